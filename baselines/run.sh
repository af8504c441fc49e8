#!/usr/bin/env bash
# The results page of issue 6 (baselines/RESULTS.md): every placer at the same sample budget.
# Five training graphs from the corpus x the Post/Spotlight 2- and 4-GPU setups and the
# heterogeneous box; 16 methods; 2400 samples per sampling method and seed; 3 seeds; at most 64
# units per graph (DESIGN.md: Post only reaches one GPU's speed near 64 units).
# Step times are simulated with roofline costs (estimates), not measured on hardware.
#
# Usage: baselines/run.sh [OUT]   (from the repository root; default OUT = baselines)
# ~1 h on one free core. baselines/run_sharded.sh runs the same command one graph per process
# and merges the tables (same seeds, so the same numbers).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-baselines}
C=datasets/corpus
GRAPHS=${GRAPHS:-"$C/inception_v3_b32.pb $C/resnet50_b32.pb $C/lstm_lm_4l_h512.pb $C/nmt_4l.pb $C/transformer_6l_d256.pb"}
export OMP_NUM_THREADS=1   # tiny tensors: one thread (see gplace/bench.py)
# shellcheck disable=SC2086
exec .venv/bin/python -m gplace bench \
  --graphs $GRAPHS \
  --cluster post-2gpu post-4gpu hetero \
  --methods post,post-sum,ce,ppo,pg,random,hill,anneal,genetic,single,expert,chunks,heft,m-topo,m-etf,m-sct \
  --budget 2400 --seeds 3 --units 64 \
  --out "$OUT"
