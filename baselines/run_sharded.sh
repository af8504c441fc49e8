#!/usr/bin/env bash
# run.sh split into one background process per graph (each (graph, cluster, method, seed) run is
# independent and seeded, so the numbers equal the single command's); then merge.py.
# Usage: baselines/run_sharded.sh GRAPH_NAME...   (e.g. inception_v3_b32 resnet50_b32)
# Each shard writes baselines/shards/NAME/ and logs to baselines/shards/NAME.log.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p baselines/shards
for name in "$@"; do
  GRAPHS=datasets/corpus/$name.pb nohup baselines/run.sh baselines/shards/$name \
    > baselines/shards/$name.log 2>&1 &
  echo "$name: pid $!"
done
