"""Zero-shot (greedy) of logit ensembles on the 48 wider validation problems: the mean of the
members' scores s and decision weights w, which is the mean of their logits at every decision
(logits are linear in both). Simulated. Checkpoints by name below; r5c300, r5c and r5cd2 are
the v18 runs (pretrain/runs/<run>/, not committed; r5c300 is the shipped policy). Usage:
    python finetune/attempts/v19_zero_shot_rollouts/ensembles.py 4c 5c300 4c+5c300 ..."""
import sys, numpy as np, torch
sys.path.insert(0, ".")
from pretrain.wide_validation import wide_problems
from torch import nn
from gplace.gnn.pretrain import cluster_of, build_state, zero_shot_time
from gplace.gnn.policy import GNNPolicy, Scores
torch.set_num_threads(1)
class Ens(nn.Module):
    def __init__(self, ms): super().__init__(); self.ms = nn.ModuleList(ms)
    def forward(self, f):
        out = [m(f) for m in self.ms]
        return Scores(sum(o.s for o in out) / len(out), sum(o.w for o in out) / len(out))
P = {'3c': 'pretrain/round3c.pt', '4c': 'pretrain/round4c.pt',
     '5c300': 'gplace/checkpoints/policy.pt', '5c': 'pretrain/runs/r5c.pt',
     '3cw': 'pretrain/round3c_warm.pt', '5cd2': 'pretrain/runs/r5cd2.pt'}
L = {k: GNNPolicy.load(v)[0] for k, v in P.items() if any(k in c.split('+') for c in sys.argv[1:])}
combos = [s.split('+') for s in sys.argv[1:]]
pols = {'+'.join(c): (L[c[0]] if len(c) == 1 else Ens([L[k] for k in c])) for c in combos}
wide = wide_problems()
res = {p: [] for p in pols}
with torch.no_grad():
    for e, c in wide:
        st = build_state(e, cluster_of(c), 1)
        for p, pol in pols.items():
            res[p].append(zero_shot_time(pol, st) / st.ref_time_s)
for p, r in res.items():
    r = np.array(r)
    print(f"{p:20s} wide48 geomean {np.exp(np.log(r).mean()):.4f}  <=1: {(r <= 1 + 1e-9).mean():.2f}", flush=True)
