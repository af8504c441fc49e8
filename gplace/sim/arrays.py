"""SimArrays: the flat arrays the compiled simulator reads, built once per problem.

Ops are renumbered by topological rank (op ``r`` of the arrays is ``op_of_rank[r]`` of the
graph), and their outputs follow in that order, so that the event loop, which takes ops roughly
in rank order, walks these arrays nearly in sequence rather than at random (10,000-op graphs no
longer fit in L2). ``out_key`` keeps each output's graph id: transfers are ordered by it, as in
the reference.

CSR layouts (FlexFlow's advice: build the task arrays apart from the hot loop):
``out_ptr`` op -> its outputs; ``cons_ptr``/``cons_op`` output -> consuming ops (one per forward
data edge); ``ctrl_ptr``/``ctrl_op`` op -> control successors; ``in_ptr``/``in_out`` op -> the
outputs it reads (for freeing memory). Loop back-edges are dropped, as in ``topo_order``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from gplace.problem import PlacementProblem


class SimArrays(NamedTuple):
    num_ops: int
    num_devices: int
    op_of_rank: np.ndarray   # (ops,) int64: graph op id of op r (ops below are by rank)
    cost: np.ndarray         # (ops, devices) float64 seconds
    temp: np.ndarray         # (ops, devices) int64 scratch bytes
    param_bytes: np.ndarray  # (ops,) int64
    out_ptr: np.ndarray      # (ops+1,) int64; outputs numbered in rank order
    out_owner: np.ndarray    # (outputs,) int64: op (rank) of each output
    out_key: np.ndarray      # (outputs,) int64: graph output id (OpGraph.out_ptr numbering)
    out_of_key: np.ndarray   # (outputs,) int64: inverse of out_key
    out_bytes: np.ndarray    # (outputs,) int64
    cons_ptr: np.ndarray     # (outputs+1,) int64
    cons_op: np.ndarray      # (forward data edges,) int64
    ctrl_ptr: np.ndarray     # (ops+1,) int64
    ctrl_op: np.ndarray      # (forward control edges,) int64
    in_ptr: np.ndarray       # (ops+1,) int64
    in_out: np.ndarray       # (forward data edges,) int64
    indeg: np.ndarray        # (ops,) int64: forward data + control in-edges
    lane_ptr: np.ndarray     # (devices+1,) int64: lane slots of each device
    channel: np.ndarray      # (devices, devices) int64
    bandwidth: np.ndarray    # (devices, devices) float64
    latency: np.ndarray      # (devices, devices) float64
    num_channels: int
    capacity: np.ndarray     # (devices,) int64


def _csr(keys: np.ndarray, values: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Groups ``values`` by ``keys`` (stable, so edge order is kept within a group)."""
    order = np.argsort(keys, kind="stable")
    ptr = np.concatenate([[0], np.cumsum(np.bincount(keys, minlength=size))]).astype(np.int64)
    return ptr, values[order].astype(np.int64)


def build_arrays(problem: PlacementProblem) -> SimArrays:
    g, cluster = problem.graph, problem.cluster
    n, n_out = g.num_ops, int(g.out_ptr[-1])
    order = g.topo_order().astype(np.int64)
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    counts = np.diff(g.out_ptr).astype(np.int64)[order]
    out_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    out_owner = np.repeat(np.arange(n, dtype=np.int64), counts)
    out_key = (g.out_ptr[order][out_owner] + np.arange(n_out) - out_ptr[out_owner]).astype(np.int64)
    out_of_key = np.empty(n_out, np.int64)
    out_of_key[out_key] = np.arange(n_out)
    fwd = ~g.edge_back
    src, dst = rank[g.edge_src[fwd]], rank[g.edge_dst[fwd]]
    out_id = out_of_key[g.out_ptr[g.edge_src[fwd]] + g.edge_src_out[fwd]]
    keep_c = ~g.ctrl_back
    ctrl_src, ctrl_dst = rank[g.ctrl_src[keep_c]], rank[g.ctrl_dst[keep_c]]
    cons_ptr, cons_op = _csr(out_id, dst, n_out)
    ctrl_ptr, ctrl_op = _csr(ctrl_src, ctrl_dst, n)
    in_ptr, in_out = _csr(dst, out_id, n)
    indeg = np.bincount(dst, minlength=n) + np.bincount(ctrl_dst, minlength=n)
    lanes = np.array([d.lanes for d in cluster.devices], np.int64)
    links = cluster.link_table()
    return SimArrays(
        num_ops=n, num_devices=cluster.num_devices, op_of_rank=order,
        cost=np.ascontiguousarray(problem.costs.time_s[order], np.float64),
        temp=np.ascontiguousarray(problem.costs.temp_bytes[order], np.int64),
        param_bytes=g.param_bytes[order].astype(np.int64), out_ptr=out_ptr,
        out_owner=out_owner, out_key=out_key, out_of_key=out_of_key,
        out_bytes=g.out_bytes[out_key].astype(np.int64), cons_ptr=cons_ptr, cons_op=cons_op,
        ctrl_ptr=ctrl_ptr, ctrl_op=ctrl_op, in_ptr=in_ptr, in_out=in_out,
        indeg=indeg.astype(np.int64),
        lane_ptr=np.concatenate([[0], np.cumsum(lanes)]).astype(np.int64),
        channel=links.channel, bandwidth=links.bandwidth, latency=links.latency_s,
        num_channels=links.num_channels,
        capacity=np.array([d.memory_bytes for d in cluster.devices], np.int64))
