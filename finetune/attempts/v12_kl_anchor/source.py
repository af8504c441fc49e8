"""Where does fine-tuning's best placement come from in 100 samples? Per arm and anchor, over
the 9 validation cases (seed 0, heuristic starts): the share of the total improvement over the
start (in log step time) made by policy samples vs local moves of the best placement.
Usage: source.py ANCHORS SEEDS"""
import dataclasses, sys
from pathlib import Path
import numpy as np
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import torch
torch.set_num_threads(1)
from finetune.study import build_case, fresh_network, CLUSTERS
import gplace.gnn.placer as placer_module
from gplace.gnn.config import FinetuneConfig
from gplace.gnn.learn import ProblemState
from gplace.gnn.placer import GNNPlacer, load_policy
from gplace.gnn.corpus import list_corpus
anchors = [float(x) for x in sys.argv[1].split(",")]
seeds = [int(x) for x in sys.argv[2].split(",")]
policy = load_policy(None)[0]
real_sample, real_local = placer_module.sample, GNNPlacer._local_moves
gain = {}


def tracked(kind, fn):
    def run(*a, **k):
        state = next(x for x in a if isinstance(x, ProblemState))
        before = state.best_time_s
        out = fn(*a, **k)
        gain[kind] = gain.get(kind, 0.0) + np.log(before / state.best_time_s)
        return out
    return run


placer_module.sample = tracked("policy samples", real_sample)
GNNPlacer._local_moves = tracked("local moves", real_local)
names = ("xception_b8_96", "gru_lm_2l_h512", "wide_deep_8x100k")
entries = [e for e in list_corpus("datasets") if e.split == "validation" and e.name in names]
totals = {}
for entry in entries:
    for cluster in CLUSTERS:
        problem, m, heur, _ = build_case(entry, cluster)
        for seed in seeds:
            for arm in ("pretrained", "untrained"):
                net = policy if arm == "pretrained" else fresh_network(policy, seed)
                for anchor in anchors:
                    gain.clear()
                    cfg = dataclasses.replace(FinetuneConfig(), anchor=anchor)
                    GNNPlacer(seed=seed, policy=net, config=cfg).place(
                        problem, m, 100, seeds=[h.placement for h in heur.values()])
                    t = totals.setdefault((arm, anchor), {})
                    for k, v in gain.items():
                        t[k] = t.get(k, 0.0) + v
                    t["runs"] = t.get("runs", 0) + 1
                    t["samples won"] = t.get("samples won", 0) + (gain.get("policy samples", 0) > 0)
for (arm, anchor), t in sorted(totals.items()):
    s, l = t.get("policy samples", 0.0), t.get("local moves", 0.0)
    print(f"{arm:<10} anchor {anchor:<4g} runs {t['runs']}: mean log gain over the start "
          f"{(s + l) / t['runs']:.4f}, by policy samples {s / (s + l):.0%}, by local moves "
          f"{l / (s + l):.0%}; runs where samples improved the best at all: {t['samples won']}",
          flush=True)
