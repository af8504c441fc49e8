"""How fine-tuning splits its samples between policy rollouts and local moves, and how much the
local moves lean on the policy: the 9 validation cases, ft 100 without heuristic starts (issue
12's last bar), pretrained and untrained. All simulated. Usage (from the repository root):
    python finetune/attempts/v14_search_mix/study.py VARIANTS SEEDS OUT.json"""
import dataclasses, json, sys, time
from pathlib import Path
import numpy as np
sys.path.insert(0, ".")
import torch
torch.set_num_threads(1)
from finetune.study import build_case, fresh_network, CLUSTERS
from gplace.gnn.config import FinetuneConfig
from gplace.gnn.placer import GNNPlacer, load_policy
from gplace.gnn.corpus import list_corpus

VARIANTS = {  # name: FinetuneConfig fields (learn.* for LearnConfig)
    "base": {},
    "local0.5": {"local_fraction": 0.5},
    "local0.2": {"local_fraction": 0.2, "local_start": 0.2},
    "local0.95": {"local_fraction": 0.95, "local_start": 0.5},
    "mix0.9": {"policy_mix": 0.9},
    "mix0.2": {"policy_mix": 0.2},
    "round20": {"learn.samples": 20},
}


def config(name: str) -> FinetuneConfig:
    base = FinetuneConfig()
    top = {k: v for k, v in VARIANTS[name].items() if not k.startswith("learn.")}
    learn = {k[6:]: v for k, v in VARIANTS[name].items() if k.startswith("learn.")}
    return dataclasses.replace(base, **top, learn=dataclasses.replace(base.learn, **learn))


names = sys.argv[1].split(",")
seeds = [int(x) for x in sys.argv[2].split(",")]
out = Path(sys.argv[3])
budget = int(sys.argv[4]) if len(sys.argv) > 4 else 100
graphs = ("xception_b8_96", "gru_lm_2l_h512", "wide_deep_8x100k")
policy = load_policy(None)[0]
done = json.loads(out.read_text()) if out.exists() else []
have = {(r["graph"], r["cluster"], r["seed"], r["arm"], r["variant"]) for r in done}
for entry in [e for e in list_corpus("datasets") if e.split == "validation" and e.name in graphs]:
    for cluster in CLUSTERS:
        problem, m, heur, bound = build_case(entry, cluster)
        best_h = min(r.step_time_s for r in heur.values() if r.feasible)
        for seed in seeds:
            for arm in ("pretrained", "untrained"):
                net = policy if arm == "pretrained" else fresh_network(policy, seed)
                for name in names:
                    key = (entry.name, cluster, seed, arm, name)
                    if key in have:
                        continue
                    t0 = time.perf_counter()
                    r = GNNPlacer(seed=seed, policy=net, config=config(name)).place(
                        problem, m, budget)
                    curve = np.minimum(r.history.best_so_far(), r.info["start_step_time_s"])
                    done.append(dict(zip(("graph", "cluster", "seed", "arm", "variant"), key),
                                     ratio=float(curve[-1] / best_h),
                                     curve=[float(c / best_h) for c in curve],
                                     s=time.perf_counter() - t0))
                    out.write_text(json.dumps(done, indent=0))
                    print({k: v for k, v in done[-1].items() if k != "curve"}, flush=True)
