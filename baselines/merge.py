"""Merges the per-graph shards of baselines/run.sh (baselines/shards/*/runs.npz) into one
results.md, results.csv, runs.npz and the curve PNGs in baselines/, as if one command had run.

Usage: .venv/bin/python baselines/merge.py [SHARD_DIR...]   (default: every baselines/shards/*/)
"""

from __future__ import annotations

import sys
from pathlib import Path

from gplace.bench import BenchConfig, load_runs, summarize, write_outputs

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    shards = [Path(a) for a in argv] or sorted(p.parent for p in HERE.glob("shards/*/runs.npz"))
    runs, meta = load_runs([s / "runs.npz" for s in shards])
    units = {m["units"] for m in meta.values()}
    cfg = BenchConfig(graphs=tuple(dict.fromkeys(r.graph for r in runs)),
                      budget=max(r.samples for r in runs), seeds=max(r.seed for r in runs) + 1,
                      units=max(units) if units else None)
    files = write_outputs(HERE, runs, summarize(runs, meta), cfg, meta)
    print(f"merged {len(runs)} runs from {len(shards)} shards: " + ", ".join(map(str, files)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
