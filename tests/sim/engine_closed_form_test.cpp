// Closed-form tests of the max-min solver and the event engine over abstract resources.
// Every expected number is derived by hand in the comment next to it.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "../../sim/engine.hpp"
#include "../../sim/lmm.hpp"
#include "../../sim/network.hpp"

using namespace sparsp::sim;

namespace {
constexpr double kGB = 1e9;

Task transfer(std::vector<lmm::Use> uses, double bytes, double latency_s = 0) {
  Task t;
  t.kind = Task::Kind::transfer;
  t.legs.push_back(NetLeg{std::move(uses), latency_s});
  t.bytes = bytes;
  return t;
}
Task compute(int gpu, double work_s) {
  Task t;
  t.kind = Task::Kind::compute;
  t.gpu = gpu;
  t.work_s = work_s;
  return t;
}
}  // namespace

TEST_CASE("lmm: textbook max-min with several links and routes") {
  // L0 = 10 carries f0, f1, f2; L1 = 6 carries f1, f3; L2 = 2 carries f2.
  // Progressive filling: L2 saturates first at level 2/1 = 2 -> f2 = 2.
  // Then L0 has 10 - 2 = 8 left for {f0, f1} (level 4), L1 has 6 for {f1, f3} (level 3):
  // L1 saturates at 3 -> f1 = f3 = 3. Then L0: 8 - 3 = 5 for f0 alone -> f0 = 5.
  lmm::System s;
  const int l0 = s.add_constraint(10), l1 = s.add_constraint(6), l2 = s.add_constraint(2);
  std::vector<lmm::Use> u0{{l0, 1}}, u1{{l0, 1}, {l1, 1}}, u2{{l0, 1}, {l2, 1}}, u3{{l1, 1}};
  const int f0 = s.add_variable(u0), f1 = s.add_variable(u1), f2 = s.add_variable(u2),
            f3 = s.add_variable(u3);
  for (int v : {f0, f1, f2, f3}) s.set_multiplicity(v, 1);
  s.solve();
  CHECK(s.value(f0) == doctest::Approx(5));
  CHECK(s.value(f1) == doctest::Approx(3));
  CHECK(s.value(f2) == doctest::Approx(2));
  CHECK(s.value(f3) == doctest::Approx(3));
  CHECK(s.load(l0) == doctest::Approx(10));
  CHECK(s.load(l1) == doctest::Approx(6));

  // Multiplicity: two flows in class f3 -> L1 has {f1, 2 x f3}: level 6/3 = 2 (L2 also at 2):
  // f1 = f2 = f3 = 2; L0: 10 - 2 - 2 = 6 for f0 -> f0 = 6.
  s.set_multiplicity(f3, 2);
  s.solve();
  CHECK(s.value(f0) == doctest::Approx(6));
  CHECK(s.value(f1) == doctest::Approx(2));
  CHECK(s.value(f3) == doctest::Approx(2));
  CHECK(s.load(l1) == doctest::Approx(6));
}

TEST_CASE("lmm: selective update leaves independent components alone") {
  // Two disjoint links; changing the flows on one re-solves only that component.
  lmm::System s;
  const int a = s.add_constraint(10), b = s.add_constraint(4);
  std::vector<lmm::Use> ua{{a, 1}}, ub{{b, 1}};
  const int va = s.add_variable(ua), vb = s.add_variable(ub);
  s.set_multiplicity(va, 2);
  s.set_multiplicity(vb, 1);
  s.solve();
  CHECK(s.value(va) == doctest::Approx(5));  // 10 / 2
  CHECK(s.value(vb) == doctest::Approx(4));
  s.set_multiplicity(vb, 4);
  s.solve();
  CHECK(s.changed_constraints() == std::vector<int>{b});
  CHECK(s.value(vb) == doctest::Approx(1));  // 4 / 4
  CHECK(s.value(va) == doctest::Approx(5));
}

TEST_CASE("lmm: bound and coefficient") {
  // f0 capped at 2 on a 10 link with f1: f0 = 2, f1 = 10 - 2 = 8.
  // f2 with coefficient 1.2 alone on a 12 link: 1.2 x = 12 -> x = 10.
  lmm::System s;
  const int l = s.add_constraint(10), k = s.add_constraint(12);
  std::vector<lmm::Use> u{{l, 1}}, uk{{k, 1.2}};
  const int f0 = s.add_variable(u, 2), f1 = s.add_variable(u), f2 = s.add_variable(uk);
  for (int v : {f0, f1, f2}) s.set_multiplicity(v, 1);
  s.solve();
  CHECK(s.value(f0) == doctest::Approx(2));
  CHECK(s.value(f1) == doctest::Approx(8));
  CHECK(s.value(f2) == doctest::Approx(10));
}

TEST_CASE("engine: one flow pays latency + launch, then bytes / bandwidth") {
  // 1 GB over a 10 GB/s link, hop latency 1 us, launch 2 us: 3 us + 1e9 / 1e10 s = 0.100003 s.
  Problem p;
  p.capacity_Bps = {10 * kGB};
  Task t = transfer({{0, 1}}, 1 * kGB, 1e-6);
  t.launch_s = 2e-6;
  p.tasks.push_back(t);
  const Outcome o = run(p);
  CHECK(o.tasks[0].start_s == 0);
  CHECK(o.tasks[0].end_s == doctest::Approx(0.100003).epsilon(1e-12));
  CHECK(o.makespan_s == o.tasks[0].end_s);
  CHECK(o.bytes[0] == doctest::Approx(1 * kGB));
  CHECK(o.busy_s[0] == doctest::Approx(0.1));
  CHECK(o.peak_load[0] == doctest::Approx(10 * kGB));
}

TEST_CASE("engine: N equal flows on one link each get 1/N") {
  // 4 flows x 1 GB on 10 GB/s: 2.5 GB/s each -> all end at 1e9 / 2.5e9 = 0.4 s.
  Problem p;
  p.capacity_Bps = {10 * kGB};
  for (int i = 0; i < 4; ++i) p.tasks.push_back(transfer({{0, 1}}, 1 * kGB));
  const Outcome o = run(p);
  for (const auto& t : o.tasks) CHECK(t.end_s == doctest::Approx(0.4));
}

TEST_CASE("engine: survivors speed up when a flow finishes") {
  // 1 GB and 3 GB on 10 GB/s: both at 5 GB/s until the first ends at 1/5 = 0.2 s; the second
  // then has 3 - 1 = 2 GB left alone at 10 GB/s: 0.2 + 0.2 = 0.4 s.
  Problem p;
  p.capacity_Bps = {10 * kGB};
  p.tasks.push_back(transfer({{0, 1}}, 1 * kGB));
  p.tasks.push_back(transfer({{0, 1}}, 3 * kGB));
  const Outcome o = run(p);
  CHECK(o.tasks[0].end_s == doctest::Approx(0.2));
  CHECK(o.tasks[1].end_s == doctest::Approx(0.4));
}

TEST_CASE("engine: textbook max-min finishing times") {
  // Same network as the lmm textbook case: rates f0 = 5, f1 = 3, f2 = 2, f3 = 3 (GB/s).
  // Bytes 5, 3, 2, 3 GB -> all four end together at 1 s (no re-solve changes anything before).
  Problem p;
  p.capacity_Bps = {10 * kGB, 6 * kGB, 2 * kGB};
  p.tasks.push_back(transfer({{0, 1}}, 5 * kGB));
  p.tasks.push_back(transfer({{0, 1}, {1, 1}}, 3 * kGB));
  p.tasks.push_back(transfer({{0, 1}, {2, 1}}, 2 * kGB));
  p.tasks.push_back(transfer({{1, 1}}, 3 * kGB));
  const Outcome o = run(p);
  for (const auto& t : o.tasks) CHECK(t.end_s == doctest::Approx(1.0));
}

TEST_CASE("engine: duplex constraint on the sum of both directions") {
  // Link with 10 GB/s per direction (r0: a->b, r1: b->a) and 16 GB/s for both together (r2).
  // One direction alone: 1 GB / 10 GB/s = 0.1 s. Both at once: 16 / 2 = 8 GB/s each ->
  // 1 GB / 8 GB/s = 0.125 s.
  Problem p;
  p.capacity_Bps = {10 * kGB, 10 * kGB, 16 * kGB};
  p.tasks.push_back(transfer({{0, 1}, {2, 1}}, 1 * kGB));
  CHECK(run(p).tasks[0].end_s == doctest::Approx(0.1));
  p.tasks.push_back(transfer({{1, 1}, {2, 1}}, 1 * kGB));
  const Outcome o = run(p);
  CHECK(o.tasks[0].end_s == doctest::Approx(0.125));
  CHECK(o.tasks[1].end_s == doctest::Approx(0.125));
}

TEST_CASE("engine: rate cap and coefficient") {
  // Capped flow 1 GB at 2 GB/s -> 0.5 s. Uncapped 4 GB on the same 10 GB/s link gets 8 GB/s
  // while the cap holds: 4 GB / 8 = 0.5 s, so both end at 0.5 s.
  Problem p;
  p.capacity_Bps = {10 * kGB, 12 * kGB};
  Task capped = transfer({{0, 1}}, 1 * kGB);
  capped.cap_Bps = 2 * kGB;
  p.tasks.push_back(capped);
  p.tasks.push_back(transfer({{0, 1}}, 4 * kGB));
  // Coefficient 1.2 on a 12 GB/s resource: rate 12 / 1.2 = 10 GB/s -> 1 GB in 0.1 s.
  p.tasks.push_back(transfer({{1, 1.2}}, 1 * kGB));
  const Outcome o = run(p);
  CHECK(o.tasks[0].end_s == doctest::Approx(0.5));
  CHECK(o.tasks[1].end_s == doctest::Approx(0.5));
  CHECK(o.tasks[2].end_s == doctest::Approx(0.1));
  CHECK(o.bytes[1] == doctest::Approx(1.2 * kGB));  // coefficient-weighted bytes
}

TEST_CASE("engine: FIFO on copy engines") {
  // GPU 0 has 2 copy engines; three 1 GB transfers on disjoint 10 GB/s links become ready at 0.
  // t0 -> ce0, t1 -> ce1 (0 .. 0.1 s); t2 waits and takes ce0 when t0 ends: 0.1 .. 0.2 s.
  // t3 is pinned to ce1 and ready at 0 after t2 in ready order... it was queued on ce1 at time 0
  // (ready seq 1 > t2's seq 0), ce1 frees at 0.1 -> t3 runs 0.1 .. 0.2 s on ce1.
  Problem p;
  p.capacity_Bps = {10 * kGB, 10 * kGB, 10 * kGB, 10 * kGB};
  p.gpus = {GpuModel{2, 100}};
  for (int i = 0; i < 4; ++i) {
    Task t = transfer({{i, 1}}, 1 * kGB);
    t.ce_gpu = 0;
    p.tasks.push_back(t);
  }
  p.tasks[3].copy_engine = 1;
  const Outcome o = run(p);
  CHECK(o.tasks[0].copy_engine == 0);
  CHECK(o.tasks[1].copy_engine == 1);
  CHECK(o.tasks[2].start_s == doctest::Approx(0.1));
  CHECK(o.tasks[2].end_s == doctest::Approx(0.2));
  CHECK(o.tasks[2].copy_engine == 0);
  CHECK(o.tasks[3].start_s == doctest::Approx(0.1));
  CHECK(o.tasks[3].copy_engine == 1);
  CHECK(o.tasks[2].pred == 0);  // released by t0's copy engine
}

TEST_CASE("engine: host-staged pipeline of k chunks") {
  // Leg 1 (GPU -> host) on r0 = 10 GB/s, leg 2 (host -> GPU) on r1 = 5 GB/s, disjoint.
  // 64 MB in chunks of 16 MB: k = 4, latency L = 1 us per leg per chunk, launch 2 us, 2 buffers.
  // Leg 2 is the bottleneck and, once fed, never idles: leg1 of chunk i+1 (L + 1.6 ms) fits in
  // leg2 of chunk i (L + 3.2 ms), and buffers (chunk i+2 needs chunk i out of leg 2) never block
  // leg 2 since leg1 of i+2 starts when leg2 of i ends and ends before leg2 of i+1 does.
  // T = launch + (L + c/r0) + k (L + c/r1) = 2e-6 + (1e-6 + 1.6e-3) + 4 (1e-6 + 3.2e-3)
  //   = 0.014407 s. First-chunk latency: chunk 0 leaves leg 2 at 2e-6 + 1.601e-3 + 3.201e-3.
  Problem p;
  p.capacity_Bps = {10 * kGB, 5 * kGB};
  Task t;
  t.legs = {NetLeg{{{0, 1}}, 1e-6}, NetLeg{{{1, 1}}, 1e-6}};
  t.bytes = 64e6;
  t.chunk_bytes = 16e6;
  t.buffers = 2;
  t.launch_s = 2e-6;
  p.tasks.push_back(t);
  Outcome o = run(p);
  CHECK(o.tasks[0].end_s == doctest::Approx(0.014407).epsilon(1e-12));
  // k = 1 (one chunk): launch + leg1 + leg2 = 2e-6 + 1e-6 + 1.6e-3 + 1e-6 + 3.2e-3 = 0.004804.
  p.tasks[0].bytes = 16e6;
  o = run(p);
  CHECK(o.tasks[0].end_s == doctest::Approx(0.004804).epsilon(1e-12));
  // One buffer: no overlap, each chunk does leg1 then leg2: launch + 4 (2L + 1.6e-3 + 3.2e-3)
  // = 2e-6 + 4 * 4.802e-3 = 0.019210.
  p.tasks[0].bytes = 64e6;
  p.tasks[0].buffers = 1;
  o = run(p);
  CHECK(o.tasks[0].end_s == doctest::Approx(0.019210).epsilon(1e-12));
}

TEST_CASE("engine: host-staged per-chunk overhead, once per chunk") {
  // One staged transfer alone on one link: leg 1 (GPU -> host) on the link's up direction, leg 2
  // (host -> GPU) on its down direction, r = 10 GB/s each, L = 1 us per leg and chunk, launch
  // 2 us, 2 buffers, chunk c = 16 MB, per-chunk overhead o = 5 us (held on leg 1 before the
  // chunk's latency). Per chunk: leg 1 o + L + c/r = 5e-6 + 1e-6 + 1.6e-3 = 1.606e-3 s,
  // leg 2 L + c/r = 1.601e-3 s. Leg 1 is the slower stage, so it runs back to back and leg 2
  // takes chunk i as soon as it leaves leg 1 (leg 2 is free: chunk i-1 left it 5 us earlier);
  // chunk i's buffer is free once chunk i-2 left leg 2, at (i-1) 1.606e-3 + 1.601e-3 after the
  // launch, before leg 1 wants it at i 1.606e-3.
  // T = launch + N (o + L + c/r) + (L + c/r) = (pipeline formula launch + (N + 1)(L + c/r))
  //     + N o. N = 4 (64 MB): 2e-6 + 4 * 1.606e-3 + 1.601e-3 = 8.027e-3 s
  //     = 2e-6 + 5 * 1.601e-3 + 4 * 5e-6 = 8.007e-3 + 2e-5.
  Problem p;
  p.capacity_Bps = {10 * kGB, 10 * kGB};
  Task t;
  t.legs = {NetLeg{{{0, 1}}, 1e-6}, NetLeg{{{1, 1}}, 1e-6}};
  t.bytes = 64e6;
  t.chunk_bytes = 16e6;
  t.buffers = 2;
  t.launch_s = 2e-6;
  t.chunk_overhead_s = 5e-6;
  p.tasks.push_back(t);
  CHECK(run(p).tasks[0].end_s == doctest::Approx(8.027e-3).epsilon(1e-12));
  // N = 16 chunks of 4 MB: c/r = 4e-4; 2e-6 + 16 * (5e-6 + 1e-6 + 4e-4) + (1e-6 + 4e-4)
  // = 2e-6 + 6.496e-3 + 4.01e-4 = 6.899e-3 s (= 2e-6 + 17 * 4.01e-4 + 16 * 5e-6).
  p.tasks[0].chunk_bytes = 4e6;
  CHECK(run(p).tasks[0].end_s == doctest::Approx(6.899e-3).epsilon(1e-12));
  // Without the overhead: the bare pipeline, 2e-6 + 17 * 4.01e-4 = 6.819e-3 s.
  p.tasks[0].chunk_overhead_s = 0;
  CHECK(run(p).tasks[0].end_s == doctest::Approx(6.819e-3).epsilon(1e-12));
  // One buffer: nothing overlaps, each chunk o + 2 (L + c/r): 2e-6 + 16 * (5e-6 + 2 * 4.01e-4)
  // = 2e-6 + 16 * 8.07e-4 = 1.2914e-2 s.
  p.tasks[0].chunk_overhead_s = 5e-6;
  p.tasks[0].buffers = 1;
  CHECK(run(p).tasks[0].end_s == doctest::Approx(1.2914e-2).epsilon(1e-12));
  // A slower host -> GPU leg (5 GB/s) hides the overhead behind it, as the second copy stream
  // hides the first one's launches on hardware: 2 buffers, N = 4 chunks of 16 MB, leg 1
  // 1.606e-3 s per chunk, leg 2 1e-6 + 3.2e-3 = 3.201e-3 s, never idle after chunk 0:
  // T = launch + (o + L + c/r0) + N (L + c/r1) = 2e-6 + 1.606e-3 + 4 * 3.201e-3 = 0.014412 s
  // (the test above without overhead: 0.014407 s; + o once).
  p.capacity_Bps = {10 * kGB, 5 * kGB};
  p.tasks[0].chunk_bytes = 16e6;
  p.tasks[0].buffers = 2;
  CHECK(run(p).tasks[0].end_s == doctest::Approx(0.014412).epsilon(1e-12));
}

TEST_CASE("engine: compute slowed by SM-driven communication") {
  // GPU with 100 SMs; compute of 1.0 s. An SM-driven transfer takes 20 SMs: 5 GB at 10 GB/s ->
  // 0.5 s. During [0, 0.5] compute runs at 80/100 -> 0.4 s of work; 0.6 s left at full speed ->
  // ends at 1.1 s. A copy-engine transfer (no SMs) leaves it at 1.0 s.
  Problem p;
  p.capacity_Bps = {10 * kGB};
  p.gpus = {GpuModel{2, 100}};
  Task t = transfer({{0, 1}}, 5 * kGB);
  t.sm_gpus[0] = 0;
  t.comm_sms = 20;
  p.tasks.push_back(t);
  p.tasks.push_back(compute(0, 1.0));
  Outcome o = run(p);
  CHECK(o.tasks[0].end_s == doctest::Approx(0.5));
  CHECK(o.tasks[1].end_s == doctest::Approx(1.1));
  p.tasks[0].comm_sms = 0;
  p.tasks[0].sm_gpus[0] = -1;
  p.tasks[0].ce_gpu = 0;
  o = run(p);
  CHECK(o.tasks[1].end_s == doctest::Approx(1.0));
}

TEST_CASE("engine: kernels of one device are served first come first served") {
  // Two compute tasks ready at 0 on one GPU, 0.5 s and 1.0 s of work: the first ready (task 0,
  // lower index at the same time) holds the GPU for 0.5 s; task 1 waits, then runs its 1.0 s ->
  // ends at 1.5 s. Its start is when it became ready (0), as the replay's start event reads it;
  // its critical predecessor is the kernel it waited for. (Max-min sharing would end them at
  // 1.0 s and 1.5 s; the H200 served four folded ranks' kernels one after another.)
  Problem p;
  p.capacity_Bps = {10 * kGB};
  p.gpus = {GpuModel{2, 100}};
  p.tasks.push_back(compute(0, 0.5));
  p.tasks.push_back(compute(0, 1.0));
  Outcome o = run(p);
  CHECK(o.tasks[0].end_s == doctest::Approx(0.5));
  CHECK(o.tasks[1].start_s == doctest::Approx(0.0));
  CHECK(o.tasks[1].end_s == doctest::Approx(1.5));
  CHECK(o.tasks[1].pred == 0);
  // Two GPUs folded onto one device (compute_shared_with): the same queue across them. GPU 1's
  // 1.0 s task is ready first at 0; GPU 0's 0.5 s task waits -> 1.0 s, then 1.5 s. A task of
  // zero work does not queue: it ends at once.
  p.gpus = {GpuModel{2, 100}, GpuModel{2, 100}};
  p.gpus[1].compute_shared_with = 0;
  p.tasks = {compute(1, 1.0), compute(0, 0.5), compute(0, 0.0)};
  o = run(p);
  CHECK(o.tasks[0].end_s == doctest::Approx(1.0));
  CHECK(o.tasks[1].end_s == doctest::Approx(1.5));
  CHECK(o.tasks[2].end_s == doctest::Approx(0.0));
  // Separate devices: each GPU computes on its own -> 1.0 s and 0.5 s.
  p.gpus[1].compute_shared_with = -1;
  o = run(p);
  CHECK(o.tasks[0].end_s == doctest::Approx(1.0));
  CHECK(o.tasks[1].end_s == doctest::Approx(0.5));
}

TEST_CASE("engine: contention factors (measured_compute.contention) slow attention") {
  // 100 SMs, compute of 1.0 s, a 5 GB transfer at 10 GB/s (0.5 s).
  Problem p;
  p.capacity_Bps = {10 * kGB};
  p.gpus = {GpuModel{2, 100, 0.25, -1}};
  Task t = transfer({{0, 1}}, 5 * kGB);
  t.ce_gpu = 0;
  p.tasks.push_back(t);
  p.tasks.push_back(compute(0, 1.0));
  // Copy engine, ce_copy 0.25: during [0, 0.5] compute runs at 1 / 1.25 = 0.8 -> 0.4 s of work;
  // 0.6 s left at full speed -> 1.1 s.
  Outcome o = run(p);
  CHECK(o.tasks[0].end_s == doctest::Approx(0.5));
  CHECK(o.tasks[1].end_s == doctest::Approx(1.1));
  // SM-driven, 20 SMs, sm_copy_per_sm 0.0125 (SM share plus HBM): 1 / (1 + 0.0125 * 20) = 0.8,
  // the same 1.1 s; ce_copy does not apply to an SM-driven copy.
  p.gpus = {GpuModel{2, 100, 0.25, 0.0125}};
  p.tasks[0].ce_gpu = -1;
  p.tasks[0].sm_gpus[0] = 0;
  p.tasks[0].comm_sms = 20;
  o = run(p);
  CHECK(o.tasks[1].end_s == doctest::Approx(1.1));
  // sm_copy_per_sm 0.025: 1 / 1.5 = 2/3 -> 1/3 s of work in [0, 0.5]; 2/3 s left -> 1.1667 s.
  p.gpus = {GpuModel{2, 100, 0, 0.025}};
  o = run(p);
  CHECK(o.tasks[1].end_s == doctest::Approx(0.5 + 2.0 / 3.0));
}

TEST_CASE("engine: DAG with a critical path, streams are FIFO") {
  // a (0.1 s compute) -> b (0.2 s) and c (0.5 s, on GPU 1) -> d (0.1 s) after b and c.
  // b and c run in parallel on different GPUs: d starts at 0.1 + 0.5 = 0.6, ends 0.7.
  // Critical path a, c, d. e is on the same stream as a (after it in task order): 0.1 .. 0.4.
  Problem p;
  p.gpus = {GpuModel{2, 100}, GpuModel{2, 100}, GpuModel{2, 100}};
  p.tasks.push_back(compute(0, 0.1));  // a
  p.tasks.push_back(compute(0, 0.2));  // b
  p.tasks.push_back(compute(1, 0.5));  // c
  p.tasks.push_back(compute(0, 0.1));  // d
  p.tasks.push_back(compute(2, 0.3));  // e
  p.tasks[1].deps = {0};
  p.tasks[2].deps = {0};
  p.tasks[3].deps = {1, 2};
  p.tasks[0].stream = 0;
  p.tasks[4].stream = 0;
  CHECK(find_cycle(p) == -1);
  const Outcome o = run(p);
  CHECK(o.tasks[3].start_s == doctest::Approx(0.6));
  CHECK(o.makespan_s == doctest::Approx(0.7));
  CHECK(o.critical_path == std::vector<int>{0, 2, 3});
  CHECK(o.tasks[4].start_s == doctest::Approx(0.1));
  CHECK(o.tasks[4].end_s == doctest::Approx(0.4));
  // A cycle through the stream: a after e, e after a (stream order).
  p.tasks[0].deps = {4};
  std::vector<int> cyc;
  CHECK(find_cycle(p, &cyc) >= 0);
  CHECK(cyc.size() == 2);
}

TEST_CASE("engine: same input, same output bit for bit") {
  Problem p;
  p.capacity_Bps = {10 * kGB, 7 * kGB, 3 * kGB};
  for (int i = 0; i < 50; ++i) {
    std::vector<lmm::Use> u{{i % 3, 1.0}};
    if (i % 4 == 0) u.push_back({(i + 1) % 3, 1.1});
    p.tasks.push_back(transfer(u, 1e6 * (1 + i % 7), 1e-6 * (i % 5)));
  }
  const Outcome a = run(p), b = run(p);
  for (size_t i = 0; i < a.tasks.size(); ++i) {
    CHECK(a.tasks[i].end_s == b.tasks[i].end_s);
  }
}

TEST_CASE("engine: a chunked direct transfer pays the latency per chunk") {
  // 64 MB in 16 MB chunks over 10 GB/s with 1 us latency, launch 2 us, chunks one after the
  // other: 2e-6 + 4 * (1e-6 + 16e6 / 1e10) = 2e-6 + 4 * 1.601e-3 = 0.006406 s.
  // A last partial chunk: 60 MB -> 16 + 16 + 16 + 12 MB: 2e-6 + 4e-6 + 60e6 / 1e10 = 0.006006 s.
  Problem p;
  p.capacity_Bps = {10 * kGB};
  Task t = transfer({{0, 1}}, 64e6, 1e-6);
  t.chunk_bytes = 16e6;
  t.launch_s = 2e-6;
  p.tasks.push_back(t);
  CHECK(run(p).tasks[0].end_s == doctest::Approx(0.006406).epsilon(1e-12));
  p.tasks[0].bytes = 60e6;
  const Outcome o = run(p);
  CHECK(o.tasks[0].end_s == doctest::Approx(0.006006).epsilon(1e-12));
  CHECK(o.bytes[0] == doctest::Approx(60e6));
}

TEST_CASE("engine: release times and zero-byte transfers") {
  // A transfer released at 0.5 s on an idle 10 GB/s link: 0.5 + 1e9 / 1e10 = 0.6 s. A zero-byte
  // transfer takes only its latency (1 us). A transfer with no resources (empty route) takes
  // only its launch overhead.
  Problem p;
  p.capacity_Bps = {10 * kGB};
  Task a = transfer({{0, 1}}, 1 * kGB);
  a.release_s = 0.5;
  p.tasks.push_back(a);
  p.tasks.push_back(transfer({{0, 1}}, 0, 1e-6));
  Task c = transfer({}, 1e6);
  c.launch_s = 3e-6;
  p.tasks.push_back(c);
  const Outcome o = run(p);
  CHECK(o.tasks[0].start_s == doctest::Approx(0.5));
  CHECK(o.tasks[0].end_s == doctest::Approx(0.6));
  CHECK(o.tasks[1].end_s == doctest::Approx(1e-6));
  CHECK(o.tasks[2].end_s == doctest::Approx(3e-6));
}

TEST_CASE("lmm: a large component fills by the heap with the scan's allocation") {
  // 600 links L_i of capacity (i + 1) GB/s, all joined by one spine S of 1e15 B/s (never binds),
  // so one component of 601 constraints: above kHeapConstraints (512), filled by the heap.
  // On L_i: class A_i of m_i = (i mod 3) + 1 flows; on every fifth link also one flow of class
  // B_i capped at 0.25 GB/s. Closed form: B_i's fair share (i + 1) / (m_i + 1) >= 1 / 2 > 0.25,
  // so B_i takes its cap and A_i = (i + 1 - 0.25 [if B_i]) / m_i GB/s per flow, e.g.
  // L_0: (1 - 0.25) / 1 = 0.75; L_4: (5 - 0) / 2 = 2.5; L_5: (6 - 0.25) / 3 = 1.9167.
  constexpr int kLinks = 600;
  constexpr double G = 1e9;
  for (size_t heap_min : {lmm::System::kHeapConstraints, static_cast<size_t>(-1)}) {
    CAPTURE(heap_min);
    lmm::System s;
    s.set_heap_threshold(heap_min);
    std::vector<int> link(kLinks), a(kLinks), b(kLinks, -1);
    const int spine = s.add_constraint(1e15);
    for (int i = 0; i < kLinks; ++i) link[i] = s.add_constraint((i + 1) * G);
    for (int i = 0; i < kLinks; ++i) {
      const std::vector<lmm::Use> u{{spine, 1}, {link[i], 1}};
      a[i] = s.add_variable(u);
      s.set_multiplicity(a[i], i % 3 + 1);
      if (i % 5 == 0) {
        b[i] = s.add_variable(u, 0.25 * G);
        s.set_multiplicity(b[i], 1);
      }
    }
    s.solve();
    for (int i = 0; i < kLinks; ++i) {
      const double rest = (i + 1) * G - (b[i] >= 0 ? 0.25 * G : 0.0);
      CHECK(s.value(a[i]) == doctest::Approx(rest / (i % 3 + 1)).epsilon(1e-12));
      if (b[i] >= 0) CHECK(s.value(b[i]) == doctest::Approx(0.25 * G).epsilon(1e-12));
      CHECK(s.load(link[i]) == doctest::Approx((i + 1) * G).epsilon(1e-12));
    }
    // Half the flows leave link 4 (A_4: 2 -> 1 flow): it alone re-solves to 5 GB/s.
    s.set_multiplicity(a[4], 1);
    s.solve();
    CHECK(s.value(a[4]) == doctest::Approx(5 * G).epsilon(1e-12));
    CHECK(s.value(a[5]) == doctest::Approx((6 - 0.25) * G / 3).epsilon(1e-12));
  }
}

TEST_CASE("lmm: a constraint that never binds joins nothing and reports its load") {
  // NIC links n0 = n1 = 10 under a leaf uplink S = 20 (= 10 + 10: never binds). Class A (2 flows)
  // uses n0 and S, class C (1 flow) n0 only, class B (1 flow) n1 and S.
  // n0: 3 flows share 10 -> A = C = 10 / 3 each; n1: B alone -> 10.
  // S carries A and B: 2 x 10 / 3 + 10 = 16.667 (of 20).
  lmm::System s;
  const int n0 = s.add_constraint(10), n1 = s.add_constraint(10);
  const int spine = s.add_constraint(20, /*binds=*/false);
  const std::vector<lmm::Use> ua{{spine, 1}, {n0, 1}}, ub{{n1, 1}, {spine, 1}}, uc{{n0, 1}};
  const int a = s.add_variable(ua), b = s.add_variable(ub), c = s.add_variable(uc);
  // uses() lists the binding constraint first.
  CHECK(s.uses(a)[0].constraint == n0);
  CHECK(s.uses(a)[1].constraint == spine);
  s.set_multiplicity(a, 2);
  s.set_multiplicity(b, 1);
  s.set_multiplicity(c, 1);
  s.solve();
  CHECK(s.value(a) == doctest::Approx(10.0 / 3).epsilon(1e-12));
  CHECK(s.value(c) == doctest::Approx(10.0 / 3).epsilon(1e-12));
  CHECK(s.value(b) == doctest::Approx(10).epsilon(1e-12));
  CHECK(s.load(spine) == doctest::Approx(20.0 / 3 + 10).epsilon(1e-12));
  // B's component is {n1} alone (S joins nothing): 2 flows on n1 -> 5 each, A and C untouched;
  // S: 2 x 10 / 3 + 2 x 5 = 16.667 again.
  s.set_multiplicity(b, 2);
  s.solve();
  CHECK(s.changed_variables() == std::vector<int>{b});
  CHECK(s.value(b) == doctest::Approx(5).epsilon(1e-12));
  CHECK(s.load(spine) == doctest::Approx(20.0 / 3 + 10).epsilon(1e-12));
  // Everything on S leaves: its load is exactly 0 (no rounding residue).
  s.set_multiplicity(a, 0);
  s.set_multiplicity(b, 0);
  s.solve();
  CHECK(s.load(spine) == 0.0);
  CHECK(s.value(c) == doctest::Approx(10).epsilon(1e-12));  // C alone on n0
}

TEST_CASE("engine: a transfer released at a kernel's last wave (Task::at_last_wave)") {
  // GPU 0 (100 SMs) runs A, 8 s of work in 4 waves of 2 s: its last wave is its last 2 s of
  // work (last_wave_work_s 2). Transfer T (3 GB at 1 GB/s = 3 s, no SMs) is released at A's last
  // wave: it starts at 8 - 2 = 6 s and ends at 9 s. B (1 s, after T) runs 9..10 s.
  Problem p;
  p.capacity_Bps = {1 * kGB};
  p.gpus = {GpuModel{2, 100}};
  p.tasks.push_back(compute(0, 8.0));
  p.tasks[0].last_wave_work_s = 2.0;
  Task t = transfer({{0, 1}}, 3 * kGB);
  t.deps = {0};
  t.at_last_wave = {0};
  p.tasks.push_back(t);
  p.tasks.push_back(compute(0, 1.0));
  p.tasks[2].deps = {1};
  Outcome o = run(p);
  CHECK(o.tasks[1].start_s == doctest::Approx(6.0));
  CHECK(o.tasks[1].pred == 0);
  CHECK(o.tasks[0].end_s == doctest::Approx(8.0));  // A's two flows add up to its 8 s
  CHECK(o.tasks[1].end_s == doctest::Approx(9.0));
  CHECK(o.makespan_s == doctest::Approx(10.0));
  // Progress, not time: T takes 20 SMs (and on GPU 0), so A's last wave runs at 80/100 from
  // 6 s: 2 s of work / 0.8 = 2.5 s -> A ends at 8.5 s; T still ends at 9 s, B at 10 s.
  p.tasks[1].sm_gpus[0] = 0;
  p.tasks[1].comm_sms = 20;
  o = run(p);
  CHECK(o.tasks[1].start_s == doctest::Approx(6.0));
  CHECK(o.tasks[0].end_s == doctest::Approx(8.5));
  CHECK(o.makespan_s == doctest::Approx(10.0));
  // Contention before the last wave moves the moment: C (SM-driven, 20 SMs, 2 GB at 1 GB/s on
  // its own link = 2 s) runs 0..2 s beside A, so A does 2 * 0.8 = 1.6 s of work by 2 s; its
  // first 6 s of work end at 2 + (6 - 1.6) = 6.4 s, T starts there and ends at 9.4 s; B 9.4..10.4.
  p.capacity_Bps = {1 * kGB, 1 * kGB};
  p.tasks[1].sm_gpus[0] = -1;
  p.tasks[1].comm_sms = 0;
  Task c = transfer({{1, 1}}, 2 * kGB);
  c.sm_gpus[0] = 0;
  c.comm_sms = 20;
  p.tasks.push_back(c);
  o = run(p);
  CHECK(o.tasks[1].start_s == doctest::Approx(6.4));
  CHECK(o.makespan_s == doctest::Approx(10.4));
  p.tasks.pop_back();
  p.capacity_Bps = {1 * kGB};
  // No wave term (last_wave_work_s 0): released at A's end, today's rule -> T 8..11, B 11..12.
  p.tasks[0].last_wave_work_s = 0;
  o = run(p);
  CHECK(o.tasks[1].start_s == doctest::Approx(8.0));
  CHECK(o.makespan_s == doctest::Approx(12.0));
  // One wave (last_wave_work_s = work_s): every CTA starts at once -> T 0..3 s beside A; A ends
  // at 8 s, B after T and after A on the device -> 8..9 s.
  p.tasks[0].last_wave_work_s = 8.0;
  o = run(p);
  CHECK(o.tasks[1].start_s == doctest::Approx(0.0));
  CHECK(o.makespan_s == doctest::Approx(9.0));
  // Listed in deps but not in at_last_wave: its end, as before.
  p.tasks[0].last_wave_work_s = 2.0;
  p.tasks[1].at_last_wave.clear();
  o = run(p);
  CHECK(o.tasks[1].start_s == doctest::Approx(8.0));
}
