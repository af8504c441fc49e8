"""PlacementProblem: a graph, a cluster and the cost of every op on every device.

The unit of placement is the colocation group (``OpGraph.group``): TF forces a resource
variable's readers and every ``loc:@x`` op onto one device, so a placement is one device index
per unit and :meth:`PlacementProblem.expand` turns it into one device per op.

Coarsening (optional, ``CoarsenConfig.max_units``), as HDP's grouper does (Mirhoseini
et al., ICLR 2018): repeatedly take the lightest unit (least best-device time, ties by lower id)
and merge it into the neighbour it exchanges the most bytes with (data edges, both directions;
a control edge counts 1 byte; ties by lower id); a unit with no neighbour merges into the next
lightest unit. Stop at ``max_units``. Colocation groups are never split (units only merge).
Merged units may form cycles between units; that is harmless because the simulator schedules
ops, not units.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Mapping, NamedTuple

import numpy as np

from gplace.cluster import Cluster
from gplace.cost import CostModel, OpCosts
from gplace.errors import ConfigError
from gplace.graph import OpGraph


@dataclass(frozen=True)
class CoarsenConfig:
    max_units: int | None = None  # None keeps the colocation groups; Post's per-unit
                                  # table is meant for tens of units


@dataclass(frozen=True, eq=False)
class PlacementProblem:
    graph: OpGraph
    cluster: Cluster
    costs: OpCosts
    unit_of_op: np.ndarray   # (ops,) int64 in 0..num_units-1
    num_units: int
    # the share of its outputs' bytes a unit is charged in the list schedulers' memory estimate
    # (gplace.placers.heuristics_view; its ``calibrated`` lowers it); 1: all, all the time
    activation_share: float = 1.0

    @classmethod
    def build(cls, graph: OpGraph, cluster: Cluster, cost_model: CostModel | None = None,
              coarsen: CoarsenConfig | None = None) -> PlacementProblem:
        costs = (cost_model or CostModel()).costs(graph, cluster)
        units = graph.group.astype(np.int64)
        limit = (coarsen or CoarsenConfig()).max_units
        if limit is not None:
            if limit < 1:
                raise ConfigError(f"CoarsenConfig.max_units = {limit} must be >= 1")
            units = coarsen_units(graph, units, costs.time_s.min(axis=1), limit)
        return cls(graph, cluster, costs, units, int(units.max()) + 1 if units.size else 0)

    @property
    def num_devices(self) -> int:
        return self.cluster.num_devices

    def expand(self, placement: np.ndarray) -> np.ndarray:
        """(ops,) device index of every op from (units,) or (batch, units) unit placements."""
        placement = np.asarray(placement, np.int64)
        if placement.shape[-1] != self.num_units:
            raise ConfigError(f"placement has {placement.shape[-1]} entries, the problem has "
                              f"{self.num_units} units")
        if placement.size and (placement.min() < 0 or placement.max() >= self.num_devices):
            raise ConfigError(f"placement holds a device index outside 0..{self.num_devices - 1}")
        return placement[..., self.unit_of_op]

    def from_op_devices(self, op_device: np.ndarray) -> np.ndarray:
        """(units,) placement from one device per op; an error names a split unit."""
        op_device = np.asarray(op_device, np.int64)
        placement = np.full(self.num_units, -1, np.int64)
        placement[self.unit_of_op] = op_device
        split = np.flatnonzero(placement[self.unit_of_op] != op_device)
        if split.size:
            op = int(split[0])
            members = self.graph.names[self.unit_of_op == self.unit_of_op[op]][:4].tolist()
            raise ConfigError(f"placement splits colocation group {int(self.unit_of_op[op])} "
                              f"(ops {', '.join(members)}...) over several devices")
        return placement

    def from_names(self, mapping: Mapping[str, str]) -> np.ndarray:
        """(units,) placement from {op name: device name or TF device string}; every unit needs
        at least one listed op, and the listed ops of a unit must agree."""
        index = {n: i for i, n in enumerate(self.graph.names.tolist())}
        placement = np.full(self.num_units, -1, np.int64)
        owner = {}
        for name, dev in mapping.items():
            if name not in index:
                raise ConfigError(f"placement names op {name!r}, which is not in graph "
                                  f"{self.graph.meta.get('name', '?')!r}")
            d, u = self.cluster.device_index(str(dev)), int(self.unit_of_op[index[name]])
            if placement[u] not in (-1, d):
                raise ConfigError(f"placement splits colocation group {u}: {owner[u]!r} on "
                                  f"{self.cluster.devices[placement[u]].name}, {name!r} on "
                                  f"{self.cluster.devices[d].name}")
            placement[u], owner[u] = d, name
        if (placement < 0).any():
            u = int(np.flatnonzero(placement < 0)[0])
            op = str(self.graph.names[self.unit_of_op == u][0])
            raise ConfigError(f"placement gives no device for op {op!r} (unit {u}); list every "
                              f"op or one op of every colocation group")
        return placement

    def random_placements(self, count: int, seed: int) -> np.ndarray:
        """(count, units) uniform random placements, reproducible from ``seed``."""
        rng = np.random.default_rng(seed)
        return rng.integers(0, self.num_devices, size=(count, self.num_units), dtype=np.int64)

    def single_device(self, device: int) -> np.ndarray:
        return np.full(self.num_units, device, np.int64)

    def unit_traffic(self) -> UnitTraffic:
        """The unit graph: one entry per ordered pair of distinct units that an edge (data or
        control) joins, with the bytes its data edges carry (summed; integers, so exact)."""
        g, u, n = self.graph, self.unit_of_op, max(self.num_units, 1)
        src = np.concatenate([u[g.edge_src], u[g.ctrl_src]])
        dst = np.concatenate([u[g.edge_dst], u[g.ctrl_dst]])
        nbytes = np.concatenate([g.edge_bytes, np.zeros(g.num_control_edges, np.int64)])
        is_data = np.concatenate([np.ones(g.num_edges, bool), np.zeros(g.num_control_edges, bool)])
        keep = src != dst
        pair, inv = np.unique(src[keep] * n + dst[keep], return_inverse=True)
        total = np.bincount(inv, weights=nbytes[keep].astype(np.float64), minlength=pair.size)
        data = np.bincount(inv, weights=is_data[keep], minlength=pair.size) > 0
        return UnitTraffic(pair // n, pair % n, total, data)


class UnitTraffic(NamedTuple):
    """PlacementProblem.unit_traffic: ordered unit pairs, ascending by (src, dst)."""

    src: np.ndarray     # (pairs,) int64
    dst: np.ndarray     # (pairs,) int64
    nbytes: np.ndarray  # (pairs,) float64: bytes of the pair's data edges
    data: np.ndarray    # (pairs,) bool: a data edge joins them (else control edges only)


def coarsen_units(graph: OpGraph, units: np.ndarray, weight: np.ndarray, max_units: int) -> np.ndarray:
    """Merges units as the module docstring says; returns new unit ids, numbered by first op."""
    n_units = int(units.max()) + 1 if units.size else 0
    w = np.bincount(units, weights=weight, minlength=n_units).tolist()
    adj: list[dict[int, int]] = [dict() for _ in range(n_units)]
    pairs = [(graph.edge_src, graph.edge_dst, graph.edge_bytes),
             (graph.ctrl_src, graph.ctrl_dst, np.ones(graph.num_control_edges, np.int64))]
    for src, dst, nbytes in pairs:
        for a, b, c in zip(units[src].tolist(), units[dst].tolist(), nbytes.tolist()):
            if a != b:
                adj[a][b] = adj[a].get(b, 0) + c
                adj[b][a] = adj[b].get(a, 0) + c
    parent = list(range(n_units))
    heap = [(w[u], u) for u in range(n_units)]
    heapq.heapify(heap)
    alive = n_units
    while alive > max_units:
        wu, u = heapq.heappop(heap)
        if parent[u] != u or wu != w[u]:
            continue  # stale entry
        if adj[u]:
            v = max(adj[u].items(), key=lambda kv: (kv[1], -kv[0]))[0]
        else:
            v = _next_lightest(heap, parent, w)
        _merge(u, v, w, adj, parent)
        heapq.heappush(heap, (w[v], v))
        alive -= 1
    root = np.array([_find(parent, u) for u in range(n_units)], np.int64)
    _, first = np.unique(root[units], return_index=True)
    order = np.argsort(np.argsort(first))  # renumber roots by their first op
    roots = np.unique(root[units])
    return order[np.searchsorted(roots, root[units])].astype(np.int64)


def _next_lightest(heap: list, parent: list[int], w: list[float]) -> int:
    while True:
        wv, v = heap[0]
        if parent[v] == v and wv == w[v]:
            return v
        heapq.heappop(heap)


def _merge(u: int, v: int, w: list, adj: list[dict[int, int]], parent: list[int]) -> None:
    """Merges unit u into v: weights add, u's neighbours become v's."""
    parent[u] = v
    w[v] += w[u]
    for x, c in adj[u].items():
        del adj[x][u]
        if x != v:
            adj[x][v] = adj[x].get(v, 0) + c
            adj[v][x] = adj[v].get(x, 0) + c
    adj[u] = {}


def _find(parent: list[int], u: int) -> int:
    while parent[u] != u:
        parent[u] = parent[parent[u]]
        u = parent[u]
    return u

