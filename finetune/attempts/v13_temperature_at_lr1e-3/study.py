"""Fine-tuning temperature at lr 1e-3 (the temperature 0.25 was picked at lr 1e-2): the 9
validation cases, ft 100 +h (best within 100 samples, heuristic starts) over the best heuristic,
pretrained and untrained. All simulated. Usage (from the repository root):
    python finetune/attempts/v13_temperature_at_lr1e-3/study.py TEMPS SEEDS OUT.json"""
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
temps = [float(x) for x in sys.argv[1].split(",")]
seeds = [int(x) for x in sys.argv[2].split(",")]
out = Path(sys.argv[3])
graphs = ("xception_b8_96", "gru_lm_2l_h512", "wide_deep_8x100k")
policy = load_policy(None)[0]
done = json.loads(out.read_text()) if out.exists() else []
have = {(r["graph"], r["cluster"], r["seed"], r["arm"], r["temperature"]) for r in done}
for entry in [e for e in list_corpus("datasets") if e.split == "validation" and e.name in graphs]:
    for cluster in CLUSTERS:
        problem, m, heur, bound = build_case(entry, cluster)
        best_h = min(r.step_time_s for r in heur.values() if r.feasible)
        starts = [r.placement for r in heur.values()]
        for seed in seeds:
            for arm in ("pretrained", "untrained"):
                net = policy if arm == "pretrained" else fresh_network(policy, seed)
                for t in temps:
                    key = (entry.name, cluster, seed, arm, t)
                    if key in have:
                        continue
                    base = FinetuneConfig()
                    cfg = dataclasses.replace(base, learn=dataclasses.replace(base.learn,
                                                                              temperature=t))
                    t0 = time.perf_counter()
                    r = GNNPlacer(seed=seed, policy=net, config=cfg).place(problem, m, 100,
                                                                           seeds=starts)
                    curve = np.minimum(r.history.best_so_far(), r.info["start_step_time_s"])
                    done.append(dict(zip(("graph", "cluster", "seed", "arm", "temperature"), key),
                                     lr=cfg.learn.lr, ratio=float(curve[-1] / best_h),
                                     s=time.perf_counter() - t0))
                    out.write_text(json.dumps(done, indent=0))
                    print(done[-1], flush=True)
