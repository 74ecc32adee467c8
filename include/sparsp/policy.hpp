#pragma once
// Sequence-parallel policies: where query/KV blocks live (placement), which transfers move the KV
// each GPU needs (scheme), and how communication and attention are scheduled (runtime). Together
// they turn one (step, layer) of a Pattern into a sim::Workload.
//
// Vocabulary. The sequence-parallel group has P ranks; rank r runs on GPU `gpu_of_rank[r]` of the
// topology. A token's Q, K and V are produced on the rank that owns its block
// (Placement::block_owner). A KV block is K and V of one block of tokens; across all heads it is
// 2 * tokens * heads * head_dim * dtype_bytes bytes.
//
// Each policy family is a name-keyed registry (STYLE habit 9): placements(), schemes(), runtimes()
// list the names with a one-line description. Placements and schemes register themselves: adding
// one is adding one file (policy/placement_*.cpp, policy/scheme_*.cpp) and touching no other;
// runtimes share one file (policy/runtime.cpp).
//
// Library sparsp::policy (folder policy/): depends on sim, patterns and topology, never on study.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sparsp/pattern.hpp"
#include "sparsp/plan.hpp"
#include "sparsp/sim.hpp"
#include "sparsp/status.hpp"
#include "sparsp/topology.hpp"

namespace sparsp::policy {

/// Attention/GEMM compute model of one GPU. Attention FLOPs per active (query block q, KV block
/// k, head) = 4 * tokens(q) * tokens(k) * head_dim (two GEMMs, QK^T and PV, 2 FLOPs per MAC; the
/// FlashAttention paper's count, Dao et al. 2022, sec. 3.1, which excludes softmax). Time = FLOPs /
/// (peak dense bf16 FLOP/s * efficiency) + launch overhead per kernel.
struct ComputeModel {
  double peak_bf16_flops = 165.2e12;  ///< RTX 4090 dense bf16 with fp32 accumulate (Ada whitepaper)
  double attention_efficiency = 0.45;  ///< FlashAttention-2 reaches ~40-50% of peak on Ada/Ampere
                                       ///< (Dao 2023, fig. 4-6: ~ 50-70% on A100 fwd; sparse
                                       ///< block kernels lower, STA reports ~ 45% MFU on H100)
  double gemm_efficiency = 0.7;        ///< large bf16 GEMMs (cuBLAS) on the same GPUs
  double launch_overhead_s = 5e-6;     ///< per kernel launch (CUDA launch latency, ~ 4-6 us)
  /// Device memory bandwidth, bytes/s: the GPU's memory_bandwidth_GBps (configs/gpus/models.json,
  /// datasheet) when known; default the RTX 4090's 1008 GB/s (its datasheet, as the FLOP/s).
  double memory_bandwidth_Bps = 1008e9;
  /// Fraction of memory_bandwidth_Bps that the block's elementwise and norm kernels reach
  /// (block_extra_time_s). 0.67: fitted to one Wan2.1-14B block at 720p on an H200, its eager
  /// elementwise work timed op by op (python/examples/wan_block_elementwise.py: 50.2 ms measured,
  /// 33.4 ms at the datasheet's 4.8 TB/s; sim/RESULTS.md); checked on the Wan2.1-1.3B 480p shape
  /// (6.91 ms measured, 6.69 ms modelled). One figure for every GPU.
  double memory_efficiency = 0.67;
  /// Fraction of one attention call's kernel time (launch overhead excluded) spent in its last
  /// wave: kernel_last_wave_share of the kernel's wave term at the rank's call shape; 0 where
  /// the kernel has no wave term (`generic`, measured figures). Used by sm_overlap's
  /// high_priority_comm=0 (a comm kernel starts as the attention's last wave drains).
  double attention_last_wave_share = 0;

  double attention_flops(double q_tokens, double k_tokens, int head_dim) const {
    return 4.0 * q_tokens * k_tokens * head_dim;
  }
  /// Seconds for `flops` of attention work in one kernel (launch overhead included).
  double attention_time_s(double flops) const {
    return flops / (peak_bf16_flops * attention_efficiency) + launch_overhead_s;
  }
  /// Rate of a strided layout transpose (`.contiguous()` of a permuted view: yunchang
  /// all_to_all_4D's copies), as a fraction of memory_bandwidth_Bps. 0.32: the median of the
  /// eight transposes timed on an H200 (python/examples/xdit_copies.py,
  /// sim/results/xdit-copies-h200.json: q/k/v and output transposes at batch 1 and 2 of
  /// CogVideoX-5b's 2-GPU shape, 109-218 MB read + written each), bytes / (time - the 5 us
  /// launch) / 4800 GB/s (the H200 datasheet): 0.300-0.339, median 0.320 (1433-1567 GB/s
  /// before the launch is taken off). Measured on the H200 only; other GPUs get the same fraction
  /// of their own bandwidth. A measured figure, not fitted to any published row.
  double transpose_bandwidth_fraction = 0.32;
  /// Rate of the float32 accumulator's cast pair (out_cast: bf16 -> fp32, then fp32 -> bf16;
  /// 6 B per element each in bf16), as a fraction of memory_bandwidth_Bps. 0.59: the same H200
  /// run, each cast's bytes / (time - 5 us) / 4800 GB/s: widening 0.433, narrowing 0.916 (batch
  /// 2; 0.431 and 0.932 at batch 1); equal bytes each, so the pair's rate is their harmonic
  /// mean, 2 / (1 / 0.433 + 1 / 0.916) = 0.588. H200 only, carried as the fraction, as above.
  double cast_bandwidth_fraction = 0.59;

  /// Seconds of one memory-bound copy kernel moving `bytes` read + written: bytes / (memory
  /// bandwidth x the kind's fraction: 1 for `plain`, transpose_bandwidth_fraction,
  /// cast_bandwidth_fraction) + launch overhead (no cache reuse: each element read and written
  /// once).
  double copy_time_s(double bytes, sim::CopyKind kind = sim::CopyKind::plain) const {
    const double f = kind == sim::CopyKind::transpose ? transpose_bandwidth_fraction
                     : kind == sim::CopyKind::cast    ? cast_bandwidth_fraction
                                                      : 1.0;
    return bytes / (memory_bandwidth_Bps * f) + launch_overhead_s;
  }
  /// Non-attention work of one transformer block per token: QKV projection (2 * hidden * 3 *
  /// hidden FLOPs), output projection (2 * hidden^2) and MLP (2 * 2 * hidden * mlp_hidden), i.e.
  /// 2 * (4 h^2 + 2 h m) FLOPs/token. HunyuanVideo's single-stream blocks fuse the MLP into the
  /// same GEMMs; the count is the same.
  /// With a cross-attention (model.cross_attention_tokens > 0) its q and o projections add
  /// 2 * 2 h^2 FLOPs/token (Wan2.1 WanT2VCrossAttention: q on the video tokens, o on its output).
  static double other_flops_per_token(const patterns::ModelSpec& model);
  /// Seconds of the block's elementwise and norm kernels on a rank holding `tokens` tokens:
  /// tokens * (hidden * elementwise_bytes_per_element + mlp_hidden *
  /// elementwise_mlp_bytes_per_element) / (memory_bandwidth_Bps * memory_efficiency) +
  /// elementwise_kernels launches. Memory-bound (each op streams its operands once; no reuse).
  double elementwise_time_s(const patterns::ModelSpec& model, double tokens) const;
  /// Seconds of the cross-attention to T = model.cross_attention_tokens text tokens on a rank
  /// holding `tokens` tokens: its attention, 4 * tokens * T * head_dim * heads FLOPs, through
  /// attention_time_s (one launch), plus its k and v projections of the T text tokens,
  /// 2 * 2 * T * h^2 FLOPs at the GEMM rate (each rank projects the whole text); 0 when T = 0.
  /// Its q/o GEMMs are in other_flops_per_token.
  double cross_attention_time_s(const patterns::ModelSpec& model, double tokens) const;
  /// Seconds of non-attention work of one layer on a rank holding `tokens` tokens: the GEMMs
  /// (5 launches: QKV, out, two MLP GEMMs, norm/modulation; 2 more with a cross-attention),
  /// plus elementwise_time_s and cross_attention_time_s.
  double other_time_s(const patterns::ModelSpec& model, double tokens) const;
};

/// Default compute model for a GPU (uses its peak_bf16_flops when known).
ComputeModel compute_model_for(const topology::GpuSpec& gpu);

// ---- attention kernels (policy/kernels.cpp; data: configs/kernels/kernels.json, embedded) ----
//
// Attention efficiency of a kernel on a GPU (fraction of the GPU's dense bf16 peak):
//   dense(arch, head_dim, N) = e_hd * N / (N + n_half)
// where e_hd is the figure for the GPU model (if the kernel lists one) else for its architecture,
// taken at the model's head_dim when listed (by_head_dim) else long_seq, N = tokens of one
// sequence and n_half the sequence length at which the kernel reaches half its long-sequence
// figure (fitted to the kernel's published short-sequence point; 0: no dependence).
// Block-sparse kernels then keep sparse(block) of it, piecewise linear in log2(block tokens)
// between the listed points, flat above the largest, and below the smallest b0 scaled by
// block / b0 (a block smaller than the kernel's tile fills a tile partly).
// `generic` is today's figure (0.45; 0.5 on Hopper) and the default.
//
// Wave quantization (a figure with tile_q_tokens > 0; never `generic`): one attention call
// launches CTAs = batch * heads * ceil(query_tokens / tile_q) thread blocks (FlashAttention-2's
// grid, csrc/flash_attn/src/flash_fwd_launch_template.h:63-64), and the GPU runs them in
// waves = CTAs / (SMs * ctas_per_sm). The last wave runs partly empty, so the dense figure is
// multiplied by tail = waves / ceil(waves) (1 at whole waves; 0.606 for 160 CTAs on 264 slots).
// Where a kernel keeps ctas_per_sm >= 2 CTAs on an SM, a CTA alone on its SM runs faster than
// one of a full SM: a last wave whose busiest SM holds k CTAs takes single_cta_wave_time of a full
// wave's time at k = 1 (1 at k = ctas_per_sm, linear between), so tail = waves / (full waves +
// that time), at most 1. FlashAttention-2 kernels on the H200: 0.61 (measured, sim/RESULTS.md
// "Attention throughput against CTAs"; 320 CTAs on 264 slots: 0.606 -> 0.753).
// The registry's long_seq and by_head_dim figures are per full wave: the published figure
// divided by the tail at the published benchmark's shape (configs/kernels/kernels.json sources).

/// One efficiency figure of a kernel on one architecture or GPU model.
struct KernelFigure {
  double long_seq = 0;  ///< fraction of dense bf16 peak at long sequences
  std::vector<std::pair<int, double>> by_head_dim;  ///< head_dim -> fraction (sorted)
  double seq_half_tokens = 0;                       ///< n_half above; 0: no sequence dependence
  int tile_q_tokens = 0;  ///< query rows per CTA (wave term above); 0: no wave term
  int ctas_per_sm = 0;    ///< resident CTAs per SM (wave term); >= 1 when tile_q_tokens > 0
  /// Time of a last wave with one CTA per SM, as a fraction of a full wave's (wave term above;
  /// needs ctas_per_sm >= 2); 1: the strict tail.
  double single_cta_wave_time = 1.0;
};

struct KernelSpec {
  std::string name;  ///< "fa3", "sta", ...
  std::string description;
  bool block_sparse = false;     ///< kind "block_sparse" (else "dense")
  std::vector<int> head_dims;    ///< supported head dims; empty: any
  std::vector<int> block_sizes;  ///< native block sizes (tokens); empty: any
  std::vector<std::pair<std::string, KernelFigure>> architectures;  ///< "hopper", ..., "default"
  std::vector<std::pair<std::string, KernelFigure>> gpu_models;     ///< full model name
  std::vector<std::pair<int, double>> sparse_by_block;  ///< block tokens -> fraction of dense
  double launch_overhead_s = 5e-6;                      ///< per kernel launch
};

/// The registry, in file order (generic first). Parsed once; a malformed embedded file aborts
/// with its JSON pointer (a build defect, tested).
const std::vector<KernelSpec>& kernels();
/// The kernel called `name`; error (exit 2, at `file`:`place`) naming the valid ones.
Result<const KernelSpec*> find_kernel(const std::string& name, const std::string& file,
                                      const std::string& place);
/// dense() above for one figure. REQUIRES: seq_tokens > 0.
double kernel_dense_efficiency(const KernelFigure& f, int head_dim, double seq_tokens);
/// tail above: waves / (full waves + the last wave's time), waves = ctas / (sms * ctas_per_sm);
/// waves / ceil(waves) when single_cta_wave_time is 1; 1 when f has no wave term or ctas,
/// sms < 1 (unknown). In (0, 1].
double kernel_wave_factor(const KernelFigure& f, double ctas, int sms);
/// Share of a call's time spent in its last wave, with the units of the tail above: the last
/// wave's time (1 when whole, else single_cta_wave_time.. 1 by its busiest SM) over full waves +
/// that time. 1 / ceil(waves) under the strict tail; 1 at one wave or fewer (every CTA starts at
/// once); 0 when f has no wave term or ctas, sms < 1 (unknown). In [0, 1].
double kernel_last_wave_share(const KernelFigure& f, double ctas, int sms);
/// CTAs of one call: batch * heads * ceil(query_tokens / tile_q). REQUIRES: tile_q >= 1.
double attention_ctas(int batch, int heads, double query_tokens, int tile_q);
/// sparse() above; 1 for a dense kernel or an empty table. REQUIRES: block_tokens > 0.
double kernel_sparse_efficiency(const KernelSpec& k, int block_tokens);
/// The figure of `k` for `gpu` (its model, else its architecture, else "default"); null if none.
/// The architecture of a GPU with none recorded is "hopper" when its model name has H100, H200
/// or H800 in it (sparsp's rule before the architecture field), else unknown.
const KernelFigure* kernel_figure(const KernelSpec& k, const topology::GpuSpec& gpu);
/// The GPU's architecture as used above ("" if unknown).
std::string gpu_architecture(const topology::GpuSpec& gpu);

/// What a study asks of the compute model; each figure is picked in this order (issue 14):
/// 1. an explicit efficiency (--attention-efficiency, /compute/attention_efficiency);
/// 2. a topology `measured_compute` entry for this GPU model and head_dim whose kernel is the
///    chosen kernel (any kernel when none is chosen; the first in file order);
/// 3. the chosen kernel's registry figure for the GPU (none there: an error naming both);
/// 4. `generic`, when no kernel is chosen.
struct ComputeRequest {
  std::string kernel;               ///< empty: none chosen
  double attention_efficiency = 0;  ///< > 0: given explicitly
  double gemm_efficiency = 0;       ///< > 0: given explicitly
  int head_dim = 128;
  double seq_tokens = 0;  ///< tokens of one sequence (N above)
  int block_tokens = 0;   ///< the pattern's block (sparse() above)
  /// Shape of one rank's attention call (wave term above); heads 0: unknown, no wave term.
  /// A rank's call covers its N / P queries over all heads (ring, USP, allgather pieces) or
  /// heads / P over all N queries (Ulysses): the same CTA count where P divides both.
  int batch = 1;
  int heads = 0;
  double query_tokens = 0;       ///< queries of one call (N / P)
  std::string file = "<study>";  ///< names the input in errors
  std::string kernel_place = "/compute/kernel";
};

struct ResolvedCompute {
  ComputeModel model;
  /// Contention factors (sim::SimOptions::contention_*): the measured entry's where it gives
  /// them, else today's model (0: none beside copy-engine copies; -1: SM share only).
  double contention_ce_copy = 0;
  double contention_sm_copy_per_sm = -1;
  std::string source;  ///< which figures came from where, e.g. "kernel fa3 (hopper)"
};

/// The compute model of `gpu` per the precedence above. `measured` is the topology's list.
/// Errors (exit 2): unknown kernel, a kernel with no figure for the GPU (naming both), a head_dim
/// the kernel does not support.
Result<ResolvedCompute> resolve_compute(const topology::GpuSpec& gpu,
                                        const std::vector<topology::MeasuredCompute>& measured,
                                        const ComputeRequest& request);

/// What placement and the schemes need to know of the machine, per rank of the group.
struct RankTopology {
  int ranks = 0;
  std::vector<int> gpu_of_rank;                     ///< [P] GPU index in the topology
  std::vector<std::vector<std::string>> ancestors;  ///< [P] nearest first, up to the socket
  std::vector<uint8_t> p2p;                         ///< [P*P] direct peer access allowed
  std::vector<int> numa;                            ///< [P] NUMA node of the rank's GPU
  /// [P] server node of the rank's GPU in a cluster topology (Topology::node_of_gpu); all 0 in
  /// one server. Host memory is reachable only inside a node: a scheme that stages through
  /// host memory must not stage between ranks of different nodes.
  std::vector<int> node;
  /// [P*P] NCCL would use its P2P transport between the pair by default; otherwise its SHM
  /// transport (through host memory). NCCL 2.30.7 src/graph/paths.cc ncclTopoCheckP2p: P2P only
  /// up to PXB (not across a host bridge: PHB, NODE, SYS), except between the GPUs of a
  /// <= 2-GPU system on an AMD CPU (any path); NVLink pairs always; never without peer access.
  /// The topology's nccl.p2p_level (NCCL_P2P_LEVEL) replaces the PXB level and the AMD rule.
  /// Empty: same as p2p.
  std::vector<uint8_t> nccl_p2p;
  bool p2p_allowed(int a, int b) const { return p2p[static_cast<size_t>(a) * ranks + b] != 0; }
  int node_of(int r) const { return node.empty() ? 0 : node[static_cast<size_t>(r)]; }
  bool nccl_p2p_allowed(int a, int b) const {
    return nccl_p2p.empty() ? p2p_allowed(a, b) : nccl_p2p[static_cast<size_t>(a) * ranks + b] != 0;
  }
  /// Flat topology of P ranks under one switch with full P2P (tests).
  static RankTopology flat(int ranks, bool p2p);
};

/// Builds the rank view; errors if a GPU index is not in the topology.
Result<RankTopology> rank_topology(const topology::Topology& topo, const std::vector<int>& gpus);

/// Which KV block each rank owns, and how heads are split for head-parallel schemes.
struct Placement {
  std::string name;
  int ranks = 0;
  std::vector<int> block_owner;  ///< [num_blocks] rank owning the block's tokens (Q, K, V)
};

/// Aggregate block dependency of a pattern, the input of the placements.
struct BlockGraph {
  int num_blocks = 0;
  std::vector<double> tokens;  ///< [num_blocks] tokens per block
  std::vector<double> work;    ///< [num_blocks] attention FLOPs of the query block, summed
                               ///< over heads, averaged over the sampled masks
  std::vector<float> dep;      ///< [q * num_blocks + k] fraction of sampled (layer, head)
                               ///< masks in which q attends to k
};

/// Samples a pattern's masks (the distinct mask groups of step 0, at most `max_layers` of them,
/// all heads) into a BlockGraph.
BlockGraph block_graph(patterns::Pattern& pattern, int max_layers = 8);

struct PlacementContext {
  const BlockGraph* graph = nullptr;
  const RankTopology* ranks = nullptr;
  int heads = 0;
  std::map<std::string, double> params;  ///< e.g. "tolerance" (1.03), "locality" (0.1)
};

struct PolicyInfo {
  std::string name;
  std::string description;
};

std::vector<PolicyInfo> placements();
std::vector<PolicyInfo> schemes();
std::vector<PolicyInfo> runtimes();

/// Runs the named placement. Errors: unknown name.
Result<Placement> make_placement(const std::string& name, const PlacementContext& ctx);

/// Demand granularity: a KV block across all heads, or per (head, KV block).
enum class Granularity { block, head_block };

/// Everything a scheme needs for one (step, layer).
struct LayerInput {
  const patterns::ModelSpec* model = nullptr;
  const patterns::BlockLayout* layout = nullptr;
  std::vector<const patterns::BlockMask*> masks;  ///< [heads] masks of this (step, layer)
  const Placement* placement = nullptr;
  const RankTopology* ranks = nullptr;
  Granularity granularity = Granularity::block;
  bool dynamic = false;  ///< demand unknown ahead (revealed by a summary exchange)
  int layer = 0;
  int step = 0;
};

/// A logical transfer between endpoints of the group (payload or control).
struct Message {
  int src = -1, dst = -1;  ///< ranks; -1 with host_numa >= 0: pinned host memory
  int host_numa = -1;      ///< for a host endpoint: its NUMA node
  double bytes = 0;
  bool control = false;          ///< demand-discovery exchange (reported apart)
  bool collective = false;       ///< part of an NCCL-style collective
  bool host_staged = false;      ///< force GPU -> host -> GPU
  int phase = 0;                 ///< ring step, or 0/1 for before/after attention
  std::vector<int> after_msgs;   ///< messages that must have arrived first (relays)
  std::vector<int> after_tasks;  ///< attention tasks that must end first (output all-to-all)
  bool counts_volume = true;     ///< false for a staging hop into host memory (its delivery
                                 ///< to the GPU is what counts)
  std::vector<int32_t> kv_blocks;
  std::string tag;  ///< short id part, e.g. "kv", "fwd", "a2a"
  /// The NCCL collective this message is part of (op, communicator size, nccl-tests size), set
  /// by the scheme; the runtime passes it to SM-driven transfers (sim::Transfer::collective).
  sim::CollectiveTag nccl{};
};

/// A piece of compute on one rank: attention (the default), or a memory-bound copy around a
/// collective (kind copy, `what.bytes`), as sim::TaskCompute describes; the runtime times
/// attention by `flops`, copies by `what.bytes` (ComputeModel::copy_time_s).
struct AttentionTask {
  int rank = 0;
  double flops = 0;
  int phase = 0;
  std::vector<int> after_msgs;  ///< data it consumes
  std::string tag;
  sim::TaskCompute what{};         ///< kind and coverage (attention: kv_ranks at least)
  std::vector<int> after_tasks{};  ///< tasks that must end first (copies around an all-to-all)
};

/// The output of a scheme for one (step, layer): transfers and attention pieces with their
/// data dependencies; a runtime decides engines and ordering.
struct CommPlan {
  std::vector<Message> messages;
  std::vector<AttentionTask> tasks;
  double payload_bytes() const;  ///< sum of non-control message bytes (each hop counted)
  double control_bytes() const;
};

/// Builds the named scheme's CommPlan. Errors (exit 2): unknown name; heads not divisible by the
/// Ulysses degree. `params`: "skip_empty" (ring, 0/1), "ulysses_degree" (usp), "host_staged" (0/1),
/// "split_text" (demand schemes, default 1: dense text-query rows computed by every rank against
/// its own KV, partial outputs reduced at the text owner; 0: the text owner fetches all it needs).
Result<CommPlan> make_scheme(const std::string& name, const LayerInput& in,
                             const std::map<std::string, double>& params);

/// Turns a CommPlan into a sim::Workload for the engine. Rank r's endpoint is
/// "gpu<gpu_of_rank[r]>". `params`: "comm_sms" (SMs per SM-driven copy, default 16), "chunk_bytes"
/// (host-staged pipeline chunk), "ce_only" (1: every transfer on copy engines, also under sync).
/// Errors: unknown runtime name.
Result<sim::Workload> make_workload(const std::string& runtime, const CommPlan& plan,
                                    const RankTopology& ranks, const ComputeModel& compute,
                                    const std::map<std::string, double>& params, int layer);

/// Validates a policy triple and its parameters (names known, values in range).
Status check_policy(const PolicySpec& spec);

/// Validates one policy parameter (name known, value in its range): chunk_bytes in
/// [4096, 1e12] bytes; tolerance >= 1; comm_sms, staging_buffers, ulysses_degree integers in
/// [1, 1024]; others >= 0. The error names the parameter and its range (no file: callers add
/// theirs). check_policy applies it to every parameter.
Status check_policy_param(const std::string& name, double value);

/// USP's Ulysses degree when `ulysses_degree` is not given.
/// - Across server nodes (`ranks_per_node` > 0, fewer than `ranks`): the ranks of one node, so
///   that the all-to-alls stay inside a node and only the ring steps cross the network (xDiT's
///   hybrid parallelism puts Ulysses on the fast intra-node links; Fang and Zhao 2024, USP,
///   arXiv:2405.07719 section 5), lowered until it divides both P and the heads H.
/// - In one server (`ranks_per_node` 0): P/2 for P >= 4 (xDiT's common PCIe setting), lowered
///   until it divides both P and H; 1 (plain ring) for P < 4.
int default_ulysses_degree(int ranks, int heads, int ranks_per_node = 0);

/// The ranks of each server node when a group of ranks spans several nodes of a cluster: the
/// length `n` of the leading run of ranks on one node, when every run of `n` consecutive ranks
/// (r - r % n ..) sits on one node and n divides P; 0 otherwise (one node, or uneven or
/// interleaved nodes, where USP keeps its one-server default).
/// `node_of_rank`: [P] node of each rank (RankTopology::node; empty: one node).
int ranks_per_node(const std::vector<int>& node_of_rank);

/// Checks a policy's parameters against the group it runs on: comm_sms at most the GPU's SMs
/// (sm_count, when known) and, for USP, no ulysses_degree of 1 (that would be plain ring, on any
/// number of ranks). Error
/// (exit 2) names the policy.
Status check_policy_on(const PolicySpec& spec, int ranks, int heads, int gpu_sm_count);

/// Whether the policy can run at all on `ranks` ranks with `heads` heads; the error's message is
/// the reason, one phrase without the policy's name. Ulysses needs heads divisible by P (each rank
/// takes H / P heads); USP needs a Ulysses degree u > 1 dividing both P and the heads: the given
/// ulysses_degree, or default_ulysses_degree (none below 4 ranks: "no Ulysses x ring split of 3
/// ranks"). Every other scheme runs on any P. Studies leave such a policy out on that topology
/// (StudyResult::skipped) instead of failing. With grouped-query attention (`kv_heads` > 0 and
/// below `heads`; 0: as many as heads) the Ulysses degree u and kv_heads must also divide one
/// another (policy/scheme_parts.cpp ulysses_kv_heads, after yunchang's all_to_all_4D): Ulysses
/// with u = P, USP with its degree. `ranks_per_node`: as default_ulysses_degree takes it.
Status check_runnable(const PolicySpec& spec, int ranks, int heads, int kv_heads = 0,
                      int ranks_per_node = 0);

/// Parses "PLACEMENT/SCHEME/RUNTIME[:k=v,k=v]" (route=host_staged is accepted as host_staged=1).
Result<PolicySpec> parse_policy(const std::string& text);

}  // namespace sparsp::policy
