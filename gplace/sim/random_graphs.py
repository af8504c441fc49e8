"""Seeded random DAGs and clusters: the test bed of the simulators and the speed benchmark.

Graphs have 1-3 outputs per op, random fan-in, duplicate consumers, control edges, TF-loop
back-edges (which the scheduling view drops), colocation groups and op ids in shuffled order,
so that every code path of both simulators is exercised.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gplace.cluster import Cluster, Device, Link
from gplace.graph import OpGraph


@dataclass(frozen=True)
class RandomDagConfig:
    ops: int = 100
    max_fan_in: int = 3         # data inputs per op, 0..max
    window: int = 50            # inputs come from the last `window` ops (locality, like layers)
    control_fraction: float = 0.1  # control edges per op
    back_edges: int = 2         # NextIteration-style back-edges (dropped by the scheduler)
    group_fraction: float = 0.2  # fraction of ops joined to another op's colocation group
    zero_flop_fraction: float = 0.2  # alias ops (Identity, Reshape): no FLOPs


def random_dag(cfg: RandomDagConfig, seed: int) -> OpGraph:
    rng = np.random.default_rng(seed)
    n = cfg.ops
    n_out = rng.integers(1, 4, size=n)
    out_ptr = np.concatenate([[0], np.cumsum(n_out)]).astype(np.int64)
    out_bytes = rng.choice([0, 4, 1 << 10, 1 << 16, 1 << 20, 1 << 22], size=int(out_ptr[-1]))
    src, dst, src_out = [], [], []
    for o in range(1, n):
        for _ in range(rng.integers(0, cfg.max_fan_in + 1)):
            s = int(rng.integers(max(0, o - cfg.window), o))
            src.append(s), dst.append(o), src_out.append(int(rng.integers(0, n_out[s])))
    n_ctrl = int(cfg.control_fraction * n)
    ca = rng.integers(0, n, size=n_ctrl)
    cb = rng.integers(0, n, size=n_ctrl)
    keep = ca != cb
    ctrl_src, ctrl_dst = np.minimum(ca, cb)[keep], np.maximum(ca, cb)[keep]
    back = min(cfg.back_edges, len(src))
    for _ in range(back):  # later -> earlier, marked as a loop back-edge
        a, b = sorted(rng.choice(n, size=2, replace=False).tolist())
        src.append(b), dst.append(a), src_out.append(0)
    edge_back = np.zeros(len(src), bool)
    edge_back[len(src) - back:] = True
    group = np.arange(n)
    for o in np.flatnonzero(rng.random(n) < cfg.group_fraction):
        group[o] = group[int(rng.integers(0, n))]
    # shuffle op ids so that id order is not a topological order
    perm = rng.permutation(n)  # new id of old op
    inv = np.argsort(perm)
    src_a, dst_a = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    flops = rng.choice([0.0, 1e6, 1e8, 1e9, 1e10], size=n)
    flops[rng.random(n) < cfg.zero_flop_fraction] = 0.0
    params = rng.choice([0, 0, 0, 1 << 20, 1 << 24], size=n)
    counts = n_out[inv]
    new_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    new_bytes = np.concatenate([out_bytes[out_ptr[i]:out_ptr[i + 1]] for i in inv]).astype(np.int64)
    edge_bytes = new_bytes[new_ptr[perm[src_a]] + np.asarray(src_out, np.int64)]
    return OpGraph(
        names=np.asarray([f"op{i}" for i in range(n)]), op_types=np.full(n, "Op"),
        devices=np.full(n, ""), flops=flops[inv], param_bytes=params[inv].astype(np.int64),
        group=np.unique(group[inv], return_inverse=True)[1].astype(np.int64),
        out_ptr=new_ptr, out_dtype=np.full(new_bytes.shape[0], "float32"), out_bytes=new_bytes,
        out_rank=np.full(new_bytes.shape[0], -1, np.int64),
        dim_ptr=np.zeros(new_bytes.shape[0] + 1, np.int64), out_dims=np.zeros(0, np.int64),
        edge_src=perm[src_a], edge_dst=perm[dst_a], edge_src_out=np.asarray(src_out, np.int64),
        edge_bytes=edge_bytes, edge_back=edge_back, ctrl_src=perm[ctrl_src],
        ctrl_dst=perm[ctrl_dst], ctrl_back=np.zeros(ctrl_src.shape[0], bool),
        meta={"name": f"random-{n}-{seed}", "source": "synthetic"}).validate()


def random_cluster(devices: int, seed: int, max_lanes: int = 3) -> Cluster:
    """Devices with random lanes and figures; one shared bus and one fast pair link when the
    cluster is big enough. Figures are powers of two so that many times tie exactly."""
    rng = np.random.default_rng(seed)
    devs = tuple(Device(
        name=f"d{i}", tf_device=f"/device:GPU:{i}", kind=f"kind{int(rng.integers(0, 2))}",
        peak_flops=float(2.0 ** rng.integers(38, 44)), mem_bandwidth=float(2.0 ** rng.integers(33, 38)),
        memory_bytes=int(2 ** rng.integers(22, 30)), launch_overhead_s=float(2.0 ** -rng.integers(14, 20)),
        lanes=int(rng.integers(1, max_lanes + 1))) for i in range(devices))
    links = []
    if devices >= 3:
        links.append(Link(("d0", "d1", "d2"), float(2.0 ** 33), 2.0 ** -16, shared=True))
    if devices >= 2:
        links.append(Link(("d0", "d1"), float(2.0 ** 36), 2.0 ** -18))
    return Cluster(f"random-{devices}-{seed}", devs, tuple(links),
                   Link((), float(2.0 ** 34), 2.0 ** -17))
