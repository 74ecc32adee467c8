// Cross-check of sparsp's flow-level engine against SimGrid 3.32, and speed comparison.
//
// Both sides get the same networks and flow sets (sim/synthetic.hpp) and only what both model:
//  - split-duplex links (one constraint per direction; SimGrid SPLITDUPLEX), or for the server
//    networks one shared constraint per resource (SimGrid SHARED links: a duplex sum, a root
//    complex are exactly a link both directions cross);
//  - plain max-min: SimGrid's CM02 model with network/TCP-gamma:0, network/weight-S:0,
//    network/latency-factor:1, network/bandwidth-factor:1, network/crosstraffic:0.
//  - zero latency. CM02 gives a flow the sharing penalty "route latency + weight-S / bandwidth"
//    (rate inversely proportional to it), so with latencies that differ between routes SimGrid is
//    not plain max-min; at latency 0 every penalty is 1. Latency is covered by the closed-form
//    tests (tests/sim/engine_closed_form_test.cpp).
// Flows start at random times (SimGrid: an actor per flow sleeps until its start, then sends).
//
// SimGrid runs one engine per process, so every SimGrid run happens in a forked child that sends
// its results back through a pipe.
//
// Usage: simgrid_crosscheck [--cases N]   cross-check, exit 1 if any relative error > 1e-6
//        simgrid_crosscheck --bench       completions/s of SimGrid and sparsp on the benchmark
//                                         flow sets (bench/bench_engine.cpp), as a table;
//                                         --gpus G: only the rows of that network
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <simgrid/s4u.hpp>
#include <string>
#include <vector>

#include "engine.hpp"
#include "network.hpp"
#include "synthetic.hpp"

namespace sg4 = simgrid::s4u;
namespace syn = sparsp::sim::synthetic;
using sparsp::sim::FlowNetwork;

namespace {

/// Process CPU time: both simulators are single-threaded (SimGrid runs its actors as contexts in
/// one thread), and CPU time is robust to other load on a shared machine.
double now_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

/// Set by in_child: ships a result to the parent and ends the child (used by drivers that stop
/// measuring before every flow has finished).
std::function<void(const struct RunResult&)> g_ship;

struct RunResult {
  std::vector<double> finish;  // per flow (all-at-once / staggered modes)
  double wall_s = 0;
  int64_t completions = 0;
};

// ---- SimGrid side ------------------------------------------------------------------------------

/// The ordered host pairs a flow set uses (all pairs for networks that store their routes; only
/// the used ones for a rail cluster, whose 1,024^2 routes would not fit a full zone's table).
std::vector<std::pair<int, int>> used_pairs(const syn::Net& net,
                                            const std::vector<syn::FlowSpec>& flows) {
  std::vector<std::pair<int, int>> pairs;
  if (net.gpus_per_node == 0) {
    for (int a = 0; a < net.hosts; ++a)
      for (int b = 0; b < net.hosts; ++b)
        if (a != b) pairs.emplace_back(a, b);
    return pairs;
  }
  for (const auto& f : flows) pairs.emplace_back(f.src, f.dst);
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  return pairs;
}

void build_platform(const syn::Net& net, const std::vector<syn::FlowSpec>& flows,
                    std::vector<sg4::Host*>& hosts) {
  auto* zone = sg4::create_full_zone("world");
  for (int h = 0; h < net.hosts; ++h)
    hosts.push_back(zone->create_host("h" + std::to_string(h), 1e9));
  std::vector<sg4::LinkInRoute> by_constraint;
  if (net.split_duplex_pairs) {
    for (size_t l = 0; l * 2 < net.capacity_Bps.size(); ++l) {
      auto* link = zone->create_split_duplex_link("l" + std::to_string(l), net.capacity_Bps[2 * l]);
      link->set_latency(0)->seal();
      by_constraint.emplace_back(link, sg4::LinkInRoute::Direction::UP);
      by_constraint.emplace_back(link, sg4::LinkInRoute::Direction::DOWN);
    }
  } else {
    for (size_t c = 0; c < net.capacity_Bps.size(); ++c) {
      auto* link = zone->create_link("r" + std::to_string(c), net.capacity_Bps[c]);
      link->set_sharing_policy(sg4::Link::SharingPolicy::SHARED)->set_latency(0)->seal();
      by_constraint.emplace_back(link);
    }
  }
  for (const auto& [a, b] : used_pairs(net, flows)) {
    std::vector<sg4::LinkInRoute> links;
    for (const auto& u : net.route(a, b)) links.push_back(by_constraint[u.constraint]);
    zone->add_route(hosts[a]->get_netpoint(), hosts[b]->get_netpoint(), nullptr, nullptr, links,
                    false);
  }
  zone->seal();
}

/// Runs in a forked child. mode 0: flows start at their start_s (one actor each); mode 1: all
/// flows at t = 0 from one actor, then wait_all; mode 2: streaming, `concurrent` in flight, each
/// completion starts the next flow, stop after `target` completions.
RunResult simgrid_run(const syn::Net& net, const std::vector<syn::FlowSpec>& flows, int mode,
                      int concurrent, int64_t target) {
  std::vector<std::string> args = {"simgrid_crosscheck",
                                   "--cfg=network/model:CM02",
                                   "--cfg=network/TCP-gamma:0",
                                   "--cfg=network/weight-S:0",
                                   "--cfg=network/latency-factor:1",
                                   "--cfg=network/bandwidth-factor:1",
                                   "--cfg=network/crosstraffic:0",
                                   "--log=root.thres:critical"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  int argc = static_cast<int>(argv.size());
  sg4::Engine e(&argc, argv.data());
  std::vector<sg4::Host*> hosts;
  build_platform(net, flows, hosts);
  RunResult r;
  r.finish.assign(flows.size(), -1);
  double t0 = 0;
  if (mode == 0) {
    for (size_t i = 0; i < flows.size(); ++i) {
      sg4::Actor::create("f" + std::to_string(i), hosts[flows[i].src], [&, i] {
        const auto& f = flows[i];
        if (f.start_s > 0) sg4::this_actor::sleep_until(f.start_s);
        sg4::Comm::sendto(hosts[f.src], hosts[f.dst], static_cast<uint64_t>(f.bytes));
        r.finish[i] = sg4::Engine::get_clock();
      });
    }
    t0 = now_s();
    e.run();
    r.wall_s = now_s() - t0;
    r.completions = static_cast<int64_t>(flows.size());
  } else if (mode == 1 && target >= static_cast<int64_t>(flows.size())) {
    sg4::Actor::create("driver", hosts[0], [&] {
      std::vector<sg4::CommPtr> comms;
      comms.reserve(flows.size());
      for (const auto& f : flows)
        comms.push_back(
            sg4::Comm::sendto_async(hosts[f.src], hosts[f.dst], static_cast<uint64_t>(f.bytes)));
      sg4::Comm::wait_all(comms);
      for (size_t i = 0; i < comms.size(); ++i) r.finish[i] = comms[i]->get_finish_time();
    });
    t0 = now_s();
    e.run();
    r.wall_s = now_s() - t0;
    r.completions = static_cast<int64_t>(flows.size());
  } else if (mode == 1) {
    // All at once, timed until `target` completions (the rest of the run is not measured).
    sg4::Actor::create("driver", hosts[0], [&] {
      std::vector<sg4::CommPtr> comms;
      comms.reserve(flows.size());
      for (const auto& f : flows)
        comms.push_back(
            sg4::Comm::sendto_async(hosts[f.src], hosts[f.dst], static_cast<uint64_t>(f.bytes)));
      int64_t done = 0;
      while (done < target) {
        const auto k = static_cast<size_t>(sg4::Comm::wait_any(comms));
        ++done;
        comms[k] = comms.back();
        comms.pop_back();
      }
      r.wall_s = now_s() - t0;
      r.completions = done;
      g_ship(r);
    });
    t0 = now_s();
    e.run();
  } else {
    sg4::Actor::create("driver", hosts[0], [&] {
      std::vector<sg4::CommPtr> comms;
      size_t next = 0;
      for (; next < static_cast<size_t>(concurrent); ++next) {
        const auto& f = flows[next];
        comms.push_back(
            sg4::Comm::sendto_async(hosts[f.src], hosts[f.dst], static_cast<uint64_t>(f.bytes)));
      }
      int64_t done = 0;
      while (done < target) {
        const ssize_t k = sg4::Comm::wait_any(comms);
        ++done;
        const auto& f = flows[next++ % flows.size()];
        comms[static_cast<size_t>(k)] =
            sg4::Comm::sendto_async(hosts[f.src], hosts[f.dst], static_cast<uint64_t>(f.bytes));
      }
      r.wall_s = now_s() - t0;
      r.completions = done;
      g_ship(r);  // the comms still in flight are not part of the measurement
    });
    t0 = now_s();
    e.run();
  }
  return r;
}

/// Forks, runs `fn` in the child, ships the result back.
RunResult in_child(const std::function<RunResult()>& fn) {
  std::fflush(stdout);  // or the child would print the parent's buffered lines again
  int fd[2];
  if (pipe(fd) != 0) {
    std::perror("pipe");
    std::exit(2);
  }
  const pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    const int out = fd[1];
    g_ship = [out](const RunResult& r) {
      const uint64_t n = r.finish.size();
      auto put = [&](const void* p, size_t len) {
        const char* c = static_cast<const char*>(p);
        while (len > 0) {
          const ssize_t w = write(out, c, len);
          if (w <= 0) _exit(3);
          c += w;
          len -= static_cast<size_t>(w);
        }
      };
      put(&n, sizeof n);
      put(r.finish.data(), n * sizeof(double));
      put(&r.wall_s, sizeof r.wall_s);
      put(&r.completions, sizeof r.completions);
      close(out);
      _exit(0);
    };
    g_ship(fn());
  }
  close(fd[1]);
  RunResult r;
  auto get = [&](void* p, size_t len) {
    char* c = static_cast<char*>(p);
    while (len > 0) {
      const ssize_t g = read(fd[0], c, len);
      if (g <= 0) return false;
      c += g;
      len -= static_cast<size_t>(g);
    }
    return true;
  };
  uint64_t n = 0;
  bool ok = get(&n, sizeof n);
  if (ok) {
    r.finish.resize(n);
    ok = get(r.finish.data(), n * sizeof(double)) && get(&r.wall_s, sizeof r.wall_s) &&
         get(&r.completions, sizeof r.completions);
  }
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!ok || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "simgrid child failed (status %d)\n", status);
    std::exit(2);
  }
  return r;
}

// ---- sparsp side -------------------------------------------------------------------------------

/// Staggered starts through the full engine (release times), zero latency and launch overhead.
RunResult sparsp_engine(const syn::Net& net, const std::vector<syn::FlowSpec>& flows) {
  sparsp::sim::Problem p;
  p.capacity_Bps = net.capacity_Bps;
  p.never_binds = net.never_binds;
  for (const auto& f : flows) {
    sparsp::sim::Task t;
    t.legs.push_back({net.route(f.src, f.dst), 0.0});
    t.bytes = f.bytes;
    t.release_s = f.start_s;
    p.tasks.push_back(std::move(t));
  }
  RunResult r;
  const double t0 = now_s();
  const auto o = sparsp::sim::run(p);
  r.wall_s = now_s() - t0;
  for (const auto& t : o.tasks) r.finish.push_back(t.end_s);
  r.completions = static_cast<int64_t>(flows.size());
  return r;
}

struct Loaded {
  FlowNetwork net;
  std::vector<int> route_ids;  // [src * hosts + dst]
};
/// Registers the routes of the pairs the flow set uses (before timing starts).
void load(const syn::Net& n, const std::vector<syn::FlowSpec>& flows, Loaded& l) {
  for (size_t c = 0; c < n.capacity_Bps.size(); ++c)
    l.net.add_resource(n.capacity_Bps[c], c >= n.never_binds.size() || !n.never_binds[c]);
  l.route_ids.assign(static_cast<size_t>(n.hosts) * n.hosts, -1);
  for (const auto& [a, b] : used_pairs(n, flows))
    l.route_ids[static_cast<size_t>(a) * n.hosts + b] = l.net.add_route(n.route(a, b));
}

/// Same modes as simgrid_run 1 and 2, on the FlowNetwork (what bench_engine measures).
RunResult sparsp_network(const syn::Net& n, const std::vector<syn::FlowSpec>& flows, int mode,
                         int concurrent, int64_t target) {
  RunResult r;
  Loaded l;
  load(n, flows, l);
  std::vector<FlowNetwork::Completion> done;
  auto start = [&](size_t i) {
    const auto& f = flows[i % flows.size()];
    l.net.start_flow(l.route_ids[static_cast<size_t>(f.src) * n.hosts + f.dst], f.bytes, 0, i);
  };
  const double t0 = now_s();
  if (mode == 1) {
    r.finish.assign(flows.size(), -1);
    for (size_t i = 0; i < flows.size(); ++i) start(i);
    while (r.completions < target) {
      const double t = l.net.next_completion();
      if (t == sparsp::sim::lmm::kInf) break;
      done.clear();
      l.net.advance(t, done);
      for (const auto& c : done) r.finish[c.tag] = t;
      r.completions += static_cast<int64_t>(done.size());
    }
  } else {
    size_t next = 0;
    for (; next < static_cast<size_t>(concurrent); ++next) start(next);
    while (r.completions < target) {
      done.clear();
      l.net.advance(l.net.next_completion(), done);
      r.completions += static_cast<int64_t>(done.size());
      for (size_t k = 0; k < done.size(); ++k) start(next++);
    }
  }
  r.wall_s = now_s() - t0;
  return r;
}

double max_rel_error(const std::vector<double>& a, const std::vector<double>& b, size_t* worst) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double e = std::abs(a[i] - b[i]) / std::max(std::abs(b[i]), 1e-12);
    if (e > m) {
      m = e;
      *worst = i;
    }
  }
  return m;
}

int crosscheck(int cases) {
  constexpr double kTol = 1e-6;
  int failures = 0;
  double worst_all = 0, sg_wall = 0, sp_wall = 0;
  int64_t flows_all = 0;
  uint64_t seed = 20261129;
  for (int c = 0; c < cases; ++c) {
    const int hosts = 4 + static_cast<int>(syn::splitmix64(seed) % 9);
    const int links = 3 + static_cast<int>(syn::splitmix64(seed) % 14);
    const int nflows = 20 + static_cast<int>(syn::splitmix64(seed) % 280);
    const syn::Net net = syn::random_split_duplex(syn::splitmix64(seed), hosts, links);
    const auto flows = syn::random_flows(net, nflows, syn::splitmix64(seed), 1e5, 1e8, 0.01);
    const RunResult sg = in_child([&] { return simgrid_run(net, flows, 0, 0, 0); });
    const RunResult sp = sparsp_engine(net, flows);
    size_t w = 0;
    const double err = max_rel_error(sp.finish, sg.finish, &w);
    worst_all = std::max(worst_all, err);
    sg_wall += sg.wall_s;
    sp_wall += sp.wall_s;
    flows_all += nflows;
    std::printf(
        "case %2d: %2d hosts %2d split-duplex links %3d flows (staggered)  max rel err %.2e"
        "  (flow %zu: sparsp %.9f s, SimGrid %.9f s)\n",
        c, hosts, links, nflows, err, w, sp.finish[w], sg.finish[w]);
    if (!(err <= kTol)) ++failures;
  }
  // All flows at once on a benchmark network, against SimGrid.
  auto all_at_once = [&](const syn::Net& net, int n, const char* label) {
    const auto flows = syn::random_flows(net, n, 42, 1e6, 64e6, 0);
    const auto all = static_cast<int64_t>(flows.size());
    const RunResult sg = in_child([&] { return simgrid_run(net, flows, 1, 0, all); });
    const RunResult sp = sparsp_network(net, flows, 1, 0, all);
    size_t w = 0;
    const double err = max_rel_error(sp.finish, sg.finish, &w);
    worst_all = std::max(worst_all, err);
    std::printf("%s %4d flows (all at once)  max rel err %.2e\n", label, n, err);
    if (!(err <= kTol)) ++failures;
  };
  // The server networks of the benchmark (100 and 1000 flows, 8 and 64 GPUs).
  for (int gpus : {8, 64})
    for (int n : {100, 1000})
      all_at_once(syn::pcie_server(gpus), n, gpus == 8 ? "server  8 GPUs" : "server 64 GPUs");
  // The 1,024-GPU rail cluster, 1,000 flows: thousands of constraints in one component, so
  // sparsp fills it by the heap (lmm.hpp).
  all_at_once(syn::rail_cluster(128), 1000, "cluster 1024 GPUs");
  std::printf(
      "cross-check: worst relative error %.3e over %d random cases (%lld flows), 4 server flow "
      "sets and 1 cluster flow set; tolerance %.0e; %s\n",
      worst_all, cases, static_cast<long long>(flows_all), kTol, failures ? "FAILED" : "passed");
  std::printf("random cases wall time: SimGrid %.3f s, sparsp engine %.3f s (%.0fx)\n", sg_wall,
              sp_wall, sg_wall / std::max(sp_wall, 1e-9));
  return failures ? 1 : 0;
}

/// One row of the benchmark: which network, how many flows in flight, and how many completions
/// each simulator is timed over (that count only bounds the run time; SimGrid gets fewer where
/// it is slow).
struct BenchRow {
  int gpus;
  int flows;
  int mode;  // 1: all at once, 2: streaming
  int64_t sp_target, sg_target;
};

std::vector<BenchRow> bench_rows() {
  std::vector<BenchRow> rows;
  for (int mode : {1, 2}) {
    for (int gpus : {8, 64})
      for (int n : {100, 1000, 10000}) {
        // Same seeds and sizes as bench/bench_engine.cpp. All at once: the first completions of
        // the flow set (the first 100 for both when N = 10000, else all N); streaming: N in
        // flight throughout.
        const int64_t sp = mode == 1 ? (n >= 10000 ? 100 : n) : std::max<int64_t>(20000, 20LL * n);
        const int64_t sg = mode == 1 ? sp : (n >= 10000 ? 100 : (n >= 1000 ? 1000 : 10000));
        rows.push_back({gpus, n, mode, sp, sg});
      }
    // The 1,024-GPU rail cluster (syn::rail_cluster(128)): 10k and 100k flows in flight. All at
    // once: both timed over the same first completions (starting every flow included).
    rows.push_back({1024, 10000, mode, mode == 1 ? 100 : 20000, mode == 1 ? 100 : 100});
    rows.push_back({1024, 100000, mode, mode == 1 ? 20 : 2000, 20});
  }
  return rows;
}

int bench(int only_gpus) {
  std::printf(
      "| GPUs | concurrent flows | mode | completions timed (SimGrid / sparsp) | SimGrid "
      "completions/s "
      "| sparsp completions/s | ratio |\n");
  std::printf("|---:|---:|---|---:|---:|---:|---:|\n");
  const syn::Net n8 = syn::pcie_server(8), n64 = syn::pcie_server(64),
                 n1024 = syn::rail_cluster(128);
  for (const BenchRow& row : bench_rows()) {
    if (only_gpus > 0 && row.gpus != only_gpus) continue;
    const syn::Net& net = row.gpus == 8 ? n8 : row.gpus == 64 ? n64 : n1024;
    const int n = row.flows;
    const auto flows = row.mode == 1 ? syn::random_flows(net, n, 42, 1e6, 64e6, 0)
                                     : syn::random_flows(net, static_cast<int>(n + row.sp_target),
                                                         7, 1e6, 64e6, 0);
    const RunResult sg =
        in_child([&] { return simgrid_run(net, flows, row.mode, n, row.sg_target); });
    const RunResult sp = sparsp_network(net, flows, row.mode, n, row.sp_target);
    const double sg_rate = static_cast<double>(sg.completions) / sg.wall_s;
    const double sp_rate = static_cast<double>(sp.completions) / sp.wall_s;
    std::printf("| %d | %d | %s | %lld / %lld | %.4g | %.4g | %.0fx |\n", row.gpus, n,
                row.mode == 1 ? "all at once" : "streaming", static_cast<long long>(sg.completions),
                static_cast<long long>(sp.completions), sg_rate, sp_rate, sp_rate / sg_rate);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int cases = 12;
  bool do_bench = false;
  int only_gpus = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--cases") && i + 1 < argc) {
      cases = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--bench")) {
      do_bench = true;
    } else if (!std::strcmp(argv[i], "--gpus") && i + 1 < argc) {
      only_gpus = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: simgrid_crosscheck [--cases N] [--bench [--gpus 8|64|1024]]\n");
      return 2;
    }
  }
  return do_bench ? bench(only_gpus) : crosscheck(cases);
}
