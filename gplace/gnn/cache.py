"""The cache beside a corpus: imported graphs, the heuristics' seed placements and the experts.

Every cached result of a problem is named by :func:`problem_key`, a hash of a canonical
description of the problem: the cluster's fields with every float written to 6 significant
digits, the cost model's rules (gplace.cost.COST_MODEL_VERSION), whether the costs are measured, the graph's size, the size its unknown dimensions
were imported with where it has some and that is not 1 (gplace.cost.import_size), and a
PyTorch program's optimizer. A float's last bits differ
between numpy builds (a random cluster's draws end in ``np.exp``), so a key that hashed
``repr(cluster)`` missed on another machine; rounded, the same problem has the same key
everywhere. The key does not say which op costs: :func:`drop_stale` deletes a graph's cached
seeds and experts when its file or its profile changed since they were cached.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path
from typing import Callable

from gplace.cluster import Cluster
from gplace.cost import COST_MODEL_VERSION, half_precision, import_size
from gplace.graph import OpGraph
from gplace.io import atomic_write_text, cached_array
from gplace.problem import PlacementProblem

KEY_SCHEME = 3  # part of every key: bump when the description below changes


def cache_dir(graph_path: str | Path, kind: str = "") -> Path:
    """The cache folder of ``kind`` ("", "seeds", "experts") for the graph at ``graph_path``:
    ``.gplace-cache/`` beside it."""
    folder = Path(graph_path).parent / ".gplace-cache"
    return folder / kind if kind else folder


def check_writable(graph_paths) -> None:
    """ConfigError naming the first graph folder where the cache cannot be written (a
    read-only corpus), before any work that would need it."""
    import tempfile
    from gplace.errors import ConfigError
    for folder in sorted({cache_dir(p) for p in graph_paths}):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=folder):
                pass
        except OSError as e:
            raise ConfigError(f"{folder}: cannot write there ({e.strerror}); pretraining keeps "
                              "its cache of expert placements beside the graphs: copy them to "
                              "a folder you can write") from None


def canonical(value):
    """``value`` (dataclasses, tuples, dicts, numbers) as JSON-ready data with every float
    written to 6 significant digits."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: canonical(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if isinstance(value, float):
        return f"{value:.6g}"
    return value


def describe_problem(cluster: Cluster, measured: bool, num_ops: int, num_edges: int,
                     num_units: int, half: bool = False, unknown_dim: int = 1,
                     optimizer: str | None = None) -> str:
    """The canonical description that :func:`problem_key` hashes (one JSON line). A device's
    ``half_flops`` is in it only where set and the graph has 16-bit ops (``half``),
    ``unknown_dim`` only where it is not 1 (a graph imported with its None batch sized has
    the same ops and edges at every size), and ``optimizer`` only for a PyTorch program
    (whose step's updates, hyperparameters included, it names): nowhere else do they change
    a cost, and every other key stays as it was before those fields."""
    record = canonical(cluster)
    for device in record["devices"]:
        if not half or device["half_flops"] is None:
            del device["half_flops"]
    extra = {**({} if unknown_dim == 1 else {"unknown_dim": unknown_dim}),
             **({} if optimizer is None else {"optimizer": optimizer})}
    return json.dumps({"scheme": KEY_SCHEME, "costs": COST_MODEL_VERSION, "cluster": record,
                       "measured": measured,
                       "ops": num_ops, "edges": num_edges, "units": num_units, **extra},
                      sort_keys=True, separators=(",", ":"))


def problem_key(problem: PlacementProblem, measured: bool) -> str:
    """16 hex digits naming a problem in the cache: equal on every machine for the same
    cluster (to 6 significant digits), costs source, graph size, size of its unknown
    dimensions and a program's optimizer."""
    return graph_key(problem.cluster, problem.graph, problem.num_units, measured)


def graph_key(cluster: Cluster, graph: OpGraph, num_units: int, measured: bool) -> str:
    """:func:`problem_key` from its parts (a full-granularity problem has a unit per
    colocation group: ``graph.group.max() + 1``), without building the problem."""
    im = graph.meta.get("import", {})
    text = describe_problem(cluster, measured, graph.num_ops, graph.num_edges, num_units,
                            bool(half_precision(graph).any()), import_size(graph),
                            im.get("optimizer") if "torch" in graph.meta else None)
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def cached(graph_path: str | Path, kind: str, name: str, compute: Callable[[], object],
           valid: Callable[[object], bool] | None = None):
    """The array cached as ``name`` in the ``kind`` folder beside the graph, or ``compute()``'s,
    then written there atomically (gplace.io.cached_array; ``valid`` refuses a damaged one)."""
    return cached_array(cache_dir(graph_path, kind) / name, compute, valid)


def placements_of(units: int, devices: int) -> Callable[[object], bool]:
    """``valid`` for cached placements of a problem: integer devices in range, one per unit
    (a row, or rows)."""
    import numpy as np

    def valid(a) -> bool:
        rows = a.reshape(1, -1) if a.ndim == 1 else a
        return (rows.ndim == 2 and rows.shape[1] == units and np.issubdtype(rows.dtype, np.integer)
                and (rows.size == 0 or (int(rows.min()) >= 0 and int(rows.max()) < devices)))
    return valid


def drop_stale(entries) -> int:
    """For each corpus graph (gplace.gnn.corpus.CorpusGraph): when the SHA-256 of its file
    (a SavedModel's saved_model.pb) and of its profile differ from the stamp recorded beside
    the cache, deletes its cached seeds and experts (``{name}-*.npy``, whose names say which
    problem but not which costs), then records the new stamp. Returns how many files went.
    A graph without a stamp (first run, a restored archive) keeps what is cached."""
    dropped = 0
    for entry in entries:
        stamp_file = cache_dir(entry.path, "stamps") / f"{entry.name}.txt"
        files = [Path(entry.path) / "saved_model.pb" if Path(entry.path).is_dir()
                 else Path(entry.path)] + ([Path(entry.profile)] if entry.profile else [])
        quick = " ".join(f"{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files)
        try:
            before = stamp_file.read_text().split("\n")
        except OSError:
            before = None
        if before and before[0] == quick:
            continue  # same sizes and times as when stamped: not read again
        digest = hashlib.sha256()
        for f in files:
            digest.update(hashlib.sha256(f.read_bytes()).digest())
        if before and len(before) > 1 and before[1] != digest.hexdigest():
            mine = re.compile(re.escape(entry.name) + r"-[0-9a-f]{16}(-.*)?\.npy")
            for kind in ("seeds", "experts"):
                for old in cache_dir(entry.path, kind).glob(f"{entry.name}-*.npy"):
                    if mine.fullmatch(old.name):  # not graph "a-b"'s files for graph "a"
                        old.unlink(missing_ok=True)
                        dropped += 1
        atomic_write_text(stamp_file, f"{quick}\n{digest.hexdigest()}")
    return dropped
