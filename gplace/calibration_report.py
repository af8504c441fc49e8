"""What a calibration (gplace.calibrate) reports: each graph's placements measured for real and
simulated, the agreement between the two, and the report's JSON and scatter plot.

Agreement: Kendall's tau-b (Kendall 1945, ties handled) and Spearman's rho over the placements
of a graph, and the median relative error |sim - real| / real. Overall figures: tau and rho are
the mean over graphs (pooling graphs of very different step times would inflate them; the
pooled tau is reported too), the error is the median over all placements.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np

from gplace.cluster import Link
from gplace.io import plain_json
from gplace.real.links import LinkFit, StepOverhead


class GraphCalibration(NamedTuple):
    name: str
    family: str
    ops: int
    units: int
    labels: list[str]             # how each placement was made
    measured_s: np.ndarray        # (placements,) real step time (the protocol's estimate over
                                  # every repeat's steps); inf if infeasible
    spread_s: np.ndarray          # (placements,) half-width of its confidence interval
    simulated_s: np.ndarray       # (placements,) simulator + step overhead
    reasons: list[str]            # "" or why a real run failed
    kendall_tau: float
    spearman_rho: float
    median_rel_error: float
    repeat_tau: float             # tau between the first two repeats: the noise ceiling
    repeats_s: np.ndarray = np.zeros((0, 0))  # (repeats, placements) each repeat's estimate
    seconds_per_placement: float = float("nan")  # wall time of one repeat / placements
    load: tuple = ()              # LoadFigures of each repeat
    placements: np.ndarray | None = None  # (placements, units) what was measured


class CalibrationReport(NamedTuple):
    cluster: str
    graphs: list[GraphCalibration]
    link: LinkFit
    overhead: StepOverhead
    kendall_tau: float            # mean over graphs
    spearman_rho: float           # mean over graphs
    median_rel_error: float       # median over every feasible placement
    pooled_kendall_tau: float
    repeat_tau: float             # mean over graphs of real-vs-real tau
    effective_bandwidth: float = float("nan")  # bytes/s the simulator's link used
    recv_cpu_s: float = 0.0                    # the simulator's receive CPU (Link)
    recv_cpu_s_per_byte: float = 0.0

    def to_json(self) -> dict:
        return {"cluster": self.cluster, "kendall_tau": self.kendall_tau,
                "spearman_rho": self.spearman_rho, "median_rel_error": self.median_rel_error,
                "pooled_kendall_tau": self.pooled_kendall_tau, "repeat_tau": self.repeat_tau,
                "link": {"latency_s": self.link.latency_s, "bandwidth": self.link.bandwidth,
                         "sizes": list(self.link.sizes), "extra_s": list(self.link.extra_s),
                         "residual_rel": list(self.link.residual_rel)},
                "step_overhead": self.overhead._asdict(),
                "simulated_link": {"latency_s": self.link.latency_s,
                                   "bandwidth": self.effective_bandwidth,
                                   "recv_cpu_s": self.recv_cpu_s,
                                   "recv_cpu_s_per_byte": self.recv_cpu_s_per_byte},
                "graphs": [_graph_json(g) for g in self.graphs]}


def _graph_json(g: GraphCalibration) -> dict:
    finite = lambda a: [float(x) if np.isfinite(x) else None for x in a]  # noqa: E731
    return {"name": g.name, "family": g.family, "ops": g.ops, "units": g.units,
            "kendall_tau": g.kendall_tau, "spearman_rho": g.spearman_rho,
            "median_rel_error": g.median_rel_error, "repeat_tau": g.repeat_tau,
            "seconds_per_placement": g.seconds_per_placement,
            "load": [f.as_dict() for f in g.load],
            "placements": [{"label": l, "measured_s": m, "spread_s": s, "simulated_s": t,
                            "repeats_s": finite(rep), "reason": r,
                            **({} if p is None else {"units": [int(x) for x in p]})}
                           for l, m, s, t, rep, r, p in zip(
                g.labels, finite(g.measured_s), finite(g.spread_s), finite(g.simulated_s),
                g.repeats_s.T, g.reasons,
                [None] * len(g.labels) if g.placements is None else g.placements)]}


# ---- statistics ------------------------------------------------------------------------------
def kendall_tau(x, y) -> float:
    """Kendall's tau-b: (concordant - discordant) / sqrt((n0 - ties_x)(n0 - ties_y))."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    i, j = np.triu_indices(len(x), 1)
    dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
    denom = np.sqrt(float(np.count_nonzero(dx)) * float(np.count_nonzero(dy)))
    return float(np.sum(dx * dy) / denom) if denom > 0 else float("nan")


def _ranks(a: np.ndarray) -> np.ndarray:
    """Average ranks (ties share the mean of their positions)."""
    order = np.argsort(a, kind="stable")
    ranks = np.empty(len(a))
    ranks[order] = np.arange(len(a), dtype=np.float64)
    sorted_a = a[order]
    for v in np.unique(sorted_a[1:][np.diff(sorted_a) == 0]):
        ranks[a == v] = ranks[a == v].mean()
    return ranks


def spearman_rho(x, y) -> float:
    """Pearson correlation of the average ranks."""
    rx, ry = _ranks(np.asarray(x, np.float64)), _ranks(np.asarray(y, np.float64))
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def median_rel_error(simulated, measured) -> float:
    s, m = np.asarray(simulated, np.float64), np.asarray(measured, np.float64)
    return float(np.median(np.abs(s - m) / m)) if len(m) else float("nan")


def repeat_tau(repeats: np.ndarray) -> float:
    """Kendall tau between the first two repeats' step times over the placements feasible in
    both: how well real measurements rank against themselves (nan with fewer than 2)."""
    if len(repeats) < 2:
        return float("nan")
    a, b = repeats[0], repeats[1]
    ok = np.isfinite(a) & np.isfinite(b)
    return kendall_tau(a[ok], b[ok]) if ok.sum() > 2 else float("nan")


# ---- the report ----------------------------------------------------------------------------


def describe_link(link: Link) -> str:
    """'latency 176 us, bandwidth 2052 MB/s, receive CPU 176 us + 0.80 ms/MB'."""
    return (f"latency {link.latency_s * 1e6:.0f} us, bandwidth {link.bandwidth / 1e6:.0f} MB/s, "
            f"receive CPU {link.recv_cpu_s * 1e6:.0f} us + "
            f"{link.recv_cpu_s_per_byte * 1e9:.2f} ms/MB")


def write_report(report: CalibrationReport, out_dir: Path) -> None:
    from gplace.io import atomic_write_text
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out_dir / "calibration.json", plain_json(report.to_json(), indent=1))
    scatter_png(report, out_dir / "calibration.png")


def build_report(name, graphs, link, overhead, simulated: Link) -> CalibrationReport:
    pooled_s, pooled_m, errors = [], [], []
    for g in graphs:
        ok = np.isfinite(g.measured_s) & np.isfinite(g.simulated_s)
        pooled_s += g.simulated_s[ok].tolist()
        pooled_m += g.measured_s[ok].tolist()
    def mean(xs) -> float:  # over the finite ones (repeat_tau is nan with one repeat)
        xs = np.asarray(xs, np.float64)
        return float(xs[np.isfinite(xs)].mean()) if np.isfinite(xs).any() else float("nan")

    return CalibrationReport(
        name, graphs, link, overhead, mean([g.kendall_tau for g in graphs]),
        mean([g.spearman_rho for g in graphs]), median_rel_error(pooled_s, pooled_m),
        kendall_tau(pooled_s, pooled_m), mean([g.repeat_tau for g in graphs]),
        simulated.bandwidth, simulated.recv_cpu_s, simulated.recv_cpu_s_per_byte)


def scatter_png(report: CalibrationReport, path: Path) -> None:
    """Simulated against measured step time, log-log, one colour per graph, y = x dashed."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 6))
    lo, hi = np.inf, 0.0
    for g in report.graphs:
        ok = np.isfinite(g.measured_s) & np.isfinite(g.simulated_s)
        ax.scatter(g.measured_s[ok] * 1e3, g.simulated_s[ok] * 1e3, s=18,
                   label=f"{g.name} ({g.family}): tau {g.kendall_tau:.2f}, "
                         f"err {g.median_rel_error:.0%}")
        if ok.any():
            both = np.r_[g.measured_s[ok], g.simulated_s[ok]] * 1e3
            lo, hi = min(lo, both.min()), max(hi, both.max())
    if hi > 0:
        ax.plot([lo * 0.8, hi * 1.2], [lo * 0.8, hi * 1.2], "k--", lw=0.8, label="y = x")
    ax.set(xscale="log", yscale="log",
           xlabel="measured step time (ms, the protocol's trimmed mean)",
           ylabel="simulated step time (ms)",
           title=f"{report.cluster}: tau {report.kendall_tau:.2f}, rho "
                 f"{report.spearman_rho:.2f}, median rel. err {report.median_rel_error:.0%}")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
