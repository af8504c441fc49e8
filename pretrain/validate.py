"""Validation table of a policy checkpoint: zero-shot (most likely device per unit, no
samples) against the best heuristic and against random placements, on the validation split.

    .venv/bin/python -m pretrain.validate --checkpoint gplace/checkpoints/policy.pt
"""

from __future__ import annotations

import argparse
import sys

import numpy as np


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default="gplace/checkpoints/policy.pt")
    parser.add_argument("--corpus", default="datasets")
    parser.add_argument("--clusters", nargs="+", default=["post-2gpu", "post-4gpu", "hetero"])
    parser.add_argument("--random", type=int, default=100, help="random placements per problem")
    args = parser.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    import gplace
    from gplace.corpus import list_corpus
    from gplace.pretrain import SEED_HEURISTICS, build_state, zero_shot_time
    placer = gplace.load(args.checkpoint)
    units = placer.config.units
    print("| graph | cluster | zero-shot ms | best heuristic ms | random ms (median of "
          f"{args.random}) | zero-shot / heuristic | zero-shot / random |\n|---|---|---|---|---|---|---|")
    ratios_h, ratios_r = [], []
    for entry in [e for e in list_corpus(args.corpus) if e.split == "validation"]:
        for cluster in args.clusters:
            state = build_state(entry, cluster, units, elite_size=len(SEED_HEURISTICS))
            z = zero_shot_time(placer.policy, state)
            h = state.elites[0][0]
            rnd = state.measurer.measure(state.problem.random_placements(args.random, seed=0))
            r = float(np.median(np.where(rnd.feasible, rnd.step_time_s, np.inf)))
            ratios_h.append(z / h)
            ratios_r.append(z / r)
            print(f"| {entry.name} | {cluster} | {z * 1e3:.2f} | {h * 1e3:.2f} | {r * 1e3:.2f} | "
                  f"{z / h:.3f} | {z / r:.3f} |", flush=True)
    print(f"\nmean zero-shot / best heuristic: {np.mean(ratios_h):.3f} "
          f"(geometric {np.exp(np.mean(np.log(ratios_h))):.3f}); mean zero-shot / random median: "
          f"{np.mean(ratios_r):.3f}; zero-shot at least as fast as the best heuristic on "
          f"{sum(x <= 1 + 1e-9 for x in ratios_h)} of {len(ratios_h)} problems")
    return 0


if __name__ == "__main__":
    sys.exit(main())
