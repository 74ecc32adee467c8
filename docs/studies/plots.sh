#!/bin/sh
# Redraws the plots of docs/STUDIES.md from the committed results (run from the repository root).
set -e
S=scripts/plot.py; D=docs/studies
$S line $D/gpus-per-switch.csv --x gpus_per_switch --y e2e_time_s --facet p2p --ylabel "end-to-end time per video (s)" --title "HunyuanVideo 720p STA, 8x L40S Gen4: 2 sockets x 2 switches x 2 GPUs / 2x1x4 / 1x1x8" -o $D/gpus-per-switch
$S line $D/pcie-gen-wan.csv --x pcie_gen --y e2e_time_s --facet p2p --where 'pattern~"sta"' --ylabel "end-to-end time per video (s)" --title "Wan2.1-14B 720p, STA (tile 3,8,16, window 3,3,3), 8x RTX PRO 6000, 2 switches/socket" -o $D/pcie-gen-wan-sta
$S line $D/pcie-gen-wan.csv --x pcie_gen --y e2e_time_s --facet p2p --where 'pattern~"radial"' --ylabel "end-to-end time per video (s)" --title "Wan2.1-14B 720p, radial attention (block 128), same server" -o $D/pcie-gen-wan-radial
$S speedup $D/sparsity-demand.csv --x sparsity --facet topology --title "HunyuanVideo 720p top-k: speedup over ring (end to end)" -o $D/sparsity-speedup
$S volume $D/sparsity-demand.csv --where topology=8x-l40s-gen4-4switch --title "Communication volume per step vs top-k sparsity (8 GPUs)" -o $D/sparsity-volume
# Gantt charts: one layer of HunyuanVideo STA on the 8x RTX 4090 (no P2P) server.
T=$(mktemp -d)
cat > $T/study.json <<'JSON'
{"schema_version": 1, "topologies": ["8x-rtx4090-epyc-nop2p"], "model": "hunyuanvideo-sta",
 "pattern": {"kind": "sta", "block": 384, "tile": [6, 8, 8], "window": [3, 3, 3]}, "gpus": 8,
 "policies": ["contiguous/ring/sm_overlap", "dependency_aware/demand_direct/ce_decoupled"]}
JSON
${SPARSP:-build/release/sparsp} simulate --config $T/study.json --trace $T > /dev/null
$S gantt $T/8x-rtx4090-epyc-nop2p__dependency_aware_demand_direct_ce_decoupled.trace.json --title "One layer, dependency_aware/demand_direct/ce_decoupled, 8x RTX 4090 (no P2P), HunyuanVideo STA" -o $D/gantt-demand-direct-4090
$S gantt $T/8x-rtx4090-epyc-nop2p__contiguous_ring_sm_overlap.trace.json --title "One layer, contiguous/ring/sm_overlap, 8x RTX 4090 (no P2P), HunyuanVideo STA" -o $D/gantt-ring-4090
rm -rf $T
