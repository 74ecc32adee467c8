#pragma once
// Copy-engine concurrency tests of `sparsp calibrate` (issue 17). CUDA builds only; private to
// replay/. The JSON it returns goes into the machine JSON under "copy_engine_concurrency"
// (keys: replay/README.md, "Copy-engine concurrency").
#include <nlohmann/json.hpp>
#include <vector>

#include "sparsp/status.hpp"

namespace sparsp::replay::detail {

struct ConcurrencyOptions {
  std::vector<int> copies{1, 2, 4, 8};  ///< N: concurrent copies per test
  double bytes_per_copy = 64.0 * 1024 * 1024;
  int iterations = 3;  ///< timed rounds per (test, N) after one warm-up; the round with the
                       ///< median last end is reported
};

/// Runs, for every device d of `devices`: h2d:d, d2h:d (N copies one direction), mixed:d (N
/// copies alternating H2D / D2H), d2d:d (N device-local copies); with two devices or more, for
/// the first pair (a, b): p2p_push:a->b (N copies issued on a's streams), p2p_pull:a->b (issued
/// on b's streams), and over all devices p2p_all_to_all_push / _pull (one copy per ordered pair,
/// all at once, issued on the source's / destination's streams). Each copy is on its own
/// non-blocking stream with its own end event; every stream first waits for one common start
/// event, and each device records its own start event behind that wait, so each copy's end is
/// timed against its device's start. Peer access must already be enabled between the devices
/// that allow it (pairs without it are left out of the P2P tests, and say so).
/// Errors: a CUDA call that fails (exit 1), naming the call.
Result<nlohmann::ordered_json> copy_engine_concurrency(const std::vector<int>& devices,
                                                       const ConcurrencyOptions& options);

}  // namespace sparsp::replay::detail
