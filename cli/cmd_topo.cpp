// `sparsp topo ...`: show / matrix / dot / import / presets (registered by add_topo_commands).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "commands.hpp"
#include "sparsp/topology.hpp"

namespace sparsp::cli {
namespace {

namespace topo = sparsp::topology;

// Writes `text` to `path` through a temporary file in the same folder and a rename, so that a
// failure never leaves a partial file behind.
Status write_file_atomically(const std::string& path, const std::string& text) {
  return write_output_file(path, text);
}

Result<std::string> read_input(const std::string& path) {
  if (path != "-") return read_text_file(path);
  return read_text_stream(std::cin, "<stdin>");
}

struct TopoArgs {
  std::string file;
  bool json = false;
  // import
  std::string format, output, gpu_model, p2p, acs, nvlink;
  int pcie_gen = 0, pcie_width = 0;
};

}  // namespace

void add_topo_commands(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<TopoArgs>();
  CLI::App* topo_cmd = app.add_subcommand("topo", "Server topologies: show, convert and export");
  topo_cmd->require_subcommand(1);

  const char* file_help = "topology JSON file, or a preset name (see `sparsp topo presets`)";

  CLI::App* show = topo_cmd->add_subcommand("show",
                                            "GPUs, switches, sockets, path-class matrix and "
                                            "single-flow bandwidth matrices of a topology");
  show->add_option("FILE", args->file, file_help)->required();
  show->add_flag("--json", args->json, "machine-readable output");
  show->callback([args, &ctx] {
    auto t = topo::Topology::load(args->file);
    if (!t) {
      ctx.exit_code = report(t.error());
      return;
    }
    std::cout << (args->json ? topo::show_json(*t) : topo::show_text(*t));
    ctx.exit_code = 0;
  });

  CLI::App* matrix = topo_cmd->add_subcommand(
      "matrix", "GPU x GPU path-class matrix in nvidia-smi `topo -m` layout (tab separated)");
  matrix->add_option("FILE", args->file, file_help)->required();
  matrix->callback([args, &ctx] {
    auto t = topo::Topology::load(args->file);
    if (!t) {
      ctx.exit_code = report(t.error());
      return;
    }
    std::cout << topo::to_matrix_text(*t);
    ctx.exit_code = 0;
  });

  CLI::App* dot = topo_cmd->add_subcommand("dot", "Graphviz DOT of the topology's nodes and links");
  dot->add_option("FILE", args->file, file_help)->required();
  dot->callback([args, &ctx] {
    auto t = topo::Topology::load(args->file);
    if (!t) {
      ctx.exit_code = report(t.error());
      return;
    }
    std::cout << topo::to_dot(*t);
    ctx.exit_code = 0;
  });

  CLI::App* presets = topo_cmd->add_subcommand(
      "presets", "List the built-in topology presets: servers, then clusters of them");
  presets->add_flag("--json", args->json, "machine-readable output");
  presets->callback([args, &ctx] {
    auto names = topo::preset_names();
    for (auto& c : topo::cluster_preset_names()) names.push_back(std::move(c));
    if (args->json) {
      std::cout << "[";
      for (size_t i = 0; i < names.size(); ++i)
        std::cout << (i ? ", " : "") << '"' << names[i] << '"';
      std::cout << "]\n";
    } else {
      for (const auto& n : names) std::cout << n << "\n";
    }
    ctx.exit_code = 0;
  });

  CLI::App* models =
      topo_cmd->add_subcommand("models", "List the GPU model table (datasheet figures)");
  models->add_flag("--json", args->json, "machine-readable output");
  models->callback([args, &ctx] {
    if (args->json) {
      std::cout << "[\n";
      const auto& table = topo::gpu_models();
      for (size_t i = 0; i < table.size(); ++i) {
        const auto& g = table[i];
        std::cout << "  {\"model\": \"" << g.model << "\", \"sm_count\": " << g.sm_count
                  << ", \"copy_engines\": " << g.copy_engines
                  << ", \"memory_bytes\": " << static_cast<long long>(g.memory_bytes)
                  << ", \"peak_bf16_flops\": " << static_cast<long long>(g.peak_bf16_flops)
                  << ", \"memory_bandwidth_Bps\": "
                  << static_cast<long long>(g.memory_bandwidth_Bps)
                  << ", \"p2p_capable\": " << (g.p2p_capable ? "true" : "false")
                  << ", \"architecture\": \"" << g.architecture
                  << "\", \"sm_version\": " << g.sm_version << ", \"pcie_gen\": " << g.pcie_gen
                  << ", \"pcie_width\": " << g.pcie_width << ", \"nvlink_gen\": " << g.nvlink_gen
                  << ", \"nvlink_links\": " << g.nvlink_links
                  << ", \"nvlink_per_link_Bps\": " << static_cast<long long>(g.nvlink_per_link_Bps)
                  << ", \"c2c_Bps\": " << static_cast<long long>(g.c2c_Bps) << "}"
                  << (i + 1 < table.size() ? "," : "") << "\n";
      }
      std::cout << "]\n";
    } else {
      std::printf("%-46s %5s %3s %9s %12s %10s %-3s %4s %s\n", "model", "SMs", "CEs", "memory GiB",
                  "bf16 TFLOP/s", "mem GB/s", "P2P", "PCIe", "NVLink");
      for (const auto& g : topo::gpu_models()) {
        char nvlink[64] = "-";
        if (g.nvlink_links > 0)
          std::snprintf(nvlink, sizeof nvlink, "gen%d %dx %.4g GB/s", g.nvlink_gen, g.nvlink_links,
                        g.nvlink_per_link_Bps / 1e9);
        char pcie[16] = "-";
        if (g.pcie_gen > 0) std::snprintf(pcie, sizeof pcie, "%dx%d", g.pcie_gen, g.pcie_width);
        std::printf("%-46s %5d %3d %9.0f %12.1f %10.0f %-3s %4s %s\n", g.model.c_str(), g.sm_count,
                    g.copy_engines, g.memory_bytes / (1024.0 * 1024.0 * 1024.0),
                    g.peak_bf16_flops / 1e12, g.memory_bandwidth_Bps / 1e9,
                    g.p2p_capable ? "yes" : "no", pcie, nvlink);
      }
    }
    ctx.exit_code = 0;
  });

  CLI::App* import = topo_cmd->add_subcommand(
      "import", "Convert `nvidia-smi topo -m` text or an NCCL topology XML dump to topology JSON");
  import->add_option("--format", args->format, "input format")
      ->required()
      ->check(CLI::IsMember({"nvidia-smi", "nccl-xml"}));
  import->add_option("IN", args->file, "input file ('-' for stdin)")->required();
  import->add_option("-o,--output", args->output, "output topology JSON ('-' for stdout)")
      ->required();
  import->add_option("--gpu-model", args->gpu_model,
                     "GPU model (default: generic; see topology/README.md)");
  import
      ->add_option("--pcie-gen", args->pcie_gen,
                   "PCIe generation of every link (default: the input's, else 4)")
      ->check(between(1, 6));
  import
      ->add_option("--pcie-width", args->pcie_width,
                   "PCIe width of every link (default: the input's, else 16)")
      ->check(CLI::IsMember({1, 2, 4, 8, 16}));
  import->add_option(
      "--nvlink", args->nvlink,
      "NVLink the input does not list: nvswitch:N (N links per GPU into one NVSwitch "
      "fabric) or direct:N (N links per GPU over all peers); default none");
  import->add_option("--p2p", args->p2p, "peer access (default: the GPU model's, off for GeForce)")
      ->check(CLI::IsMember({"on", "off"}));
  import
      ->add_option("--acs-redirect", args->acs,
                   "ACS redirect on every inferred switch (default off)")
      ->check(CLI::IsMember({"on", "off"}));
  import->callback([args, &ctx] {
    if (args->file != "-" && args->output != "-")
      if (auto st = distinct_files({{"IN", args->file}, {"--output", args->output}}); !st) {
    ctx.exit_code = report(st.error());
    return;
  }
  auto text = read_input(args->file);
  if (!text) {
    ctx.exit_code = report(text.error());
    return;
  }
  topo::ImportOptions opt;
  opt.gpu_model = args->gpu_model;
  opt.pcie_gen = args->pcie_gen;
  opt.pcie_width = args->pcie_width;
  if (!args->p2p.empty()) opt.p2p = args->p2p == "on";
  opt.acs_redirect = args->acs == "on";
  opt.nvlink = args->nvlink;
  const std::string name = args->file == "-" ? "<stdin>" : args->file;
  auto t = args->format == "nvidia-smi" ? topo::import_nvidia_smi(*text, name, opt)
                                        : topo::import_nccl_xml(*text, name, opt);
  if (!t) {
    ctx.exit_code = report(t.error());
    return;
  }
  if (args->output == "-") {
    std::cout << t->to_json();  // checked at exit (finish_stdout)
  } else if (auto st = write_file_atomically(args->output, t->to_json()); !st) {
    ctx.exit_code = report(st.error());
    return;
  }
  for (const auto& n : t->options().notes) std::cerr << "sparsp: warning: " << n << "\n";
  ctx.exit_code = 0;
});
}  // namespace sparsp::cli

}  // namespace sparsp::cli
