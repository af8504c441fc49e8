"""Where fine-tuning's gains come from: one case, ft 100 without heuristic starts, seed 0; per
round, the measured batch of policy samples (S) and of local moves (L): its size, best and
median step time over the best heuristic. Simulated. Usage:
    python finetune/attempts/v19_zero_shot_rollouts/where_gains_come_from.py GRAPH CLUSTER CKPT|untrained ..."""
import sys, numpy as np, torch
sys.path.insert(0, ".")
torch.set_num_threads(1)
from finetune.study import build_case
import gplace.gnn.placer as P
from gplace.gnn.policy import GNNPolicy
from gplace.gnn.corpus import list_corpus
ents = {e.name: e for e in list_corpus("datasets")}
log = []
real_sample, real_local = P.sample, P.GNNPlacer._local_moves
def s(*a, **k):
    b = real_sample(*a, **k); log.append(("S", len(b.step_time_s), float(np.min(b.step_time_s)), float(np.median(b.step_time_s)))); return b
def l(self, policy, state, tracker, count, rng):
    before = len(tracker.times); real_local(self, policy, state, tracker, count, rng)
    t = tracker.times[-1]; log.append(("L", len(t), float(t.min()), float(np.median(t))))
P.sample, P.GNNPlacer._local_moves = s, l
for g, c in [(sys.argv[1], sys.argv[2])]:
    problem, m, heur, bound = build_case(ents[g], c)
    bh = min(r.step_time_s for r in heur.values() if r.feasible)
    for name in sys.argv[3:]:
        if name == "untrained": torch.manual_seed(0); net = GNNPolicy()
        else: net = GNNPolicy.load(name)[0]
        log.clear()
        r = P.GNNPlacer(seed=0, policy=net).place(problem, m, 100)
        print(name.split('/')[-1], "zero %.3f" % (r.info["zero_shot_step_time_s"] / bh), " ".join(f"{k}{n}:{mn/bh:.3f}/{md/bh:.3f}" for k, n, mn, md in log), "final %.3f" % (r.step_time_s / bh), flush=True)
