"""Fine-tuning settings side by side on the 9 validation fine-tuning cases (xception_b8_96,
gru_lm_2l_h512, wide_deep_8x100k x post-4gpu, hetero, hdp-8gpu), pretrained and untrained, ft N
without heuristic starts: the runner of the attempts/ studies that compare FinetuneConfig
variants. All simulated. A study script names its variants and calls :func:`main`:

    python finetune/attempts/<study>/study.py VARIANTS SEEDS OUT.json [BUDGET [CKPT]]

VARIANTS and SEEDS are comma-separated; OUT.json gains one row per (case, seed, arm, variant)
and is resumed where it stops; CKPT defaults to the shipped policy.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import numpy as np

GRAPHS = ("xception_b8_96", "gru_lm_2l_h512", "wide_deep_8x100k")


def config(fields: dict):
    """FinetuneConfig with ``fields`` replaced (``learn.*`` for its LearnConfig)."""
    from gplace.gnn.config import FinetuneConfig
    base = FinetuneConfig()
    top = {k: v for k, v in fields.items() if not k.startswith("learn.")}
    learn = {k[6:]: v for k, v in fields.items() if k.startswith("learn.")}
    return dataclasses.replace(base, **top, learn=dataclasses.replace(base.learn, **learn))


def main(variants: dict[str, dict], argv: list[str], graphs: tuple[str, ...] = GRAPHS,
         split: str = "validation") -> None:
    import torch
    torch.set_num_threads(1)
    from finetune.study import CLUSTERS, build_case, fresh_network
    from gplace.gnn.corpus import list_corpus
    from gplace.gnn.placer import GNNPlacer, load_policy
    names, seeds = argv[0].split(","), [int(x) for x in argv[1].split(",")]
    out = Path(argv[2])
    budget = int(argv[3]) if len(argv) > 3 else 100
    policy = load_policy(argv[4] if len(argv) > 4 else None)[0]
    done = json.loads(out.read_text()) if out.exists() else []
    have = {(r["graph"], r["cluster"], r["seed"], r["arm"], r["variant"]) for r in done}
    for entry in [e for e in list_corpus("datasets") if e.split == split
                  and e.name in graphs]:
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
                        r = GNNPlacer(seed=seed, policy=net, config=config(variants[name])).place(
                            problem, m, budget)
                        curve = np.minimum(r.history.best_so_far(), r.info["start_step_time_s"])
                        done.append(dict(zip(("graph", "cluster", "seed", "arm", "variant"), key),
                                         ratio=float(curve[-1] / best_h),
                                         zero_shot=float(r.info["zero_shot_step_time_s"] / best_h),
                                         curve=[float(c / best_h) for c in curve],
                                         s=time.perf_counter() - t0))
                        out.write_text(json.dumps(done, indent=0))
                        print({k: v for k, v in done[-1].items() if k != "curve"}, flush=True)
