// Progress on stderr for long runs (`sparsp sweep` points, `sparsp simulate` layers): a bar
// redrawn in place on a terminal, or plain lines at an interval. Public surface:
// include/sparsp/sweep.hpp (ProgressMeter).
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include "sparsp/sweep.hpp"

namespace sparsp::study {

namespace {

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const auto t = static_cast<int64_t>(std::llround(s));
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(t / 3600),
                  static_cast<long long>(t / 60 % 60));
  else if (t >= 60)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(t / 60),
                  static_cast<long long>(t % 60));
  else
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(t));
  return buf;
}

/// Rates over less time than this are not shown (a first update after a few microseconds
/// would read as millions of units per second).
constexpr double kMinRateElapsed_s = 0.2;

/// x (>= 0, < 1e3 after scaling) with 3 significant digits, at least one decimal below 100.
std::string fmt3(double x) {
  char buf[32];
  if (x >= 99.95)
    std::snprintf(buf, sizeof buf, "%.0f", x);
  else if (x >= 9.995 || x < 1e-9)
    std::snprintf(buf, sizeof buf, "%.1f", x);
  else
    std::snprintf(buf, sizeof buf, "%.2f", x);
  return buf;
}

}  // namespace

std::string format_rate(double per_s) {
  if (!std::isfinite(per_s) || per_s < 0) return "?";
  static const char* const kSuffix[] = {"", "k", "M", "G", "T", "P", "E"};
  size_t i = 0;
  double x = per_s;
  // Round to 3 significant digits first, so that 999.96 reads "1.00k", not "1000".
  while (i + 1 < std::size(kSuffix) && std::stod(fmt3(x)) >= 1000) {
    x /= 1000;
    ++i;
  }
  return fmt3(x) + kSuffix[i];
}

ProgressMode resolve_progress_mode(ProgressMode mode, bool explicit_stream,
                                   ProgressMode otherwise) {
  if (mode != ProgressMode::automatic) return mode;
  return !explicit_stream && isatty(STDERR_FILENO) ? ProgressMode::bar : otherwise;
}

ProgressMeter::ProgressMeter(ProgressMode mode, int64_t total, int64_t already, std::string unit,
                             std::string prefix, double interval_s, std::ostream* out)
    : out_(out ? *out : std::cerr),
      mode_(mode == ProgressMode::automatic ? ProgressMode::off : mode),
      total_(total),
      already_(already),
      interval_s_(interval_s),
      unit_(std::move(unit)),
      prefix_(std::move(prefix)),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

void ProgressMeter::update(int64_t done, bool final) {
  if (mode_ == ProgressMode::off) return;
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_).count();
  const double period = mode_ == ProgressMode::bar ? 0.1 : interval_s_;
  if (!final && since < period) return;
  last_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(done - already_) / elapsed : 0;
  const double eta = rate > 0 ? static_cast<double>(total_ - done) / rate : NAN;
  char stats[200];
  if (elapsed < kMinRateElapsed_s)
    std::snprintf(stats, sizeof stats, "%lld/%lld %s", static_cast<long long>(done),
                  static_cast<long long>(total_), unit_.c_str());
  else
    std::snprintf(stats, sizeof stats, "%lld/%lld %s, %s %s/s, %s %s", static_cast<long long>(done),
                  static_cast<long long>(total_), unit_.c_str(), format_rate(rate).c_str(),
                  unit_.c_str(), final ? "elapsed" : "ETA",
                  format_duration(final ? elapsed : eta).c_str());
  if (mode_ == ProgressMode::bar) {
    constexpr int kWidth = 30;
    const int filled =
        total_ > 0
            ? static_cast<int>(static_cast<double>(done) * kWidth / static_cast<double>(total_))
            : kWidth;
    out_ << "\r[" << std::string(static_cast<size_t>(filled), '#')
         << std::string(static_cast<size_t>(kWidth - filled), '.') << "] " << stats << "\x1b[K";
    if (final) out_ << "\n";
  } else {
    out_ << prefix_ << ": " << stats << "\n";
  }
  out_.flush();
}

}  // namespace sparsp::study
