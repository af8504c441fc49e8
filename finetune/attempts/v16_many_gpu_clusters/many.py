"""v16 experiment: one more random cluster per training graph with 6-8 GPUs (1 or 2 kinds, as
random_cluster draws them), besides round 2c's. Wraps `gplace pretrain` or `pretrain.experts`:
    PYTHONPATH=. python finetune/attempts/v16_many_gpu_clusters/many.py experts ARGS...
    PYTHONPATH=. python finetune/attempts/v16_many_gpu_clusters/many.py pretrain ARGS..."""
import sys
from dataclasses import replace
import gplace.gnn.pretrain as P
import gplace.gnn.random_clusters as RC
from gplace.cluster import Cluster

_specs, _cluster_of = P.problem_specs, P.cluster_of


def many_gpu_cluster(seed: int) -> Cluster:
    """random_cluster's draw with 6-8 GPUs, named apart (the experts' cache keys hash it)."""
    return replace(RC.random_cluster(seed, min_gpus=6), name=f"many-{seed}",
                   description="random pretraining cluster, 6-8 GPUs")


def problem_specs(cfg, split):
    specs = _specs(cfg, split)
    if split != "train":
        return specs
    entries = [e for e in P.list_corpus(cfg.corpus) if e.split == split]
    return specs + [(e, f"many-{5_000_000 + cfg.seed * 10_000 + i * 10}")
                    for i, e in enumerate(entries)]


def cluster_of(spec):
    if isinstance(spec, str) and spec.startswith("many-"):
        return many_gpu_cluster(int(spec[5:]))
    return _cluster_of(spec)


P.problem_specs, P.cluster_of = problem_specs, cluster_of
if sys.argv[1] == "experts":
    from pretrain.experts import main
    sys.exit(main(sys.argv[2:]))
from gplace.cli import main
sys.exit(main(sys.argv[1:]))
