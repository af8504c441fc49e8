"""ft 100 without heuristic starts on the 9 validation cases, seeds 0-3, for policy checkpoints;
the untrained arm is v14's `base` rows (the same cases, seeds and settings). Simulated. Usage
(from the repository root):
    python finetune/attempts/v15_pretraining_variants/ft100.py OUT.json CKPT [CKPT ...]"""
import dataclasses, json, sys, time
from pathlib import Path
import numpy as np
sys.path.insert(0, ".")
import torch
torch.set_num_threads(1)
from finetune.study import build_case, CLUSTERS
from gplace.gnn.config import FinetuneConfig
from gplace.gnn.placer import GNNPlacer
from gplace.gnn.policy import GNNPolicy
from gplace.gnn.corpus import list_corpus

# made when zero-shot was the greedy rollout (before v19's zero_shot_rollouts)
GREEDY_START = dataclasses.replace(FinetuneConfig(), zero_shot_rollouts=0)
out = Path(sys.argv[1])
ckpts = sys.argv[2:]
graphs = ("xception_b8_96", "gru_lm_2l_h512", "wide_deep_8x100k")
done = json.loads(out.read_text()) if out.exists() else []
have = {(r["graph"], r["cluster"], r["seed"], r["checkpoint"]) for r in done}
policies = {c: GNNPolicy.load(c)[0] for c in ckpts}
for entry in [e for e in list_corpus("datasets") if e.split == "validation" and e.name in graphs]:
    for cluster in CLUSTERS:
        problem, m, heur, bound = build_case(entry, cluster)
        best_h = min(r.step_time_s for r in heur.values() if r.feasible)
        for seed in range(4):
            for c, net in policies.items():
                if (entry.name, cluster, seed, c) in have:
                    continue
                t0 = time.perf_counter()
                r = GNNPlacer(seed=seed, policy=net, config=GREEDY_START).place(problem, m, 100)
                curve = np.minimum(r.history.best_so_far(), r.info["start_step_time_s"])
                done.append({"graph": entry.name, "cluster": cluster, "seed": seed,
                             "checkpoint": c, "ratio": float(curve[-1] / best_h),
                             "zero_shot": float(r.info["zero_shot_step_time_s"] / best_h),
                             "s": time.perf_counter() - t0})
                out.write_text(json.dumps(done, indent=0))
                print(done[-1], flush=True)
