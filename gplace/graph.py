"""OpGraph: the immutable, array-based model of one training-step graph.

Every per-op and per-edge quantity is a numpy array indexed by op (or edge) id; no Python object
per op. Op ids follow the order of the source GraphDef.

Outputs are ragged: op ``i`` owns outputs ``out_ptr[i]:out_ptr[i+1]``; output ``j`` has dtype
``out_dtype[j]``, bytes ``out_bytes[j]`` and shape ``out_dims[dim_ptr[j]:dim_ptr[j+1]]`` when
``out_rank[j] >= 0`` (``-1`` means unknown rank; a dimension of ``-1`` is unknown).
"""

from __future__ import annotations

import dataclasses
import json
import os
import weakref
import zipfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gplace.errors import GraphError
from gplace.io import atomic_write

FORMAT_VERSION = 1

_ARRAY_FIELDS = (
    "names", "op_types", "devices", "flops", "param_bytes", "group",
    "out_ptr", "out_dtype", "out_bytes", "out_rank", "dim_ptr", "out_dims",
    "edge_src", "edge_dst", "edge_src_out", "edge_bytes", "edge_back",
    "ctrl_src", "ctrl_dst", "ctrl_back",
)


_TOPO_ORDERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # OpGraph.topo_order's


@dataclass(frozen=True, eq=False)
class OpGraph:
    """One graph; build it with :func:`gplace.load_graph` or :meth:`OpGraph.load`."""

    names: np.ndarray          # (ops,) str: unique op names
    op_types: np.ndarray       # (ops,) str: TensorFlow op type, e.g. "Conv2D"
    devices: np.ndarray        # (ops,) str: the device the GraphDef requested ("" if none)
    flops: np.ndarray          # (ops,) float64: floating-point operations of one run of the op
    param_bytes: np.ndarray    # (ops,) int64: bytes of variables the op owns (weights, slots)
    group: np.ndarray          # (ops,) int64: colocation group id, 0..groups-1
    out_ptr: np.ndarray        # (ops+1,) int64: CSR offsets into the output arrays
    out_dtype: np.ndarray      # (outputs,) str: "float32", "resource", ...
    out_bytes: np.ndarray      # (outputs,) int64: bytes of each output tensor
    out_rank: np.ndarray       # (outputs,) int64: rank, -1 when unknown
    dim_ptr: np.ndarray        # (outputs+1,) int64: CSR offsets into out_dims
    out_dims: np.ndarray       # (dims,) int64: dimensions, -1 when unknown
    edge_src: np.ndarray       # (edges,) int64: producing op
    edge_dst: np.ndarray       # (edges,) int64: consuming op
    edge_src_out: np.ndarray   # (edges,) int64: output index at the producer
    edge_bytes: np.ndarray     # (edges,) int64: bytes of the tensor on the edge
    edge_back: np.ndarray      # (edges,) bool: NextIteration -> Merge back-edge of a TF1 loop
    ctrl_src: np.ndarray       # (control edges,) int64
    ctrl_dst: np.ndarray       # (control edges,) int64
    ctrl_back: np.ndarray      # (control edges,) bool: back-edge of a TF1 loop
    meta: dict[str, Any] = field(default_factory=dict)  # name, source, import summary

    def __repr__(self) -> str:
        """``OpGraph('gpt12', 7,407 ops, 9,950 edges, 5,231 groups, 1.2e+12 FLOPs)``: the
        sizes, not the arrays (a dataclass would print them all)."""
        return (f"OpGraph({self.meta.get('name', '')!r}, {self.num_ops:,} ops, "
                f"{self.num_edges:,} edges, {self.num_groups:,} groups, "
                f"{float(self.flops.sum()):.3g} FLOPs)")

    # ---- sizes ---------------------------------------------------------------------------
    @property
    def num_ops(self) -> int:
        return int(self.names.shape[0])

    @property
    def num_edges(self) -> int:
        return int(self.edge_src.shape[0])

    @property
    def num_control_edges(self) -> int:
        return int(self.ctrl_src.shape[0])

    @property
    def num_groups(self) -> int:
        return int(self.group.max()) + 1 if self.num_ops else 0

    @property
    def output_bytes(self) -> np.ndarray:
        """(ops,) int64: total bytes of each op's outputs."""
        owner = np.repeat(np.arange(self.num_ops), np.diff(self.out_ptr))
        return np.bincount(owner, weights=self.out_bytes, minlength=self.num_ops).astype(np.int64)

    def index(self, name: str) -> int:
        """The id of the op called ``name``."""
        hits = np.flatnonzero(self.names == name)
        if hits.size == 0:
            raise KeyError(f"no op named {name!r} in graph {self.meta.get('name', '?')!r}")
        return int(hits[0])

    def output_shape(self, j: int) -> tuple[int, ...] | None:
        """Shape of output ``j`` (global output id), None for unknown rank."""
        if self.out_rank[j] < 0:
            return None
        return tuple(int(d) for d in self.out_dims[self.dim_ptr[j]:self.dim_ptr[j + 1]])

    # ---- the scheduling view ---------------------------------------------------------------
    def topo_order(self) -> np.ndarray:
        """(ops,) int64: a topological order of the acyclic view (loop back-edges dropped).

        Ties break by op id, so the order is deterministic. Raises GraphError on a cycle.
        Computed once per graph (the heuristics, the features, the simulator's arrays and the
        bounds all ask for it); each call returns a copy.
        """
        cached = _TOPO_ORDERS.get(self)
        if cached is None:
            cached = _TOPO_ORDERS[self] = self._topo_order()
        return cached.copy()

    def _topo_order(self) -> np.ndarray:
        src, dst = self._forward_edges()
        indeg = np.bincount(dst, minlength=self.num_ops)
        order_idx = np.argsort(src, kind="stable")
        succ_ptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=self.num_ops))])
        succ = dst[order_idx]
        import heapq
        ready = [i for i in range(self.num_ops) if indeg[i] == 0]
        heapq.heapify(ready)
        order = []
        while ready:
            u = heapq.heappop(ready)
            order.append(u)
            for v in succ[succ_ptr[u]:succ_ptr[u + 1]]:
                indeg[v] -= 1
                if indeg[v] == 0:
                    heapq.heappush(ready, int(v))
        if len(order) < self.num_ops:
            raise GraphError(f"cycle that is not a TF loop: {self._describe_cycle(indeg)}")
        return np.asarray(order, np.int64)

    def _forward_edges(self) -> tuple[np.ndarray, np.ndarray]:
        keep_d, keep_c = ~self.edge_back, ~self.ctrl_back
        src = np.concatenate([self.edge_src[keep_d], self.ctrl_src[keep_c]]).astype(np.int64)
        dst = np.concatenate([self.edge_dst[keep_d], self.ctrl_dst[keep_c]]).astype(np.int64)
        return src, dst

    def _describe_cycle(self, indeg: np.ndarray) -> str:
        """Names a few ops on a cycle among the ops left with positive in-degree."""
        src, dst = self._forward_edges()
        stuck = indeg > 0
        pred: dict[int, int] = {}
        for s, d in zip(src, dst):
            if stuck[s] and stuck[d]:
                pred.setdefault(int(d), int(s))
        node = int(np.flatnonzero(stuck)[0])
        seen: list[int] = []
        while node not in seen and node in pred:
            seen.append(node)
            node = pred[node]
        cycle = seen[seen.index(node):] if node in seen else seen
        names = [str(self.names[i]) for i in reversed(cycle)][:6]
        return " -> ".join(names + [names[0]]) if names else "unknown"

    # ---- checks ----------------------------------------------------------------------------
    def validate(self) -> OpGraph:
        """Checks shapes, ranges and acyclicity; raises GraphError naming the first problem."""
        n = self.num_ops
        for name in ("op_types", "devices", "flops", "param_bytes", "group"):
            arr = getattr(self, name)
            if arr.shape != (n,):
                raise GraphError(f"OpGraph.{name} has shape {arr.shape}, expected ({n},)")
        if len(set(self.names.tolist())) != n:
            raise GraphError("OpGraph.names has duplicate op names")
        if self.out_ptr.shape != (n + 1,) or self.out_ptr[-1] != self.out_dtype.shape[0]:
            raise GraphError("OpGraph.out_ptr does not match the output arrays")
        for name in ("flops", "param_bytes", "out_bytes", "edge_bytes"):
            arr = getattr(self, name)
            if arr.size and (not np.all(np.isfinite(arr)) or arr.min() < 0):
                bad = int(np.flatnonzero(~np.isfinite(arr) | (arr < 0))[0])
                raise GraphError(f"OpGraph.{name}[{bad}] = {arr[bad]} is negative or not finite")
        for name in ("edge_src", "edge_dst", "ctrl_src", "ctrl_dst"):
            arr = getattr(self, name)
            if arr.size and (arr.min() < 0 or arr.max() >= n):
                raise GraphError(f"OpGraph.{name} holds an op id outside 0..{n - 1}")
        if n and (self.group.min() < 0 or np.unique(self.group).size != self.group.max() + 1):
            raise GraphError("OpGraph.group ids are not 0..groups-1")
        self.topo_order()
        return self

    # ---- persistence -----------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> None:
        """Writes the graph to one ``.npz`` file, atomically."""
        arrays = {name: getattr(self, name) for name in _ARRAY_FIELDS}
        arrays["_meta"] = np.frombuffer(
            json.dumps({"format_version": FORMAT_VERSION, **self.meta}).encode(), np.uint8)

        def write(f):
            np.savez_compressed(f, **arrays)
        atomic_write(path, write, binary=True)

    @classmethod
    def load(cls, path: str | os.PathLike) -> OpGraph:
        """Reads a graph written by :meth:`save`."""
        try:
            with np.load(path, allow_pickle=False) as data:
                meta = json.loads(bytes(data["_meta"]).decode())
                arrays = {name: data[name] for name in _ARRAY_FIELDS}
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
            why = "not an .npz archive" if "pickle" in str(e) else " ".join(str(e).split())[:120]
            raise GraphError(f"{path}: not a gplace graph file ({why})") from None
        version = meta.pop("format_version", None)
        if version != FORMAT_VERSION:
            raise GraphError(f"{path}: graph format version {version}, this gplace reads "
                             f"{FORMAT_VERSION}")
        return cls(**arrays, meta=meta)

    @classmethod
    def from_lists(cls, flops, out_bytes, edges=(), control_edges=(), names=None, op_types=None,
                   param_bytes=None, group=None, name: str = "graph") -> OpGraph:
        """A small graph from plain lists: one output per op of ``out_bytes[i]`` bytes; ``edges``
        are ``(src, dst)`` pairs carrying that output. For tests and synthetic graphs."""
        n = len(flops)
        edges = np.asarray(list(edges), np.int64).reshape(-1, 2)
        ctrl = np.asarray(list(control_edges), np.int64).reshape(-1, 2)
        out_bytes = np.asarray(out_bytes, np.int64)
        groups = np.arange(n) if group is None else np.unique(np.asarray(group), return_inverse=True)[1]
        return cls(
            names=np.asarray(names if names is not None else [f"op{i}" for i in range(n)], str),
            op_types=np.asarray(op_types if op_types is not None else ["Op"] * n, str),
            devices=np.full(n, "", dtype=str),
            flops=np.asarray(flops, np.float64),
            param_bytes=np.zeros(n, np.int64) if param_bytes is None else np.asarray(param_bytes, np.int64),
            group=np.asarray(groups, np.int64),
            out_ptr=np.arange(n + 1, dtype=np.int64),
            out_dtype=np.full(n, "float32", dtype=str), out_bytes=out_bytes,
            out_rank=np.ones(n, np.int64), dim_ptr=np.arange(n + 1, dtype=np.int64),
            out_dims=out_bytes // 4,
            edge_src=edges[:, 0].copy(), edge_dst=edges[:, 1].copy(),
            edge_src_out=np.zeros(len(edges), np.int64), edge_bytes=out_bytes[edges[:, 0]],
            edge_back=np.zeros(len(edges), bool),
            ctrl_src=ctrl[:, 0].copy(), ctrl_dst=ctrl[:, 1].copy(),
            ctrl_back=np.zeros(len(ctrl), bool),
            meta={"name": name, "source": "synthetic"})

    def replace(self, **changes: Any) -> OpGraph:
        """A copy with some fields changed (the graph itself is immutable)."""
        return dataclasses.replace(self, **changes)

    def summary(self) -> dict[str, Any]:
        """Counts and totals, the core of ``gplace inspect``."""
        types, counts = np.unique(self.op_types, return_counts=True)
        top = sorted(zip(counts.tolist(), types.tolist()), reverse=True)[:10]
        return {
            "name": self.meta.get("name", ""),
            "ops": self.num_ops,
            "edges": self.num_edges,
            "control_edges": self.num_control_edges,
            "groups": self.num_groups,
            "flops": float(self.flops.sum()),
            "param_bytes": int(self.param_bytes.sum()),
            "output_bytes": int(self.out_bytes.sum()),
            "top_op_types": {t: c for c, t in top},
        }
