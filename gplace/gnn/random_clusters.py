"""Random clusters for pretraining, so that a policy meets many device sets (GiPH, MLSys 2023,
trains on random device networks for the same reason).

A random cluster has 2 to 9 devices: usually a host CPU, and GPUs of one or two kinds drawn
from the presets' datasheet devices (their throughput scaled by 0.5-2x), joined by PCIe-class
links of random bandwidth, sometimes NVLink-class pairs or a shared bus. The devices of
``hdp-8gpu`` (K40s) are left out, so that preset stays unseen in pretraining.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gplace.cluster import Cluster, Device, Link, load_cluster

TEMPLATE_PRESETS = ("post-4gpu", "hetero", "nvlink-8gpu")


def _templates() -> tuple[list[Device], list[Device]]:
    """(host CPUs, accelerators) of the template presets, one per kind."""
    cpus, gpus = {}, {}
    for name in TEMPLATE_PRESETS:
        for d in load_cluster(name).devices:
            (cpus if "CPU" in d.tf_device.upper() else gpus).setdefault(d.kind, d)
    return list(cpus.values()), list(gpus.values())


def _digits(x: float) -> float:
    """``x`` to 6 significant digits: a draw that ends in ``np.exp`` or a scaled uniform differs
    in its last bits between numpy builds, so every drawn float is rounded to a value that all
    builds agree on (same seed, same cluster, on any machine)."""
    return float(f"{x:.6g}")


def random_cluster(seed: int, min_gpus: int = 1) -> Cluster:
    """A reproducible random cluster (same seed, same cluster, on any machine) with
    ``min_gpus`` to 8 GPUs (the default draws the clusters pretraining has always used)."""
    if not 1 <= min_gpus <= 8:
        raise ValueError(f"min_gpus must be in [1, 8], not {min_gpus}")
    rng = np.random.default_rng(seed)
    cpus, gpus = _templates()
    n_gpu = int(rng.integers(min_gpus, 9))
    has_cpu = n_gpu == 1 or rng.random() < 0.8
    kinds = rng.choice(len(gpus), size=1 + int(rng.random() < 0.4), replace=False)
    devices: list[Device] = []
    if has_cpu:
        devices.append(replace(cpus[int(rng.integers(len(cpus)))], name="cpu",
                               tf_device="/job:localhost/replica:0/task:0/device:CPU:0"))
    scale = {int(k): float(np.exp(rng.uniform(np.log(0.5), np.log(2.0)))) for k in kinds}
    for i in range(n_gpu):
        k = int(kinds[i * len(kinds) // n_gpu])
        t = gpus[k]
        devices.append(replace(
            t, name=f"gpu{i}", tf_device=f"/job:localhost/replica:0/task:0/device:GPU:{i}",
            kind=t.kind, peak_flops=_digits(t.peak_flops * scale[k]),
            mem_bandwidth=_digits(t.mem_bandwidth * scale[k]),
            half_flops=None if t.half_flops is None else _digits(t.half_flops * scale[k])))
    default = Link((), _digits(rng.uniform(6e9, 16e9)), _digits(rng.uniform(5e-6, 2e-5)))
    return Cluster(f"random-{seed}", tuple(devices), _random_links(devices, rng), default,
                   "random pretraining cluster")


def _random_links(devices: list[Device], rng: np.random.Generator) -> tuple[Link, ...]:
    gpus = [d.name for d in devices if d.name.startswith("gpu")]
    links = []
    if len(gpus) >= 2 and rng.random() < 0.4:  # NVLink-class pairs
        for a, b in zip(gpus[0::2], gpus[1::2]):
            links.append(Link((a, b), _digits(rng.uniform(25e9, 150e9)), 5e-6))
    elif len(gpus) >= 2 and rng.random() < 0.3:  # two GPUs on one shared bus (a K80 board)
        links.append(Link((gpus[0], gpus[1]), _digits(rng.uniform(6e9, 12e9)), 1e-5, shared=True))
    return tuple(links)
