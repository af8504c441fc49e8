"""``gplace profile MODEL``: measure every op of a TensorFlow training step on this machine's CPU.

Runs the step with gplace's profiler (``gplace.profiler``: one op at a time on one core,
``RunMetadata.step_stats`` under FULL_TRACE, medians over the traced steps) and writes the
``CostProfile`` beside the model as ``<name>.profile.json.gz``, where ``gplace place``,
``simulate`` and ``bench`` look for it (``gplace.cost.cost_model_for``): op times on devices of
kind ``cpu`` (the ``local`` and ``local-procs`` clusters) are then measured, not estimated, and
on every cluster a graph's TF1 loops are simulated per iteration (the profile counts each op's
runs). The graph runs for real, so ops off gplace's list of ops without side
effects (gplace/real/allowlist.py) are refused unless ``--allow-unsafe``.

A PyTorch program (``.pt2``) is measured node by node by gplace.torchfront.profile (an FX
interpreter on one thread, medians over the timed steps), its step with ``--optimizer``'s
updates as ``gplace place --optimizer`` imports it; its archive is checked as the import checks
it unless ``--trust-pt2``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from gplace.cli import checks
from gplace.errors import ConfigError, GplaceError
from gplace.io import plain_json


def add_parser(sub, name: str) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help="measure every op of a training step on this CPU",
                       description="Measure every op of a TensorFlow or PyTorch training step "
                                   "on this machine's CPU and write the profile beside the "
                                   "model, where place, simulate and bench read it.")
    p.add_argument("model", help=".pb, .pbtxt, .meta, SavedModel directory or PyTorch .pt2")
    p.add_argument("--out", metavar="FILE",
                   help="where to write the profile (default: <model name>.profile.json.gz "
                        "beside the model, where gplace looks for it)")
    p.add_argument("--steps", type=checks.count(1, 1000, "traced steps"), default=5, metavar="N",
                   help="traced steps; each op's time is its median over them (default 5)")
    p.add_argument("--loss", default=None, metavar="NAME",
                   help="the op that ends a training step (default: step_loss, or else the one "
                        "op nothing in the imported step consumes)")
    p.add_argument("--unknown-dim", type=checks.count(1, 2**31 - 1, "--unknown-dim"), default=1,
                   metavar="N", help="the size given to unknown dimensions, such as a "
                                     "signature's None batch: run the step with inputs of that "
                                     "size, as place --unknown-dim N places it (default: 1)")
    p.add_argument("--allow-unsafe", action="store_true",
                   help="run ops off gplace's list of ops without side effects (files, Python, "
                        "network; see gplace/real/allowlist.py)")
    p.add_argument("--timeout", type=checks.count(1, 86400, "seconds"), default=600,
                   metavar="SECONDS", help="fail an op that blocks longer than this, e.g. a "
                                           "queue nothing fills (default 600)")
    p.add_argument("--optimizer", default=None, metavar="NAME[:KEY=VALUE,...]",
                   help=".pt2 only: the optimizer whose updates the measured step runs, as "
                        "place --optimizer (default: sgd)")
    p.add_argument("--trust-pt2", action="store_true",
                   help=".pt2 only: load it without gplace's checks (as place --trust-pt2)")
    p.add_argument("--force", action="store_true", help="replace a profile that exists")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    return p


def run(args) -> int:
    model = checks.model_path(args.model)
    pt2 = str(model).lower().endswith(".pt2")
    if str(model).lower().endswith(".npz"):
        raise ConfigError(f"{model}: gplace profile runs a training step (.pb, .pbtxt, .meta, "
                          "SavedModel or .pt2), not a saved OpGraph")
    if not pt2 and (args.optimizer is not None or args.trust_pt2):
        raise ConfigError("--optimizer and --trust-pt2 apply to PyTorch (.pt2) models only")
    if pt2 and (args.loss is not None or args.allow_unsafe or args.unknown_dim != 1):
        raise ConfigError("--loss, --allow-unsafe and --unknown-dim apply to TensorFlow graphs; "
                          "a .pt2's step is its forward's loss at its example batch")
    from gplace.cost import import_size, profile_path_for
    beside = profile_path_for(model)
    out = checks.output_file(args.out or beside)
    if out.exists() and not args.force:
        raise ConfigError(f"{out} exists; --force replaces it")
    if pt2:
        return _profile_program(args, model, out, beside)
    # The profiler's kernels: no oneDNN fusions, so that step_stats names are the graph's (this
    # must precede TensorFlow's import; nothing in the command has imported it yet).
    os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
    from gplace.opgraph_cache import load_graph
    from gplace.profiler import ProfileConfig, profile_graph
    from gplace.real.measurer import runnable_step
    from gplace.report import source_graph_def
    # its name is what the cost model matches the profile by
    graph = load_graph(str(model), unknown_dim=args.unknown_dim)
    graph_def, fetch = runnable_step(source_graph_def(str(model)), graph.names.tolist(),
                                     args.allow_unsafe, args.loss, runner="gplace profile",
                                     unknown_dim=args.unknown_dim)
    for node in graph_def.node:  # measured on this CPU, wherever the graph was placed before
        node.device = ""
    start = time.perf_counter()
    profile = _measure(lambda: profile_graph(graph_def, graph.meta["name"], fetch,
                                             ProfileConfig(traced_steps=args.steps,
                                                           op_timeout_s=args.timeout)), model)
    # the cost model uses it at this size only (1 where the graph has nothing to size)
    profile.meta["unknown_dim"] = import_size(graph)
    profile.save(out)
    runs = profile.op_runs
    summary = {"graph": profile.graph, "profile": str(out), "ops_profiled": len(profile.op_names),
               "graph_ops": graph.num_ops, "step_time_s": profile.step_time_s,
               "coverage": round(profile.coverage, 4),
               "max_runs_per_op": int(runs.max()) if runs is not None and runs.size else 1,
               "loop_trips": profile.meta.get("loop_trips") or {},
               "machine": profile.machine, "seconds": round(time.perf_counter() - start, 1)}
    if args.json:
        print(plain_json(summary))
        return 0
    loops = (f"; TF1 loops: up to {summary['max_runs_per_op']} runs per op"
             if summary["max_runs_per_op"] > 1 else "")
    trips = profile.meta.get("loop_trips") or {}
    if trips:
        shown = ", ".join(f"{n} {t:,}" for n, t in list(trips.items())[:3])
        loops += (f"; functional While trips: {shown}" + (", ..." if len(trips) > 3 else ""))
    return _say(summary, out, beside, "traced", profile.coverage, loops,
                "gplace place, simulate and bench now read it: its times for devices of kind "
                "cpu (clusters local and local-procs), its run counts on every cluster")


def _say(summary: dict, out: Path, beside: Path, how: str, coverage: float, extra: str,
         use: str) -> int:
    """The command's two lines: what was measured, and where it was written for whom."""
    if out.resolve() != beside.resolve():
        use = f"gplace reads a model's profile from {beside}; move it there to use it"
    print(f"profiled {summary['ops_profiled']:,} of {summary['graph_ops']:,} ops of "
          f"{summary['graph']} on {summary['machine']}: step {summary['step_time_s'] * 1e3:.1f} "
          f"ms {how}, op times cover {coverage:.0%} of it{extra} ({summary['seconds']:.0f} s)\n"
          f"wrote {out}: {use}")
    return 0


def _profile_program(args, model: Path, out: Path, beside: Path) -> int:
    """``gplace profile`` of a PyTorch program: its step's nodes timed on this CPU."""
    from gplace.torchfront.optim import parse_optimizer
    from gplace.torchfront.profile import profile_file
    optimizer = parse_optimizer(args.optimizer) if args.optimizer else None
    start = time.perf_counter()
    profile, graph = profile_file(model, optimizer, args.trust_pt2, args.steps)
    profile.save(out)
    summary = {"graph": profile.graph, "profile": str(out), "ops_profiled": len(profile.op_names),
               "graph_ops": graph.num_ops, "step_time_s": profile.step_time_s,
               "coverage": round(profile.meta["time_coverage"], 4),
               "optimizer": profile.meta["optimizer"], "machine": profile.machine,
               "seconds": round(time.perf_counter() - start, 1)}
    if args.json:
        print(plain_json(summary))
        return 0
    return _say(summary, out, beside, "run node by node", summary["coverage"], "",
                "gplace place, simulate and bench now read it for devices of kind cpu "
                "(clusters local and local-procs) when the step is imported with --optimizer "
                f"{profile.meta['optimizer']}; another optimizer's update ops are estimated")


def _measure(profile, model: Path):
    """``profile()``, with TensorFlow's failure to run the step as one line."""
    import tensorflow as tf
    from gplace.errors import tf_error_message
    try:
        return profile()
    except tf.errors.OpError as e:
        raise GplaceError(f"{model}: TensorFlow could not run the step ({type(e).__name__}: "
                          f"{tf_error_message(e.message or str(e))})") from None
