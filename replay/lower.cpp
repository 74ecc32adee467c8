// Lowering of a plan into buffer layouts, copy pieces and checks (see exec_plan.hpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <queue>

#include "exec_plan.hpp"
#include "lower_compute.hpp"

namespace sparsp::replay::detail {

int holder_of(const std::string& endpoint, const policy::Plan& plan) {
  if (endpoint.rfind("gpu", 0) == 0) return plan.rank_of_gpu(std::stol(endpoint.substr(3)));
  if (endpoint.rfind("host", 0) == 0) return plan.gpus + std::stoi(endpoint.substr(4));
  return -1;
}

namespace {
// The plan's name of a holder: its GPU endpoint (rank_gpus) or "hostK".
std::string holder_name(const policy::Plan& plan, int h, int ranks) {
  return h < ranks ? plan.gpu_endpoint(h) : "host" + std::to_string(h - ranks);
}
uint64_t align_up(uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }
}  // namespace

std::string describe(const policy::Plan& plan, const ExecLayer& layer, const Region& r, int ranks) {
  const policy::LayerPlan& L = plan.layers[layer.plan_index];
  std::string s = "layer " + std::to_string(L.layer) + " (step " + std::to_string(L.step) + ")";
  if (r.block >= 0) {
    s += " block " + std::to_string(r.block) + " (owner " + plan.gpu_endpoint(r.key.owner) + ")";
  } else {
    s += " transfer \"" + L.work.transfers[r.transfer].id + "\" payload";
  }
  return s + " at " + holder_name(plan, r.holder, ranks);
}

void fill_region(uint8_t* base, const Region& r) {
  uint8_t* p = base + r.offset;
  const uint64_t words = r.bytes / 4;
  for (uint64_t w = 0; w < words; ++w) {
    const uint32_t v = content_word(r.key, w);
    std::memcpy(p + 4 * w, &v, 4);
  }
  for (uint64_t i = words * 4; i < r.bytes; ++i) p[i] = content_byte(r.key, i);
}

int64_t check_region(const uint8_t* base, const Region& r) {
  const uint8_t* p = base + r.offset;
  const uint64_t words = r.bytes / 4;
  for (uint64_t w = 0; w < words; ++w) {
    uint32_t v;
    std::memcpy(&v, p + 4 * w, 4);
    if (v != content_word(r.key, w)) {
      for (uint64_t i = 4 * w; i < 4 * w + 4; ++i)
        if (p[i] != content_byte(r.key, i)) return static_cast<int64_t>(i);
    }
  }
  for (uint64_t i = words * 4; i < r.bytes; ++i)
    if (p[i] != content_byte(r.key, i)) return static_cast<int64_t>(i);
  return -1;
}

std::pair<uint64_t, uint64_t> corrupt_span(const Region& r) {
  const uint64_t start = (r.bytes / 2) & ~uint64_t{1};
  return {r.offset + start, std::min<uint64_t>(r.bytes - start, 4096)};
}

std::vector<int> checked_rows(const RankQueries& rq, const std::vector<int>& check) {
  std::vector<int> rows;
  for (int i : check)
    for (int t = rq.reference.q_block_offsets[static_cast<size_t>(i)];
         t < rq.reference.q_block_offsets[static_cast<size_t>(i) + 1]; ++t)
      rows.push_back(t);
  return rows;
}

void append_piece(std::vector<Piece>& pieces, const Piece& p) {
  if (p.bytes == 0) return;
  Piece* last = pieces.empty() ? nullptr : &pieces.back();
  if (last && last->src_offset + last->bytes == p.src_offset &&
      last->dst_offset + last->bytes == p.dst_offset && last->bytes % kAlign == 0)
    last->bytes += p.bytes;
  else
    pieces.push_back(p);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Result<ExecPlan> lower(const policy::Plan& plan, const ReplayOptions& opt) {
  ExecPlan ex;
  ex.ranks = plan.gpus;
  if (!(opt.payload_scale > 0 && opt.payload_scale <= 1))
    return Error{"replay: payload_scale must be in (0, 1]", 2};
  // Host memories named by the plan.
  int max_host = -1;
  for (const auto& L : plan.layers)
    for (const auto& t : L.work.transfers)
      for (const auto* e : {&t.src, &t.dst})
        if (e->rfind("host", 0) == 0) max_host = std::max(max_host, std::stoi(e->substr(4)));
  ex.hosts = max_host + 1;
  if (ex.hosts > 64)
    return Error{
        "replay: plan names host" + std::to_string(max_host) + "; at most 64 host memories", 2};
  ex.max_holder_bytes.assign(ex.holders(), 0);
  ex.max_q_bytes.assign(static_cast<size_t>(ex.ranks), 0);
  ex.max_out_bytes.assign(static_cast<size_t>(ex.ranks), 0);
  ex.max_scratch_bytes.assign(static_cast<size_t>(ex.ranks), 0);
  ex.heads = plan.heads;
  ex.kv_heads = plan.kv_heads_or_heads();
  ex.head_dim = plan.head_dim;

  // Compute mode: real where asked (or by default where possible).
  const bool no_compute = opt.compute == ComputeMode::none || !opt.emulate_compute;
  if (!no_compute && (opt.compute == ComputeMode::real || opt.compute == ComputeMode::automatic)) {
    const std::string why = real_compute_obstacle(plan, opt);
    if (why.empty())
      ex.real = true;
    else if (opt.compute == ComputeMode::real)
      return Error{"replay: --compute real: " + why + " (use --compute emulated)", 2};
    else if (std::any_of(plan.layers.begin(), plan.layers.end(),
                         [](const auto& l) { return !l.work.compute.empty(); }))
      ex.compute_note = "emulated compute: " + why;  // (no note where there is nothing to run)
  }
  if (ex.real)
    ex.tolerance = attention::derive_tolerance(
        plan.head_dim, 1.0 / std::sqrt(static_cast<double>(std::max(1, plan.head_dim))),
        kContentMaxAbs, kContentMaxAbs, kContentMaxAbs);

  // Block sizes (plan units): given, or uniform with an inferred partial last block.
  std::vector<double> size_of(static_cast<size_t>(plan.num_blocks), plan.kv_block_bytes);
  if (!plan.block_bytes.empty()) {
    size_of = plan.block_bytes;
  } else if (plan.num_blocks > 0) {
    const int last_block = plan.num_blocks - 1;
    bool found = false;
    for (const auto& L : plan.layers) {
      for (const auto& t : L.work.transfers) {
        if (std::find(t.kv_blocks.begin(), t.kv_blocks.end(), last_block) == t.kv_blocks.end())
          continue;
        const double deficit =
            static_cast<double>(t.kv_blocks.size()) * plan.kv_block_bytes - t.bytes;
        if (deficit > 1.0 && deficit < plan.kv_block_bytes)
          size_of[last_block] = plan.kv_block_bytes - deficit;
        found = true;
        break;
      }
      if (found) break;
    }
    // A ulysses / usp plan names no blocks in its transfers: its all-to-alls give the tokens.
    if (!found && ulysses_plan(plan))
      if (const double b = ulysses_last_block_bytes(plan); b > 0) size_of[last_block] = b;
  }
  auto scaled = [&](int b) {
    return static_cast<uint64_t>(std::llround(size_of[static_cast<size_t>(b)] * opt.payload_scale));
  };
  // K and V are stored per KV head (plan kv_heads, GQA): the head slices of a block's content.
  const uint32_t heads = static_cast<uint32_t>(std::max(1, plan.kv_heads_or_heads()));

  const size_t nlayers =
      opt.max_layers > 0 ? std::min<size_t>(plan.layers.size(), static_cast<size_t>(opt.max_layers))
                         : plan.layers.size();
  bool corrupt_found = false;
  bool skip_found = false;  // --skip-transfer names a transfer of a replayed layer plan
  for (size_t li = 0; li < nlayers; ++li) {
    const policy::LayerPlan& L = plan.layers[li];
    const std::string where = "plan:/layers/" + std::to_string(li);
    ExecLayer el;
    el.plan_index = static_cast<int>(li);
    el.holder_bytes.assign(ex.holders(), 0);
    const auto& trs = L.work.transfers;
    const auto& cps = L.work.compute;
    std::map<std::string, int> index_of;
    for (size_t i = 0; i < trs.size(); ++i) index_of[trs[i].id] = static_cast<int>(i);
    for (size_t i = 0; i < cps.size(); ++i) index_of[cps[i].id] = static_cast<int>(trs.size() + i);

    // Which transfers carry whole blocks.
    std::vector<char> carries_blocks(trs.size(), 0);
    for (size_t i = 0; i < trs.size(); ++i) {
      const auto& t = trs[i];
      double sum = 0;
      for (int b : t.kv_blocks) sum += size_of[static_cast<size_t>(b)];
      carries_blocks[i] = !t.kv_blocks.empty() && std::abs(t.bytes - sum) <= 1.0;
      // A transfer naming blocks must carry them whole, or it could pass unchecked (plan_io.cpp
      // refuses such a file at load; this covers plans built in memory).
      if (!t.kv_blocks.empty() && !carries_blocks[i])
        return Error{
            where + "/transfers/" + std::to_string(i) +
                "/bytes: " + std::to_string(static_cast<long long>(std::llround(t.bytes))) +
                " bytes, but its " + std::to_string(t.kv_blocks.size()) + " kv_blocks hold " +
                std::to_string(static_cast<long long>(std::llround(sum))) + " bytes",
            2};
    }
    // Under real compute, a ulysses / usp plan's all-to-all in (".a2a_qkv." in its id) and
    // ring steps (".ring.") carry Q, K and V of head groups (lower_ulysses_transfers below), not
    // opaque bytes; the output all-to-all stays opaque (the output is checked where computed).
    std::vector<char> structured(trs.size(), 0);
    if (ex.real && ulysses_plan(plan))
      for (size_t i = 0; i < trs.size(); ++i) {
        const int s = holder_of(trs[i].src, plan), d = holder_of(trs[i].dst, plan);
        if (!trs[i].kv_blocks.empty() || s >= ex.ranks || d >= ex.ranks) continue;
        if (trs[i].id.find(".a2a_qkv.") != std::string::npos)
          structured[i] = 1;
        else if (trs[i].id.find(".ring.") != std::string::npos)
          structured[i] = 2;
      }
    // Block slots: (holder, block) -> offset. Owners hold sources; receivers hold copies.
    std::map<std::pair<int, int>, uint64_t> slot;
    Received received;
    auto& received_by = received.kv;  // (holder, block) -> first transfer
    auto slot_of = [&](int h, int b) {
      auto [it, fresh] = slot.try_emplace({h, b}, 0);
      if (fresh) {
        it->second = el.holder_bytes[h];
        el.holder_bytes[h] += align_up(scaled(b));
      }
      return it->second;
    };
    for (size_t i = 0; i < trs.size(); ++i) {
      if (!carries_blocks[i]) continue;
      const int d = holder_of(trs[i].dst, plan);
      for (int b : trs[i].kv_blocks) received_by.try_emplace({d, b}, static_cast<int>(i));
    }
    for (size_t i = 0; i < trs.size(); ++i) {
      const auto& t = trs[i];
      Activity a;
      a.kind = ActKind::transfer;
      a.index = static_cast<int>(i);
      a.id = t.id;
      a.transfer = &t;
      a.src = holder_of(t.src, plan);
      a.dst = holder_of(t.dst, plan);
      const double chunk = t.chunk_bytes > 0 ? t.chunk_bytes : opt.default_chunk_bytes;
      a.chunk_bytes = std::max<uint64_t>(kAlign, static_cast<uint64_t>(chunk) / kAlign * kAlign);
      a.staging_buffers = t.staging_buffers > 0 ? t.staging_buffers : opt.default_staging_buffers;
      a.comm_sms = t.comm_sms > 0 ? t.comm_sms : opt.default_comm_sms;
      a.skip = !opt.skip_transfer.empty() && opt.skip_transfer == t.id;
      skip_found = skip_found || a.skip;
      if (carries_blocks[i]) {
        for (int b : t.kv_blocks) {
          const int owner = plan.block_owner[b];
          if (a.src != owner && !received_by.count({a.src, b}))
            return Error{where + "/transfers/" + std::to_string(i) + ": " + t.src +
                             " sends block " + std::to_string(b) +
                             " but neither owns it (owner gpu" + std::to_string(owner) +
                             ") nor receives it in this layer",
                         2};
          const uint64_t so = slot_of(a.src, b);
          const uint64_t dof = slot_of(a.dst, b);
          const uint64_t bb = scaled(b);
          append_piece(a.pieces, {so, dof, bb});
        }
      } else if (!structured[i]) {
        const uint64_t n = static_cast<uint64_t>(std::llround(t.bytes * opt.payload_scale));
        Region src{a.src, el.holder_bytes[a.src], n, {}, -1, static_cast<int>(i)};
        src.key = ContentKey{static_cast<uint32_t>(li), kOpaqueItem | static_cast<uint32_t>(i),
                             static_cast<uint32_t>(a.src), 1, 0};
        el.holder_bytes[a.src] += align_up(n);
        Region dst = src;
        dst.holder = a.dst;
        dst.offset = el.holder_bytes[a.dst];
        el.holder_bytes[a.dst] += align_up(n);
        if (n > 0) {
          a.pieces.push_back({src.offset, dst.offset, n});
          el.fills.push_back(src);
          el.checks.push_back(dst);
        }
      }
      for (const auto& p : a.pieces) a.bytes += p.bytes;
      el.acts.push_back(std::move(a));
    }
    for (size_t i = 0; i < cps.size(); ++i) {
      Activity a;
      a.kind = ActKind::compute;
      a.index = static_cast<int>(i);
      a.id = cps[i].id;
      a.compute = &cps[i];
      a.src = a.dst = holder_of(cps[i].gpu, plan);
      a.duration_s = cps[i].duration_s;
      if (a.duration_s <= 0 && cps[i].flops > 0 && opt.peak_flops > 0)
        a.duration_s = cps[i].flops / (opt.peak_flops * opt.compute_efficiency);
      const sim::TaskCompute& w = cps[i].what;
      if (ex.real && w.kind == sim::TaskKind::gemm)
        a.scratch_bytes = 2 * (static_cast<uint64_t>(w.m) * static_cast<uint64_t>(w.k) +
                               static_cast<uint64_t>(w.k) * static_cast<uint64_t>(w.n) +
                               static_cast<uint64_t>(w.m) * static_cast<uint64_t>(w.n));
      else if (ex.real && w.kind == sim::TaskKind::copy)
        a.scratch_bytes = static_cast<uint64_t>(std::llround(w.bytes / 2)) * 2;
      if (a.src >= 0 && a.src < ex.ranks)
        ex.max_scratch_bytes[static_cast<size_t>(a.src)] =
            std::max(ex.max_scratch_bytes[static_cast<size_t>(a.src)], a.scratch_bytes);
      el.acts.push_back(std::move(a));
    }
    const bool layer_attention = std::any_of(cps.begin(), cps.end(), [](const auto& c) {
      return c.what.kind == sim::TaskKind::attention;
    });
    if (ex.real && layer_attention) {
      const auto alloc = [&](int h, uint64_t bytes) {
        const uint64_t off = el.holder_bytes[static_cast<size_t>(h)];
        el.holder_bytes[static_cast<size_t>(h)] += align_up(bytes);
        return off;
      };
      auto st = lower_attention(
          plan, opt, static_cast<int>(li), size_of, [&](int h, int b) { return slot_of(h, b); },
          alloc, el, ex);
      if (!st) return st.error();
      if (std::any_of(structured.begin(), structured.end(), [](char c) { return c != 0; })) {
        auto us = lower_ulysses_transfers(
            plan, opt, static_cast<int>(li), structured, index_of,
            [&](int h, int b) { return slot_of(h, b); }, el, received);
        if (!us) return us.error();
      }
    }
    // Block regions: owner slots are filled, receiver slots checked (where a Ulysses transfer
    // delivered some KV heads only, those).
    for (const auto& [key, off] : slot) {
      const auto [h, b] = key;
      const uint64_t block_bytes = scaled(b);
      const uint64_t bytes_per_head = heads > 1 ? std::max<uint64_t>(1, block_bytes / heads) : 0;
      Region r{h, off, block_bytes, {}, b, -1};
      r.key = ContentKey{static_cast<uint32_t>(li), static_cast<uint32_t>(b),
                         static_cast<uint32_t>(plan.block_owner[b]), heads, bytes_per_head};
      if (block_bytes == 0) continue;
      if (h == plan.block_owner[b]) {
        el.fills.push_back(r);
        continue;
      }
      if (auto it = received.kv_heads.find(key);
          it != received.kv_heads.end() && bytes_per_head > 0) {
        const auto [g0, g1] = it->second;
        r.offset += static_cast<uint64_t>(g0) * bytes_per_head;
        r.bytes = static_cast<uint64_t>(g1 - g0) * bytes_per_head;
        r.key.word0 = static_cast<uint64_t>(g0) * bytes_per_head / 4;
      }
      el.checks.push_back(r);
    }
    if (opt.corrupt_block >= 0) {
      for (size_t c = 0; c < el.checks.size(); ++c)
        if (el.checks[c].block == opt.corrupt_block && el.checks[c].query == opt.corrupt_query) {
          const auto& by = opt.corrupt_query ? received.q : received.kv;
          auto it = by.find({el.checks[c].holder, opt.corrupt_block});
          if (it == by.end()) continue;
          el.corrupt_check = static_cast<int>(c);
          el.corrupt_act = it->second;
          break;
        }
    }
    // Dependencies: plan `after` plus the FIFO predecessor on a named stream.
    std::map<std::string, int> last_on_stream;
    for (size_t i = 0; i < el.acts.size(); ++i) {
      Activity& a = el.acts[i];
      const auto& after = a.kind == ActKind::transfer ? a.transfer->after : a.compute->after;
      const auto& stream = a.kind == ActKind::transfer ? a.transfer->stream : a.compute->stream;
      for (const auto& id : after) a.deps.push_back(index_of.at(id));
      if (!stream.empty()) {
        auto it = last_on_stream.find(stream);
        if (it != last_on_stream.end()) a.deps.push_back(it->second);
        last_on_stream[stream] = static_cast<int>(i);
      }
      std::sort(a.deps.begin(), a.deps.end());
      a.deps.erase(std::unique(a.deps.begin(), a.deps.end()), a.deps.end());
    }
    // Topological order, lowest index first among the ready (deterministic).
    const size_t n = el.acts.size();
    std::vector<int> indeg(n, 0);
    std::vector<std::vector<int>> out(n);
    for (size_t i = 0; i < n; ++i)
      for (int d : el.acts[i].deps) {
        ++indeg[i];
        out[d].push_back(static_cast<int>(i));
      }
    std::priority_queue<int, std::vector<int>, std::greater<>> ready;
    for (size_t i = 0; i < n; ++i)
      if (indeg[i] == 0) ready.push(static_cast<int>(i));
    while (!ready.empty()) {
      const int i = ready.top();
      ready.pop();
      el.order.push_back(i);
      for (int j : out[i])
        if (--indeg[j] == 0) ready.push(j);
    }
    if (el.order.size() != n) {
      for (size_t i = 0; i < n; ++i)
        if (indeg[i] > 0)
          return Error{where + ": dependency cycle through \"" + el.acts[i].id + "\"", 2};
    }
    corrupt_found = corrupt_found || el.corrupt_act >= 0;
    for (const auto& a : el.acts)
      if (a.kind == ActKind::transfer && !a.skip) el.bytes_moved += a.bytes;
    for (int h = 0; h < ex.holders(); ++h)
      ex.max_holder_bytes[h] = std::max(ex.max_holder_bytes[h], el.holder_bytes[h]);
    ex.layers.push_back(std::move(el));
  }
  // The host backend computes on one CPU thread per task: bounded (kHostRealComputeMaxFlops).
  if (ex.real && opt.backend == "host") {
    double worst = 0, worst_scratch = 0;
    size_t worst_li = 0, worst_scratch_li = 0;
    for (size_t li = 0; li < ex.layers.size(); ++li) {
      double f = 0, scratch = 0;
      for (const auto& a : ex.layers[li].acts) scratch += static_cast<double>(a.scratch_bytes);
      if (scratch > worst_scratch) {
        worst_scratch = scratch;
        worst_scratch_li = li;
      }
      for (const auto& w : ex.layers[li].attn) f += w.flops;
      for (const auto& a : ex.layers[li].acts)  // GEMMs count too (2 m n k each); copies as bytes
        if (a.kind == ActKind::compute && a.compute->what.kind == sim::TaskKind::gemm)
          f += 2.0 * static_cast<double>(a.compute->what.m) *
               static_cast<double>(a.compute->what.n) * static_cast<double>(a.compute->what.k) *
               static_cast<double>(a.compute->what.count);
        else if (a.kind == ActKind::compute)
          f += static_cast<double>(a.scratch_bytes);
      if (f > worst) {
        worst = f;
        worst_li = li;
      }
    }
    if (worst > kHostRealComputeMaxFlops || worst_scratch > kHostRealScratchMaxBytes) {
      char buf[256];
      if (worst > kHostRealComputeMaxFlops)
        std::snprintf(buf, sizeof buf,
                      "the host backend computes for real up to %.3g FLOPs per layer plan "
                      "(attention and GEMMs; a copied byte counts as one); layer plan %zu has "
                      "%.3g",
                      kHostRealComputeMaxFlops, worst_li, worst);
      else
        std::snprintf(buf, sizeof buf,
                      "the host backend's GEMM and copy buffers are bounded by %.3g bytes per "
                      "layer plan; layer plan %zu needs %.3g",
                      kHostRealScratchMaxBytes, worst_scratch_li, worst_scratch);
      if (opt.compute == ComputeMode::real)
        return Error{std::string("replay: --compute real: ") + buf + " (use --compute emulated)",
                     2};
      ex.real = false;
      ex.compute_note = std::string("emulated compute: ") + buf;
      for (auto& el : ex.layers) {
        el.attn.clear();
        el.attn_of_act.clear();
        el.queries.clear();
        for (auto& a : el.acts) a.scratch_bytes = 0;
      }
      ex.max_scratch_bytes.assign(ex.max_scratch_bytes.size(), 0);
    }
  }
  // A misspelt id skipped nothing, and the run passed as if the fault had been injected.
  if (!opt.skip_transfer.empty() && !skip_found)
    return input_error("<command line>", "--skip-transfer",
                       "no transfer \"" + opt.skip_transfer + "\" in the replayed layer plans of " +
                           opt.plan_source);
  if (opt.corrupt_block >= 0 && !corrupt_found)
    return Error{"replay: --corrupt-block " + std::to_string(opt.corrupt_block) +
                     (opt.corrupt_query
                          ? " --corrupt-query: no transfer of the replayed layer plans delivers "
                            "that block's Q (only the all-to-alls of ulysses and usp plans under "
                            "--compute real do), so there is nothing to corrupt"
                          : ": no transfer of the replayed layer plans delivers that block, so "
                            "there is nothing to corrupt (pick a block some rank receives)"),
                 2};
  return ex;
}

}  // namespace sparsp::replay::detail
