"""Structure statistics of one corpus graph, from the gplace importer (which also validates it):
the ``<name>.stats.json`` sidecar beside each ``.pb``, read by the manifest.

- depth: ops on the longest path of data edges (TF1 loop back-edges left out);
- branching: mean number of distinct consumer ops per op that has consumers (data edges);
- width: ops / depth, the average number of ops per level;
- param_share: parameter bytes (weights and optimizer slots) / (parameter bytes + bytes of every
  op output in one step), the share of the step's memory that placement cannot free by
  scheduling.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

STATS_VERSION = 1


def sidecar_path(pb: Path) -> Path:
    return pb.with_name(pb.name[: -len(".pb")] + ".stats.json")


def longest_path(num_ops: int, order: np.ndarray, src: np.ndarray, dst: np.ndarray) -> int:
    """Ops on the longest path, visiting ``order`` (topological) once."""
    depth = np.ones(num_ops, np.int64)
    by_src = np.argsort(src, kind="stable")
    starts = np.searchsorted(src[by_src], np.arange(num_ops + 1))
    for u in order:
        succ = dst[by_src[starts[u]:starts[u + 1]]]
        if len(succ):
            np.maximum.at(depth, succ, depth[u] + 1)
    return int(depth.max()) if num_ops else 0


def compute(pb: Path, recipe_hash: str | None) -> dict:
    """Statistics of the graph at ``pb``; raises if gplace cannot import or validate it."""
    import gplace
    graph = gplace.load_graph(str(pb)).validate()
    s = graph.summary()
    fwd = ~graph.edge_back
    src, dst = graph.edge_src[fwd], graph.edge_dst[fwd]
    depth = longest_path(graph.num_ops, graph.topo_order(), src, dst)
    pairs = np.unique(np.stack([src, dst], 1), axis=0) if len(src) else np.zeros((0, 2), int)
    producers = len(np.unique(pairs[:, 0]))
    params, outputs = int(s["param_bytes"]), int(s["output_bytes"])
    return {
        "version": STATS_VERSION, "recipe_hash": recipe_hash,
        "graph_sha256": hashlib.sha256(pb.read_bytes()).hexdigest(),
        "ops": int(s["ops"]), "flops": float(s["flops"]), "param_bytes": params,
        "output_bytes": outputs, "stats_source": "gplace.load_graph",
        "depth": depth, "branching": round(len(pairs) / max(1, producers), 4),
        "width": round(int(s["ops"]) / max(1, depth), 2),
        "param_share": round(params / max(1, params + outputs), 4),
    }


def write(pb: Path, recipe_hash: str | None) -> dict:
    from gplace.io import atomic_write_text
    stats = compute(pb, recipe_hash)
    atomic_write_text(sidecar_path(pb), json.dumps(stats, indent=1) + "\n")
    return stats


def read(pb: Path) -> dict | None:
    p = sidecar_path(pb)
    if not p.exists():
        return None
    stats = json.loads(p.read_text())
    return stats if stats.get("version") == STATS_VERSION else None
