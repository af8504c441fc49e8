"""Validation figures of policy checkpoints: the greedy rollout and the zero-shot placement
by the policy's own rollouts, as pretraining validates (gplace.gnn.validation.zero_shot_time;
``--zero-shot-prior``: as `gplace place` makes it, FinetuneConfig's defaults), each against the
problem's best heuristic, geometric mean. By default on a wider set than pretraining's 24
problems: the 6 validation graphs x post-2gpu, post-4gpu, hetero, hdp-8gpu and 4 random
clusters used nowhere else (48 problems; pretrain/README.md quotes it); ``--card``: the 24
problems a `gplace pretrain` card with the default corpus and clusters validates on.
Checkpoints of the rank order (every shipped one). Simulated: estimates.

    .venv/bin/python -m pretrain.wide_validation untrained gplace/checkpoints/policy.pt
    .venv/bin/python -m pretrain.wide_validation --card untrained runs/policy.pt
"""

import argparse

import numpy as np
import torch

from gplace.gnn.config import ORDERS, FinetuneConfig, PretrainConfig
from gplace.gnn.corpus import list_corpus
from gplace.gnn.infer import policy_weights
from gplace.gnn.policy import GNNPolicy
from gplace.gnn.pretrain import ProblemPool, build_state, cluster_of
from gplace.gnn.validation import VALIDATION_RULE, greedy_time, zero_shot_time


def wide_problems() -> list:
    """(corpus entry, cluster spec) of the 48 problems: the 6 validation graphs x 4 presets and
    4 random clusters (seeds used nowhere else)."""
    entries = [e for e in list_corpus('pretrain/corpus139') if e.split == 'validation']
    return [(e, c) for i, e in enumerate(entries)
            for c in ['post-2gpu', 'post-4gpu', 'hetero', 'hdp-8gpu']
            + [3_000_000 + 10 * i + j for j in range(4)]]


def states(card: bool, order: str = "rank", random_clusters: int = 2):
    """The problems' ProblemStates, one at a time."""
    if card:
        cfg = PretrainConfig(order=order, random_clusters=random_clusters)
        pool = ProblemPool(cfg, "validation", search=False)
        for i in range(len(pool)):
            yield pool.state(i)
            pool.states.pop(i)
    else:
        for e, c in wide_problems():
            yield build_state(e, cluster_of(c), 1, order=order)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoints", nargs="+", help="policy checkpoints, or 'untrained'")
    ap.add_argument("--card", action="store_true",
                    help="the 24 validation problems of `gplace pretrain` with its defaults")
    ap.add_argument("--random-clusters", type=int, default=2,
                    help="with --card: the random clusters per training graph of the run (0: "
                         "the 18 preset problems)")
    ap.add_argument("--zero-shot-prior", action="store_true",
                    help="zero-shot as `gplace place` makes it (FinetuneConfig's defaults: "
                         "the untrained network's rollouts too, the polish, link queues)")
    ap.add_argument("--order", choices=ORDERS, default="rank",
                    help="the list scheduler's order of the problems and the checkpoints")
    args = ap.parse_args(argv)
    if args.random_clusters != 2 and not args.card:
        ap.error("--random-clusters picks the card's problems: give --card too")
    torch.set_num_threads(1)
    pols = {p: GNNPolicy(order=args.order) if p == 'untrained' else GNNPolicy.load(p)[0]
            for p in args.checkpoints}
    if any(pol.order != args.order for pol in pols.values()):
        ap.error(f"the problems are built in the {args.order} order: give checkpoints of that "
                 "order (--order)")
    weights = {p: policy_weights(pol) for p, pol in pols.items()}
    config = FinetuneConfig() if args.zero_shot_prior else VALIDATION_RULE
    res = {p: ([], []) for p in pols}
    for st in states(args.card, args.order, args.random_clusters):
        for p, pol in pols.items():
            res[p][0].append(greedy_time(pol, st) / st.ref_time_s)
            res[p][1].append(zero_shot_time(weights[p], st, config) / st.ref_time_s)
    for p, (g, z) in res.items():
        g, z = np.array(g), np.array(z)
        print(f"{p:50s} greedy {np.exp(np.log(g).mean()):.4f} (<=1: {(g <= 1 + 1e-9).mean():.2f})"
              f"  zero-shot {np.exp(np.log(z).mean()):.4f} (<=1: {(z <= 1 + 1e-9).mean():.2f})"
              f"  n={len(g)}")


if __name__ == "__main__":
    main()
