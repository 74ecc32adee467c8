// Importer for `nvidia-smi topo -m` text.
//
// Inference (topology/README.md, "Importing nvidia-smi topo -m"):
//  - sockets: GPUs joined by PIX/PXB/PHB/NODE share a socket (SYS separates sockets); NV# pairs
//    say nothing about PCIe, so they share a socket when their "NUMA Affinity" agrees or is absent.
//    Sockets are numbered by their lowest GPU, NUMA nodes renumbered 0..S-1 in that order.
//  - host bridges: PIX/PXB/PHB pairs share one; a bridge with several subtrees becomes a
//    root_port node ("PHB"), NODE pairs hang from different bridges of one CPU.
//  - switches: PIX cliques (with NICs that are PIX to them) -> one switch; a subtree holding
//    several PIX cliques (PXB pairs) -> an upper switch with one leaf switch per clique.
//  - NVLink: NV# pairs get # bonded links; a GPU whose NV counts sum above 18 (the most NVLinks
//    any GPU has) must reach its peers through an NVSwitch fabric, modelled as one nvswitch node.
// The inferred graph's path classes are compared with the input: any difference is an error.
#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include "import_common.hpp"

namespace sparsp::topology {
namespace {

using detail::GraphBuilder;

std::string strip_ansi(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1b') {
      // CSI: ESC [ params final-byte
      if (i + 1 < text.size() && text[i + 1] == '[') {
        size_t j = i + 2;
        while (j < text.size() && !(text[j] >= '@' && text[j] <= '~')) ++j;
        i = j;
      }
      continue;
    }
    out.push_back(text[i]);
  }
  return out;
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

// Cells of a line: tab separated when there are tabs, else separated by runs of 2+ spaces
// (copies that lost their tabs). The row label is the first cell.
std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  if (line.find('\t') != std::string::npos) {
    size_t start = 0;
    while (true) {
      const size_t t = line.find('\t', start);
      out.push_back(trim(std::string_view(line).substr(
          start, t == std::string::npos ? std::string::npos : t - start)));
      if (t == std::string::npos) break;
      start = t + 1;
    }
    return out;
  }
  // Space-aligned: a leading blank cell when the line starts with whitespace (header line).
  if (!line.empty() && std::isspace(static_cast<unsigned char>(line[0]))) out.emplace_back();
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    if (i >= line.size()) break;
    size_t j = i;
    while (j < line.size() &&
           !(std::isspace(static_cast<unsigned char>(line[j])) && j + 1 < line.size() &&
             std::isspace(static_cast<unsigned char>(line[j + 1]))) &&
           line[j] != '\t') {
      ++j;
    }
    out.push_back(trim(std::string_view(line).substr(i, j - i)));
    i = j;
  }
  return out;
}

// "GPU12" -> 12 for prefix "GPU"; -1 otherwise.
int device_index(const std::string& s, const char* prefix) {
  const size_t n = std::char_traits<char>::length(prefix);
  if (s.size() <= n || s.compare(0, n, prefix) != 0) return -1;
  int v = 0;
  for (size_t i = n; i < s.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i])) || i - n > 5) return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

// A device column name of older drivers ("mlx5_2"): a letter, then letters, digits or '_', with a
// digit somewhere; no spaces.
bool is_device_name(const std::string& s) {
  if (s.empty() || !std::isalpha(static_cast<unsigned char>(s[0]))) return false;
  bool digit = false;
  for (char ch : s) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_') return false;
    digit = digit || std::isdigit(static_cast<unsigned char>(ch));
  }
  return digit;
}

// The lowest NUMA node of an affinity cell ("1", "0,5-11", "0-3"); nullopt for "N/A", empty or
// anything else.
std::optional<int> first_of_list(const std::string& v) {
  std::optional<int> low;
  int x = -1;
  for (size_t i = 0; i <= v.size(); ++i) {
    const char ch = i < v.size() ? v[i] : ',';
    if (std::isdigit(static_cast<unsigned char>(ch))) {
      x = (x < 0 ? 0 : x) * 10 + (ch - '0');
      if (x > 100000) return std::nullopt;
    } else if (ch == ',' || ch == '-') {
      if (x < 0) return std::nullopt;
      low = low ? std::min(*low, x) : x;
      x = -1;
    } else {
      return std::nullopt;
    }
  }
  return low;
}

struct Cls {
  PathClass c = PathClass::sys;
  int nv = 0;
};

std::optional<Cls> parse_token(const std::string& t) {
  if (t == "X") return Cls{PathClass::self, 0};
  if (t == "PIX") return Cls{PathClass::pix, 0};
  if (t == "PXB") return Cls{PathClass::pxb, 0};
  if (t == "PHB") return Cls{PathClass::phb, 0};
  if (t == "NODE") return Cls{PathClass::node, 0};
  if (t == "SYS" || t == "SOC") return Cls{PathClass::sys, 0};
  if (t.size() > 2 && t.compare(0, 2, "NV") == 0) {
    int n = 0;
    for (size_t i = 2; i < t.size(); ++i) {
      if (!std::isdigit(static_cast<unsigned char>(t[i])) || i > 4) return std::nullopt;
      n = n * 10 + (t[i] - '0');
    }
    if (n < 1 || n > 64) return std::nullopt;
    return Cls{PathClass::nvlink, n};
  }
  return std::nullopt;
}

struct UnionFind {
  std::vector<int> p;
  explicit UnionFind(size_t n) : p(n) { std::iota(p.begin(), p.end(), 0); }
  int find(int x) {
    return p[static_cast<size_t>(x)] == x
               ? x
               : p[static_cast<size_t>(x)] = find(p[static_cast<size_t>(x)]);
  }
  void unite(int a, int b) {
    a = find(a);
    b = find(b);
    if (a != b) p[static_cast<size_t>(std::max(a, b))] = std::min(a, b);
  }
};

// Groups of `members` (sorted) by union-find root, ordered by smallest member.
std::vector<std::vector<int>> groups(UnionFind& uf, const std::vector<int>& members) {
  std::map<int, std::vector<int>> by_root;
  std::vector<int> order;
  for (int m : members) {
    const int r = uf.find(m);
    if (!by_root.count(r)) order.push_back(r);
    by_root[r].push_back(m);
  }
  std::vector<std::vector<int>> out;
  for (int r : order) out.push_back(by_root[r]);
  return out;
}

}  // namespace

Result<Topology> import_nvidia_smi(std::string_view raw, const std::string& file,
                                   const ImportOptions& options) {
  const std::string text = strip_ansi(raw);
  std::vector<std::string> lines;
  {
    size_t start = 0;
    while (start <= text.size()) {
      size_t e = text.find('\n', start);
      if (e == std::string::npos) e = text.size();
      std::string l = text.substr(start, e - start);
      if (!l.empty() && l.back() == '\r') l.pop_back();
      lines.push_back(std::move(l));
      start = e + 1;
    }
  }
  // Header: the first line whose cells name GPU0.
  int header = -1;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (trim(lines[i]).empty()) continue;
    const auto c = cells(lines[i]);
    if (std::find(c.begin(), c.end(), "GPU0") != c.end()) {
      header = static_cast<int>(i);
      break;
    }
    return input_error(file, std::to_string(i + 1),
                       "expected the `nvidia-smi topo -m` header (GPU0 GPU1 ...)");
  }
  if (header < 0) {
    const bool empty = trim(text).empty();
    return input_error(
        file, "1", empty ? "empty file" : "no `nvidia-smi topo -m` header (GPU0 GPU1 ...) found");
  }
  const int header_line = header + 1;
  const auto head = cells(lines[static_cast<size_t>(header)]);
  // Device columns: GPUk / NICk after the (blank) corner cell; then affinity columns by name.
  std::vector<std::string> columns;
  size_t col = head.empty() || head[0].empty() ? 1 : 0;
  int n_gpu = 0;
  std::vector<int> nic_columns;
  for (; col < head.size(); ++col) {
    const std::string& h = head[col];
    if (n_gpu > 0 && device_index(h, "GPU") < 0 && is_device_name(h)) {
      // Older drivers name NIC columns after the device (mlx5_2) instead of NICk.
      nic_columns.push_back(static_cast<int>(columns.size()));
    } else if (device_index(h, "GPU") >= 0) {
      if (device_index(h, "GPU") != n_gpu || !nic_columns.empty()) {
        return input_error(
            file, std::to_string(header_line),
            "header column '" + h + "' out of order (expected GPU" + std::to_string(n_gpu) + ")");
      }
      ++n_gpu;
    } else if (device_index(h, "NIC") >= 0) {
      nic_columns.push_back(static_cast<int>(columns.size()));
    } else {
      break;
    }
    columns.push_back(h);
  }
  const size_t n_dev = columns.size();
  int numa_col = -1, gpu_numa_col = -1;  // index among the affinity columns
  std::vector<std::string> affinity_head;
  for (size_t k = col; k < head.size(); ++k) {
    if (head[k].empty()) continue;
    if (head[k] == "NUMA Affinity")
      numa_col = static_cast<int>(affinity_head.size());
    else if (head[k] == "GPU NUMA ID")
      gpu_numa_col = static_cast<int>(affinity_head.size());
    else if (head[k] != "CPU Affinity") {
      return input_error(file, std::to_string(header_line), "unknown column '" + head[k] + "'");
    }
    affinity_head.push_back(head[k]);
  }
  // Rows.
  std::vector<std::vector<Cls>> m(static_cast<size_t>(n_gpu), std::vector<Cls>(n_dev));
  std::vector<int> row_line(static_cast<size_t>(n_gpu), 0);
  std::vector<std::optional<int>> numa(static_cast<size_t>(n_gpu));
  std::vector<std::optional<int>> gpu_numa(static_cast<size_t>(n_gpu));  // GPU NUMA ID
  // NIC pairs marked PIX in a NIC row: the ports of one card (or two cards on one switch port).
  std::set<std::pair<int, int>> nic_pix;  // (NIC index, NIC index), both orders
  int rows = 0;
  int last_line = header_line;
  for (size_t i = static_cast<size_t>(header) + 1; i < lines.size(); ++i) {
    const std::string t = trim(lines[i]);
    if (t.empty()) continue;
    if (t.rfind("Legend", 0) == 0) break;
    const int line = static_cast<int>(i) + 1;
    const auto c = cells(lines[i]);
    const std::string& label = c[0];
    if (std::find(columns.begin() + n_gpu, columns.end(), label) != columns.end()) {
      // NIC rows: the GPU rows' NIC columns carry the structure; only check the tokens here.
      const int row_col =
          static_cast<int>(std::find(columns.begin(), columns.end(), label) - columns.begin());
      const int row_nic = static_cast<int>(
          std::find(nic_columns.begin(), nic_columns.end(), row_col) - nic_columns.begin());
      for (size_t k = 1; k < c.size() && k <= n_dev; ++k) {
        const auto tok = c[k].empty() ? std::nullopt : parse_token(c[k]);
        if (!c[k].empty() && !tok) {
          return input_error(
              file, std::to_string(line),
              "unknown legend token '" + c[k] + "' in row " + label + ", column " + columns[k - 1]);
        }
        const auto at = std::find(nic_columns.begin(), nic_columns.end(), static_cast<int>(k - 1));
        if (tok && tok->c == PathClass::pix && at != nic_columns.end()) {
          const int other = static_cast<int>(at - nic_columns.begin());
          nic_pix.insert({row_nic, other});
          nic_pix.insert({other, row_nic});
        }
      }
      continue;
    }
    const int g = device_index(label, "GPU");
    if (g < 0)
      return input_error(file, std::to_string(line),
                         "expected a GPU or NIC row, got '" + label + "'");
    if (g != rows) {
      return input_error(
          file, std::to_string(line),
          "row '" + label + "' out of order (expected GPU" + std::to_string(rows) + ")");
    }
    if (g >= n_gpu) {
      return input_error(
          file, std::to_string(line),
          "matrix is not square: " + std::to_string(n_gpu) + " GPU columns but row " + label);
    }
    if (c.size() < n_dev + 1) {
      return input_error(file, std::to_string(line),
                         "matrix is not square: row " + label + " has " +
                             std::to_string(c.size() - 1) + " entries, expected " +
                             std::to_string(n_dev));
    }
    // More entries than the header has columns (`GPU0  X  PIX PIX PIX` under a 2-GPU header)
    // is a malformed row, not extra information. Empty cells are not counted (tab runs).
    const auto non_empty = [](const std::vector<std::string>& v, size_t from) {
      return static_cast<size_t>(std::count_if(v.begin() + static_cast<ptrdiff_t>(from), v.end(),
                                               [](const std::string& x) { return !x.empty(); }));
    };
    if (non_empty(c, 1) > non_empty(head, 0)) {
      return input_error(file, std::to_string(line),
                         "row " + label + " has " + std::to_string(non_empty(c, 1)) +
                             " entries, but the header has " + std::to_string(non_empty(head, 0)) +
                             " columns");
    }
    for (size_t k = 0; k < n_dev; ++k) {
      auto cls = parse_token(c[k + 1]);
      if (!cls) {
        return input_error(
            file, std::to_string(line),
            "unknown legend token '" + c[k + 1] + "' in row " + label + ", column " + columns[k]);
      }
      const bool diagonal = static_cast<int>(k) == g;
      if (diagonal != (cls->c == PathClass::self)) {
        return input_error(file, std::to_string(line),
                           diagonal
                               ? "diagonal entry of " + label + " must be X, got '" + c[k + 1] + "'"
                               : "'X' off the diagonal in row " + label + ", column " + columns[k]);
      }
      m[static_cast<size_t>(g)][k] = *cls;
    }
    // Affinity cells: nvidia-smi pads some with an empty cell ("0\t\tN/A" under "NUMA
    // Affinity\tGPU NUMA ID", HGX B200); empty cells beyond the header's count are dropped.
    std::vector<std::string> aff(c.begin() + static_cast<ptrdiff_t>(n_dev + 1), c.end());
    for (size_t k = aff.size(); k-- > 0 && aff.size() > affinity_head.size();) {
      if (aff[k].empty()) aff.erase(aff.begin() + static_cast<ptrdiff_t>(k));
    }
    const auto affinity = [&](int k) {
      return k >= 0 && static_cast<size_t>(k) < aff.size() ? aff[static_cast<size_t>(k)]
                                                           : std::string();
    };
    numa[static_cast<size_t>(g)] = first_of_list(affinity(numa_col));
    if (const std::string id = affinity(gpu_numa_col); !id.empty() && id != "N/A") {
      if (id.size() > 6 || id.find_first_not_of("0123456789") != std::string::npos)
        return input_error(
            file, std::to_string(line),
            "GPU NUMA ID '" + id + "' of " + label + " is not a NUMA node number (or N/A)");
      gpu_numa[static_cast<size_t>(g)] = std::stoi(id);
    }
    row_line[static_cast<size_t>(g)] = line;
    last_line = line;
    ++rows;
  }
  if (rows != n_gpu) {
    return input_error(file, std::to_string(last_line),
                       "matrix is not square: " + std::to_string(n_gpu) + " GPU columns but " +
                           std::to_string(rows) + " GPU rows");
  }
  for (int i = 0; i < n_gpu; ++i) {
    for (int j = 0; j < i; ++j) {
      const Cls& a = m[static_cast<size_t>(i)][static_cast<size_t>(j)];
      const Cls& b = m[static_cast<size_t>(j)][static_cast<size_t>(i)];
      if (a.c != b.c || a.nv != b.nv) {
        return input_error(file, std::to_string(row_line[static_cast<size_t>(i)]),
                           "asymmetric matrix: GPU" + std::to_string(i) + "-GPU" +
                               std::to_string(j) + " is " + to_string(a.c, a.nv) + " but GPU" +
                               std::to_string(j) + "-GPU" + std::to_string(i) + " is " +
                               to_string(b.c, b.nv));
      }
    }
  }
  // NIC names: the column itself on older drivers (mlx5_2), else the "NIC Legend" ("NIC0: mlx5_0").
  std::map<std::string, std::string> nic_legend;
  for (size_t i = static_cast<size_t>(header) + 1; i < lines.size(); ++i) {
    const std::string t = trim(lines[i]);
    const size_t colon = t.find(':');
    if (colon == std::string::npos || device_index(t.substr(0, colon), "NIC") < 0) continue;
    const std::string name = trim(std::string_view(t).substr(colon + 1));
    // Printable ASCII without spaces or commas (the names go into JSON, a card's joined by ",").
    const bool plain = !name.empty() && std::all_of(name.begin(), name.end(), [](char ch) {
      return static_cast<unsigned char>(ch) > 0x20 && static_cast<unsigned char>(ch) < 0x7f &&
             ch != ',';
    });
    if (plain) nic_legend.emplace(t.substr(0, colon), name);
  }
  auto nic_name = [&](int k) {
    const std::string& h = columns[static_cast<size_t>(nic_columns[static_cast<size_t>(k)])];
    if (device_index(h, "NIC") < 0) return h;
    const auto it = nic_legend.find(h);
    return it == nic_legend.end() ? std::string() : it->second;
  };
  auto spec = detail::import_gpu_spec(options, file);
  if (!spec) return spec.error();
  if (!options.nvlink.empty())
    return input_error(file, "",
                       "--nvlink fills NVLink into NCCL XML files that list none; `nvidia-smi topo "
                       "-m` lists NVLink itself (NV#)");
  const int gen = detail::import_default_gen(options, *spec);
  const int width = detail::import_default_width(options, *spec);
  const double nvlink_rate_Bps = detail::import_nvlink_rate_Bps(*spec);

  // Devices: GPUs 0..n-1, then NICs n.. (from the GPU rows' NIC columns).
  const int n_nic = static_cast<int>(nic_columns.size());
  const int n_all = n_gpu + n_nic;
  auto rel = [&](int a, int b) -> Cls {  // class between devices (a GPU on at least one side)
    if (a < n_gpu && b < n_gpu) return m[static_cast<size_t>(a)][static_cast<size_t>(b)];
    if (a >= n_gpu && b >= n_gpu) return Cls{PathClass::sys, 0};
    const int g = a < n_gpu ? a : b, nic = (a < n_gpu ? b : a) - n_gpu;
    return m[static_cast<size_t>(g)][static_cast<size_t>(nic_columns[static_cast<size_t>(nic)])];
  };
  // A dual-port card: NICs PIX to each other with the same path to every GPU are one NIC node
  // with `ports` 2 (or more), as the NCCL XML importer makes of a card's <net> children.
  std::vector<int> nic_card(static_cast<size_t>(n_nic));  // NIC -> the first NIC of its card
  std::iota(nic_card.begin(), nic_card.end(), 0);
  for (int k = 0; k < n_nic; ++k) {
    for (int j = 0; j < k && nic_card[static_cast<size_t>(k)] == k; ++j) {
      if (nic_card[static_cast<size_t>(j)] != j || !nic_pix.count({j, k})) continue;
      bool same = true;
      for (int g = 0; g < n_gpu && same; ++g) {
        const Cls a =
            m[static_cast<size_t>(g)][static_cast<size_t>(nic_columns[static_cast<size_t>(j)])];
        const Cls b =
            m[static_cast<size_t>(g)][static_cast<size_t>(nic_columns[static_cast<size_t>(k)])];
        same = a.c == b.c && a.nv == b.nv;
      }
      if (same) nic_card[static_cast<size_t>(k)] = j;
    }
  }
  std::vector<int> nic_node(static_cast<size_t>(n_nic), -1), nic_ports;  // NIC -> node index
  for (int k = 0; k < n_nic; ++k) {
    if (nic_card[static_cast<size_t>(k)] == k) {
      nic_node[static_cast<size_t>(k)] = static_cast<int>(nic_ports.size());
      nic_ports.push_back(1);
    } else {
      const int node = nic_node[static_cast<size_t>(nic_card[static_cast<size_t>(k)])];
      nic_node[static_cast<size_t>(k)] = node;
      ++nic_ports[static_cast<size_t>(node)];
    }
  }
  auto is = [](const Cls& c, std::initializer_list<PathClass> set) {
    return std::find(set.begin(), set.end(), c.c) != set.end();
  };
  // Sockets (over GPUs; NICs follow their PIX GPU or the first GPU they share a socket with):
  // PCIe classes short of SYS join GPUs, directly or through a NIC both reach without SYS; NV#
  // pairs join when their NUMA nodes agree, or, where a NUMA node is unknown, unless a SYS entry
  // lies between their groups.
  UnionFind sock(static_cast<size_t>(n_all));
  const std::initializer_list<PathClass> kSameSocket = {PathClass::pix, PathClass::pxb,
                                                        PathClass::phb, PathClass::node};
  for (int i = 0; i < n_gpu; ++i) {
    for (int j = 0; j < i; ++j) {
      if (is(rel(i, j), kSameSocket)) sock.unite(i, j);
    }
  }
  std::vector<int> nic_anchor(static_cast<size_t>(n_nic), -1);  // GPU a NIC shares a socket with
  for (int k = 0; k < n_nic; ++k) {
    const int d = n_gpu + k;
    for (PathClass want : kSameSocket) {
      for (int g = 0; g < n_gpu && nic_anchor[static_cast<size_t>(k)] < 0; ++g) {
        if (rel(g, d).c == want) nic_anchor[static_cast<size_t>(k)] = g;
      }
    }
    for (int g = 0; g < n_gpu; ++g) {
      if (is(rel(g, d), kSameSocket)) sock.unite(d, g);
    }
  }
  auto sys_between = [&](int i, int j) {
    for (int a = 0; a < n_gpu; ++a) {
      for (int b = 0; b < n_gpu; ++b) {
        if (sock.find(a) == sock.find(i) && sock.find(b) == sock.find(j) &&
            rel(a, b).c == PathClass::sys)
          return true;
      }
    }
    return false;
  };
  // Two GPUs with a GPU NUMA ID each (coherent memory behind NVLink-C2C) and no NUMA Affinity
  // hang from a CPU each: Grace Hopper, one Grace per GPU.
  bool coherent_sockets = false;
  for (int i = 0; i < n_gpu; ++i) {
    for (int j = 0; j < i; ++j) {
      if (rel(i, j).c != PathClass::nvlink) continue;
      const auto& ni = numa[static_cast<size_t>(i)];
      const auto& nj = numa[static_cast<size_t>(j)];
      const bool coherent = gpu_numa[static_cast<size_t>(i)] && gpu_numa[static_cast<size_t>(j)];
      if (ni && nj ? *ni == *nj : !coherent && !sys_between(i, j)) sock.unite(i, j);
      coherent_sockets = coherent_sockets || (!(ni && nj) && coherent);
    }
  }
  std::vector<int> gpus(static_cast<size_t>(n_gpu));
  std::iota(gpus.begin(), gpus.end(), 0);
  const auto socket_groups = groups(sock, gpus);

  GraphBuilder gb;
  if (numa_col < 0 && n_gpu > 1 && !coherent_sockets)
    gb.note(file, std::to_string(header_line),
            "no NUMA Affinity column: " + std::to_string(socket_groups.size()) +
                " socket(s) inferred from the SYS entries");
  if (coherent_sockets)
    gb.note(file, std::to_string(header_line),
            "no NUMA Affinity for GPUs with a GPU NUMA ID (coherent memory, NVLink-C2C): one "
            "socket per such GPU (Grace Hopper: one Grace per GPU), " +
                std::to_string(socket_groups.size()) + " socket(s)");
  for (int g = 0; g < n_gpu; ++g) {
    if (gpu_numa[static_cast<size_t>(g)] && spec->c2c_Bps <= 0) {
      gb.note(file, std::to_string(row_line[static_cast<size_t>(g)]),
              "GPU" + std::to_string(g) + " has GPU NUMA ID " +
                  std::to_string(*gpu_numa[static_cast<size_t>(g)]) +
                  " (its memory is a NUMA node, as behind NVLink-C2C on Grace Hopper) but GPU "
                  "model '" +
                  spec->model +
                  "' has no NVLink-C2C: its host link stays PCIe (--gpu-model GH200 for a Grace "
                  "Hopper)");
      break;
    }
  }
  std::vector<std::string> cpus;
  std::set<int> numa_ids;
  for (size_t s = 0; s < socket_groups.size(); ++s) {
    Node cpu;
    cpu.id = "cpu" + std::to_string(s);
    cpu.kind = NodeKind::cpu;
    cpu.numa_node = static_cast<int>(s);
    // The OS NUMA number, where every GPU of the socket names the same one.
    const auto& first = numa[static_cast<size_t>(socket_groups[s][0])];
    bool same = first.has_value();
    for (int g : socket_groups[s]) same = same && numa[static_cast<size_t>(g)] == first;
    if (same && numa_ids.insert(*first).second && *first != cpu.numa_node) cpu.numa_id = *first;
    gb.node(std::move(cpu), header_line);
    cpus.push_back("cpu" + std::to_string(s));
  }
  for (int g = 0; g < n_gpu; ++g) {
    Node n;
    n.id = "gpu" + std::to_string(g);
    n.kind = NodeKind::gpu;
    n.gpu = *spec;
    n.memory_numa_id = gpu_numa[static_cast<size_t>(g)].value_or(-1);
    gb.node(std::move(n), row_line[static_cast<size_t>(g)]);
  }
  auto dev_id = [&](int d) {
    return d < n_gpu ? "gpu" + std::to_string(d)
                     : "nic" + std::to_string(nic_node[static_cast<size_t>(d - n_gpu)]);
  };
  auto dev_line = [&](int d) { return d < n_gpu ? row_line[static_cast<size_t>(d)] : header_line; };
  std::vector<int> placed_nics;
  UnionFind bridge(static_cast<size_t>(n_all)), subtree(static_cast<size_t>(n_all)),
      clique(static_cast<size_t>(n_all));
  for (int a = 0; a < n_all; ++a) {
    for (int b = 0; b < a; ++b) {
      if (a >= n_gpu && b >= n_gpu) continue;
      const Cls c = rel(a, b);
      if (is(c, {PathClass::pix, PathClass::pxb, PathClass::phb})) bridge.unite(a, b);
      if (is(c, {PathClass::pix, PathClass::pxb})) subtree.unite(a, b);
      if (c.c == PathClass::pix) clique.unite(a, b);
    }
  }
  int n_rp = 0, n_sw = 0;
  for (size_t s = 0; s < socket_groups.size(); ++s) {
    std::vector<int> members = socket_groups[s];
    for (int k = 0; k < n_nic; ++k) {
      const int a = nic_anchor[static_cast<size_t>(k)];
      if (nic_card[static_cast<size_t>(k)] != k) continue;  // a further port of a placed card
      if (a >= 0 && sock.find(a) == sock.find(members[0])) members.push_back(n_gpu + k);
    }
    const std::string cpu = cpus[s];
    for (const auto& hb : groups(bridge, members)) {
      std::string top = cpu;
      const auto subtrees = groups(subtree, hb);
      if (subtrees.size() > 1) {
        Node rp;
        rp.id = "rp" + std::to_string(n_rp++);
        rp.kind = NodeKind::root_port;
        gb.node(rp, dev_line(hb[0]));
        // Internal host-bridge link: as many device links as hang below it (never binds one flow).
        gb.pcie(cpu, rp.id, gen, width, dev_line(hb[0]),
                static_cast<double>(subtrees.size()) * pcie_usable_Bps(gen, width));
        top = rp.id;
      }
      for (const auto& st : subtrees) {
        const auto parts = groups(clique, st);
        auto place = [&](const std::vector<int>& part, const std::string& parent,
                         bool force_switch) {
          if (part.size() == 1 && !force_switch) {
            if (part[0] < n_gpu && parent == cpu && spec->c2c_Bps > 0)
              gb.c2c(cpu, dev_id(part[0]), spec->c2c_Bps, dev_line(part[0]));  // Grace Hopper
            else
              gb.pcie(parent, dev_id(part[0]), gen, width, dev_line(part[0]));
            return;
          }
          const std::string sw = "sw" + std::to_string(n_sw++);
          Node n;
          n.id = sw;
          n.kind = NodeKind::pcie_switch;
          n.acs_redirect = options.acs_redirect;
          gb.node(n, dev_line(part[0]));
          gb.pcie(parent, sw, gen, width, dev_line(part[0]));
          for (int d : part) gb.pcie(sw, dev_id(d), gen, width, dev_line(d));
        };
        if (parts.size() == 1) {
          place(parts[0], top, false);
        } else {
          const std::string upper = "sw" + std::to_string(n_sw++);
          Node n;
          n.id = upper;
          n.kind = NodeKind::pcie_switch;
          n.acs_redirect = options.acs_redirect;
          gb.node(n, dev_line(st[0]));
          gb.pcie(top, upper, gen, width, dev_line(st[0]));
          for (const auto& part : parts) place(part, upper, true);
        }
      }
    }
    for (int d : members) {
      if (d >= n_gpu) placed_nics.push_back(d);
    }
  }
  // NICs: placed above when anchored to a GPU; the rest hang off cpu0.
  for (int k = 0; k < n_nic; ++k) {
    if (nic_card[static_cast<size_t>(k)] != k) continue;
    Node n;
    n.id = dev_id(n_gpu + k);
    n.kind = NodeKind::nic;
    n.ports = nic_ports[static_cast<size_t>(nic_node[static_cast<size_t>(k)])];
    for (int p = k; p < n_nic; ++p) {  // the card's ports in column order
      const std::string port = nic_card[static_cast<size_t>(p)] == k ? nic_name(p) : "";
      if (!port.empty()) n.name += (n.name.empty() ? "" : ",") + port;
    }
    if (n.ports > 1)
      gb.note(file, std::to_string(header_line),
              columns[static_cast<size_t>(nic_columns[static_cast<size_t>(k)])] + " and " +
                  std::to_string(n.ports - 1) +
                  " more NIC(s) PIX to it with the same paths to every GPU: one card with " +
                  std::to_string(n.ports) + " ports (" + n.id + ")");
    gb.node(std::move(n), header_line);
    if (nic_anchor[static_cast<size_t>(k)] < 0)
      gb.pcie(cpus[0], dev_id(n_gpu + k), gen, width, header_line);
  }
  // NVLink: direct bonded links, or an NVSwitch fabric for GPUs whose NV counts exceed 18 in sum.
  constexpr int kMaxLinksPerGpu = 18;
  std::vector<int> nv_sum(static_cast<size_t>(n_gpu), 0);
  for (int i = 0; i < n_gpu; ++i) {
    for (int j = 0; j < n_gpu; ++j)
      nv_sum[static_cast<size_t>(i)] += m[static_cast<size_t>(i)][static_cast<size_t>(j)].nv;
  }
  std::vector<int> fabric;
  for (int i = 0; i < n_gpu; ++i) {
    if (nv_sum[static_cast<size_t>(i)] > kMaxLinksPerGpu) fabric.push_back(i);
  }
  if (!fabric.empty()) {
    // Every pair within the fabric must show the same count k: each GPU then has k links into it.
    const int k =
        m[static_cast<size_t>(fabric[0])][static_cast<size_t>(fabric[1 % fabric.size()])].nv;
    for (int i : fabric) {
      for (int j : fabric) {
        if (i != j && m[static_cast<size_t>(i)][static_cast<size_t>(j)].nv != k) {
          return input_error(file, std::to_string(row_line[static_cast<size_t>(i)]),
                             "NVLink counts of GPU" + std::to_string(i) + " exceed " +
                                 std::to_string(kMaxLinksPerGpu) +
                                 " links but are not a uniform NVSwitch fabric (GPU" +
                                 std::to_string(i) + "-GPU" + std::to_string(j) + ")");
        }
      }
    }
    Node nvs;
    nvs.id = "nvswitch0";
    nvs.kind = NodeKind::nvswitch;
    gb.node(std::move(nvs), header_line);
    for (int i : fabric)
      gb.nvlink("gpu" + std::to_string(i), "nvswitch0", k, row_line[static_cast<size_t>(i)],
                nvlink_rate_Bps);
  }
  for (int i = 0; i < n_gpu; ++i) {
    for (int j = i + 1; j < n_gpu; ++j) {
      const int nv = m[static_cast<size_t>(i)][static_cast<size_t>(j)].nv;
      const bool in_fabric = std::count(fabric.begin(), fabric.end(), i) &&
                             std::count(fabric.begin(), fabric.end(), j);
      if (nv > 0 && !in_fabric)
        gb.nvlink("gpu" + std::to_string(i), "gpu" + std::to_string(j), nv,
                  row_line[static_cast<size_t>(i)], nvlink_rate_Bps);
    }
  }
  gb.sockets(cpus, LinkKind::upi, header_line);

  Topology::Options topt;
  topt.p2p = options.p2p.value_or(spec->p2p_capable);
  detail::note_compute_figures(gb, file, *spec);
  topt.notes = gb.notes;
  auto t = Topology::build(detail::import_name(file), "imported from nvidia-smi topo -m: " + detail::printable_copy(file),
                           std::move(gb.nodes), std::move(gb.links), topt, file,
                           std::move(gb.node_places), std::move(gb.link_places));
  if (!t) return t;
  // The inferred tree must reproduce the input matrix exactly.
  for (int i = 0; i < n_gpu; ++i) {
    for (int j = 0; j < n_gpu; ++j) {
      const Cls& want = m[static_cast<size_t>(i)][static_cast<size_t>(j)];
      const PathClass got = t->path_class(i, j);
      const int got_nv = t->nvlink_count(i, j);
      if (got != want.c || got_nv != want.nv) {
        return input_error(
            file, std::to_string(row_line[static_cast<size_t>(i)]),
            "GPU" + std::to_string(i) + "-GPU" + std::to_string(j) + " is " +
                to_string(want.c, want.nv) +
                " but no PCIe tree consistent with the other entries gives that (inferred " +
                to_string(got, got_nv) + ")");
      }
    }
  }
  return t;
}

}  // namespace sparsp::topology
