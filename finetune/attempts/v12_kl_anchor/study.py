"""KL anchor in fine-tuning (FinetuneConfig.anchor): cases x seeds x arms x anchors x start
modes, best within 100 samples (or BUDGET) over the best heuristic (all simulated).

    cd /work/main && PYTHONPATH=/tmp/kl .venv/bin/python \
        /tmp/kl/finetune/attempts/v12_kl_anchor/study.py SPLIT GRAPHS ANCHORS MODES OUT.json SEEDS \
        [LR [BUDGET]]

LR (optional, 7th): fine-tuning's Adam lr (default FinetuneConfig's, 1e-2); BUDGET (8th,
default 100): samples. One lr and budget per OUT file.
MODES: "h" (heuristic placements as starts, as `gplace place` runs it) and/or "none" (no
``seeds=``: the zero-shot placement is the only start); the ratio is over the best heuristic
either way. Copied from v11_guided_moves/study.py; the library comes from this worktree."""
import dataclasses, json, sys, time
from pathlib import Path
import numpy as np
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))   # this worktree's gplace
import torch
torch.set_num_threads(1)
from finetune.study import build_case, fresh_network, CLUSTERS
from gplace.gnn.config import FinetuneConfig
from gplace.gnn.placer import GNNPlacer, load_policy
from gplace.gnn.corpus import list_corpus
import gplace
assert Path(gplace.__file__).resolve().parents[1] == Path(__file__).resolve().parents[3]
split, graphs = sys.argv[1], sys.argv[2].split(",")
anchors, modes = [float(x) for x in sys.argv[3].split(",")], sys.argv[4].split(",")
out, seeds = Path(sys.argv[5]), [int(x) for x in sys.argv[6].split(",")]
lr = float(sys.argv[7]) if len(sys.argv) > 7 else None   # fine-tuning's Adam lr (None: 1e-2)
budget = int(sys.argv[8]) if len(sys.argv) > 8 else 100
policy = load_policy(None)[0]
done = json.loads(out.read_text()) if out.exists() else []
KEY = ("graph", "cluster", "seed", "arm", "anchor", "starts")
have = {tuple(r[k] for k in KEY) for r in done}
entries = [e for e in list_corpus("datasets") if e.split == split and e.name in graphs]
for entry in entries:
    for cluster in CLUSTERS:
        problem, m, heur, bound = build_case(entry, cluster)
        best_h = min(r.step_time_s for r in heur.values() if r.feasible)
        starts = [r.placement for r in heur.values()]
        for seed in seeds:
            for arm in ("pretrained", "untrained"):
                net = policy if arm == "pretrained" else fresh_network(policy, seed)
                for mode in modes:
                    for anchor in anchors:
                        key = (entry.name, cluster, seed, arm, anchor, mode)
                        if key in have:
                            continue
                        t0 = time.perf_counter()
                        cfg = dataclasses.replace(FinetuneConfig(), anchor=anchor)
                        if lr is not None:
                            cfg = dataclasses.replace(cfg, learn=dataclasses.replace(cfg.learn,
                                                                                     lr=lr))
                        g = GNNPlacer(seed=seed, policy=net, config=cfg)
                        r = g.place(problem, m, budget, seeds=starts if mode == "h" else ())
                        curve = np.minimum(r.history.best_so_far(), r.info["start_step_time_s"])
                        rec = dict(zip(KEY, key), ratio=float(curve[-1] / best_h),
                                   zero_shot=float(r.info["zero_shot_step_time_s"] / best_h),
                                   s=time.perf_counter() - t0, lr=cfg.learn.lr,
                                   budget=budget)
                        done.append(rec)
                        out.write_text(json.dumps(done, indent=0))
                        print(rec, flush=True)
