"""Why interleaved Post (``post``) trails PPO alone and the weighted sum here: its CE refit
replaces the whole logit table by the elite frequencies of *every* sample so far, so every 100
samples it throws away what PPO learned and pulls back towards old elites. Two variants of the
refit, Algorithm 1 otherwise unchanged, at the main run's budget and seeds:

* ``post-recent``: elites from the last ``refit_every`` samples only (the classic cross-entropy
  method, Rubinstein 1999: elites of the current batch);
* ``post-rare``: the refit every 400 samples instead of 100, PPO in between.

Usage: .venv/bin/python baselines/why_elites.py > baselines/why_elites.md
Step times are simulated with roofline costs: estimates, not measurements.
"""

from __future__ import annotations

import sys

import numpy as np
import torch

from gplace.cli.inspect_cmd import load_any
from gplace.cluster import load_cluster
from gplace.placers import SimMeasurer, get_placer
from gplace.placers.post_table import PostPlacer
from gplace.problem import CoarsenConfig, PlacementProblem

PAIRS = (("nmt_4l", "post-2gpu"), ("nmt_4l", "post-4gpu"), ("nmt_4l", "hetero"),
         ("lstm_lm_4l_h512", "post-4gpu"), ("inception_v3_b32", "hetero"),
         ("resnet50_b32", "hetero"))
TITLE = ("# why_elites.py: which samples Post's CE refit uses"
         " (budget 2400, 3 seeds, 64 units; simulated estimates, ms)")
BUDGET, SEEDS = 2400, 3


class RecentElitePost(PostPlacer):
    def _refit(self, logits, placements, rewards, num_devices) -> None:
        n = self.config.refit_every
        super()._refit(logits, placements[-n:], rewards[-n:], num_devices)


def make(method: str, seed: int):
    if method == "post-recent":
        return RecentElitePost(seed=seed)
    if method == "post-rare":
        return PostPlacer(seed=seed, refit_every=400)
    return get_placer(method, seed=seed)


def main() -> int:
    torch.set_num_threads(1)
    print(TITLE + "\n")
    methods = ("post", "post-recent", "post-rare", "ppo", "post-sum")
    print("| graph | cluster | " + " | ".join(methods) + " |\n|---|---|" + "---|" * len(methods))
    for gname, cname in PAIRS:
        problem = PlacementProblem.build(load_any(f"datasets/corpus/{gname}.pb"),
                                         load_cluster(cname), coarsen=CoarsenConfig(max_units=64))
        measurer, cells = SimMeasurer(problem), []
        for method in methods:
            t = np.array([make(method, s).place(problem, measurer, BUDGET).step_time_s
                          for s in range(SEEDS)]) * 1e3
            cells.append(f"{t.mean():.4g} ± {t.std():.2g}")
        print(f"| {gname} | {cname} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
