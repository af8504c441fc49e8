"""``report.html``: the page a person reads after ``gplace place``.

Sections, top to bottom: a headline (graph, cluster, step time, speed-ups, who found it), the
placers compared, the devices (ops, busy time, peak memory against capacity), where the
top-level name scopes went, the figures, and how to run ``placed.pb``. Plain HTML with inline
CSS, no script; the figures are SVG files beside the page, so the folder is self-contained.
"""

from __future__ import annotations

import html
from typing import NamedTuple

import numpy as np

CAPTIONS = {
    "gantt.svg": "One training step of the placement, simulated: a row per device, one for the "
                 "links with the tensors they carry.",
    "devices.svg": "Busy share of the step and peak memory against capacity, per device.",
    "finetune.svg": "Fine-tuning: the best step time after each measured placement.",
    "comparison.svg": "The placement against the single fastest device, the best heuristic, "
                      "the zero-shot policy and the lower bound.",
}
TOP_SCOPES = 15  # scopes listed by name; the rest share one row

_CSS = (
    "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;"
    "color:#222;line-height:1.4}h1{font-size:1.6em;margin-bottom:.2em}"
    ".lead{font-size:1.2em}.fine{color:#666;font-size:.9em}"
    "table{border-collapse:collapse;margin:.5em 0 1.5em}"
    "th,td{padding:.25em .7em;border-bottom:1px solid #ddd;text-align:right}"
    "th:first-child,td:first-child{text-align:left}thead th{border-bottom:2px solid #999}"
    "tr.chosen{background:#eef7ee;font-weight:600}"
    ".bar{display:inline-block;width:8em;height:.8em;background:#eee;vertical-align:middle}"
    ".bar span{display:block;height:100%;background:#4a90d9}.bar .over{background:#d9534f}"
    "figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee}"
    "figcaption{color:#555;font-size:.9em}pre{background:#f6f6f6;padding:1em;overflow-x:auto}"
)


class PlacerRow(NamedTuple):
    placer: str
    step_time_s: float | None   # None: not run; inf: nothing feasible
    samples: int                # measured placements charged to a budget
    note: str


class DeviceRow(NamedTuple):
    name: str
    kind: str
    ops: int
    busy_s: float               # summed op time (lane-seconds for multi-lane CPUs)
    busy_share: float           # busy_s / lanes / step time
    peak_bytes: int
    capacity_bytes: int


class ScopeRow(NamedTuple):
    scope: str
    ops: int
    busy_s: float               # summed simulated op time of the scope's ops
    share: np.ndarray           # (devices,) fraction of the scope's ops on each device


def placer_rows(result) -> list[PlacerRow]:
    """The cheap heuristics, the policy zero-shot and fine-tuned, and the lower bound."""
    s = result.summary
    rows = [PlacerRow(name, r.step_time_s, r.samples,
                      "everything on the fastest device" if name == "single" else "heuristic")
            for name, r in result.heuristics.items()]
    rows.append(PlacerRow("gnn (zero-shot)", s.zero_shot_step_time_s, 0,
                          "the pretrained policy, no samples (the best of its greedy "
                          "and sampled rollouts by its own schedule estimate)"))
    if s.samples:  # --measure real: the time measured again beside the heuristics
        tuned = result.intervals.get("gnn", (result.finetune.step_time_s,))[0]
        rows.append(PlacerRow("gnn (fine-tuned)", tuned, s.samples,
                              "fine-tuning from the zero-shot and heuristic placements"))
    return rows


def device_rows(problem, sim) -> list[DeviceRow]:
    """Per device: ops placed there, busy time and peak memory in the simulated step."""
    devices = problem.cluster.devices
    ops = np.bincount(sim.op_device, minlength=len(devices))
    step = max(sim.step_time_s, 1e-12)
    return [DeviceRow(d.name, d.kind, int(ops[i]), float(sim.busy_s[i]),
                      float(sim.busy_s[i]) / d.lanes / step, int(sim.peak_bytes[i]),
                      int(d.memory_bytes))
            for i, d in enumerate(devices)]


def top_scope(name: str) -> str:
    """The first component of an op name: ``gradients/conv1/...`` -> ``gradients``."""
    return name.split("/", 1)[0]


def scope_rows(graph, sim, num_devices: int, top: int = TOP_SCOPES) -> list[ScopeRow]:
    """Top-level name scopes by simulated busy time, each with its ops' device shares; scopes
    past ``top`` are folded into one last row."""
    scopes = np.array([top_scope(n) for n in graph.names.tolist()])
    names, inverse = np.unique(scopes, return_inverse=True)
    busy = np.bincount(inverse, weights=sim.op_end_s - sim.op_start_s, minlength=names.size)
    counts = np.bincount(inverse, minlength=names.size)
    order = np.lexsort((names, -counts, -busy))
    keep, rest = order[:top], order[top:]
    rows = [_scope_row(str(names[k]), inverse == k, sim, busy[k], num_devices) for k in keep]
    if rest.size:
        mask = np.isin(inverse, rest)
        rows.append(_scope_row(f"({rest.size} other scopes)", mask, sim, busy[rest].sum(),
                               num_devices))
    return rows


def _scope_row(label: str, mask: np.ndarray, sim, busy: float, num_devices: int) -> ScopeRow:
    per_device = np.bincount(sim.op_device[mask], minlength=num_devices)
    return ScopeRow(label, int(mask.sum()), float(busy), per_device / max(per_device.sum(), 1))


def report_html(result, sim, figures: list[str], placed: bool = True) -> str:
    """The whole page; ``figures`` are SVG file names in the page's folder; ``placed``: whether
    placed.pb was written (not for a graph given as an OpGraph)."""
    s = result.summary
    body = "".join([
        _headline(s),
        _section("Placers compared", _placer_table(placer_rows(result), s)),
        _section("Devices", _device_note(s) + _device_table(device_rows(result.problem, sim))),
        _section("Where the name scopes went",
                 _scope_table(scope_rows(result.graph, sim, result.problem.num_devices),
                              [d.name for d in result.problem.cluster.devices])),
        _section("Figures", "".join(_figure(f) for f in figures)),
        _section("Running placed.pb", _how_to_run(result) if placed else _no_placed_pb()),
    ])
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>gplace: {_e(s.graph)} on {_e(s.cluster)}</title><style>{_CSS}</style>"
            f"</head><body>{body}</body></html>\n")


def _headline(s) -> str:
    best = s.best_heuristic
    vs_best = (f"{s.speedup_vs_best_heuristic:.2f}x as fast as the best heuristic, "
               f"{_e(best.name)} ({_ms(best.step_time_s)})" if best.name
               else "no heuristic placement fits in memory")
    return (f"<h1>{_e(s.graph)} on {_e(s.cluster)}: {_ms(s.step_time_s)} per training step</h1>"
            f"<p class='lead'>{s.speedup_vs_single:.2f}x as fast as the single fastest device "
            f"({_ms(s.single_device_s)}); {vs_best}. Found by <b>{_e(s.chosen)}</b>, "
            f"with {s.samples} fine-tuning samples in {s.wall_s:.1f} s."
            f"{f' Stopped {_e(s.stopped)}.' if s.stopped else ''}</p>"
            f"<p class='fine'>{s.ops:,} ops in {s.units:,} units of placement (colocation "
            f"groups). {_e(s.cluster_choice)}. Step times: {_e(s.step_times)}. Op costs: "
            f"{_e(s.costs)}. {_bound_sentence(s)}</p>")


def _bound_sentence(s) -> str:
    if s.measure == "sim":
        return (f"No placement can beat the lower bound of {_ms(s.lower_bound_s)} (from the "
                f"cost model, for placements that fit in memory: a critical path that charges "
                f"transfers, atomic colocation groups and device loads).")
    return (f"The cost model's lower bound, {_ms(s.lower_bound_s)}, bounds simulated step times, "
            f"not measured ones. Measured step times vary from run to run: the same placement "
            f"measured twice (a heuristic's, then again as a start of fine-tuning) can differ "
            f"by a few percent.")


def _section(title: str, content: str) -> str:
    return f"<h2>{_e(title)}</h2>{content}"


def _placer_table(rows: list[PlacerRow], s) -> str:
    head = ("<tr><th>placer</th><th>step time</th><th>against the result</th><th>samples</th>"
            "<th>what it is</th></tr>")
    body = "".join(_placer_tr(r, s) for r in sorted(rows, key=_time_key))
    what = "no placement is faster" if s.measure == "sim" else "of simulated step times"
    bound = (f"<tr><td>lower bound</td><td>{_ms(s.lower_bound_s)}</td><td></td><td></td>"
             f"<td>{what}</td></tr>")
    return f"<table><thead>{head}</thead><tbody>{body}{bound}</tbody></table>"


def _placer_tr(r: PlacerRow, s) -> str:
    chosen = r.placer == s.chosen
    if r.step_time_s is None or not np.isfinite(r.step_time_s):
        vs = "does not fit in memory" if r.step_time_s is not None else "not run"
    else:
        vs = f"{r.step_time_s / s.step_time_s:.2f}x the time"
    mark = " (chosen)" if chosen else ""
    return (f"<tr{' class=chosen' if chosen else ''}><td>{_e(r.placer)}{mark}</td>"
            f"<td>{_ms(r.step_time_s)}</td><td>{vs}</td><td>{r.samples}</td>"
            f"<td>{_e(r.note)}</td></tr>")


def _time_key(r: PlacerRow) -> float:
    return np.inf if r.step_time_s is None else r.step_time_s


def _device_note(s) -> str:
    where = ("the simulated step of the placement" if s.measure == "sim" else
             "the simulated step of the placement (the step time above was measured; "
             "these per-device figures are the cost model's)")
    return f"<p class='fine'>From {where}.</p>"


def _device_table(rows: list[DeviceRow]) -> str:
    head = ("<tr><th>device</th><th>kind</th><th>ops</th><th>busy</th><th>busy share of "
            "the step</th><th>peak memory</th><th>capacity</th><th>peak / capacity</th></tr>")
    body = "".join(
        f"<tr><td>{_e(r.name)}</td><td>{_e(r.kind)}</td><td>{r.ops:,}</td>"
        f"<td>{_ms(r.busy_s)}</td><td>{_bar(r.busy_share)} {r.busy_share:.0%}</td>"
        f"<td>{_size(r.peak_bytes)}</td><td>{_size(r.capacity_bytes)}</td>"
        f"<td>{_bar(r.peak_bytes / max(r.capacity_bytes, 1))} "
        f"{r.peak_bytes / max(r.capacity_bytes, 1):.1%}</td></tr>" for r in rows)
    return f"<table><thead>{head}</thead><tbody>{body}</tbody></table>"


def _scope_table(rows: list[ScopeRow], devices: list[str]) -> str:
    head = ("<tr><th>top-level scope</th><th>ops</th><th>busy</th>"
            + "".join(f"<th>{_e(d)}</th>" for d in devices) + "</tr>")
    body = "".join(
        f"<tr><td>{_e(r.scope)}</td><td>{r.ops:,}</td><td>{_ms(r.busy_s)}</td>"
        + "".join(_share_td(x) for x in r.share) + "</tr>" for r in rows)
    return (f"<p class='fine'>Each device column: the share of the scope's ops placed there. "
            f"Scopes by simulated busy time.</p>"
            f"<table><thead>{head}</thead><tbody>{body}</tbody></table>")


def _share_td(x: float) -> str:
    if x <= 0:
        return "<td></td>"
    return f"<td style='background:rgba(74,144,217,{0.1 + 0.6 * x:.2f})'>{x:.0%}</td>"


def _figure(name: str) -> str:
    caption = CAPTIONS.get(name, name)
    return (f"<figure><img src='{_e(name)}' alt='{_e(caption)}'>"
            f"<figcaption>{_e(caption)}</figcaption></figure>")


def fetch_ops(graph, limit: int = 10) -> tuple[list[str], list[str], list[str], int]:
    """(initializers, step fetches, placeholders, fetches left off): the initializer sinks the
    import left out of the step (gplace.importer.step), the step's sinks that update a variable
    or come after an update (all of its sinks when none does; ``limit`` of them), and the
    placeholders the step reads (to feed)."""
    used = np.zeros(graph.num_ops, bool)
    used[graph.edge_src] = True
    used[graph.ctrl_src] = True
    from gplace.importer.step import TRAINING_UPDATE
    # the import left the initializers out: any Assign still in the step updates a variable
    after = np.array([bool(TRAINING_UPDATE.fullmatch(t)) or t.startswith("Assign")
                      for t in graph.op_types.tolist()], bool)
    succ = [[] for _ in range(graph.num_ops)]
    for a, b in zip(np.concatenate([graph.edge_src, graph.ctrl_src]).tolist(),
                    np.concatenate([graph.edge_dst, graph.ctrl_dst]).tolist()):
        succ[a].append(b)
    stack = np.flatnonzero(after).tolist()
    while stack:
        for j in succ[stack.pop()]:
            if not after[j]:
                after[j] = True
                stack.append(j)
    sinks = np.flatnonzero(~used)
    steps = [graph.names[k] for k in sinks if after[k]] or graph.names[sinks].tolist()
    inits = graph.meta.get("import", {}).get("left_out_sinks", {}).get("variable initializers",
                                                                       [])
    feeds = [n for n, t, k in zip(graph.names.tolist(), graph.op_types.tolist(),
                                  range(graph.num_ops))
             if t in ("Placeholder", "PlaceholderV2")
             and graph.out_dtype[graph.out_ptr[k]] != "resource"]
    return list(inits), [str(n) for n in steps[:limit]], feeds, max(0, len(steps) - limit)


def _how_to_run(result) -> str:
    used = sorted(set(result.op_devices.values()))
    remote = any(not d.startswith("/job:localhost") for d in used)
    runs_with = result.graph.meta.get("import", {}).get("runs_with")
    if runs_with is None and _captured_variables(result.graph):
        code, how = _function_recipe(), (
            "<code>placed.pb</code> is the graph of the <code>tf.function</code> you placed, "
            "with <code>NodeDef.device</code> set on every op of the step; its variables "
            "come in as resource placeholders (the function's captures), so it runs inside "
            "<code>tf.compat.v1.wrap_function</code> with them mapped to your variables. It "
            "uses these devices:")
    else:
        code, how = _session_recipe(result, runs_with, remote), (
            "<code>placed.pb</code> is the graph with <code>NodeDef.device</code> set on every "
            "op of the step (the ops the import left out keep the device they had); run it "
            "like the original graph" + (
                " on the TF cluster whose tasks these are (a session on one of its servers, "
                "<code>grpc://HOST:PORT</code>)" if remote else "") + ". It uses these devices:")
    devices = "".join(f"<li><code>{_e(d)}</code></li>" for d in used)
    return (f"<p>{how}</p><ul>{devices}</ul><pre>{_e(code)}</pre>"
            f"<p>Also in this folder: <code>placement.json</code> (the summary and op name to "
            f"device), <code>trace.json</code> (the simulated step; open it in "
            f"<a href='https://ui.perfetto.dev'>ui.perfetto.dev</a>) and the figures.</p>")


def _captured_variables(graph) -> bool:
    """Whether the step reads variables through resource placeholders (a tf.function's
    graph: its captures), which a TF1 session cannot feed."""
    placeholders = np.flatnonzero(graph.op_types == "Placeholder")
    return bool((graph.out_dtype[graph.out_ptr[placeholders]] == "resource").any())


_READ_PLACED = ("import tensorflow as tf\n\n"
                "graph_def = tf.compat.v1.GraphDef()\n"
                "graph_def.ParseFromString(open(\"placed.pb\", \"rb\").read())\n")


def _session_recipe(result, runs_with: dict | None, remote: bool) -> str:
    """A TF1 session that runs the step: a SavedModel's variables restored by its saver and
    its signature fed and fetched, else the initializers the import left out and the ops
    that update variables (fetch_ops)."""
    target = '"grpc://HOST:PORT", ' if remote else ""
    inits, steps, feeds, more = fetch_ops(result.graph)
    saver = (runs_with or {}).get("saver")
    signature = (runs_with or {}).get("signature")
    if saver:
        from gplace.importer.reader import checkpoint_of
        im = result.graph.meta.get("import", {})
        checkpoint = checkpoint_of(result.graph.meta.get("source"),
                                   im.get("format", "")) or "CHECKPOINT_PREFIX"
        init = (f"    sess.run({saver['restore_op']!r}, {{{saver['filename_tensor']!r}: "
                f"{checkpoint!r}}})  # once: the variables, from their checkpoint\n")
    elif inits:
        init = f"    sess.run({inits!r})  # once: the initializers\n"
    else:
        init = "    # run your variables' initializer once, if the graph has one\n"
    if signature:
        feed = ", ".join(f"{tensor!r}: ..." for tensor in signature["inputs"].values())
        step = (f"    sess.run({signature['outputs']!r}, feed_dict={{{feed}}})  # each step: "
                f"signature {result.graph.meta['import'].get('signature')!r} (inputs "
                f"{', '.join(signature['inputs'])})\n")
    else:
        fed = (", feed_dict={" + ", ".join(f"{n + ':0'!r}: ..." for n in feeds[:8])
               + (", ..." if len(feeds) > 8 else "") + "}") if feeds else ""
        step = (f"    sess.run({steps!r}{fed})  # each step: the training ops"
                + (f" (and {more} more ops nothing depends on)" if more else "") + "\n")
    return (_READ_PLACED +
            "with tf.Graph().as_default() as graph:\n"
            "    tf.graph_util.import_graph_def(graph_def, name=\"\")\n"
            "# allow_soft_placement=False: fail rather than move an op off its device\n"
            "config = tf.compat.v1.ConfigProto(allow_soft_placement=False)\n"
            f"with tf.compat.v1.Session({target}graph=graph, config=config) as sess:\n"
            + init + step)


def _function_recipe() -> str:
    """The placed graph of a tf.function run in place of it: its captured variables' handles
    and its inputs mapped onto the graph's placeholders."""
    return (_READ_PLACED +
            "concrete = step.get_concrete_function(...)  # the tf.function you placed\n\n"
            "def run_placed(*args):\n"
            "    captured = {inner.name: tf.identity(outer)\n"
            "                for outer, inner in concrete.graph.captures}\n"
            "    feeds = {t.name: a for t, a in zip(concrete.inputs, args)}\n"
            "    return tf.graph_util.import_graph_def(\n"
            "        graph_def, input_map={**feeds, **captured},\n"
            "        return_elements=[t.name for t in concrete.outputs], name=\"placed\")\n\n"
            "placed_step = tf.compat.v1.wrap_function(\n"
            "    run_placed, tf.nest.flatten(concrete.structured_input_signature))\n"
            "# each call: one training step, each op on its device; the arguments flattened\n"
            "placed_step(*tf.nest.flatten(batch))\n")


def _no_placed_pb() -> str:
    return ("<p>No <code>placed.pb</code>: the graph was given as an <code>OpGraph</code>, "
            "without the TensorFlow graph behind it. <code>placement.json</code> maps each op "
            "name to its TF device string; set <code>NodeDef.device</code> from it.</p>")


def _bar(fraction: float) -> str:
    over = " class='over'" if fraction > 1 else ""
    return f"<span class='bar'><span{over} style='width:{min(fraction, 1) * 100:.0f}%'></span></span>"


def _ms(seconds: float | None) -> str:
    if seconds is None or not np.isfinite(seconds):
        return "-"
    return f"{seconds * 1e3:.3f} ms"


def _size(n: float) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


def _e(text) -> str:
    return html.escape(str(text), quote=True)
