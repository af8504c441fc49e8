#!/usr/bin/env bash
# One shard queue: waits for PID (if given, 0 = none) to end, then runs run.sh on each graph in
# turn, waiting for a graph's .pb and profile to appear in the corpus (it may still be building).
# Usage: baselines/run_queue.sh PID GRAPH_NAME...
set -euo pipefail
cd "$(dirname "$0")/.."
after=$1; shift
while [ "$after" != 0 ] && kill -0 "$after" 2>/dev/null; do sleep 20; done
mkdir -p baselines/shards
for name in "$@"; do
  until [ -s datasets/corpus/$name.profile.json.gz ]; do sleep 30; done
  GRAPHS=datasets/corpus/$name.pb baselines/run.sh baselines/shards/$name \
    > baselines/shards/$name.log 2>&1
done
