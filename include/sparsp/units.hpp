#pragma once
// One unit system inside sparsp: bytes, seconds, bytes/s, FLOP, FLOP/s. Conversions only at the
// edges (config parsing, printing), through these constants (STYLE habit 3): GB = 1e9, GiB = 2^30.
namespace sparsp::units {

inline constexpr double kKB = 1e3;
inline constexpr double kMB = 1e6;
inline constexpr double kGB = 1e9;
inline constexpr double kTB = 1e12;
inline constexpr double kKiB = 1024.0;
inline constexpr double kMiB = 1024.0 * 1024.0;
inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

inline constexpr double kUs = 1e-6;
inline constexpr double kNs = 1e-9;
inline constexpr double kMs = 1e-3;

inline constexpr double GBps_to_Bps(double GBps) { return GBps * kGB; }
inline constexpr double Bps_to_GBps(double Bps) { return Bps / kGB; }
inline constexpr double us_to_s(double us) { return us * kUs; }
inline constexpr double s_to_us(double s) { return s / kUs; }
inline constexpr double s_to_ms(double s) { return s / kMs; }
inline constexpr double TFLOPs_to_FLOPs(double tflops) { return tflops * 1e12; }

}  // namespace sparsp::units
