"""Memory of pretraining's problems: builds every training and validation problem of a corpus
as `gplace pretrain` holds them (gplace.gnn.pretrain.ProblemPool, the default clusters: three
presets and two random clusters per training graph), in a fresh process, and prints the
resident memory they add, the process's peak, the time, and how many bytes of arrays the
problems offered to the shared pool (gplace.gnn.shared_arrays) against what it kept.

    .venv/bin/python benchmarks/pool_memory.py [--corpus datasets] [--limit N] [--tree DIR]

``--limit N`` builds the first N training problems only. ``--tree DIR`` runs the gplace package
of another source tree (``git archive COMMIT gplace | tar -x -C DIR``) for a before/after
comparison. Expert placements are left out (they are a few kB per problem).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import gc, json, resource, sys, time
import torch
torch.set_num_threads(1)
from gplace.gnn.config import PretrainConfig
from gplace.gnn.pretrain import ProblemPool

def resident():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096

corpus, limit = sys.argv[1], int(sys.argv[2])
cfg = PretrainConfig(corpus=corpus)
pools = [ProblemPool(cfg, split, search=False) for split in ("train", "validation")]
gc.collect()
base, start, built = resident(), time.perf_counter(), 0
for k, pool in enumerate(pools):
    pool.expert_budget = 0
    n = len(pool) if k or limit <= 0 else min(limit, len(pool))
    for i in range(n):
        pool.state(i)
        built += 1
        if built % 200 == 0:
            print(f"  {built} problems, {(resident() - base) / 2**30:.2f} GiB",
                  file=sys.stderr, flush=True)
gc.collect()
arrays = [getattr(p, "arrays", None) for p in pools]
print(json.dumps({
    "problems": built, "seconds": time.perf_counter() - start,
    "added_bytes": resident() - base,
    "peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    "offered_bytes": sum(a.offered_bytes for a in arrays if a is not None),
    "kept_bytes": sum(a.kept_bytes for a in arrays if a is not None),
    "shared": any(a is not None for a in arrays)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default="datasets")
    ap.add_argument("--limit", type=int, default=0, help="training problems to build (0: all)")
    ap.add_argument("--tree", help="the gplace package of this source tree instead")
    args = ap.parse_args()
    env, cwd = dict(os.environ), ROOT  # python -c puts its working directory first on the path
    if args.tree:
        cwd = Path(args.tree).resolve()
        env["PYTHONPATH"] = str(cwd)
    corpus = str(Path(args.corpus).resolve())
    proc = subprocess.run([sys.executable, "-c", CHILD, corpus, str(args.limit)],
                          cwd=cwd, env=env, stdout=subprocess.PIPE, text=True)
    if proc.returncode:
        raise SystemExit(f"the build exited {proc.returncode}")
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    gib = 2**30
    print(f"{r['problems']} problems of {args.corpus} built in {r['seconds']:.0f} s: "
          f"{r['added_bytes'] / gib:.2f} GiB resident added, peak {r['peak_bytes'] / gib:.2f} "
          f"GiB, {r['added_bytes'] / r['problems'] / 2**20:.2f} MiB per problem")
    if r["shared"]:
        print(f"arrays: {r['offered_bytes'] / gib:.2f} GiB offered, {r['kept_bytes'] / gib:.2f} "
              f"GiB kept ({1 - r['kept_bytes'] / max(r['offered_bytes'], 1):.0%} shared)")
    else:
        print("arrays: not shared (a tree before gplace.gnn.shared_arrays)")


if __name__ == "__main__":
    main()
