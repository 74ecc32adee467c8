// `sparsp pattern gen|stats|convert`: attention-sparsity patterns (see patterns/README.md).
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.hpp"
#include "sparsp/pattern.hpp"

namespace sparsp::cli {
namespace {

namespace pt = sparsp::patterns;

struct PatternArgs {
  std::string model;
  std::string tile, window;
  double max_memory_gib = 16.0;  // as simulate's default (study::kDefaultMaxMemoryBytes)
  pt::PatternOptions opt;
};

Result<std::array<int, 3>> parse_triple(const std::string& s, const std::string& flag) {
  std::array<int, 3> v{};
  std::stringstream ss(s);
  std::string part;
  int n = 0;
  while (std::getline(ss, part, ',')) {
    if (n == 3) break;
    try {
      size_t used = 0;
      v[static_cast<size_t>(n)] = std::stoi(part, &used);
      if (used != part.size()) throw std::invalid_argument(part);
    } catch (const std::exception&) {
      return input_error("<command line>", flag, "expected t,h,w integers, got '" + s + "'");
    }
    ++n;
  }
  if (n != 3 || ss.rdbuf()->in_avail() > 0)
    return input_error("<command line>", flag, "expected t,h,w integers, got '" + s + "'");
  return v;
}

void add_generator_flags(CLI::App* c, PatternArgs& a, bool model_required) {
  auto* m = c->add_option("--model", a.model,
                          "model preset (hunyuanvideo-720p, hunyuanvideo-sta, wan2.1-14b-720p, "
                          "wan2.1-1.3b-480p, cogvideox-2b, cogvideox-5b) or model JSON path");
  if (model_required) m->required();
  c->add_option("--max-memory-gib", a.max_memory_gib,
                "refuse generators whose masks would need more (GiB; default 16, as simulate)")
      ->check(above_up_to(0, 1e6));
  c->add_option("--kind", a.opt.kind, "dense|causal|sta|radial|svg|topk|cdf|random")
      ->capture_default_str();
  c->add_option("--block", a.opt.block_tokens, "tokens per block")
      ->capture_default_str()
      ->check(at_least(1));
  c->add_option("--order", a.opt.order, "raster|tile (default: tile for sta, raster otherwise)");
  c->add_option("--tile", a.tile, "tile shape t,h,w (default 6,8,8 for sta, 4,4,4 for tile order)");
  c->add_option("--window", a.window, "sta window in tiles t,h,w (default 3,3,3)");
  c->add_option("--table", a.opt.table_path,
                "per-layer/per-head JSON table (sta windows, svg heads)");
  c->add_option("--density", a.opt.density,
                "random: keep probability; topk: k = ceil(density*blocks)")
      ->capture_default_str()
      ->check(between(0, 1));
  c->add_option("--seed", a.opt.seed, "RNG seed")->capture_default_str()->check(at_least(0));
  c->add_option("--topk", a.opt.topk, "topk: KV blocks per query block (0: from --density)")
      ->capture_default_str()
      ->check(at_least(0));
  c->add_option("--threshold", a.opt.threshold, "cdf: softmax mass to keep")
      ->capture_default_str()
      ->check(above_up_to(0, 1));
  c->add_option("--decay", a.opt.decay, "radial: decay factor")
      ->capture_default_str()
      ->check(finite_number());
  c->add_option("--band-frames", a.opt.svg_band_frames, "svg: band width in frames")
      ->capture_default_str()
      ->check(at_least(0));
  c->add_option("--spatial-ratio", a.opt.svg_spatial_ratio, "svg: fraction of spatial heads")
      ->capture_default_str()
      ->check(between(0, 1));
  c->add_option("--steps", a.opt.steps, "denoising steps (0: the model's)")->check(at_least(0));
  c->add_option("--layers", a.opt.layers, "layers (0: the model's)")->check(at_least(0));
  c->add_option("--q", a.opt.q_path, "topk/cdf: Q dump .npy [H, tokens, head_dim]");
  c->add_option("--k", a.opt.k_path, "topk/cdf: K dump .npy [H, tokens, head_dim]");
}

Status finish_args(PatternArgs& a) {
  a.opt.max_memory_bytes = a.max_memory_gib * static_cast<double>(1ull << 30);
  if (!a.tile.empty()) {
    auto t = parse_triple(a.tile, "--tile");
    if (!t) return t.error();
    a.opt.tile = *t;
  }
  if (!a.window.empty()) {
    auto w = parse_triple(a.window, "--window");
    if (!w) return w.error();
    a.opt.window = *w;
  }
  return Ok{};
}

Result<std::unique_ptr<pt::Pattern>> open_pattern(PatternArgs& a, const std::string& file) {
  if (auto s = finish_args(a); !s) return s.error();
  std::unique_ptr<pt::ModelSpec> model;
  if (!a.model.empty()) {
    auto m = pt::load_model(a.model);
    if (!m) return m.error();
    model = std::make_unique<pt::ModelSpec>(*m);
  }
  if (!file.empty()) return pt::load_pattern(file, model.get(), a.opt);
  if (!model)
    return input_error("<command line>", "--model", "give a pattern FILE or --model and --kind");
  return pt::make_pattern(*model, a.opt);
}

nlohmann::json stats_json(pt::Pattern& p, const pt::PatternStats& s) {
  nlohmann::json j;
  j["model"] = p.model().name;
  j["pattern"] = p.describe();
  j["steps"] = s.steps;
  j["layers"] = s.layers;
  j["heads"] = s.heads;
  j["num_blocks"] = s.num_blocks;
  j["num_video_blocks"] = s.num_video_blocks;
  j["block_tokens"] = p.layout().block_tokens;
  j["density"] = s.density;
  j["video_density"] = s.video_density;
  j["union_density"] = s.union_density;
  j["mean_kv_blocks"] = s.mean_kv_blocks;
  j["mean_block_distance"] = s.mean_block_distance;
  j["distinct_groups"] = s.distinct_groups;
  j["layer_density"] = s.layer_density;
  j["head_density"] = s.head_density;
  j["step_density"] = s.step_density;
  return j;
}

}  // namespace

void add_pattern_commands(CLI::App& app, Context& ctx) {
  auto* pat =
      app.add_subcommand("pattern", "Attention-sparsity patterns: generate, inspect, convert");
  pat->require_subcommand(1);

  {  // gen
    auto a = std::make_shared<PatternArgs>();
    auto out = std::make_shared<std::string>();
    auto* c = pat->add_subcommand("gen", "Generate a pattern and write it (.spm native or .npy)");
    add_generator_flags(c, *a, true);
    c->add_option("-o,--output", *out, "output file (.spm or .npy)")->required();
    c->callback([a, out, c, &ctx] {
      if (auto st = options_apply_to_kind(a->opt.kind, given_options(*c)); !st) {
        ctx.exit_code = report(st.error());
        return;
      }
      auto p = open_pattern(*a, "");
      if (!p) {
        ctx.exit_code = report(p.error());
        return;
      }
      auto st = pt::write_pattern(**p, *out);
      ctx.exit_code = st ? 0 : report(st.error());
    });
  }
  {  // stats
    auto a = std::make_shared<PatternArgs>();
    auto file = std::make_shared<std::string>();
    auto json = std::make_shared<bool>(false);
    auto max_steps = std::make_shared<int>(0);
    auto* c = pat->add_subcommand("stats", "Densities and locality of a pattern file or generator");
    c->add_option("file", *file, "pattern file (.spm, or .npy/.npz with --model)");
    add_generator_flags(c, *a, false);
    c->add_option("--max-steps", *max_steps, "only the first N steps (0: all)")->check(at_least(0));
    c->add_flag("--json", *json, "JSON output");
    c->callback([a, file, json, max_steps, c, &ctx] {
      if (!file->empty() && !c->count("--block")) a->opt.block_tokens = 0;  // the file's own
      if (file->empty())
        if (auto st = options_apply_to_kind(a->opt.kind, given_options(*c)); !st) {
          ctx.exit_code = report(st.error());
          return;
        }
      auto p = open_pattern(*a, *file);
      if (!p) {
        ctx.exit_code = report(p.error());
        return;
      }
      pt::StatsOptions so;
      so.max_steps = *max_steps;
      so.per_layer_head = false;
      auto s = pt::compute_stats(**p, so);
      if (!s) {
        ctx.exit_code = report(s.error());
        return;
      }
      // An empty mask is legal (a layer that attends to nothing) but almost always a mistake in
      // a recording or a threshold: say so on stderr, outside the report (break-it 2026-12-02).
      if (s->density == 0)
        std::cerr << "sparsp: warning: the mask has no active (query block, KV block) pair "
                     "(density 0): attention computes nothing\n";
      if (*json) {
        std::cout << stats_json(**p, *s).dump(2) << "\n";
      } else {
        std::cout << "model            " << (*p)->model().name << "\n"
                  << "pattern          " << (*p)->describe() << "\n"
                  << "blocks           " << s->num_blocks << " (" << s->num_video_blocks
                  << " video) of " << (*p)->layout().block_tokens << " tokens\n"
                  << "steps x layers x heads  " << s->steps << " x " << s->layers << " x "
                  << s->heads << "\n"
                  << "density          " << s->density << "\n"
                  << "video_density    " << s->video_density << "\n"
                  << "union_density    " << s->union_density << "\n"
                  << "mean_kv_blocks   " << s->mean_kv_blocks << "\n"
                  << "mean_block_dist  " << s->mean_block_distance << "\n"
                  << "distinct_groups  " << s->distinct_groups << "\n";
      }
      ctx.exit_code = 0;
    });
  }
  {  // convert
    auto a = std::make_shared<PatternArgs>();
    auto in = std::make_shared<std::string>();
    auto out = std::make_shared<std::string>();
    auto* c =
        pat->add_subcommand("convert", "Convert between .npy/.npz and the native .spm format");
    c->add_option("input", *in, "input (.npy, .npz or .spm)")->required();
    c->add_option("-o,--output", *out, "output (.spm or .npy)")->required();
    c->add_option("--model", a->model, "model preset or JSON (needed for .npy/.npz layouts)");
    c->add_option("--block", a->opt.block_tokens, "tokens per block")
        ->capture_default_str()
        ->check(at_least(1));
    c->add_option("--order", a->opt.order, "raster|tile");
    c->add_option("--tile", a->tile, "tile shape t,h,w");
    c->callback([a, in, out, c, &ctx] {
      if (!c->count("--block")) a->opt.block_tokens = 0;  // the file's own
      if (auto st = distinct_files({{"input", *in}, {"--output", *out}}); !st) {
        ctx.exit_code = report(st.error());
        return;
      }
      auto p = open_pattern(*a, *in);
      if (!p) {
        ctx.exit_code = report(p.error());
        return;
      }
      auto st = pt::write_pattern(**p, *out);
      ctx.exit_code = st ? 0 : report(st.error());
    });
  }
}

}  // namespace sparsp::cli
