"""How far does fine-tuning move the policy from its start within 100 samples? Per case, arm and
anchor (seed 0, heuristic starts): KL(pi || pi_start) per decision (learn.anchor_kl, at the
temperature of fine-tuning) over each round's sampled decisions, measured before each round's
PPO epochs, printed at the second (the first follows one round of updates), middle and last round with a batch. Usage: diag.py ANCHORS [LR]"""
import dataclasses, sys
from pathlib import Path
import numpy as np
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import torch
torch.set_num_threads(1)
from finetune.study import build_case, fresh_network
from gplace.gnn import learn
import gplace.gnn.placer as placer_module
from gplace.gnn.config import FinetuneConfig
from gplace.gnn.placer import GNNPlacer, load_policy
from gplace.gnn.corpus import list_corpus
anchors = [float(x) for x in sys.argv[1].split(",")]
lr = float(sys.argv[2]) if len(sys.argv) > 2 else FinetuneConfig().learn.lr
policy = load_policy(None)[0]
real_loss = placer_module.loss
for name, cluster in (("gru_lm_2l_h512", "hetero"), ("wide_deep_8x100k", "hdp-8gpu"),
                      ("xception_b8_96", "post-4gpu")):
    entry = [e for e in list_corpus("datasets") if e.name == name][0]
    problem, m, heur, _ = build_case(entry, cluster)
    best_h = min(r.step_time_s for r in heur.values() if r.feasible)
    for arm in ("pretrained", "untrained"):
        net = policy if arm == "pretrained" else fresh_network(policy, 0)
        for anchor in anchors:
            kls, last = [], [None]
            with torch.no_grad():
                start0 = learn.tempered(net(learn.ProblemState(problem, m).features), 0.25)

            def spy(pol, state, batch, cfg, seed=0, anchor=0.0, start=None):
                if batch is not None and batch is not last[0]:  # first PPO epoch of a round
                    last[0] = batch
                    with torch.no_grad():
                        kls.append(float(learn.anchor_kl(learn.tempered(
                            pol(state.features), cfg.temperature), start0, batch.ro)))
                return real_loss(pol, state, batch, cfg, seed, anchor, start)

            placer_module.loss = spy
            cfg = dataclasses.replace(FinetuneConfig(), anchor=anchor)
            cfg = dataclasses.replace(cfg, learn=dataclasses.replace(cfg.learn, lr=lr))
            r = GNNPlacer(seed=0, policy=net, config=cfg).place(
                problem, m, 100, seeds=[h.placement for h in heur.values()])
            placer_module.loss = real_loss
            curve = np.minimum(r.history.best_so_far(), r.info["start_step_time_s"])
            print(f"{name:<17} {cluster:<9} {arm:<10} lr {lr:g} anchor {anchor:<4g} ratio "
                  f"{curve[-1] / best_h:.4f}  KL round 2 / mid / last "
                  f"{kls[1]:.4f} / {kls[len(kls) // 2]:.4f} / {kls[-1]:.4f} ({len(kls)} rounds)",
                  flush=True)
