"""SimArrays: the flat arrays the compiled simulator reads, built once per problem.

Ops are renumbered (op ``i`` of the arrays is ``op_of_id[i]`` of the graph) by topological rank,
and their outputs follow in that order. ``op_key`` keeps each op's topological rank (its number:
the event loop relies on it) and ``out_key`` each output's graph id: the event loop orders ties
by them, as the reference does. (Numbering by earliest start instead, so that the loop would
walk the arrays more in sequence, measured no faster on the 10,000-op benchmark graph: 4.3
against 4.5 ms per placement, best of 6 batches of 20, within the noise of a shared machine.)

CSR layouts (FlexFlow's advice: build the task arrays apart from the hot loop):
``out_ptr`` op -> its outputs; ``cons_ptr``/``cons_op`` output -> consuming ops (one per forward
data edge); ``ctrl_ptr``/``ctrl_op`` op -> control successors. Loop back-edges are dropped, as
in ``topo_order``.

Indices are 32-bit (half the cache footprint of int64; graphs stay far below 2^31 ops, outputs
and edges), byte counts int64, times float64. Those the event loop indexes with most (op and
output pointers, edges' ends, devices, a transfer's output and device) are uint32: numba
checks a signed index for a negative value (Python's wrap-around) on every access, not an
unsigned one (one core on the 10,000-op benchmark graph: 1428 -> 1282 us CPU per placement).
Arithmetic on them stays in int64 (uint32 with int64 gives int64); a range() over them
counts in uint64, which only ever indexes (numba mixes uint64 with int64 into float64).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from gplace.cost import transfer_repeats
from gplace.problem import PlacementProblem


class SimArrays(NamedTuple):
    num_ops: int
    num_devices: int
    op_of_id: np.ndarray     # (ops,) int32: graph op id of op i (ops below are by this id)
    op_key: np.ndarray       # (ops,) int32: topological rank (the event loop's tie-break)
    sources: np.ndarray      # (sources,) int32: ops without inputs, by op_key
    cost: np.ndarray         # (ops, devices) float64 seconds
    temp: np.ndarray         # (ops, devices) int64 scratch bytes
    param_bytes: np.ndarray  # (ops,) int64
    param_ops: np.ndarray    # (ops with parameters,) uint32
    out_ptr: np.ndarray      # (ops+1,) uint32; outputs numbered in op order
    out_owner: np.ndarray    # (outputs,) uint32: op of each output
    out_key: np.ndarray      # (outputs,) int32: graph output id (OpGraph.out_ptr numbering)
    out_bytes: np.ndarray    # (outputs,) int64
    out_total: np.ndarray    # (ops,) int64: bytes of all outputs of the op
    cons_ptr: np.ndarray     # (outputs+1,) uint32
    cons_op: np.ndarray      # (forward data edges,) uint32
    cons_out: np.ndarray     # (forward data edges,) uint32: the output each edge reads
    ctrl_ptr: np.ndarray     # (ops+1,) uint32
    ctrl_op: np.ndarray      # (forward control edges,) uint32
    indeg: np.ndarray        # (ops,) int32: forward data + control in-edges
    lane_ptr: np.ndarray     # (devices+1,) uint32: lane slots of each device
    channel: np.ndarray      # (devices, devices) int32
    bandwidth: np.ndarray    # (devices, devices) float64
    latency: np.ndarray      # (devices, devices) float64
    num_channels: int
    capacity: np.ndarray     # (devices,) int64
    eager: np.ndarray        # (channels,) bool: fed by one device of one lane (loop.run_eager)
    any_temp: bool           # some op has scratch bytes on some device (memory.events)
    recv_cpu: np.ndarray     # (devices, devices) float64: fixed receive CPU of a transfer
    recv_cpu_per_byte: np.ndarray  # (devices, devices) float64
    any_recv: bool           # some link charges receive CPU (receive tasks: loop.run only)
    out_repeat: np.ndarray   # (outputs,) float64: sends per step of a crossing output (its
    #                          consumers' TF1 loop iterations; cost.transfer_repeats), 1 outside
    #                          loops: a transfer's time, latency and receive CPU are this many
    op_runs: np.ndarray      # (ops,) float64: executions per step; a crossing control edge
    #                          pays its latency once per run of its successor


def _csr(keys: np.ndarray, values: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Groups ``values`` by ``keys`` (stable, so edge order is kept within a group)."""
    order = np.argsort(keys, kind="stable")
    ptr = np.concatenate([[0], np.cumsum(np.bincount(keys, minlength=size))]).astype(np.int32)
    return ptr, values[order].astype(np.int32)


def _op_order(problem: PlacementProblem) -> tuple[np.ndarray, np.ndarray]:
    """(graph op of each id, topological rank of each graph op)."""
    topo = problem.graph.topo_order().astype(np.int64)
    rank = np.empty(problem.graph.num_ops, np.int64)
    rank[topo] = np.arange(problem.graph.num_ops)
    return topo, rank


def build_arrays(problem: PlacementProblem) -> SimArrays:
    g, cluster = problem.graph, problem.cluster
    n, n_out = g.num_ops, int(g.out_ptr[-1])
    order, rank = _op_order(problem)
    new_id = np.empty(n, np.int64)
    new_id[order] = np.arange(n)
    counts = np.diff(g.out_ptr)[order]
    out_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    out_owner = np.repeat(np.arange(n, dtype=np.int32), counts)
    out_key = g.out_ptr[order][out_owner] + np.arange(n_out) - out_ptr[out_owner]
    out_of_key = np.empty(n_out, np.int64)
    out_of_key[out_key] = np.arange(n_out)
    fwd = ~g.edge_back
    dst = new_id[g.edge_dst[fwd]]
    out_id = out_of_key[g.out_ptr[g.edge_src[fwd]] + g.edge_src_out[fwd]]
    keep_c = ~g.ctrl_back
    ctrl_src, ctrl_dst = new_id[g.ctrl_src[keep_c]], new_id[g.ctrl_dst[keep_c]]
    cons_ptr, cons_op = _csr(out_id, dst, n_out)
    ctrl_ptr, ctrl_op = _csr(ctrl_src, ctrl_dst, n)
    indeg = np.bincount(dst, minlength=n) + np.bincount(ctrl_dst, minlength=n)
    key = rank[order]  # 0, 1, 2, ...: loop.run and run_eager use an op's number as its key
    assert (key == np.arange(n)).all()
    sources = np.flatnonzero(indeg == 0)
    out_bytes = g.out_bytes[out_key].astype(np.int64)
    lanes = np.array([d.lanes for d in cluster.devices], np.int32)
    links = cluster.link_table()
    runs = problem.costs.runs
    return SimArrays(
        num_ops=n, num_devices=cluster.num_devices, op_of_id=order.astype(np.int32),
        op_key=key.astype(np.int32), sources=sources[np.argsort(key[sources])].astype(np.int32),
        cost=np.ascontiguousarray(problem.costs.time_s[order], np.float64),
        temp=np.ascontiguousarray(problem.costs.temp_bytes[order], np.int64),
        param_bytes=g.param_bytes[order].astype(np.int64),
        param_ops=np.flatnonzero(g.param_bytes[order]).astype(np.uint32),
        out_ptr=out_ptr.astype(np.uint32),
        out_owner=out_owner.astype(np.uint32), out_key=out_key.astype(np.int32),
        out_bytes=out_bytes,
        out_total=np.diff(np.concatenate([[0], np.cumsum(out_bytes)])[out_ptr]).astype(np.int64),
        cons_ptr=cons_ptr.astype(np.uint32), cons_op=cons_op.astype(np.uint32),
        cons_out=np.repeat(np.arange(n_out, dtype=np.uint32), np.diff(cons_ptr)),
        ctrl_ptr=ctrl_ptr.astype(np.uint32), ctrl_op=ctrl_op.astype(np.uint32),
        indeg=indeg.astype(np.int32),
        lane_ptr=np.concatenate([[0], np.cumsum(lanes)]).astype(np.uint32),
        channel=links.channel.astype(np.int32), bandwidth=links.bandwidth,
        latency=links.latency_s, num_channels=links.num_channels,
        capacity=np.array([d.memory_bytes for d in cluster.devices], np.int64),
        eager=_eager_channels(links.channel, lanes, links.num_channels),
        any_temp=bool(problem.costs.temp_bytes.any()),
        recv_cpu=links.recv_cpu_s, recv_cpu_per_byte=links.recv_cpu_s_per_byte,
        any_recv=bool(links.recv_cpu_s.any() or links.recv_cpu_s_per_byte.any()),
        out_repeat=transfer_repeats(g, runs)[out_key],
        op_runs=(np.ones(n) if runs is None else runs[order]).astype(np.float64))


def _eager_channels(channel: np.ndarray, lanes: np.ndarray, channels: int) -> np.ndarray:
    """Channels whose transfers all come from one device of one lane: that device's ops end
    in the order they start, so its transfers come in the order the channel sends them."""
    eager = np.zeros(channels, np.bool_)
    for ch in range(channels):
        sources = np.unique(np.nonzero(channel == ch)[0])
        eager[ch] = sources.size == 1 and lanes[sources[0]] == 1
    return eager
