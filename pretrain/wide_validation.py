"""Zero-shot of policy checkpoints on a wider validation set than pretraining's 24 problems:
the 6 validation graphs x post-2gpu, post-4gpu, hetero, hdp-8gpu and 4 random clusters used
nowhere else (48 problems; pretrain/README.md quotes it). Simulated: estimates.

    .venv/bin/python -m pretrain.wide_validation untrained gplace/checkpoints/policy.pt
"""
import sys, numpy as np, torch
from gplace.gnn.corpus import list_corpus
from gplace.gnn.pretrain import cluster_of, build_state, greedy_time
from gplace.gnn.policy import GNNPolicy


def wide_problems() -> list:
    """(corpus entry, cluster spec) of the 48 problems: the 6 validation graphs x 4 presets and
    4 random clusters (seeds used nowhere else)."""
    entries = [e for e in list_corpus('pretrain/corpus139') if e.split == 'validation']
    return [(e, c) for i, e in enumerate(entries)
            for c in ['post-2gpu', 'post-4gpu', 'hetero', 'hdp-8gpu']
            + [3_000_000 + 10 * i + j for j in range(4)]]


if __name__ == "__main__":
    torch.set_num_threads(1)
    pols = {p: GNNPolicy() if p == 'untrained' else GNNPolicy.load(p)[0] for p in sys.argv[1:]}
    res = {p: [] for p in pols}
    for e, c in wide_problems():
        st = build_state(e, cluster_of(c), 1)
        for p, pol in pols.items():
            res[p].append(greedy_time(pol, st) / st.ref_time_s)
    for p, r in res.items():
        r = np.array(r)
        print(f"{p:50s} geomean {np.exp(np.log(r).mean()):.4f}  <=1: {(r <= 1 + 1e-9).mean():.2f}  n={len(r)}")
