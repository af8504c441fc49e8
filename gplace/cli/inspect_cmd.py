"""``gplace inspect MODEL``: what the importer sees in a graph."""

from __future__ import annotations

import argparse
import time

from gplace.cli import checks, models
from gplace.io import plain_json


def add_parser(sub, name: str) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help="import a graph and print its ops, groups, FLOPs and loops",
                       description="Import a TensorFlow graph (.pb, .pbtxt, .meta, SavedModel "
                                   "directory), a PyTorch training step (.pt2, torch.export) "
                                   "or a gplace .npz and summarize it.")
    p.add_argument("model", help="graph file or SavedModel directory")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--save", metavar="FILE.npz", help="also write the imported OpGraph here")
    models.add_import_arguments(p)
    return p


def run(args) -> int:
    start = time.perf_counter()
    checks.model_path(args.model)
    options = models.import_options(args)
    if args.save:
        checks.output_file(args.save, "--save")
    if not str(args.model).endswith(".npz"):  # imported by TensorFlow's graph framework alone
        from gplace.opgraph_cache import finish, prefetch
        pending = prefetch(args.model, options.get("unknown_dim", 1), args.signature)
        if pending is not None:
            finish(pending)  # a bad graph's error from there
    graph = models.load_model(args.model, **options)
    if args.save:
        try:
            graph.save(args.save)
        except OSError as e:  # checked above, but a disk can fill up meanwhile
            from gplace.errors import GplaceError
            raise GplaceError(f"could not write {args.save} ({e.strerror or e})") from None
    summary = graph.summary()
    summary["import"] = graph.meta.get("import", {})
    if summary["import"].get("loops"):
        from gplace.cost import cost_model_for
        runs = cost_model_for(args.model).runs(graph)
        summary["loop_runs"] = None if runs is None else int(runs.max())
    from gplace.cost import half_precision
    summary["flops_16bit"] = float(graph.flops[half_precision(graph)].sum())
    from gplace.summary import import_note, shape_caveat
    summary["note"] = "; ".join(n for n in (import_note(graph), shape_caveat(graph)[2:]) if n)
    if args.save:
        summary["saved"] = str(args.save)
    summary["seconds"] = round(time.perf_counter() - start, 3)
    if args.json:
        print(plain_json(summary))
    else:
        print(render(summary))
    return 0


def render(s: dict) -> str:
    im = s.get("import", {})
    lines = [
        f"graph          {s['name']}",
        f"ops            {s['ops']:,}",
        *([f"left out       {left} (ops a training step does not run; whole_graph=True in "
           "gplace.load_graph keeps them)"] if (left := _left_out(im)) else []),
        f"edges          {s['edges']:,} data, {s['control_edges']:,} control",
        f"groups         {s['groups']:,} colocation groups",
        f"flops          {s['flops']:.4g} (" + (
            f"{im['flops_from_torch_counter']:.4g} from torch.utils.flop_counter's formulas, "
            "the rest estimated" if "flops_from_torch_counter" in im
            else f"{im.get('flops_from_tf_registry', 0):,} ops from TensorFlow's statistics, "
                 "the rest estimated") + ")" + _half_note(s),
        f"params         {s['param_bytes'] / 2**20:,.1f} MiB (variables, optimizer slots "
        "included)",
        f"loops          {im.get('loops', 0)} TF1 loop frames" + _loop_note(s),
        f"functions      {sum(im.get('inlined_functions', {}).values())} calls inlined, "
        f"{len(im.get('kept_function_ops', {}))} kept as one op"
        + (f", {len(im['lowered_conds'])} tf.cond lowered to Switch and Merge"
           if im.get("lowered_conds") else ""),
        f"unknown dims   {im.get('outputs_with_unknown_dims', 0):,} outputs (counted as "
        f"{im.get('unknown_dim', 1)} per unknown dimension)",
        f"shapes from    {im.get('shape_inference', '?')}",
        "top op types   " + ", ".join(f"{t} {c:,}" for t, c in s["top_op_types"].items()),
    ]
    lines += [f"note           {n}" for n in ([s["note"]] if s.get("note") else [])
              + im.get("notes", [])]
    lines += [f"kept           {op}: {why}" for op, why in
              list(im.get("kept_function_ops", {}).items())[:5]]
    if s.get("saved"):
        lines.append(f"saved          {s['saved']} (gplace place and simulate take it)")
    lines.append(f"time           {s['seconds']:.2f} s")
    return "\n".join(lines)


def _half_note(s: dict) -> str:
    """The share of the FLOPs in float16 or bfloat16 ops (a device's half_flops prices them)."""
    half = s.get("flops_16bit", 0.0)
    if not half:
        return ""
    return (f"; {half / s['flops']:.1%} in float16 or bfloat16 ops (at a device's half_flops, "
            "its tensor-core peak)")


def _left_out(im: dict) -> str:
    return ", ".join(f"{kind} {count:,}" for kind, count in sorted(im.get("left_out", {}).items()))


def _loop_note(s: dict) -> str:
    """How the simulator counts the graph's TF1 loops: with the run counts of the profile
    beside it (each iteration's transfers), or else as one trip."""
    if not s.get("import", {}).get("loops"):
        return ""
    if s.get("loop_runs") is not None:
        return (f"; up to {s['loop_runs']} runs per op (the profile's counts): a tensor that "
                "crosses devices inside a loop is charged every iteration")
    return ("; no run counts (no profile beside the graph records them), so simulated as one "
            "trip: an estimated op time and a tensor that crosses devices inside a loop count "
            "once per step, where TensorFlow runs them every iteration")
