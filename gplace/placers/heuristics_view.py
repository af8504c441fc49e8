"""The scheduling view the placement heuristics share (:mod:`gplace.placers.heuristics`).

Heuristics schedule *ops* (the op graph is acyclic; the graph of units is not: a variable's
colocation group holds both its read at the start of the step and its update at the end) and fix
a unit's device when the first of its ops is placed, so colocation holds by construction.

Edges are aggregated per (producer, consumer) pair: the bytes of all data edges between them, and
a control edge costs latency only. Communication time from device a to device b is
``(latency[a, b] + bytes / bandwidth[a, b]) * rep`` (0 on one device), ``rep`` the times per step
the pair's tensors cross (the simulator's: ``cost.transfer_repeats`` of their outputs, the
successor's runs for a control-only pair; 1 outside TF1 loops); link contention is ignored, as
in HEFT and Baechi's cost model. (Written ``latency * rep + bytes * inv_bw * rep``: with rep 1
that is the arithmetic without repeats, bit for bit.)

Memory (Baechi's m-* heuristics, and the learned placer's rollouts): a unit needs the parameter
bytes of its ops plus every output of its ops (``PlacementProblem.activation_share`` of them;
all by default), all the time. It is not a bound either way: in full it overstates activations
(the simulator frees a tensor after its last consumer: 643 MB for the example ResNet against a
65 MB peak on one device; calibrated scales them to that peak), and it leaves
out the copies a device receives from other devices and kernel scratch memory, so a placement
it calls feasible can overflow in the simulator. The simulator's peak decides; this estimate
only steers the search.
"""

from __future__ import annotations

import weakref
from typing import NamedTuple

import numpy as np

from gplace.cost import transfer_repeats
from gplace.problem import PlacementProblem


class OpView(NamedTuple):
    order: np.ndarray       # (ops,) int64 topological order (loop back-edges dropped)
    position: np.ndarray    # (ops,) int64 index of each op in ``order``
    pred_ptr: np.ndarray    # (ops+1,) int64 CSR over aggregated in-edges
    pred_op: np.ndarray     # (pairs,) int64 producer
    pred_bytes: np.ndarray  # (pairs,) float64 bytes (0 for control-only)
    pred_rep: np.ndarray    # (pairs,) float64 crossings per step (module docstring), >= 1
    succ_ptr: np.ndarray    # (ops+1,) int64 CSR over aggregated out-edges
    succ_op: np.ndarray     # (pairs,) int64 consumer
    succ_bytes: np.ndarray  # (pairs,) float64
    succ_rep: np.ndarray    # (pairs,) float64
    latency: np.ndarray     # (D, D) float64 seconds, 0 on the diagonal
    inv_bw: np.ndarray      # (D, D) float64 seconds per byte, 0 on the diagonal
    best: np.ndarray        # (ops,) float64 best-device time
    unit_need: np.ndarray   # (units,) float64 bytes, the static estimate of the module docstring
    capacity: np.ndarray    # (D,) float64 bytes


_VIEWS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def build_view(problem: PlacementProblem) -> OpView:
    """The arrays above, built with numpy (no per-op Python objects) once per problem and
    shared by every heuristic and the rollout's arrays: read them, never write them."""
    view = _VIEWS.get(problem)
    if view is None:
        view = _VIEWS[problem] = _build_view(problem)
    return view


def estimate_binds(problem: PlacementProblem) -> bool:
    """Whether the memory estimate (``OpView.unit_need``) can refuse a unit a device: its total
    is more than the smallest device holds."""
    view = build_view(problem)
    return bool(view.unit_need.sum() > view.capacity.min()) if view.capacity.size else False


def calibrated(problem: PlacementProblem) -> PlacementProblem:
    """The problem with the memory estimate's ``activation_share`` set from one simulation:
    the activation bytes at the peak of the whole graph on one device (the largest-memory
    one-lane device, else the largest) over all its outputs' bytes. Charged in full, outputs
    overstate the peak (the simulator frees a tensor after its last consumer: 643 MB against
    65 MB for the example ResNet), and the list schedulers then send to the CPU what fits on
    the GPUs. A steer, not a bound: the simulator decides what fits."""
    from dataclasses import replace

    from gplace.sim import FastSimulator
    devices = problem.cluster.devices
    memory = np.array([d.memory_bytes for d in devices], np.float64)
    single = [k for k, d in enumerate(devices) if d.lanes == 1] or list(range(len(devices)))
    d = max(single, key=lambda k: memory[k])
    peak = FastSimulator(problem).run(np.full(problem.num_units, d, np.int64)).peak_bytes[d]
    outputs = float(problem.costs.output_bytes.sum())
    activations = max(float(peak) - float(problem.graph.param_bytes.sum()), 0.0)
    share = min(1.0, activations / outputs) if outputs > 0 else 1.0
    return replace(problem, activation_share=share)


def _build_view(problem: PlacementProblem) -> OpView:
    g, n = problem.graph, problem.graph.num_ops
    keep_d, keep_c = ~g.edge_back, ~g.ctrl_back
    src = np.concatenate([g.edge_src[keep_d], g.ctrl_src[keep_c]]).astype(np.int64)
    dst = np.concatenate([g.edge_dst[keep_d], g.ctrl_dst[keep_c]]).astype(np.int64)
    nbytes = np.concatenate([g.edge_bytes[keep_d], np.zeros(int(keep_c.sum()))]).astype(float)
    runs = np.ones(n) if problem.costs.runs is None else problem.costs.runs.astype(float)
    out = g.out_ptr[g.edge_src[keep_d]] + g.edge_src_out[keep_d]
    rep = np.concatenate([transfer_repeats(g, problem.costs.runs)[out],
                          runs[g.ctrl_dst[keep_c]]])
    pairs, inverse = np.unique(src * max(n, 1) + dst, return_inverse=True)
    pair_bytes = np.bincount(inverse, weights=nbytes, minlength=pairs.size)
    pair_rep = np.ones(pairs.size)
    np.maximum.at(pair_rep, inverse, rep)
    p_src, p_dst = pairs // max(n, 1), pairs % max(n, 1)
    order = g.topo_order()
    position = np.empty(n, np.int64)
    position[order] = np.arange(n)
    links = problem.cluster.link_table()
    inv_bw = 1.0 / links.bandwidth   # inf on the diagonal -> 0
    need = problem.graph.param_bytes.astype(float) + \
        problem.activation_share * problem.costs.output_bytes.astype(float)
    return OpView(
        order=order, position=position,
        **_csr("pred", p_dst, p_src, pair_bytes, pair_rep, n),
        **_csr("succ", p_src, p_dst, pair_bytes, pair_rep, n),
        latency=np.asarray(links.latency_s, float), inv_bw=inv_bw,
        best=problem.costs.time_s.min(axis=1) if n else np.zeros(0),
        unit_need=np.bincount(problem.unit_of_op, weights=need, minlength=problem.num_units),
        capacity=np.array([d.memory_bytes for d in problem.cluster.devices], float))


def _csr(prefix: str, keys: np.ndarray, values: np.ndarray, nbytes: np.ndarray,
         rep: np.ndarray, n: int) -> dict:
    order = np.argsort(keys, kind="stable")
    ptr = np.concatenate([[0], np.cumsum(np.bincount(keys, minlength=n))]).astype(np.int64)
    return {f"{prefix}_ptr": ptr, f"{prefix}_op": values[order].astype(np.int64),
            f"{prefix}_bytes": nbytes[order], f"{prefix}_rep": rep[order]}


def data_ready(view: OpView, op: int, finish: np.ndarray, op_dev: np.ndarray) -> np.ndarray:
    """(D,) the time every input of ``op`` can be on each device (its producers are placed)."""
    lo, hi = view.pred_ptr[op], view.pred_ptr[op + 1]
    if lo == hi:
        return np.zeros(view.latency.shape[0])
    p = view.pred_op[lo:hi]
    a = op_dev[p]
    r = view.pred_rep[lo:hi, None]
    arrive = finish[p][:, None] + view.latency[a] * r + view.pred_bytes[lo:hi, None] * view.inv_bw[a] * r
    return arrive.max(axis=0)


def compute_devices(problem: PlacementProblem) -> np.ndarray:
    """Indices of the accelerators (devices whose TF device string is not a CPU); all devices
    when there are none. Hand placements and Baechi's experiments keep the host CPU for ops
    that fit nowhere else."""
    cpu = np.array(["CPU" in d.tf_device.upper() or d.kind.lower() == "cpu"
                    for d in problem.cluster.devices])
    return np.flatnonzero(~cpu) if (~cpu).any() else np.arange(problem.num_devices)


def speed_shares(problem: PlacementProblem, devices: np.ndarray) -> np.ndarray:
    """(len(devices),) fractions of the work each device should get, proportional to its speed
    (1 / its total time for the whole graph, times its lanes' parallelism)."""
    lanes = np.array([problem.cluster.devices[d].lanes for d in devices], float)
    total = problem.costs.time_s[:, devices].sum(axis=0) / lanes
    speed = 1.0 / np.maximum(total, 1e-30)
    return speed / speed.sum()


def cut_by_weight(weights: np.ndarray, shares: np.ndarray) -> np.ndarray:
    """(items,) chunk index of each item of a sequence cut into ``len(shares)`` contiguous
    chunks whose summed weights follow ``shares``; an item goes where its weight's midpoint lies."""
    total = float(weights.sum())
    if total <= 0:
        return np.zeros(weights.size, np.int64)
    mid = np.cumsum(weights) - weights / 2
    cuts = np.cumsum(shares)[:-1] * total
    return np.searchsorted(cuts, mid, side="right").astype(np.int64)


def units_by_majority(problem: PlacementProblem, op_dev: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """(units,) the device holding the largest share of each unit's ``weight`` (op count breaks
    ties among zero-weight ops, then the lower device index)."""
    votes = np.zeros((problem.num_units, problem.num_devices))
    tiny = 1e-9 * (float(weight.max()) if weight.size else 0.0) + 1e-30
    np.add.at(votes, (problem.unit_of_op, op_dev), weight + tiny)
    return votes.argmax(axis=1).astype(np.int64)


def most_free(used: np.ndarray, capacity: np.ndarray, devices: np.ndarray) -> int:
    """The device of ``devices`` with the most free memory (the fallback when nothing fits)."""
    free = capacity[devices] - used[devices]
    return int(devices[int(np.argmax(free))])
