"""The SVG figures of ``report.html``: a Gantt chart of the simulated step (one row per device,
one for the links with their transfers), device utilization and peak memory against capacity,
the fine-tuning curve, and the comparison with the single fastest device, the best heuristic and
the lower bound. Each function takes a PlacementResult (and the simulated step) and returns the
figure as SVG text, written directly (a plot library's import and rendering took a second).
"""

from __future__ import annotations

import html
import math

import numpy as np

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")  # matplotlib's tab10
FONT = "font-family='system-ui,sans-serif' font-size='12'"


class Canvas:
    """An SVG of ``width`` x ``height`` pixels with one plot area inside ``margin`` (left,
    top, right, bottom), data coordinates mapped linearly (or log10 on y) onto it."""

    def __init__(self, width: int, height: int, margin=(60, 30, 20, 45)):
        self.width, self.height = width, height
        self.left, self.top = margin[0], margin[1]
        self.right, self.bottom = width - margin[2], height - margin[3]
        self.parts: list[str] = []
        self.x0, self.x1, self.y0, self.y1, self.log_y = 0.0, 1.0, 0.0, 1.0, False

    def limits(self, x0, x1, y0, y1, log_y: bool = False) -> Canvas:
        self.x0, self.x1, self.y0, self.y1, self.log_y = x0, max(x1, x0 + 1e-12), y0, y1, log_y
        if log_y:
            self.y0, self.y1 = math.log10(y0), math.log10(max(y1, y0 * 10))
        return self

    def px(self, x) -> np.ndarray:
        return self.left + (np.asarray(x, float) - self.x0) / (self.x1 - self.x0) * (
            self.right - self.left)

    def py(self, y) -> np.ndarray:
        y = np.log10(np.maximum(np.asarray(y, float), 1e-300)) if self.log_y else np.asarray(y, float)
        return self.bottom - (y - self.y0) / (self.y1 - self.y0) * (self.bottom - self.top)

    def rect(self, x, y, w, h, color: str) -> None:
        self.parts.append(f"<rect x='{x:.2f}' y='{y:.2f}' width='{max(w, 0.3):.2f}' "
                          f"height='{h:.2f}' fill='{color}'/>")

    def line(self, xs, ys, color: str, width: float = 1.5, dash: str = "", opacity=1.0) -> None:
        points = " ".join(f"{x:.2f},{y:.2f}" for x, y in zip(xs, ys))
        style = f" stroke-dasharray='{dash}'" if dash else ""
        self.parts.append(f"<polyline points='{points}' fill='none' stroke='{color}' "
                          f"stroke-width='{width}' stroke-opacity='{opacity}'{style}/>")

    def text(self, x, y, s: str, anchor: str = "start", size: int = 12, rotate: float = 0,
             bold: bool = False) -> None:
        turn = f" transform='rotate({rotate} {x:.1f} {y:.1f})'" if rotate else ""
        weight = " font-weight='600'" if bold else ""
        self.parts.append(f"<text x='{x:.1f}' y='{y:.1f}' text-anchor='{anchor}' "
                          f"font-size='{size}'{weight}{turn}>{html.escape(s)}</text>")

    def frame(self, title: str, xlabel: str = "", ylabel: str = "") -> None:
        self.parts.append(f"<rect x='{self.left}' y='{self.top}' width='{self.right - self.left}' "
                          f"height='{self.bottom - self.top}' fill='none' stroke='#444'/>")
        self.text((self.left + self.right) / 2, self.top - 10, title, "middle", 13, bold=True)
        if xlabel:
            self.text((self.left + self.right) / 2, self.height - 8, xlabel, "middle")
        if ylabel:
            self.text(14, (self.top + self.bottom) / 2, ylabel, "middle", rotate=-90)

    def x_ticks(self) -> None:
        for v in nice_ticks(self.x0, self.x1):
            x = float(self.px(v))
            self.line([x, x], [self.bottom, self.bottom + 4], "#444", 1)
            self.text(x, self.bottom + 16, f"{v:g}", "middle", 11)

    def y_ticks(self) -> None:
        values = ([10.0 ** e for e in range(math.floor(self.y0), math.ceil(self.y1) + 1)]
                  if self.log_y else nice_ticks(self.y0, self.y1))
        for v in values:
            y = float(self.py(v))
            if self.top - 0.5 <= y <= self.bottom + 0.5:
                self.line([self.left - 4, self.left], [y, y], "#444", 1)
                self.text(self.left - 6, y + 4, f"{v:g}", "end", 11)

    def legend(self, entries: list[tuple[str, str, str]], x: float, y: float) -> None:
        """(label, color, dash) rows from the top-left corner (x, y)."""
        for i, (label, color, dash) in enumerate(entries):
            yy = y + 15 * i
            self.line([x, x + 22], [yy, yy], color, 2, dash)
            self.text(x + 28, yy + 4, label, size=11)

    def svg(self) -> str:
        return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{self.width}' "
                f"height='{self.height}' viewBox='0 0 {self.width} {self.height}' {FONT}>"
                f"<rect width='100%' height='100%' fill='white'/>{''.join(self.parts)}</svg>\n")


def nice_ticks(lo: float, hi: float, count: int = 6) -> list[float]:
    """About ``count`` round values (1, 2 or 5 x 10^k apart) between lo and hi."""
    span = hi - lo
    if not span > 0 or not math.isfinite(span):
        return [lo]
    raw = span / count
    step = min((m * 10 ** math.floor(math.log10(raw)) for m in (1, 2, 5, 10)),
               key=lambda s: abs(s - raw))
    first = math.ceil(lo / step - 1e-9) * step
    return [round(first + i * step, 12) for i in range(int((hi - first) / step + 1e-9) + 1)]


def merged_spans(start: np.ndarray, end: np.ndarray, resolution: float) -> tuple[np.ndarray, np.ndarray]:
    """The union of [start, end) intervals, with gaps under ``resolution`` closed (a pixel's
    worth: the chart looks the same with far fewer rectangles)."""
    keep = end > start
    start, end = start[keep], end[keep]
    if not start.size:
        return start, end
    order = np.argsort(start, kind="stable")
    start, end = start[order], np.maximum.accumulate(end[order])
    breaks = np.flatnonzero(start[1:] > end[:-1] + resolution) + 1
    firsts = np.concatenate([[0], breaks])
    lasts = np.concatenate([breaks - 1, [start.size - 1]])
    return start[firsts], end[lasts]


def gantt(result, sim) -> str:
    devices = result.problem.cluster.devices
    channels = result.problem.cluster.link_table()
    rows = len(devices) + 1
    c = Canvas(1100, int(55 * rows + 160), (170, 40, 20, 45))
    step_ms = max(result.step_time_s * 1e3, 1e-6)
    c.limits(0, step_ms, -0.5, rows - 0.5)
    resolution = step_ms / (c.right - c.left) / 4
    row_h = float(c.py(0) - c.py(0.8))
    for d, dev in enumerate(devices):
        mine = sim.op_device == d
        starts, ends = merged_spans(sim.op_start_s[mine] * 1e3, sim.op_end_s[mine] * 1e3,
                                    resolution)
        _bars(c, starts, ends, rows - 1 - d, row_h, PALETTE[d % 10])
        c.text(c.left - 6, float(c.py(rows - 1 - d)) + 4, f"{dev.name} ({dev.kind})", "end")
    x = sim.transfers
    starts, ends = merged_spans(np.asarray(x.start_s) * 1e3, np.asarray(x.done_s) * 1e3,
                                resolution)
    _bars(c, starts, ends, 0, row_h, "#666666")
    c.text(c.left - 6, float(c.py(0)) + 4, "links", "end")
    c.x_ticks()
    c.frame(f"{result.summary.graph} on {result.summary.cluster}: one training step, "
            f"{result.step_time_s * 1e3:.2f} ms ({len(x.nbytes)} transfers over "
            f"{channels.num_channels} link channels)", "time in the step (ms, simulated)")
    return c.svg()


def _bars(c: Canvas, starts, ends, row: float, height: float, color: str) -> None:
    top = float(c.py(row)) - height / 2
    for x0, x1 in zip(c.px(starts).tolist(), c.px(ends).tolist()):
        c.rect(x0, top, x1 - x0, height, color)


def devices_figure(result, sim) -> str:
    """Two panels side by side: busy share of the step, and peak memory against capacity."""
    devices = result.problem.cluster.devices
    names = [d.name for d in devices]
    lanes = np.array([d.lanes for d in devices])
    util = sim.busy_s / lanes / max(sim.step_time_s, 1e-12) * 100
    cap = np.array([d.memory_bytes for d in devices]) / 1e9
    peak = np.asarray(sim.peak_bytes) / 1e9
    left = _bar_panel(names, [(util, PALETTE[0])], "device utilization", "busy (% of the step)",
                      (0, 105), False)
    positive = np.concatenate([cap[cap > 0], peak[peak > 0]])
    low = 10 ** math.floor(math.log10(positive.min())) if positive.size else 1e-3
    right = _bar_panel(names, [(cap, "#d9d9d9"), (peak, PALETTE[1])],
                       "peak memory against capacity", "GB",
                       (low, max(positive.max() if positive.size else 1, low * 10) * 1.5), True,
                       [("capacity", "#d9d9d9", ""), ("peak (parameters + live tensors)",
                                                      PALETTE[1], "")])
    return ("<svg xmlns='http://www.w3.org/2000/svg' width='1100' height='380' "
            f"viewBox='0 0 1100 380' {FONT}><rect width='100%' height='100%' fill='white'/>"
            f"<svg x='0' width='550' height='380'>{_inner(left)}</svg>"
            f"<svg x='550' width='550' height='380'>{_inner(right)}</svg></svg>\n")


def _inner(svg: str) -> str:
    """The drawing inside a figure's outer <svg> element."""
    return svg[svg.index(">") + 1: svg.rindex("</svg>")]


def _bar_panel(names, series, title, ylabel, ylim, log_y, legend=None) -> str:
    c = Canvas(550, 380, (70, 35, 15, 90)).limits(-0.5, len(names) - 0.5, *ylim, log_y=log_y)
    width = float(c.px(0.4) - c.px(0))
    base = c.bottom
    for values, color in series:
        for i, v in enumerate(np.asarray(values, float).tolist()):
            if v > 0 and math.isfinite(v):
                y = float(np.clip(c.py(v), c.top, base))
                c.rect(float(c.px(i)) - width, y, 2 * width, base - y, color)
    for i, name in enumerate(names):
        x = float(c.px(i))
        c.text(x, c.bottom + 12, name, "end", 11, rotate=-45)
    c.y_ticks()
    c.frame(title, "", ylabel)
    if legend:
        c.legend(legend, c.left + 10, c.top + 14)
    return c.svg()


def finetune_curve(result) -> str:
    s = result.summary
    curve = result.finetune.history.best_so_far()
    start = result.start_step_time_s
    zero = result.finetune.info.get("zero_shot_step_time_s", s.zero_shot_step_time_s)  # as
    # the search measured it, like the curve (--measure real measures it again after)
    marks = [(label, value, dash, color) for (label, value, dash, color) in (
        ("zero-shot", zero, "6,4", PALETTE[2]),
        ("best heuristic", s.best_heuristic.step_time_s, "2,3", PALETTE[3]),
        ("single device", s.single_device_s, "8,3,2,3", PALETTE[4]),
        ("lower bound", s.lower_bound_s, "", "#4d4d4d"))
        if value is not None and np.isfinite(value)]
    lines = []
    if curve.size:
        lines = [(np.minimum(curve, start) * 1e3, PALETTE[0], 1.0,
                  "best so far (from the zero-shot and heuristic starts)"),
                 (curve * 1e3, PALETTE[1], 0.6, "best fine-tuning sample alone")]
    values = [v * 1e3 for _, v, _, _ in marks]
    for ys, *_ in lines:
        values += ys[np.isfinite(ys)].tolist()
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    pad = (hi - lo) * 0.05 or abs(hi) * 0.05 or 1.0
    c = Canvas(700, 400, (70, 35, 20, 45)).limits(1, max(curve.size, 2), lo - pad, hi + pad)
    for ys, color, opacity, _ in lines:
        xs = np.arange(1, curve.size + 1)
        ok = np.isfinite(ys)
        c.line(c.px(xs[ok]), c.py(ys[ok]), color, 1.5, opacity=opacity)
    for _, v, dash, color in marks:
        c.line([c.left, c.right], [float(c.py(v * 1e3))] * 2, color, 1, dash)
    c.x_ticks()
    c.y_ticks()
    c.frame(f"fine-tuning: {s.samples} samples", "evaluated placements",
            f"step time (ms, {s.step_times})")
    c.legend([(label, color, "") for *_, color, _o, label in lines]
             + [(f"{label} {v * 1e3:.3f} ms", color, dash) for label, v, dash, color in marks],
             c.left + 10, c.top + 14)
    return c.svg()


def comparison(result) -> str:
    s = result.summary
    bars = [("single device", s.single_device_s),
            (f"best heuristic ({s.best_heuristic.name})", s.best_heuristic.step_time_s),
            ("gplace zero-shot", s.zero_shot_step_time_s), ("gplace", s.step_time_s),
            ("lower bound", s.lower_bound_s)]
    bars = [(n, v * 1e3) for n, v in bars if v is not None and np.isfinite(v)]
    c = Canvas(700, 60 + 34 * max(len(bars), 1) + 45, (190, 35, 70, 45))
    c.limits(0, max([v for _, v in bars], default=1.0) * 1.05, -0.5, len(bars) - 0.5)
    height = float(c.py(0) - c.py(0.8))
    for i, (name, v) in enumerate(bars):
        y = float(c.py(len(bars) - 1 - i))
        c.rect(c.left, y - height / 2, float(c.px(v)) - c.left, height, PALETTE[2])
        c.text(c.left - 6, y + 4, name, "end")
        c.text(float(c.px(v)) + 4, y + 4, f"{v:.3f}", size=11)
    c.x_ticks()
    c.frame("placement comparison", f"step time (ms, {s.step_times})")
    return c.svg()
