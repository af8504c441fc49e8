"""The outputs of ``gplace place``: placed.pb, placement.json, trace.json, report.html + PNGs.

Figures: a Gantt chart of the simulated step (one row per device, one per link with its
transfers), device utilization and peak memory against capacity, the fine-tuning curve, and the
comparison with the single fastest device, the best heuristic and the lower bound.
"""

from __future__ import annotations

import html
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from gplace.io import atomic_write, atomic_write_bytes, atomic_write_text
from gplace.sim import FastSimulator
from gplace.sim.trace import write_trace


def source_graph_def(src):
    """The GraphDef behind what ``place`` imported, functions inlined as the importer did;
    None for an OpGraph."""
    from gplace.importer import functions
    from gplace.importer.reader import read_graph_def
    if isinstance(src, (str, Path)):
        graph_def, _ = read_graph_def(src)
    elif hasattr(src, "as_graph_def"):
        graph_def = src.as_graph_def()
    elif hasattr(src, "node"):
        graph_def = src
    else:
        return None
    graph_def, _ = functions.inline_functions(graph_def)
    return graph_def


def placed_graph_def(result):
    """The source GraphDef with NodeDef.device set for every op."""
    graph_def = source_graph_def(result.source)
    if graph_def is None:
        return None
    placed = type(graph_def)()
    placed.CopyFrom(graph_def)
    devices = result.op_devices
    for node in placed.node:
        node.device = devices[node.name]
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
    seed; the wall time is printed and in report.html) and op name -> TF device."""
    summary = {k: v for k, v in result.summary.items() if k != "wall_s"}
    return {"summary": summary, "placement": result.op_devices}


def _write_outputs(result, out: Path) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    written = []
    placed = placed_graph_def(result)
    if placed is not None:  # deterministic: attr maps in key order, the same bytes every run
        atomic_write_bytes(out / "placed.pb", placed.SerializeToString(deterministic=True))
        written.append(out / "placed.pb")
    atomic_write_text(out / "placement.json", json.dumps(placement_record(result), indent=1))
    sim = FastSimulator(result.problem).run(result.unit_placement)
    write_trace(out / "trace.json", result.problem, sim)
    written += [out / "placement.json", out / "trace.json"]
    figures = {"gantt.png": gantt(result, sim), "devices.png": devices_figure(result, sim),
               "finetune.png": finetune_curve(result), "comparison.png": comparison(result)}
    for name, fig in figures.items():
        atomic_write(out / name, lambda f, fig=fig: fig.savefig(f, format="png", dpi=100,
                                                               bbox_inches="tight"), binary=True)
        written.append(out / name)
    atomic_write_text(out / "report.html", report_html(result, list(figures)))
    return written + [out / "report.html"]


def _plt():
    import matplotlib.pyplot as plt
    plt.close("all")
    return plt


def gantt(result, sim):
    plt = _plt()
    devices = result.problem.cluster.devices
    channels = result.problem.cluster.link_table()
    rows = len(devices) + 1
    fig, ax = plt.subplots(figsize=(11, 0.55 * rows + 1.6))
    colors = plt.get_cmap("tab10")
    for d, dev in enumerate(devices):
        mine = np.flatnonzero(sim.op_device == d)
        spans = [(s * 1e3, (e - s) * 1e3) for s, e in zip(sim.op_start_s[mine], sim.op_end_s[mine])
                 if e > s]
        ax.broken_barh(spans, (rows - 1 - d - 0.4, 0.8), color=colors(d % 10), lw=0)
    x = sim.transfers
    spans = [(s * 1e3, (f - s) * 1e3) for s, f in zip(x.start_s, x.done_s) if f > s]
    ax.broken_barh(spans, (-0.4, 0.8), color="0.4", lw=0)
    ax.set_yticks(range(rows), ["links"] + [f"{d.name} ({d.kind})" for d in reversed(devices)])
    ax.set_xlabel("time in the step (ms, simulated)")
    ax.set_title(f"{result.summary['graph']} on {result.summary['cluster']}: one training step, "
                 f"{result.step_time_s * 1e3:.2f} ms ({len(x.nbytes)} transfers over "
                 f"{channels.num_channels} link channels)")
    ax.set_xlim(0, max(result.step_time_s * 1e3, 1e-6))
    return fig


def devices_figure(result, sim):
    plt = _plt()
    devices = result.problem.cluster.devices
    names = [d.name for d in devices]
    lanes = np.array([d.lanes for d in devices])
    util = sim.busy_s / lanes / max(sim.step_time_s, 1e-12) * 100
    cap = np.array([d.memory_bytes for d in devices]) / 1e9
    peak = sim.peak_bytes / 1e9
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.6))
    a.bar(names, util, color="tab:blue")
    a.set(ylabel="busy (% of the step)", ylim=(0, 105), title="device utilization")
    b.bar(names, cap, color="0.85", label="capacity")
    b.bar(names, peak, color="tab:orange", label="peak (parameters + live tensors)")
    b.set(ylabel="GB", title="peak memory against capacity")
    b.set_yscale("log")
    b.legend(fontsize=8)
    for axis in (a, b):
        axis.tick_params(axis="x", rotation=45)
    return fig


def finetune_curve(result):
    plt = _plt()
    s = result.summary
    fig, ax = plt.subplots(figsize=(7, 4))
    curve = result.finetune.history.best_so_far()
    start = result.finetune.info.get("start_step_time_s", np.inf)
    if curve.size:
        ax.plot(np.arange(1, curve.size + 1), np.minimum(curve, start) * 1e3,
                label="best so far (from the zero-shot and heuristic starts)")
        ax.plot(np.arange(1, curve.size + 1), curve * 1e3, lw=0.8, alpha=0.6,
                label="best fine-tuning sample alone")
    for label, value, style in (("zero-shot", s["zero_shot_step_time_s"], "--"),
                                ("best heuristic", s["best_heuristic"]["step_time_s"], ":"),
                                ("single device", s["single_device_s"], "-."),
                                ("lower bound", s["lower_bound_s"], "-")):
        if value is not None and np.isfinite(value):
            ax.axhline(value * 1e3, ls=style, lw=1, color="0.3" if label == "lower bound" else None,
                       label=f"{label} {value * 1e3:.3f} ms")
    ax.set(xlabel="evaluated placements", ylabel="step time (ms, simulated)",
           title=f"fine-tuning: {s['samples']} samples")
    ax.legend(fontsize=8)
    return fig


def comparison(result):
    plt = _plt()
    s = result.summary
    bars = [("single device", s["single_device_s"]),
            (f"best heuristic ({s['best_heuristic']['name']})", s["best_heuristic"]["step_time_s"]),
            ("gplace zero-shot", s["zero_shot_step_time_s"]), ("gplace", s["step_time_s"]),
            ("lower bound", s["lower_bound_s"])]
    bars = [(n, v * 1e3) for n, v in bars if v is not None and np.isfinite(v)]
    fig, ax = plt.subplots(figsize=(7, 3.2))
    ax.barh([n for n, _ in bars][::-1], [v for _, v in bars][::-1], color="tab:green")
    for i, (_, v) in enumerate(bars[::-1]):
        ax.text(v, i, f" {v:.3f}", va="center", fontsize=8)
    ax.set(xlabel="step time (ms, simulated)", title="placement comparison")
    return fig


def report_html(result, figures: list[str]) -> str:
    s = result.summary
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(_fmt(v))}</td></tr>"
                   for k, v in s.items())
    imgs = "".join(f'<figure><img src="{f}" style="max-width:100%"></figure>' for f in figures)
    speedup = s["single_device_s"] / s["step_time_s"] if s["step_time_s"] else float("nan")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>gplace: "
            f"{html.escape(s['graph'])}</title><style>body{{font-family:sans-serif;max-width:1100px;"
            f"margin:auto}}th{{text-align:left;padding-right:1em}}</style></head><body>"
            f"<h1>gplace placement of {html.escape(s['graph'])}</h1>"
            f"<p>{html.escape(s['cluster_choice'])}. Step time {s['step_time_s'] * 1e3:.3f} ms, "
            f"{speedup:.2f}x as fast as the single fastest device. Step times: {s['step_times']}; "
            f"device costs: {html.escape(s['costs'])}.</p><table>{rows}</table>{imgs}"
            f"<p>Files: placed.pb (the graph with NodeDef.device set), placement.json, "
            f"trace.json (open in ui.perfetto.dev).</p></body></html>")


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return json.dumps(v) if isinstance(v, (dict, list)) else str(v)
