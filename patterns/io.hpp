#pragma once
// Pattern files (private): .npy/.npz import, native format, Q/K-derived patterns.
#include <cstdint>
#include <memory>
#include <string>

#include "sparsp/pattern.hpp"

namespace sparsp::patterns {

/// Model as the JSON object parse_model reads.
std::string model_to_json(const ModelSpec& m);

/// topk / cdf from Q and K dumps (.npy [H, tokens, head_dim], tokens in the layout's sequence
/// order): mean-pool per block, scores q.k / sqrt(head_dim), softmax over KV blocks. The one
/// (layer, step) mask set is used for every layer and step.
Result<std::unique_ptr<Pattern>> qk_pattern(const ModelSpec& model, const BlockLayout& layout,
                                            const PatternOptions& o, int steps, int layers);

/// True when `path` is a .npz with a sparsp recording sidecar `<path>.json` beside it.
bool is_recording(const std::string& path);

/// A recording of the PyTorch bridge (patterns/README.md, "Recordings"): the sidecar gives the
/// model and layout; a non-null `model` and non-default layout options override them. Steps are
/// read lazily, one at a time. Errors (exit 2) name the sidecar and its JSON pointer, or the
/// archive and its entry.
Result<std::unique_ptr<Pattern>> load_recording(const std::string& path, const ModelSpec* model,
                                                const PatternOptions& o);

/// Native format from memory (fuzzer, tests). `src` names it in errors.
Result<std::unique_ptr<Pattern>> parse_native(const uint8_t* data, size_t size,
                                              const std::string& src);

}  // namespace sparsp::patterns
