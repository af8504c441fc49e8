"""Zero-shot of policy checkpoints on the 48 wider validation problems (pretrain.wide_validation),
as the greedy rollout (K=0) and as the best of the greedy rollout and K sampled rollouts by
the list schedule's own estimate (FinetuneConfig.zero_shot_rollouts; nothing measured). Simulated.
    python finetune/attempts/v19_zero_shot_rollouts/zero_shot_k.py CKPT|untrained ..."""
import sys, numpy as np, torch, dataclasses
sys.path.insert(0, ".")
from pretrain.wide_validation import wide_problems
torch.set_num_threads(1)
from gplace.gnn.config import FinetuneConfig
from gplace.gnn.pretrain import cluster_of, build_state
from gplace.gnn.placer import GNNPlacer
from gplace.gnn.policy import GNNPolicy
wide = wide_problems()
Ks = [0, 16, 64]
ck = sys.argv[1:]
res = {(c, k): [] for c in ck for k in Ks}
for e, cl in wide:
    st = build_state(e, cluster_of(cl), 1)
    for c in ck:
        if c == 'untrained': torch.manual_seed(0); net = GNNPolicy()
        else: net = GNNPolicy.load(c)[0]
        for k in Ks:
            pl = GNNPlacer(seed=0, policy=net, config=dataclasses.replace(FinetuneConfig(), zero_shot_rollouts=k))
            z = pl.zero_shot(st.problem)
            m = st.measurer.measure(z[None])
            res[(c, k)].append(m.step_time_s[0] / st.ref_time_s if m.feasible[0] else np.inf)
for (c, k), r in res.items():
    r = np.array(r)
    print(f"{c:30s} K={k:3d} wide48 {np.exp(np.log(r).mean()):.4f} <=1 {(r <= 1 + 1e-9).mean():.2f}", flush=True)
