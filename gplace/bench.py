"""Equal-budget comparison of placers (``gplace bench``): every method on every (graph, cluster)
with the same sample budget and seeds; a Markdown and CSV table and learning-curve PNGs.

Step times come from the simulator and the cost model, so every figure is an estimate unless
the cost model's devices were all measured (the table says which).
"""

from __future__ import annotations

import csv
import io
import json
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gplace import stopping
from gplace.io import atomic_write, atomic_write_text
from gplace.placers import SimMeasurer, get_placer
from gplace.problem import CoarsenConfig, PlacementProblem
from gplace.sim import lower_bound
from gplace.stopping import stop_on_interrupt

HEURISTICS = ("single", "expert", "chunks", "heft", "m-topo", "m-etf", "m-sct")


@dataclass(frozen=True)
class BenchConfig:
    graphs: tuple[str, ...]
    clusters: tuple[str, ...] = ("post-4gpu",)
    methods: tuple[str, ...] = ("post", "pg", "random", "hill", "single")
    budget: int = 2400           # evaluated placements per sampling method and seed (Post: ~2400)
    seeds: int = 3
    units: int | None = 64       # coarsen to at most this many units (Post's per-unit
                                 # table is meant for tens); None keeps the colocation groups
    extra: dict = field(default_factory=dict)


@dataclass
class Run:
    graph: str
    cluster: str
    method: str
    seed: int
    step_time_s: float
    feasible: bool
    samples: int
    wall_s: float
    curve: np.ndarray            # best feasible step time after each sample


def run_bench(cfg: BenchConfig, log=sys.stderr) -> tuple[list[Run], dict, bool]:
    """All runs, per (graph, cluster) the lower bound and whether costs were estimated, and
    whether a Ctrl-C stopped the bench (gplace.stopping: the runs done by then, the one it
    cut left out, since it spent less than the budget)."""
    from gplace.importer import load_any
    from gplace.cluster import load_cluster
    import torch
    # The placers' tensors are tiny (units x devices): intra-op threads only add synchronization.
    torch.set_num_threads(1)
    for method in cfg.methods:
        get_placer(method)  # an unknown name fails here, listing the valid ones, before any work
    runs: list[Run] = []
    meta: dict = {}
    graphs = [load_any(g) for g in cfg.graphs]  # a bad file fails before any run, not after
    clusters = [load_cluster(c) for c in cfg.clusters]
    with stop_on_interrupt(log, "once the run going on now returns",
                           "the runs finished before it are the results"):
        _run_all(cfg, graphs, clusters, runs, meta, log)
        stopped = stopping.requested()
    if stopped:
        print(f"bench: stopped by Ctrl-C after {len(runs)} run{'s' if len(runs) != 1 else ''}"
              ": the results are theirs (a run cut short is left out)", file=log, flush=True)
    return runs, meta, stopped


def _run_all(cfg: BenchConfig, graphs: list, clusters: list, runs: list, meta: dict,
             log) -> None:
    """Every (graph, cluster, method, seed) run into ``runs``, until a Ctrl-C."""
    from gplace.cost import cost_model_for
    for gpath, graph in zip(cfg.graphs, graphs):
        gname = graph.meta.get("name", Path(gpath).stem)
        for cname, cluster in zip(cfg.clusters, clusters):
            problem = PlacementProblem.build(graph, cluster, cost_model_for(gpath),
                                             coarsen=CoarsenConfig(max_units=cfg.units))
            measurer = SimMeasurer(problem)
            meta[(gname, cname)] = {"lower_bound_s": float(lower_bound(problem).bound_s),
                                    "units": int(problem.num_units),
                                    "estimated": bool(problem.costs.estimated.any())}
            for method in cfg.methods:
                seeds = [0] if method in HEURISTICS else range(cfg.seeds)
                for seed in seeds:
                    r = get_placer(method, seed=seed).place(problem, measurer, cfg.budget)
                    if "stopped_at" in r.info:  # cut short by a Ctrl-C: not comparable
                        return
                    runs.append(Run(gname, cname, method, seed, r.step_time_s, r.feasible,
                                    r.samples, r.wall_s, r.history.best_so_far()))
                    print(f"bench: {gname} on {cname}: {method} seed {seed}: "
                          f"{r.step_time_s * 1e3:.3f} ms, {r.samples} samples, "
                          f"{r.wall_s:.1f} s", file=log, flush=True)
                    if stopping.requested():
                        return


def summarize(runs: list[Run], meta: dict) -> list[dict]:
    """One row per (graph, cluster, method): mean and std over seeds and the ratios."""
    rows = []
    keys = sorted({(r.graph, r.cluster) for r in runs})
    for g, c in keys:
        mine = [r for r in runs if (r.graph, r.cluster) == (g, c)]
        heur = [r.step_time_s for r in mine if r.method in HEURISTICS and r.feasible]
        best_heur = min(heur) if heur else np.nan
        for method in dict.fromkeys(r.method for r in mine):
            rs = [r for r in mine if r.method == method]
            t = np.array([r.step_time_s for r in rs])
            rows.append({
                "graph": g, "cluster": c, "method": method,
                "mean_step_time_s": float(t.mean()),  # inf (null in JSON): a seed found none
                "std_step_time_s": float(t.std()) if np.isfinite(t).all() else np.inf,
                "seeds": len(rs), "feasible": sum(r.feasible for r in rs),
                "vs_best_heuristic": float(t.mean() / best_heur) if heur else None,
                "vs_lower_bound": float(t.mean() / meta[(g, c)]["lower_bound_s"]),
                "samples": int(np.mean([r.samples for r in rs])),
                "wall_s": float(np.mean([r.wall_s for r in rs])),
                "units": meta[(g, c)]["units"], "estimated": meta[(g, c)]["estimated"]})
    return rows


def markdown_table(rows: list[dict]) -> str:
    head = ("| graph | cluster | method | step time ms (mean ± std) | vs best heuristic | "
            "vs lower bound | samples | wall s |\n|---|---|---|---|---|---|---|---|\n")
    fmt = (lambda x: "n/a" if x is None else f"{x:.3f}")
    body = "".join(
        f"| {r['graph']} | {r['cluster']} | {r['method']} | {r['mean_step_time_s'] * 1e3:.3f} "
        f"± {r['std_step_time_s'] * 1e3:.3f} | {fmt(r['vs_best_heuristic'])} | "
        f"{fmt(r['vs_lower_bound'])} | {r['samples']} | {r['wall_s']:.1f} |\n" for r in rows)
    return head + body


def write_outputs(out: Path, runs: list[Run], rows: list[dict], cfg: BenchConfig,
                  meta: dict) -> list[Path]:
    if not rows:
        raise ValueError("write_outputs: no rows (BenchConfig names no method?)")
    out.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(out / "results.csv", buf.getvalue())
    note = ("Step times are simulated with the cost model: estimates, not hardware measurements"
            if any(r["estimated"] for r in rows) else "Step times simulated from measured costs")
    atomic_write_text(out / "results.md", f"# gplace bench\n\nbudget {cfg.budget} samples, "
                      f"{cfg.seeds} seeds, units <= {cfg.units}. {note}.\n\n"
                      + markdown_table(rows))
    return ([out / "results.csv", out / "results.md", save_runs(out / "runs.npz", runs, meta)]
            + plot_curves(out, runs, meta))


def save_runs(path: Path, runs: list[Run], meta: dict) -> Path:
    """Every run with its learning curve (NaN-padded rows), so that tables and plots can be
    remade or merged across shards without rerunning (:func:`load_runs`)."""
    width = max((len(r.curve) for r in runs), default=0)
    curves = np.full((len(runs), width), np.nan)
    for i, r in enumerate(runs):
        curves[i, :len(r.curve)] = r.curve
    cols = {f: np.array([getattr(r, f) for r in runs])
            for f in ("graph", "cluster", "method", "seed", "step_time_s", "feasible",
                      "samples", "wall_s")}
    meta_json = json.dumps([[g, c, m] for (g, c), m in meta.items()])
    atomic_write(path, lambda f: np.savez_compressed(f, curves=curves, lengths=np.array(
        [len(r.curve) for r in runs]), meta=np.array(meta_json), **cols), binary=True)
    return path


def load_runs(paths: list[Path]) -> tuple[list[Run], dict]:
    """The runs and meta of one or more ``runs.npz`` files (e.g. one per shard), in order."""
    runs, meta = [], {}
    for path in paths:
        z = np.load(path, allow_pickle=False)
        for i in range(len(z["graph"])):
            runs.append(Run(str(z["graph"][i]), str(z["cluster"][i]), str(z["method"][i]),
                            int(z["seed"][i]), float(z["step_time_s"][i]), bool(z["feasible"][i]),
                            int(z["samples"][i]), float(z["wall_s"][i]),
                            z["curves"][i, :int(z["lengths"][i])]))
        meta.update({(g, c): m for g, c, m in json.loads(str(z["meta"]))})
    return runs, meta


def plot_curves(out: Path, runs: list[Run], meta: dict) -> list[Path]:
    """Best step time against samples, mean over seeds with a min-max band; one PNG per
    (graph, cluster); heuristics as dotted horizontal lines, the lower bound dashed black.
    The y axis starts below the lower bound and stops a little above the best single device,
    so that the first (uniform-random) samples do not flatten everything else; every legend
    entry carries its final value, so a line cut off at the top still reads."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    paths = []
    for g, c in sorted({(r.graph, r.cluster) for r in runs}):
        with warnings.catch_warnings():  # a column where no seed fits yet is NaN, not a warning
            warnings.simplefilter("ignore", RuntimeWarning)
            paths.append(_plot_curve(out, runs, meta, g, c, plt))
    return paths


def _file_part(name: str) -> str:
    """A graph or cluster name as one part of a file name: a path's stem ("yaml/x.yaml": x)."""
    return Path(name).stem if "/" in name or name.endswith((".yaml", ".yml")) else name


def _plot_curve(out: Path, runs: list[Run], meta: dict, g: str, c: str, plt) -> Path:
    """One (graph, cluster)'s PNG for :func:`plot_curves`."""
    fig, ax = plt.subplots(figsize=(9, 5))
    mine = [r for r in runs if (r.graph, r.cluster) == (g, c)]
    methods = list(dict.fromkeys(r.method for r in mine))
    sampled = [m for m in methods if m not in HEURISTICS]
    colors = {**dict(zip(sampled, plt.get_cmap("tab10").colors)),
              **dict(zip([m for m in methods if m in HEURISTICS],
                         plt.get_cmap("Dark2").colors))}
    finals = []
    for method in methods:
        rs = [r for r in mine if r.method == method]
        if rs[0].samples == 0:
            t = rs[0].step_time_s * 1e3
            ax.axhline(t, ls=(0, (1, 2)), lw=1.5, color=colors[method],
                       label=f"{method} (heuristic) {t:.4g}")
            finals.append(t)
            continue
        n = min(len(r.curve) for r in rs)
        finite = np.stack([r.curve[:n] for r in rs]) * 1e3
        finite = np.where(np.isfinite(finite), finite, np.nan)
        x = np.arange(1, n + 1)
        mean = np.nanmean(finite, 0)
        ax.plot(x, mean, color=colors[method], lw=1.6, label=f"{method} {mean[-1]:.4g}")
        ax.fill_between(x, np.nanmin(finite, 0), np.nanmax(finite, 0), color=colors[method],
                        alpha=0.15, lw=0)
        finals.append(mean[-1])
    bound = meta.get((g, c), {}).get("lower_bound_s")
    if bound:
        ax.axhline(bound * 1e3, ls="--", lw=1, color="black",
                   label=f"lower bound {bound * 1e3:.4g}")
    single = [r.step_time_s * 1e3 for r in mine if r.method == "single"]
    top = max(single + [np.nanmedian(finals)]) * 1.3 if finals else None
    bottom = (bound * 1e3 if bound else np.nanmin(finals)) * 0.9
    if top and np.isfinite(top) and top > bottom:
        ax.set_ylim(bottom, top)
    ax.set(xlabel="evaluated placements (samples)",
           ylabel="best step time so far (ms, simulated estimate)",
           title=f"{g} on {c}: mean over seeds, band = min..max")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              title="final (ms)", title_fontsize=8)
    path = out / f"curve_{_file_part(g)}_{_file_part(c)}.png"
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=110, bbox_inches="tight"),
                 binary=True)
    plt.close(fig)
    return path
