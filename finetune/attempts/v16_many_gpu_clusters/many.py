"""v16 experiment: one more random cluster per training graph with 6-8 GPUs (1 or 2 kinds, as
random_cluster draws them), besides round 2c's. Wraps `gplace pretrain` or `pretrain.experts`:
    PYTHONPATH=. python finetune/attempts/v16_many_gpu_clusters/many.py experts ARGS...
    PYTHONPATH=. python finetune/attempts/v16_many_gpu_clusters/many.py pretrain ARGS..."""
import sys
from dataclasses import replace
import numpy as np
import gplace.gnn.pretrain as P
import gplace.gnn.random_clusters as RC
from gplace.cluster import Cluster, Device, Link

_specs, _cluster_of = P.problem_specs, P.cluster_of


def many_gpu_cluster(seed: int) -> Cluster:
    rng = np.random.default_rng(seed)
    cpus, gpus = RC._templates()
    n_gpu = int(rng.integers(6, 9))
    has_cpu = rng.random() < 0.8
    kinds = rng.choice(len(gpus), size=1 + int(rng.random() < 0.4), replace=False)
    devices = []
    if has_cpu:
        devices.append(replace(cpus[int(rng.integers(len(cpus)))], name="cpu",
                               tf_device="/job:localhost/replica:0/task:0/device:CPU:0"))
    scale = {int(k): float(np.exp(rng.uniform(np.log(0.5), np.log(2.0)))) for k in kinds}
    for i in range(n_gpu):
        k = int(kinds[i * len(kinds) // n_gpu])
        t = gpus[k]
        devices.append(replace(t, name=f"gpu{i}",
                               tf_device=f"/job:localhost/replica:0/task:0/device:GPU:{i}",
                               peak_flops=t.peak_flops * scale[k],
                               mem_bandwidth=t.mem_bandwidth * scale[k]))
    default = Link((), float(rng.uniform(6e9, 16e9)), float(rng.uniform(5e-6, 2e-5)))
    return Cluster(f"many-{seed}", tuple(devices), RC._random_links(devices, rng), default,
                   "random pretraining cluster, 6-8 GPUs")


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
