"""ft 100 without heuristic starts on the 9 validation cases for one checkpoint and seeds:
    python finetune/attempts/v16_many_gpu_clusters/eval.py CKPT 0,1,2,3 OUT.json"""
import json, sys, time
sys.path.insert(0, ".")
import numpy as np, torch
torch.set_num_threads(1)
from finetune.study import build_case, CLUSTERS
from gplace.gnn.placer import GNNPlacer
from gplace.gnn.policy import GNNPolicy
from gplace.gnn.corpus import list_corpus
ck, seeds, out = sys.argv[1], [int(s) for s in sys.argv[2].split(",")], sys.argv[3]
net = GNNPolicy.load(ck)[0]
rows = []
for entry in [e for e in list_corpus("datasets") if e.split == "validation" and e.name in ("xception_b8_96", "gru_lm_2l_h512", "wide_deep_8x100k")]:
    for cluster in CLUSTERS:
        problem, m, heur, bound = build_case(entry, cluster)
        best_h = min(r.step_time_s for r in heur.values() if r.feasible)
        for seed in seeds:
            r = GNNPlacer(seed=seed, policy=net).place(problem, m, 100)
            curve = np.minimum(r.history.best_so_far(), r.info["start_step_time_s"])
            rows.append({"graph": entry.name, "cluster": cluster, "seed": seed, "arm": ck, "ratio": float(curve[-1] / best_h)})
json.dump(rows, open(out, "w"))
g = lambda x: float(np.exp(np.mean(np.log(x))))
cases = sorted({(r["graph"], r["cluster"]) for r in rows})
print(ck, seeds, "%.4f" % g([g([r["ratio"] for r in rows if (r["graph"], r["cluster"]) == c]) for c in cases]))
for cl in CLUSTERS:
    print(" ", cl, "%.4f" % g([r["ratio"] for r in rows if r["cluster"] == cl]))
