"""Builds the expert placements of every training problem before pretraining, in parallel
processes (pretraining would otherwise build each on the problem's first use, one at a time).

    .venv/bin/python -m pretrain.experts --budget 300 --jobs 2 [--problems N] [--expert-from CKPT]

Takes the same corpus, clusters and seed as `gplace pretrain`'s defaults; the experts land in
the corpus' cache (datasets/.gplace-cache/experts), where `gplace pretrain --expert-budget`
finds them. Prints each problem's expert against its best heuristic (simulated: estimates).
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import replace

import numpy as np

from gplace.gnn.config import PretrainConfig


_POOLS: dict = {}  # per worker process: listing the problems loads every graph once


def one(cfg: PretrainConfig, i: int) -> tuple[str, float, float, float]:
    import torch
    torch.set_num_threads(1)
    from gplace.gnn.pretrain import ProblemPool
    if cfg not in _POOLS:
        _POOLS[cfg] = ProblemPool(cfg, "train")
    pool = _POOLS[cfg]
    start = time.perf_counter()
    st = pool.state(i)
    return pool.names[i], st.best_time_s, pool.best_heuristic(i), time.perf_counter() - start


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget", type=int, default=300)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--problems", type=int, default=None, help="only the first N problems")
    ap.add_argument("--corpus", default=PretrainConfig.corpus)
    ap.add_argument("--expert-from", default=None, metavar="CKPT",
                    help="start the searches from this policy (the next round)")
    args = ap.parse_args(argv)
    cfg = replace(PretrainConfig(), corpus=args.corpus, expert_budget=args.budget,
                  expert_from=args.expert_from)
    from gplace.gnn.pretrain import ProblemPool
    n = len(ProblemPool(cfg, "train"))
    todo = range(n if args.problems is None else min(n, args.problems))
    ratios = []
    with ProcessPoolExecutor(args.jobs) as ex:
        futures = [ex.submit(one, cfg, i) for i in todo]
        for k, f in enumerate(as_completed(futures), 1):
            name, t, h, s = f.result()
            ratios.append(t / h)
            print(f"[{k}/{len(todo)}] {name}: expert {t * 1e3:.2f} ms = {t / h:.3f}x the best "
                  f"heuristic ({s:.0f} s)", flush=True)
    print(f"experts / best heuristic: geomean {np.exp(np.mean(np.log(ratios))):.3f} over "
          f"{len(ratios)} problems (estimated step times)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
