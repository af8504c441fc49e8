"""Policy-guided local-move units: cases x arms x shares, ft 100 +h (best within 100 samples,
heuristic starts), over the best heuristic. Usage: ubp.py SPLIT GRAPHS SHARES OUT.json [SEEDS]"""
import dataclasses, json, sys, time
from pathlib import Path
import numpy as np
sys.path.insert(0, "/work/main")
import torch
torch.set_num_threads(1)
from finetune.study import build_case, fresh_network, CLUSTERS
from gplace.gnn.config import FinetuneConfig
from gplace.gnn.placer import GNNPlacer, load_policy
from gplace.gnn.corpus import list_corpus
split, graphs = sys.argv[1], sys.argv[2].split(",")
shares, out = [float(x) for x in sys.argv[3].split(",")], Path(sys.argv[4])
seeds = [int(x) for x in sys.argv[5].split(",")] if len(sys.argv) > 5 else [0]
policy = load_policy(None)[0]
done = json.loads(out.read_text()) if out.exists() else []
have = {(r["graph"], r["cluster"], r["seed"], r["arm"], r["share"]) for r in done}
entries = [e for e in list_corpus("datasets") if e.split == split and e.name in graphs]
for entry in entries:
    for cluster in CLUSTERS:
        problem, m, heur, bound = build_case(entry, cluster)
        best_h = min(r.step_time_s for r in heur.values() if r.feasible)
        starts = [r.placement for r in heur.values()]
        for seed in seeds:
            for arm in ("pretrained", "untrained"):
                net = policy if arm == "pretrained" else fresh_network(policy, seed)
                for share in shares:
                    key = (entry.name, cluster, seed, arm, share)
                    if key in have:
                        continue
                    t0 = time.perf_counter()
                    cfg = dataclasses.replace(FinetuneConfig(), unit_by_policy=share)
                    r = GNNPlacer(seed=seed, policy=net, config=cfg).place(problem, m, 100, seeds=starts)
                    curve = np.minimum(r.history.best_so_far(), r.info["start_step_time_s"])
                    rec = dict(zip(("graph", "cluster", "seed", "arm", "share"), key),
                               ratio=float(curve[-1] / best_h), s=time.perf_counter() - t0)
                    done.append(rec)
                    out.write_text(json.dumps(done, indent=0))
                    print(rec, flush=True)
