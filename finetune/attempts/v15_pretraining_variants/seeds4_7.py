"""The choice of round 2c again on fresh fine-tuning seeds 4-7: ft 100 without heuristic starts
on the 9 validation cases, round 2b, round 2c and the untrained network. Simulated. Usage:
    python finetune/attempts/v15_pretraining_variants/seeds4_7.py OUT.json"""
import json, sys, time
from pathlib import Path
import numpy as np
sys.path.insert(0, ".")
import torch
torch.set_num_threads(1)
from finetune.study import build_case, fresh_network, CLUSTERS
from gplace.gnn.placer import GNNPlacer
from gplace.gnn.policy import GNNPolicy
from gplace.gnn.corpus import list_corpus

out = Path(sys.argv[1])
graphs = ("xception_b8_96", "gru_lm_2l_h512", "wide_deep_8x100k")
arms = {"round 2b": GNNPolicy.load("pretrain/round2b.pt")[0],
        "round 2c": GNNPolicy.load("gplace/checkpoints/policy.pt")[0]}
done = json.loads(out.read_text()) if out.exists() else []
have = {(r["graph"], r["cluster"], r["seed"], r["arm"]) for r in done}
for entry in [e for e in list_corpus("datasets") if e.split == "validation" and e.name in graphs]:
    for cluster in CLUSTERS:
        problem, m, heur, bound = build_case(entry, cluster)
        best_h = min(r.step_time_s for r in heur.values() if r.feasible)
        for seed in range(4, 8):
            nets = dict(arms, untrained=fresh_network(arms["round 2c"], seed))
            for arm, net in nets.items():
                if (entry.name, cluster, seed, arm) in have:
                    continue
                t0 = time.perf_counter()
                r = GNNPlacer(seed=seed, policy=net).place(problem, m, 100)
                curve = np.minimum(r.history.best_so_far(), r.info["start_step_time_s"])
                done.append({"graph": entry.name, "cluster": cluster, "seed": seed, "arm": arm,
                             "ratio": float(curve[-1] / best_h), "s": time.perf_counter() - t0})
                out.write_text(json.dumps(done, indent=0))
arms_ = ("round 2b", "round 2c", "untrained")
g = lambda x: float(np.exp(np.mean(np.log(x))))
cases = sorted({(r["graph"], r["cluster"]) for r in done})
res = {a: g([g([r["ratio"] for r in done if (r["graph"], r["cluster"]) == c and r["arm"] == a])
             for c in cases]) for a in arms_}
print("ft 100 without heuristic starts, 9 validation cases, seeds 4-7 (geomean of per-case "
      "geomeans, / best heuristic):")
for a in arms_:
    print(f"  {a:10s} {res[a]:.4f}   / untrained {res[a] / res['untrained']:.4f}")
key = lambda r: (r["graph"], r["cluster"], r["seed"])
by = {(key(r), r["arm"]): r["ratio"] for r in done}
for a in ("round 2b", "round 2c"):
    runs = [k for (k, arm) in by if arm == a]
    print(f"  {a} better than untrained in {sum(by[(k, a)] < by[(k, 'untrained')] for k in runs)} "
          f"of {len(runs)} runs; round 2c better than round 2b in "
          f"{sum(by[(k, 'round 2c')] < by[(k, 'round 2b')] for k in runs)} of {len(runs)}")
