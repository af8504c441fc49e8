"""Placement heuristics that cut the graph without scheduling it: ``single``, ``chunks``,
``expert`` and Baechi's ``m-topo`` (Jeon et al., "Baechi: fast device placement of machine
learning graphs", SoCC 2020, section 4.1). Rules in :mod:`gplace.placers.heuristics`.
"""

from __future__ import annotations

import time

import numpy as np

from gplace.placers.base import Measurer, PlaceResult, heuristic_result, register
from gplace.placers.heuristics_view import (OpView, build_view, compute_devices, cut_by_weight,
                                            most_free, speed_shares, units_by_majority)
from gplace.problem import PlacementProblem

GRAD_PREFIX = "gradients/"   # tf.gradients names the gradient of op X "gradients/X_grad/..."


@register("single", cheap=True)
class SingleDevice:
    """The fastest single device whose memory fits; else the smallest shortfall (infeasible).
    Every device's one-device placement is measured once (no samples are charged)."""

    def __init__(self, seed: int = 0):
        self.seed = seed  # unused: the heuristic is deterministic

    def place(self, problem: PlacementProblem, measurer: Measurer, budget: int) -> PlaceResult:
        start = time.perf_counter()
        candidates = np.stack([problem.single_device(d) for d in range(problem.num_devices)])
        m = measurer.measure(candidates)
        capacity = np.array([d.memory_bytes for d in problem.cluster.devices])
        shortfall = (np.asarray(m.peak_bytes) - capacity[None, :]).max(axis=1)
        times = np.where(m.feasible, m.step_time_s, np.inf)
        best = int(np.argmin(times)) if np.isfinite(times).any() else int(np.argmin(shortfall))
        names = [d.name for d in problem.cluster.devices]
        return heuristic_result("single", measurer, candidates[best], start, device=names[best],
                                candidates=dict(zip(names, times.tolist())))


@register("chunks", cheap=True)
class Chunks:
    """Cost-balanced topological chunks, one per device, sized by device speed."""

    def __init__(self, seed: int = 0):
        self.seed = seed

    def place(self, problem: PlacementProblem, measurer: Measurer, budget: int) -> PlaceResult:
        start = time.perf_counter()
        view = build_view(problem)
        devices = np.arange(problem.num_devices)
        chunk = cut_by_weight(view.best[view.order], speed_shares(problem, devices))
        op_dev = np.empty(problem.graph.num_ops, np.int64)
        op_dev[view.order] = devices[chunk]
        placement = units_by_majority(problem, op_dev, view.best)
        return heuristic_result("chunks", measurer, placement, start)


@register("m-topo", cheap=True)
class MTopo:
    """Baechi's m-TOPO: ops in topological order fill one accelerator after another up to an
    even share of the total memory need (capped by capacity); a unit that fits no accelerator
    goes to the host CPU, and one that fits nowhere to the device with the most free memory."""

    def __init__(self, seed: int = 0):
        self.seed = seed

    def place(self, problem: PlacementProblem, measurer: Measurer, budget: int) -> PlaceResult:
        start = time.perf_counter()
        view = build_view(problem)
        placement, overflow = m_topo(problem, view)
        return heuristic_result("m-topo", measurer, placement, start, overflow_units=overflow)


def m_topo(problem: PlacementProblem, view: OpView) -> tuple[np.ndarray, int]:
    """(units,) placement and the number of units placed over the memory estimate."""
    gpus = compute_devices(problem)
    others = np.setdiff1d(np.arange(problem.num_devices), gpus)
    share = view.unit_need.sum() / gpus.size
    limit = view.capacity.copy()
    limit[gpus[:-1]] = np.minimum(limit[gpus[:-1]], share)  # the last accelerator takes the rest
    used = np.zeros(problem.num_devices)
    placement = np.full(problem.num_units, -1, np.int64)
    current, overflow = 0, 0
    for op in view.order.tolist():
        u = int(problem.unit_of_op[op])
        if placement[u] >= 0:
            continue
        need = view.unit_need[u]
        while current < gpus.size - 1 and used[gpus[current]] + need > limit[gpus[current]]:
            current += 1
        d = int(gpus[current])
        if used[d] + need > limit[d]:
            d = _first_fit(need, used, view.capacity, others)
            if d < 0:
                d, overflow = most_free(used, view.capacity, np.arange(problem.num_devices)), overflow + 1
        placement[u] = d
        used[d] += need
    return placement, overflow


def _first_fit(need: float, used: np.ndarray, capacity: np.ndarray, devices: np.ndarray) -> int:
    fits = [int(d) for d in devices if used[d] + need <= capacity[d]]
    return fits[0] if fits else -1


@register("expert", cheap=True)
class Expert:
    """A hand placement: forward layers cut into contiguous pipeline stages of equal cost over
    the accelerators, each layer's gradient ops on its layer's device."""

    def __init__(self, seed: int = 0):
        self.seed = seed

    def place(self, problem: PlacementProblem, measurer: Measurer, budget: int) -> PlaceResult:
        start = time.perf_counter()
        view = build_view(problem)
        anchor = forward_anchor(problem.graph.names.tolist())
        op_dev = expert_op_devices(problem, view, anchor)
        placement = units_by_majority(problem, op_dev, view.best)
        placement, on_cpu = _spill_to_host(problem, view, placement)
        matched = int(((anchor >= 0) & (anchor != np.arange(anchor.size))).sum())
        return heuristic_result("expert", measurer, placement, start, gradient_ops_matched=matched,
                                units_on_host=on_cpu)


def forward_anchor(names: list[str]) -> np.ndarray:
    """(ops,) the forward op each op belongs with: itself for a forward op; X for an op named
    ``gradients/.../X_grad/...`` (the shortest such X that is an op); -1 for other gradient ops."""
    index = {n: i for i, n in enumerate(names)}
    anchor = np.arange(len(names), dtype=np.int64)
    for i, name in enumerate(names):
        if not name.startswith(GRAD_PREFIX):
            continue
        parts = name[len(GRAD_PREFIX):].split("/")
        anchor[i] = -1
        for k in range(1, len(parts) + 1):
            head = "/".join(parts[:k])
            if head.endswith("_grad") and head[:-5] in index:
                anchor[i] = index[head[:-5]]
                break
    return anchor


def expert_op_devices(problem: PlacementProblem, view: OpView, anchor: np.ndarray) -> np.ndarray:
    """(ops,) device per op: layers (forward ops with an input) are cut in topological order by
    their cost plus their gradients' cost; every other op joins a neighbour (see _join)."""
    n = problem.graph.num_ops
    gpus = compute_devices(problem)
    has_input = np.diff(view.pred_ptr) > 0
    own = anchor == np.arange(n)
    layer = own & has_input
    weight = view.best.copy()
    grads = (anchor >= 0) & ~own
    np.add.at(weight, anchor[grads], view.best[grads])
    layers = view.order[layer[view.order]]
    op_dev = np.full(n, -1, np.int64)
    op_dev[layers] = gpus[cut_by_weight(weight[layers], speed_shares(problem, gpus))]
    follows = grads & layer[np.maximum(anchor, 0)]
    op_dev[follows] = op_dev[anchor[follows]]
    return _join(view, op_dev, int(gpus[0]))


def _join(view: OpView, op_dev: np.ndarray, default: int) -> np.ndarray:
    """Unplaced ops take the device of the producer they read the most bytes per step from
    (topological order), then of the consumer they send the most bytes per step to (reverse
    order), else ``default``; bytes per step: a pair's bytes times its crossings per step
    (``view.pred_rep``, 1 outside TF1 loops)."""
    for ptr, nbr, nbytes, order in (
            (view.pred_ptr, view.pred_op, view.pred_bytes * view.pred_rep, view.order),
            (view.succ_ptr, view.succ_op, view.succ_bytes * view.succ_rep, view.order[::-1])):
        for op in order[op_dev[order] < 0].tolist():
            lo, hi = ptr[op], ptr[op + 1]
            placed = op_dev[nbr[lo:hi]] >= 0
            if placed.any():
                k = int(np.argmax(np.where(placed, nbytes[lo:hi], -1.0)))
                op_dev[op] = op_dev[nbr[lo + k]]
    op_dev[op_dev < 0] = default
    return op_dev


def _spill_to_host(problem: PlacementProblem, view: OpView,
                   placement: np.ndarray) -> tuple[np.ndarray, int]:
    """Moves units whose memory need fits no accelerator to the first other device where they
    fit (the host CPU); returns the placement and how many units moved."""
    gpus = compute_devices(problem)
    others = np.setdiff1d(np.arange(problem.num_devices), gpus)
    too_big = view.unit_need > view.capacity[gpus].max()
    placement = placement.copy()
    for u in np.flatnonzero(too_big).tolist():
        fits = others[view.capacity[others] >= view.unit_need[u]]
        if fits.size:
            placement[u] = int(fits[0])
    return placement, int(too_big.sum())
