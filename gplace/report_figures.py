"""The PNG figures of ``report.html``: a Gantt chart of the simulated step (one row per device,
one for the links with their transfers), device utilization and peak memory against capacity,
the fine-tuning curve, and the comparison with the single fastest device, the best heuristic and
the lower bound. Each function takes a PlacementResult (and the simulated step) and returns a
matplotlib figure.
"""

from __future__ import annotations

import numpy as np

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
    ax.set_title(f"{result.summary.graph} on {result.summary.cluster}: one training step, "
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
    start = result.start_step_time_s
    if curve.size:
        ax.plot(np.arange(1, curve.size + 1), np.minimum(curve, start) * 1e3,
                label="best so far (from the zero-shot and heuristic starts)")
        ax.plot(np.arange(1, curve.size + 1), curve * 1e3, lw=0.8, alpha=0.6,
                label="best fine-tuning sample alone")
    for label, value, style in (("zero-shot", s.zero_shot_step_time_s, "--"),
                                ("best heuristic", s.best_heuristic.step_time_s, ":"),
                                ("single device", s.single_device_s, "-."),
                                ("lower bound", s.lower_bound_s, "-")):
        if value is not None and np.isfinite(value):
            ax.axhline(value * 1e3, ls=style, lw=1, color="0.3" if label == "lower bound" else None,
                       label=f"{label} {value * 1e3:.3f} ms")
    ax.set(xlabel="evaluated placements", ylabel=f"step time (ms, {s.step_times})",
           title=f"fine-tuning: {s.samples} samples")
    ax.legend(fontsize=8)
    return fig


def comparison(result):
    plt = _plt()
    s = result.summary
    bars = [("single device", s.single_device_s),
            (f"best heuristic ({s.best_heuristic.name})", s.best_heuristic.step_time_s),
            ("gplace zero-shot", s.zero_shot_step_time_s), ("gplace", s.step_time_s),
            ("lower bound", s.lower_bound_s)]
    bars = [(n, v * 1e3) for n, v in bars if v is not None and np.isfinite(v)]
    fig, ax = plt.subplots(figsize=(7, 3.2))
    ax.barh([n for n, _ in bars][::-1], [v for _, v in bars][::-1], color="tab:green")
    for i, (_, v) in enumerate(bars[::-1]):
        ax.text(v, i, f" {v:.3f}", va="center", fontsize=8)
    ax.set(xlabel=f"step time (ms, {s.step_times})", title="placement comparison")
    return fig
