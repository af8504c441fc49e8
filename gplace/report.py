"""The outputs of ``gplace place``: placed.pb, placement.json, trace.json, report.html + SVGs,
written into one folder all at once (the page: :mod:`gplace.report_page`, the figures:
:mod:`gplace.report_figures`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from gplace.io import atomic_write_bytes, atomic_write_text, plain_json
from gplace.sim import FastSimulator
from gplace.sim.trace import write_trace


def source_graph_def(src, lean: bool = False):
    """The GraphDef behind what ``place`` imported, functions inlined as the importer did;
    None for an OpGraph. ``lean``: a file is read without starting TensorFlow unless it
    calls functions (inlining builds their bodies with TF; gplace.importer.reader, lean)."""
    from gplace.importer import functions, graph_def_of
    from gplace.importer.reader import read_graph_def
    if isinstance(src, (str, Path)) and str(src).lower().endswith((".pt2", ".npz")):
        return None  # a PyTorch program (gplace.torchfront.placed runs it) or an OpGraph
    if isinstance(src, (str, Path)):
        graph_def, _ = read_graph_def(src, lean=lean)
        if len(graph_def.library.function) and "tensorflow" not in type(graph_def).__module__:
            graph_def, _ = read_graph_def(src)
    elif graph_def_of(src) is not None:
        graph_def = graph_def_of(src)
        # the functions as this process defined them, without the shapes graph_def_of adds:
        # importing placed.pb beside them must not define them a second time, differently
        graph_def.library.CopyFrom(getattr(src, "graph", src).as_graph_def().library)
    elif hasattr(src, "node"):
        graph_def = src
    else:
        return None
    graph_def, _ = functions.inline_functions(graph_def)
    return graph_def


def _file_behind(graph) -> str | None:
    """The TensorFlow file an OpGraph was imported from (``meta["source"]``), if it is still
    there; None for other sources."""
    source = graph.meta.get("source") if hasattr(graph, "meta") else None
    if not isinstance(source, str) or source.startswith("<") or \
            source.lower().endswith((".pt2", ".npz")) or not Path(source).exists():
        return None
    return source


def placed_graph_def(result):
    """The source GraphDef with NodeDef.device set for every op of the step; the ops outside
    it (initializers, checkpoint ops: gplace.importer.step) keep the device they asked for."""
    graph_def = source_graph_def(result.source, lean=True)
    if graph_def is None and _file_behind(result.graph) is not None:
        # an OpGraph from gplace.load_graph(path): the file it came from, if it still holds
        # every op the placement names
        graph_def = source_graph_def(_file_behind(result.graph), lean=True)
        names = {n.name for n in graph_def.node}
        if not all(name in names for name in result.op_devices):
            return None
    if graph_def is None:
        return None
    placed = type(graph_def)()
    placed.CopyFrom(graph_def)
    devices = result.op_devices
    for node in placed.node:
        node.device = devices.get(node.name, node.device)
    return placed


def export_all(result, out: Path) -> list[Path]:
    """Writes every output into a hidden folder in ``out``, then moves each file into place:
    a failure (a full disk) leaves ``out`` as it was, with no half of a result in it."""
    created = _make_dirs(out)
    try:
        stage = Path(tempfile.mkdtemp(prefix=".gplace-export-", dir=out))
        try:
            staged = _write_outputs(result, stage)
            for f in staged:
                os.replace(f, out / f.name)
        finally:
            shutil.rmtree(stage, ignore_errors=True)
    except BaseException:
        for d in reversed(created):  # the folders this call made, now empty again
            try:
                d.rmdir()
            except OSError:
                pass
        raise
    return [out / f.name for f in staged]


def _make_dirs(path: Path) -> list[Path]:
    """Creates ``path`` and missing parents; returns the folders it created, outermost first."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for d in reversed(missing):
        d.mkdir()
    return list(reversed(missing))


def placement_record(result) -> dict:
    """placement.json: the summary without its wall time (the file is byte-reproducible for a
    seed; the wall time is printed and in report.html), the cluster as placed on (memory
    limits applied: `gplace simulate --placement` simulates on it), op name -> TF device, and
    with --measure real the final batch's intervals and ties, as --json prints them."""
    summary = {k: v for k, v in result.summary.as_dict().items() if k != "wall_s"}
    record = {"summary": summary, "cluster": result.problem.cluster.summary(),
              "placement": result.op_devices}
    if result.intervals:  # --measure real: (step time, low, high) by placer, and the ties
        record.update(intervals_s={k: list(v) for k, v in result.intervals.items()},
                      ties=list(result.ties))
    signature = result.graph.meta.get("import", {}).get("signature")
    if signature:  # the SavedModel signature placed: `gplace simulate --placement` takes it
        record["signature"] = signature
    unknown_dim = result.graph.meta.get("import", {}).get("unknown_dim", 1)
    if unknown_dim != 1:  # --unknown-dim: `gplace simulate --placement` imports it so too
        record["unknown_dim"] = unknown_dim
    if "torch" in result.graph.meta:  # a PyTorch step: also by FX node and by module
        from gplace.torchfront.record import torch_record
        record["torch"] = torch_record(result.graph, result.op_devices)
    return record


def _write_outputs(result, out: Path) -> list[Path]:
    from gplace import report_figures as fig
    from gplace.report_page import report_html
    written = []
    placed = placed_graph_def(result)
    if placed is not None:  # deterministic: attr maps in key order, the same bytes every run
        atomic_write_bytes(out / "placed.pb", placed.SerializeToString(deterministic=True))
        written.append(out / "placed.pb")
    atomic_write_text(out / "placement.json", plain_json(placement_record(result), indent=1))
    sim = FastSimulator(result.problem).run(result.unit_placement)
    write_trace(out / "trace.json", result.problem, sim)
    written += [out / "placement.json", out / "trace.json"]
    figures = {"gantt.svg": fig.gantt(result, sim), "devices.svg": fig.devices_figure(result, sim),
               "finetune.svg": fig.finetune_curve(result), "comparison.svg": fig.comparison(result)}
    for name, figure in figures.items():
        atomic_write_text(out / name, figure)
        written.append(out / name)
    atomic_write_text(out / "report.html", report_html(result, sim, list(figures),
                                                           placed=placed is not None))
    return written + [out / "report.html"]
