"""Features of a placement problem for the GNN policy (gplace.gnn.policy).

Everything is relative or log-scaled so that one network reads graphs of any size and clusters
of any number and kind of devices:

* units (colocation groups, possibly coarsened): op-type histogram (for an embedding bag), log
  FLOPs, log output and parameter bytes, log op count, share of the step's best-device work,
  mean topological depth, log in/out degree, gradient and optimizer-update fractions;
* unit-graph edges, both directions: log bytes, control-only flag, direction flag;
* devices: speed, bandwidth and memory relative to the cluster's best, lanes, link bandwidth and
  latency to the others, and the device's position among its interchangeable twins (identical
  GPUs would otherwise get identical logits, and no placement could put consecutive stages on
  different ones: the position lets the policy say "early units on the first GPU");
* (unit, device) pairs: the unit's time on that device against its best device, its share of
  the step, its memory against the device's capacity, whether the device is one of its
  fastest, and the lookahead: what the unit's tensors would take to cross to and from its
  neighbours in the unit graph if each neighbour sat on its own fastest device
  (:func:`neighbour_transfer_s`), on the scale of the scheduler's finish-time features
  (gplace.gnn.schedule). A list scheduler sees only the units placed before; the lookahead
  lets a unit that finishes first on one device (a table whose ops run no kernel) see that
  its readers will want it elsewhere.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from gplace.problem import PlacementProblem

# The op types that make up most of the corpus; every other type shares index 0.
OP_VOCAB = (
    "<other>", "Const", "Identity", "Reshape", "Mul", "AddV2", "Add", "Sub", "RealDiv", "Sum",
    "Mean", "Tile", "AddN", "NoOp", "VarHandleOp", "ReadVariableOp", "AssignVariableOp",
    "ResourceApplyMomentum", "ResourceApplyAdam", "ResourceApplyGradientDescent", "Conv2D",
    "Conv2DBackpropInput", "Conv2DBackpropFilter", "DepthwiseConv2dNative",
    "DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter", "MatMul",
    "BatchMatMulV2", "Einsum", "BiasAdd", "BiasAddGrad", "Relu", "ReluGrad", "Relu6",
    "Relu6Grad", "Sigmoid", "SigmoidGrad", "Tanh", "TanhGrad", "Softmax", "LogSoftmax",
    "SparseSoftmaxCrossEntropyWithLogits", "FusedBatchNormV3", "FusedBatchNormGradV3",
    "MaxPool", "MaxPoolGrad", "AvgPool", "AvgPoolGrad", "ConcatV2", "Split", "SplitV", "Slice",
    "StridedSlice", "StridedSliceGrad", "Pad", "Transpose", "GatherV2", "ResourceGather",
    "UnsortedSegmentSum", "Square", "Sqrt", "Rsqrt", "RsqrtGrad", "SquaredDifference", "Cast",
    "Shape", "Fill", "ZerosLike", "OnesLike", "Squeeze", "ExpandDims", "Pack", "Unpack",
    "BroadcastTo", "BroadcastGradientArgs", "Maximum", "Minimum", "Neg", "Exp", "Log",
    "Enter", "Exit", "Merge", "Switch", "NextIteration", "LoopCond", "StackV2", "StackPushV2",
    "StackPopV2", "TensorArrayV3", "TensorArrayReadV3", "TensorArrayWriteV3", "Select",
    "SelectV2", "RandomStandardNormal", "RandomUniform", "RandomUniformInt", "Erf", "Gelu",
)
VOCAB_INDEX = {t: i for i, t in enumerate(OP_VOCAB)}
UNIT_FEATURES, EDGE_FEATURES, DEVICE_FEATURES, PAIR_FEATURES = 11, 3, 9, 5
LOOKAHEAD = 4  # the pair feature the policy's prior weighs (GNNPolicy.look0)


class ProblemFeatures(NamedTuple):
    unit_x: np.ndarray       # (units, UNIT_FEATURES) float32
    unit_types: np.ndarray   # (units, len(OP_VOCAB)) float32: fraction of the unit's ops per type
    edge_index: np.ndarray   # (2, edges) int64: unit graph, both directions
    edge_attr: np.ndarray    # (edges, EDGE_FEATURES) float32
    device_x: np.ndarray     # (devices, DEVICE_FEATURES) float32
    pair_x: np.ndarray       # (units, devices, PAIR_FEATURES) float32


def _log(x, scale: float) -> np.ndarray:
    return (np.log10(1.0 + np.asarray(x, np.float64)) / scale).astype(np.float32)


def op_depth(problem: PlacementProblem) -> np.ndarray:
    """(ops,) longest-path depth in the acyclic view, divided by the maximum (0..1)."""
    g = problem.graph
    keep, keep_c = ~g.edge_back, ~g.ctrl_back
    src = np.concatenate([g.edge_src[keep], g.ctrl_src[keep_c]])
    dst = np.concatenate([g.edge_dst[keep], g.ctrl_dst[keep_c]])
    order = g.topo_order()
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    by_src = np.argsort(rank[src], kind="stable")  # relax edges in topological order of sources
    depth = np.zeros(g.num_ops)
    for s, d in zip(src[by_src].tolist(), dst[by_src].tolist()):
        if depth[s] + 1 > depth[d]:
            depth[d] = depth[s] + 1
    return depth / max(depth.max(), 1.0)


def unit_features(problem: PlacementProblem) -> tuple[np.ndarray, np.ndarray]:
    g, u, n = problem.graph, problem.unit_of_op, problem.num_units
    best = problem.costs.time_s.min(axis=1)
    total_best = max(best.sum(), 1e-12)

    def per_unit(values) -> np.ndarray:
        return np.bincount(u, weights=np.asarray(values, np.float64), minlength=n)
    ops = per_unit(np.ones(g.num_ops))
    unit_src, unit_dst = u[g.edge_src], u[g.edge_dst]
    cross = unit_src != unit_dst
    indeg = np.bincount(unit_dst[cross], minlength=n)
    outdeg = np.bincount(unit_src[cross], minlength=n)
    names = g.names.astype(str)
    grad = np.char.startswith(names, "gradients/")
    apply = np.char.find(g.op_types.astype(str), "Apply") >= 0
    x = np.stack([
        _log(per_unit(g.flops), 12), _log(per_unit(g.output_bytes), 10),
        _log(per_unit(g.param_bytes), 10), _log(ops, 4),
        (per_unit(best) / total_best).astype(np.float32),
        (per_unit(op_depth(problem)) / ops).astype(np.float32),
        _log(indeg, 3), _log(outdeg, 3),
        (per_unit(grad) / ops).astype(np.float32), (per_unit(apply) / ops).astype(np.float32),
        _log(per_unit(best) * 1e6, 6),
    ], axis=1)
    type_ids = np.array([VOCAB_INDEX.get(t, 0) for t in g.op_types.tolist()], np.int64)
    types = np.zeros((n, len(OP_VOCAB)), np.float32)
    np.add.at(types, (u, type_ids), 1.0)
    return x, types / ops[:, None].astype(np.float32)


def unit_edges(problem: PlacementProblem) -> tuple[np.ndarray, np.ndarray]:
    """The unit graph (PlacementProblem.unit_traffic) in both directions: log bytes, control
    only, forward."""
    t = problem.unit_traffic()
    fwd = np.stack([_log(t.nbytes, 10), (~t.data).astype(np.float32),
                    np.ones(t.src.size, np.float32)], 1)
    bwd = fwd.copy()
    bwd[:, 2] = 0.0
    edge_index = np.concatenate([np.stack([t.src, t.dst]), np.stack([t.dst, t.src])],
                                axis=1).astype(np.int64)
    return edge_index, np.concatenate([fwd, bwd]).astype(np.float32)


def device_features(problem: PlacementProblem) -> np.ndarray:
    devices = problem.cluster.devices
    peak = np.array([d.peak_flops for d in devices])
    bw = np.array([d.mem_bandwidth for d in devices])
    mem = np.array([d.memory_bytes for d in devices], np.float64)
    lanes = np.array([d.lanes for d in devices], np.float64)
    links = problem.cluster.link_table()
    off = ~np.eye(len(devices), dtype=bool)
    link_bw = np.where(off, links.bandwidth, np.nan)
    link_lat = np.where(off, links.latency_s, np.nan)
    mean_bw = np.nan_to_num(np.nanmean(link_bw, 1), nan=0.0) if len(devices) > 1 else np.zeros(1)
    mean_lat = np.nan_to_num(np.nanmean(link_lat, 1), nan=0.0) if len(devices) > 1 else np.zeros(1)
    position, twins = twin_positions(problem)
    return np.stack([
        peak / peak.max(), bw / bw.max(), mem / mem.max(), np.log2(lanes) / 4,
        _log(mean_bw, 11), _log(mean_lat * 1e6, 3), _log(peak, 14),
        position / np.maximum(twins - 1, 1), np.log2(twins) / 3,
    ], axis=1).astype(np.float32)


def twin_groups(problem: PlacementProblem) -> np.ndarray:
    """(devices,) id of each device's interchangeable group: equal datasheet figures."""
    keys = [(d.kind, d.peak_flops, d.mem_bandwidth, d.memory_bytes, d.lanes, d.launch_overhead_s,
             d.half_flops) for d in problem.cluster.devices]
    first = {k: i for i, k in reversed(list(enumerate(keys)))}
    return np.array([first[k] for k in keys], np.int64)


def twin_positions(problem: PlacementProblem) -> tuple[np.ndarray, np.ndarray]:
    """(position of each device among its twins, size of its twin group)."""
    groups = twin_groups(problem)
    position = np.array([int((groups[:d] == groups[d]).sum()) for d in range(len(groups))])
    return position.astype(np.float64), np.bincount(groups)[groups].astype(np.float64)


def pair_features(problem: PlacementProblem) -> np.ndarray:
    g, u, n = problem.graph, problem.unit_of_op, problem.num_units
    t = unit_device_times(problem)                                        # (units, devices)
    best = t.min(axis=1, keepdims=True)
    total = max(problem.costs.time_s.min(axis=1).sum(), 1e-12)
    need = np.bincount(u, weights=(g.param_bytes + g.output_bytes).astype(float), minlength=n)
    cap = np.array([d.memory_bytes for d in problem.cluster.devices], np.float64)
    return np.stack([
        np.log2(np.maximum(t, 1e-15) / np.maximum(best, 1e-15)) / 8, t / total,
        np.minimum(need[:, None] / cap[None, :], 4.0), (t <= best * (1 + 1e-9)).astype(float),
        lookahead(problem),
    ], axis=2).astype(np.float32)


def unit_device_times(problem: PlacementProblem) -> np.ndarray:
    """(units, devices) seconds: each unit's summed op time on each device."""
    u, n = problem.unit_of_op, problem.num_units
    return np.stack([np.bincount(u, weights=problem.costs.time_s[:, d], minlength=n)
                     for d in range(problem.num_devices)], axis=1).reshape(n, -1)


def neighbour_transfer_s(problem: PlacementProblem) -> np.ndarray:
    """(units, devices) seconds: for unit u on device d, the sum over its neighbours v in the
    unit graph (both directions, data edges) of the cheapest transfer of their bytes between d
    and any of v's fastest devices (latency plus bytes over the link's bandwidth; nothing on
    the same device). Identical devices and ops that run no kernel tie: every tied device is
    a candidate, so a neighbour is never pinned to the first of its twins."""
    nd = problem.num_devices
    t = unit_device_times(problem)
    if t.size == 0 or nd < 2:
        return np.zeros_like(t)
    fastest = t <= t.min(axis=1, keepdims=True) * (1 + 1e-9)                 # (units, devices)
    links = problem.cluster.link_table()
    traffic = problem.unit_traffic()
    keep = traffic.data & (traffic.nbytes > 0)
    a = np.concatenate([traffic.src[keep], traffic.dst[keep]])
    b = np.concatenate([traffic.dst[keep], traffic.src[keep]])
    nbytes = np.concatenate([traffic.nbytes[keep]] * 2)
    inv_bw = np.where(np.isfinite(links.bandwidth), 1.0 / links.bandwidth, 0.0)
    cost = np.zeros((a.size, nd))
    for d in range(nd):  # (pairs, devices of the neighbour) for unit a on device d
        move = links.latency_s[d][None, :] + nbytes[:, None] * inv_bw[d][None, :]
        move[:, d] = 0.0
        cost[:, d] = np.where(fastest[b], move, np.inf).min(axis=1)
    out = np.zeros_like(t)
    np.add.at(out, a, cost)
    return out


def lookahead(problem: PlacementProblem, tau: float | None = None) -> np.ndarray:
    """(units, devices) float: ``log1p(T / tau)`` of :func:`neighbour_transfer_s` less its
    least over the devices, 0 on the best one; ``tau`` the scheduler's time unit, the mean
    best-device op time (gplace.gnn.schedule.build_sched)."""
    if tau is None:
        best = problem.costs.time_s.min(axis=1) if problem.graph.num_ops else np.ones(1)
        tau = max(float(best.mean()), 1e-12)
    x = np.log1p(neighbour_transfer_s(problem) / tau)
    return x - x.min(axis=1, keepdims=True) if x.size else x


def problem_features(problem: PlacementProblem) -> ProblemFeatures:
    unit_x, unit_types = unit_features(problem)
    edge_index, edge_attr = unit_edges(problem)
    return ProblemFeatures(unit_x, unit_types, edge_index, edge_attr,
                           device_features(problem), pair_features(problem))
