"""``gplace place MODEL``: zero-shot and fine-tuned placement of a graph, exported to run."""

from __future__ import annotations

import argparse
import json
import math
import sys

from gplace.cli import checks, models
from gplace.io import plain_json
from gplace.summary import format_ms as _ms
from gplace.summary import summary_text


def add_parser(sub, name: str) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help="place a graph: zero-shot, fine-tuned, exported with a report",
                       description="Place every op of a TensorFlow or PyTorch (.pt2) "
                                   "training step on a device. Runs the pretrained policy "
                                   "zero-shot, then spends --finetune measured placements on "
                                   "policy samples (Post's objective) and, more and more, on "
                                   "policy-guided local moves of the best placement; runs the "
                                   "cheap heuristics alongside and keeps the fastest feasible "
                                   "placement. A first Ctrl-C (once the graph is imported) "
                                   "stops the search and writes the best placement so far, "
                                   "with exit code 130.")
    p.add_argument("model", help=".pb, .pbtxt, .meta, SavedModel directory, a PyTorch "
                                 "torch.export program (.pt2) whose forward returns the loss, "
                                 "or an OpGraph saved by inspect --save (.npz)")
    models.add_import_arguments(p)
    p.add_argument("--cluster", default=None,
                   help="preset or YAML file (default: the devices here if there are at least "
                        "two, else post-4gpu, or local-procs with --measure real)")
    p.add_argument("--checkpoint", default=None, help="policy checkpoint (default: shipped)")
    p.add_argument("--finetune", type=checks.count(0, checks.MAX_SAMPLES, "placements measured"),
                   default=0, metavar="N",
                   help="placements to measure while fine-tuning (default 0: zero-shot only; "
                        "at most 10**6)")
    p.add_argument("--polish", type=checks.count(0, checks.MAX_SAMPLES, "schedule estimates"),
                   default=None, metavar="N",
                   help="zero-shot's hill climbing on the list schedule's estimate: N replays, "
                        "nothing measured (default 3200; 0: none, faster on large graphs)")
    p.add_argument("--screen", type=checks.count(1, checks.MAX_SCREEN, "moves drawn"),
                   default=None, metavar="N",
                   help="fine-tuning: each move measured is the best of N drawn by the list "
                        "schedule's estimate (default 16; 1: every drawn move measured, faster)")
    p.add_argument("--measure", choices=("sim", "real"), default="sim",
                   help="measure placements with the simulator (default) or on the devices")
    p.add_argument("--memory-limit", type=checks.memory_limit, default=None, metavar="SIZE",
                   help="cap device memory: 8GB for all, or gpu0=8GB,gpu1=4GB")
    p.add_argument("--allow-unsafe", action="store_true",
                   help="with --measure real: run ops off gplace's list of ops without side "
                        "effects (files, Python, network; see gplace/real/allowlist.py)")
    p.add_argument("--loss", default=None, metavar="NAME",
                   help="with --measure real: the op that ends a training step, run each step "
                        "(default: step_loss, or else the one op nothing in the imported step "
                        "consumes)")
    p.add_argument("--optimal", type=_seconds, default=None, metavar="SECONDS",
                   help="then run the exact placer (CP-SAT, small problems) for up to SECONDS "
                        "and print its proven lower bound; its placement is kept when faster "
                        "(simulated), or when nothing else fits in memory. What it finds "
                        "within a time limit depends on the machine's speed and load")
    p.add_argument("--seed", type=checks.seed, default=0, help="0 <= seed < 2**32 (default 0)")
    p.add_argument("--out", default="gplace-out", help="output directory (default: gplace-out)")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bars on stderr (default: where stderr is a terminal and "
                        "without --json)")
    return p


def run(args) -> int:
    from gplace.errors import ConfigError, GplaceError
    if args.allow_unsafe and args.measure != "real":
        raise ConfigError("--allow-unsafe lets --measure real run ops with side effects; it "
                          "needs --measure real")
    if args.loss is not None and args.measure != "real":
        raise ConfigError(f"--loss {args.loss!r} names the op a real step runs; it needs "
                          f"--measure real")
    checks.model_path(args.model)  # before the seconds of importing TensorFlow and torch
    options = models.import_options(args)
    checks.cluster_name(args.cluster)
    out = checks.output_dir(args.out)
    checks.policy_checkpoint(args.checkpoint)
    if args.measure == "real" and str(args.model).lower().endswith(".pt2"):
        raise ConfigError("--measure real runs TensorFlow graphs; place a PyTorch (.pt2) step "
                          "in simulation and run the placed step with "
                          "gplace.torchfront.load_placed (finetune/PYTORCH.md)")
    if args.optimal is not None and args.measure != "sim":
        raise ConfigError("--optimal bounds simulated step times; it needs --measure sim")
    claim = checks.claim_output(out)  # noqa: F841 - held until the run returns
    pending = None
    if args.measure == "sim":  # the graph imports (TensorFlow) in another process meanwhile
        from gplace.opgraph_cache import finish, prefetch
        pending = prefetch(args.model, options.get("unknown_dim", 1), signature=args.signature)
    from gplace.place import place  # numba, the placers
    if args.finetune or args.measure != "sim":
        import torch  # noqa: F401 - fine-tuning's policy (1-2 s): beside the graph's import
    if pending is not None:
        from gplace.warmup import load_kernels
        load_kernels()  # what the placement would load later, while this process waits
        finish(pending)  # a bad graph's error from there
    result = place(args.model, cluster=args.cluster, checkpoint=args.checkpoint,
                   finetune=args.finetune, measure=args.measure, memory_limit=args.memory_limit,
                   seed=args.seed, allow_unsafe=args.allow_unsafe,
                   # by default only on a terminal: a log file would keep every redraw
                   progress=args.progress if args.progress is not None else
                   not args.json and sys.stderr.isatty(),
                   loss=args.loss, polish=args.polish, screen=args.screen,
                   optimal=args.optimal, **options)
    exact = result.exact
    try:
        files = result.export(out)
    except OSError as e:  # checked above, but a disk can fill up meanwhile: keep the result
        print(render(result.summary, None, args.json))
        raise GplaceError(f"could not write the results to {out} ({e.strerror or e}); nothing "
                          f"was written there; the result is printed above") from None
    text = render(result.summary, files, args.json, result.intervals, result.ties)
    if exact is not None and args.json:
        text = plain_json({**json.loads(text), "exact": _exact_info(exact)})
    elif exact is not None:
        text += "\n" + _exact_line(exact)
    print(text)
    return 130 if result.summary.stopped else 0  # 130: the shell's code for a Ctrl-C


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 86400:
        raise argparse.ArgumentTypeError(f"{text!r}: give seconds, more than 0, at most 86400")
    return value


def _exact_info(exact) -> dict:
    """The exact placer's figures, plain JSON types."""
    keep = ("status", "returned", "solver_bound_s", "cp_sat_bound_s", "solver_makespan_s",
            "solver_step_time_s", "gap", "time_unit_s", "rounding_slack_s", "wall_s")
    return {"step_time_s": exact.step_time_s,
            **{k: v if isinstance(v, str) else float(v) for k, v in exact.info.items()
               if k in keep}}


def _exact_line(exact) -> str:
    """One line: the status, the proven bound and what the exact placer found."""
    i = exact.info
    gap = float(i.get("gap", float("nan")))
    if i["status"] == "optimal":
        proven = "optimal schedule of the relaxation"
    elif math.isfinite(gap):
        proven = f"{i['status']}, solver gap {gap:.1%}"
    else:  # CP-SAT found no schedule in the time limit: the bound is the combinatorial one
        proven = f"{i['status']}: no solver schedule within --optimal, the cost model's bound"
    by = {"solver": "by CP-SAT", "polish": "by hill climbing from the solver's best start",
          "start": "its start"}.get(i.get("returned"), "")
    return (f"exact (CP-SAT)   proven lower bound {_ms(i['solver_bound_s'])} ({proven}); best "
            f"placement found {_ms(exact.step_time_s)} simulated, {by} "
            f"({i.get('proven_ratio', float('nan')):.3f}x the bound"
            f"{', certified optimal' if i.get('certified') else ''}) in {i['wall_s']:.0f} s")


def render(s, files: list | None, as_json: bool, intervals: dict | None = None,
           ties: tuple = ()) -> str:
    """The PlaceSummary as text, or as one JSON object; ``files`` None when they were not
    written; ``intervals`` (name -> step time, low, high) and ``ties`` from --measure real."""
    intervals = intervals or {}
    if as_json:
        extra = {"intervals_s": intervals, "ties": list(ties)} if intervals else {}
        return plain_json({**s.as_dict(), **extra,
                           "out": str(files[0].parent) if files else None})
    return summary_text(s, files, intervals, ties)
