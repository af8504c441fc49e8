"""``gplace place MODEL``: zero-shot and fine-tuned placement of a graph, exported to run."""

from __future__ import annotations

import argparse
import json

from gplace.cli import checks


def add_parser(sub, name: str) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help="place a graph: zero-shot, fine-tuned, exported with a report",
                       description="Place every op of a TensorFlow training graph on a device. "
                                   "Runs the pretrained policy zero-shot, then spends --finetune "
                                   "measured placements on policy samples (Post's objective) and, "
                                   "more and more, on policy-guided local moves of the best "
                                   "placement; runs the cheap heuristics alongside and keeps the "
                                   "fastest feasible placement.")
    p.add_argument("model", help=".pb, .pbtxt, .meta or SavedModel directory")
    p.add_argument("--cluster", default=None,
                   help="preset or YAML file (default: the devices here if there are at least "
                        "two, else post-4gpu)")
    p.add_argument("--checkpoint", default=None, help="policy checkpoint (default: shipped)")
    p.add_argument("--finetune", type=int, default=0, metavar="N",
                   help="placements to measure while fine-tuning (0: zero-shot)")
    p.add_argument("--measure", choices=("sim", "real"), default="sim",
                   help="measure placements with the simulator (default) or on the devices")
    p.add_argument("--memory-limit", default=None, metavar="SIZE",
                   help="cap device memory: 8GB for all, or gpu0=8GB,gpu1=4GB")
    p.add_argument("--allow-unsafe", action="store_true",
                   help="with --measure real: run ops off gplace's list of ops without side "
                        "effects (files, Python, network; see gplace/real/allowlist.py)")
    p.add_argument("--seed", type=checks.seed, default=0, help="0 <= seed < 2**32 (default 0)")
    p.add_argument("--out", default="gplace-out", help="output directory (default: gplace-out)")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    return p


def run(args) -> int:
    from gplace.errors import ConfigError, GplaceError
    if args.finetune < 0:
        raise ConfigError(f"--finetune {args.finetune}: must be >= 0")
    checks.model_path(args.model)  # before the 5-15 s of importing TensorFlow and torch
    checks.cluster_name(args.cluster)
    out = checks.output_dir(args.out)
    checks.policy_checkpoint(args.checkpoint)
    if args.measure == "real":  # refuse an untrusted graph before any placement work
        from gplace.importer.reader import read_graph_def
        from gplace.real.safety import check_safe
        check_safe(read_graph_def(args.model)[0], args.allow_unsafe)
    from gplace.place import place
    result = place(args.model, cluster=args.cluster, checkpoint=args.checkpoint,
                   finetune=args.finetune, measure=args.measure, memory_limit=args.memory_limit,
                   seed=args.seed, progress=not args.json, allow_unsafe=args.allow_unsafe)
    try:
        files = result.export(out)
    except OSError as e:  # checked above, but a disk can fill up meanwhile: keep the result
        print(render(result.summary, None, args.json))
        raise GplaceError(f"could not write the results to {out} ({e.strerror or e}); nothing "
                          f"was written there; the result is printed above") from None
    print(render(result.summary, files, args.json, result.intervals, result.ties))
    return 0


def render(s, files: list | None, as_json: bool, intervals: dict | None = None,
           ties: tuple = ()) -> str:
    """The PlaceSummary as text, or as one JSON object; ``files`` None when they were not
    written; ``intervals`` (name -> step time, low, high) and ``ties`` from --measure real."""
    intervals = intervals or {}
    if as_json:
        extra = {"intervals_s": intervals, "ties": list(ties)} if intervals else {}
        return json.dumps({**s.as_dict(), **extra,
                           "out": str(files[0].parent) if files else None})
    best = s.best_heuristic
    bound = ("from the cost model" if s.measure == "sim" else
             "from the cost model's profiled op times, not scaled to this machine: it bounds "
             "simulated step times, not measured ones")
    tie = (f"; tied with {', '.join(ties)} (intervals overlap: not ranked)" if ties else "")
    lines = [
        f"{s.graph}: {s.ops:,} ops in {s.units} units; {s.cluster_choice}",
        f"step time        {_ms(s.step_time_s)}{_interval(intervals.get('chosen'))} "
        f"({s.step_times}); found by {s.chosen}{tie}",
        f"single device    {_ms(s.single_device_s)}{_interval(intervals.get('single'))} "
        f"({s.speedup_vs_single:.2f}x slower)",
        f"best heuristic   {best.name or 'none fits'} {_ms(best.step_time_s)}"
        f"{_interval(intervals.get(best.name))}",
        f"zero-shot        {_ms(s.zero_shot_step_time_s)}",
        *([f"fine-tuned best  {_ms(intervals['gnn'][0])}{_interval(intervals['gnn'])} "
           "(measured again beside the heuristics)"] if "gnn" in intervals else []),
        f"lower bound      {_ms(s.lower_bound_s)} ({bound})",
        f"samples          {s.samples} in {s.wall_s:.1f} s",
        f"costs            {s.costs}",
        f"wrote            {', '.join(str(f) for f in files) if files else 'nothing'}",
    ]
    return "\n".join(lines)


def _interval(entry) -> str:
    """' [11.92-12.80]' from (step time, low, high) in seconds; '' without one."""
    if not entry:
        return ""
    return f" [90% interval {entry[1] * 1e3:.3f}-{entry[2] * 1e3:.3f}]"


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3f} ms"
