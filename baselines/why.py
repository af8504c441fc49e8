"""Why Post loses to local search here: the two causes DESIGN.md's first measurement named,
tested directly on three (graph, cluster) pairs at the main run's budget and seeds.

1. The uniform start. ``post-warm`` is Post's Algorithm 1 unchanged except that the logit table
   starts at the best single-device placement (1 - eps on that device, eps spread), the start a
   pretrained policy would give; hill climbing starts there too. Also reported: the median step
   time of uniform random placements (what Post's first batches sample) and the share of units
   the final placements leave on the CPU.
2. The coarsening level: ``post`` and ``hill`` at 16 and 256 units besides the main run's 64.

Usage: .venv/bin/python baselines/why.py > baselines/why.md   (about 15 CPU-minutes)
Step times are simulated with roofline costs: estimates, not measurements.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import torch

from gplace import post
from gplace.cli.inspect_cmd import load_any
from gplace.cluster import load_cluster
from gplace.placers import SimMeasurer, get_placer
from gplace.placers.base import Tracker
from gplace.placers.post_table import PostPlacer
from gplace.problem import CoarsenConfig, PlacementProblem

PAIRS = (("inception_v3_b32", "post-4gpu"), ("inception_v3_b32", "hetero"),
         ("nmt_4l", "post-4gpu"))
TITLE = ('# why.py: the uniform start and the coarsening level'
         " (budget 2400, 3 seeds; simulated estimates, ms)")
BUDGET, SEEDS = int(os.environ.get("WHY_BUDGET", 2400)), 3   # WHY_BUDGET: smoke tests


class WarmPost(PostPlacer):
    """Post (Algorithm 1, same config) with the logit table started at a given placement."""

    def __init__(self, start: np.ndarray, seed: int = 0, eps: float = 0.05):
        super().__init__(seed=seed)
        self.start, self.start_eps = start, eps

    def place(self, problem, measurer, budget):
        cfg, rng = self.config, np.random.default_rng(self.seed)
        tracker = Tracker(problem, measurer, budget)
        dist = post.elite_distribution(self.start[None, :], problem.num_devices, self.start_eps)
        logits = torch.tensor(np.log(dist), requires_grad=True)
        opt = torch.optim.Adam([logits], lr=cfg.lr)
        seen, since_refit = [], 0
        while tracker.left > 0:
            probs = torch.softmax(logits.detach(), -1).numpy()
            batch = post.sample_placements(probs, min(cfg.batch, tracker.left), rng)
            tracker.evaluate(batch)
            seen.append(batch)
            since_refit += len(batch)
            rewards = post.reward(*tracker.history())
            self._ppo(logits, opt, batch, rewards[-len(batch):], seen, rewards)
            if since_refit >= cfg.refit_every:
                self._refit(logits, np.concatenate(seen), rewards, problem.num_devices)
                opt = torch.optim.Adam([logits], lr=cfg.lr)
                since_refit = 0
        return tracker.result("post-warm", self.start)


def best_single(problem, measurer) -> np.ndarray:
    starts = np.stack([problem.single_device(d) for d in range(problem.num_devices)])
    m = measurer.measure(starts)
    return starts[int(np.argmin(np.where(m.feasible, m.step_time_s, np.inf)))]


def cpu_share(problem, placement) -> float:
    """Fraction of the graph's ops that ``placement`` leaves on the CPU (device kind xeon*)."""
    cpu = [i for i, d in enumerate(problem.cluster.devices) if d.kind.startswith("xeon")]
    return float(np.isin(problem.expand(placement), cpu).mean())


def runs(problem, method, start=None):
    measurer = SimMeasurer(problem)
    out = []
    for seed in range(SEEDS):
        placer = (WarmPost(start, seed=seed) if method == "post-warm"
                  else get_placer(method, seed=seed))
        r = placer.place(problem, measurer, BUDGET)
        out.append((r.step_time_s * 1e3, cpu_share(problem, r.placement)))
    t = np.array(out)
    return t[:, 0].mean(), t[:, 0].std(), t[:, 1].mean()


def main() -> int:
    torch.set_num_threads(1)
    print(TITLE + "\n")
    print("| graph | cluster | units | method | step time ms (mean ± std, 3 seeds) | "
          "ops on CPU | note |\n|---|---|---|---|---|---|---|")
    for gname, cname in PAIRS:
        graph, cluster = load_any(f"datasets/corpus/{gname}.pb"), load_cluster(cname)
        for units in (64, 16, 256):
            problem = PlacementProblem.build(graph, cluster, coarsen=CoarsenConfig(max_units=units))
            measurer = SimMeasurer(problem)
            start = best_single(problem, measurer)
            if units == 64:
                uni = measurer.measure(np.random.default_rng(0).integers(
                    0, problem.num_devices, (200, problem.num_units)))
                ok = uni.step_time_s[uni.feasible] * 1e3
                t1 = measurer.measure(start[None]).step_time_s[0] * 1e3
                print(f"| {gname} | {cname} | {problem.num_units} | uniform random | "
                      f"median {np.median(ok):.4g} (best of 200: {ok.min():.4g}) | "
                      f"{1 / problem.num_devices:.0%} expected | best single device {t1:.4g} |",
                      flush=True)
            methods = ("post-warm", "post", "hill") if units == 64 else ("post", "hill")
            for method in methods:
                w = time.perf_counter()
                mean, std, cpu = runs(problem, method, start)
                print(f"| {gname} | {cname} | {problem.num_units} | {method} | {mean:.4g} ± "
                      f"{std:.2g} | {cpu:.0%} | {time.perf_counter() - w:.0f} s |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
