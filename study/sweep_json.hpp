#pragma once
// Private helpers shared by sweep_*.cpp and tune_*.cpp (JSON is kept out of public headers).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sparsp/sweep.hpp"

namespace sparsp::study::detail {

/// Parses the sweep part of a sweep or tune document. Keys in `extra_keys` are accepted (and
/// ignored) besides the sweep's own; `all_product` refuses zip groups (tune).
Result<SweepSpec> parse_sweep_object(const nlohmann::json& doc, const std::string& source_name,
                                     const std::string& base_dir,
                                     const std::vector<std::string>& extra_keys, bool all_product);

/// Position of the point with these axis coordinates in the sweep order.
int64_t point_index(const SweepSpec& spec, const std::vector<int>& coords);

/// FNV-1a 64 (stable across platforms and runs, unlike std::hash): content-named temporary files
/// and the sweep fingerprint of shard outputs. Constants: the FNV-1a 64-bit offset basis and prime
/// (Fowler, Noll, Vo; IETF draft-eastlake-fnv).
inline uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace sparsp::study::detail
