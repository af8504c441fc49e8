"""``gplace calibrate --cluster C [--graphs ...] [--placements N] [--out DIR] [--json]``.

Measures the same placements of each graph for real and in the simulator (gplace.calibrate)
and reports Kendall's tau, Spearman's rho and the median relative error per graph and overall;
writes DIR/calibration.png (simulated against measured) and DIR/calibration.json. Progress
lines go to stderr; ``--json`` prints one object on stdout with ``kendall_tau`` and
``median_rel_error`` at the top level.

``--resimulate`` re-scores the run already in DIR (its calibration.json and profiles/) with the
current simulator, without starting TensorFlow: the real figures stay the run's.

Graphs: a corpus name (datasets/corpus/NAME.pb, else built into DIR/graphs with
``python -m datasets.worker``) or a path to a GraphDef. Default: the three quick corpus graphs
(quick_mlp, quick_cnn, quick_gpt: families mlp, cnn, gpt), which run in minutes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from gplace.cli import checks
from gplace.errors import ConfigError
from gplace.io import plain_json

DEFAULT_GRAPHS = ("quick_mlp", "quick_cnn", "quick_gpt")


def add_parser(sub, name: str) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help="check the simulator against real runs of placements",
                       description="Run the same placements for real and in the simulator; "
                                   "report rank correlation and error.")
    p.add_argument("--cluster", required=True, metavar="C",
                   help="a cluster with real devices: local-procs, or a cluster YAML whose "
                        "devices are /job:worker tasks (with --tasks) or /job:localhost")
    p.add_argument("--graphs", nargs="+", default=list(DEFAULT_GRAPHS), metavar="G",
                   help="corpus names or GraphDef paths (default: %(default)s)")
    p.add_argument("--placements", type=int, default=24, metavar="N",
                   help="placements per graph, >= 20 (default 24)")
    p.add_argument("--units", type=int, default=32, metavar="U",
                   help="coarsen to at most U units (default 32)")
    p.add_argument("--repeats", type=int, default=2, metavar="R",
                   help="independent protocol runs of every placement; the first two give the "
                        "real-vs-real tau (default 2)")
    p.add_argument("--rel-width", type=float, default=2.0, metavar="PCT",
                   help="stop timing a placement once its 90%% interval is within +-PCT%% of "
                        "its step time (default 2)")
    p.add_argument("--max-steps", type=int, default=90, metavar="K",
                   help="timed steps per placement and repeat at most, >= 15 (default 90)")
    p.add_argument("--cap", type=float, default=15.0, metavar="S",
                   help="time cap of a repeat: S seconds x placements (default 15)")
    p.add_argument("--sessions", type=int, default=2, metavar="S",
                   help="sessions per placement and repeat, visited in turn, session s on the "
                        "placement's s-th mirror over interchangeable devices (default 2; see "
                        "gplace/real/protocol.py)")
    p.add_argument("--tasks", metavar="FILE",
                   help="YAML 'tasks: [host:port, ...]' of servers already running elsewhere "
                        "(python -m gplace.real.procs serve ...); default: start local ones")
    p.add_argument("--transfer-cpu", type=float, default=0.8, metavar="MS_PER_MB",
                   help="CPU per MB a transfer takes from its one-core tasks (default 0.8; see "
                        "calibration/RESULTS.md)")
    p.add_argument("--transfer-cpu-at", choices=("receiver", "link"), default="receiver",
                   help="where the simulator charges that CPU: on the receiving task's core "
                        "after the transfer arrives, with the fitted latency as a fixed part "
                        "(receiver, the default), or folded into the link's bandwidth (link, "
                        "the model before)")
    p.add_argument("--resimulate", action="store_true",
                   help="re-score the run already in --out (its calibration.json, profiles/ "
                        "and graphs/) with the current simulator; starts no TensorFlow "
                        "process when they are all there")
    p.add_argument("--no-overhead", action="store_true",
                   help="do not add the measured per-step RPC cost to simulated times")
    p.add_argument("--loss", default=None, metavar="NAME",
                   help="the op that ends a training step, in every graph (default: step_loss, "
                        "or else the one op nothing in the imported step consumes)")
    p.add_argument("--allow-unsafe", action="store_true",
                   help="run ops off gplace's list of ops without side effects (files, "
                        "Python, network; see gplace/real/allowlist.py)")
    p.add_argument("--out", default="gplace-calibration", metavar="DIR",
                   help="where the PNG, JSON and profiles go (default: gplace-calibration, so "
                        "that a run inside a clone leaves the committed calibration/ page alone)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    return p


def clone_root(start: Path | None = None) -> Path | None:
    """The gplace clone that holds ``start`` (default: the current directory): the nearest
    folder with datasets/registry.py. The installed package never assumes it lives in one."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "datasets" / "registry.py").is_file():
            return folder
    return None


def resolve_graph(name: str, out: Path) -> tuple[str, Path, str]:
    """(name, path, family) of a corpus name or a path, the fields of
    gplace.calibrate.GraphSource; builds a missing corpus graph into out/graphs."""
    path = Path(name)
    if path.suffix in (".pb", ".pbtxt"):  # a path: no need for the registry (seconds to import)
        if not path.is_file():
            raise ConfigError(f"graph file {name} does not exist")
        return (path.name.split(".")[0], path, "")
    root = clone_root()
    GRAPHS = {}
    if root is not None:
        try:
            sys.path.append(str(root))
            from datasets.registry import GRAPHS
        except ImportError:
            pass
    family = GRAPHS[name].family if name in GRAPHS else ""
    if path.is_file():
        return (path.name.split(".")[0], path, family)
    if root is None:
        raise ConfigError(f"graph {name!r}: not a file, and corpus names need a gplace clone "
                          "(run gplace calibrate inside one, or pass a .pb path)")
    for candidate in (root / "datasets" / "corpus" / f"{name}.pb", out / "graphs" / f"{name}.pb"):
        if candidate.is_file():
            return (name, candidate, family)
    if name not in GRAPHS:
        raise ConfigError(f"unknown graph {name!r}: not a file and not a corpus name "
                          f"(e.g. {', '.join(DEFAULT_GRAPHS)})")
    print(f"gplace calibrate: building {name} (python -m datasets.worker)", file=sys.stderr)
    (out / "graphs").mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-m", "datasets.worker", name,
                           str((out / "graphs").resolve())],  # the child runs in the clone
                          cwd=root, capture_output=True, text=True)
    if done.returncode != 0:
        raise ConfigError(f"building {name} failed: {done.stderr.strip().splitlines()[-1:]}")
    return (name, out / "graphs" / f"{name}.pb", family)


def run(args) -> int:
    if args.placements < 20:
        raise ConfigError(f"--placements {args.placements}: the calibration needs >= 20")
    from gplace.real.protocol import ProtocolConfig
    least = ProtocolConfig.min_steps  # timed steps before a placement's interval is read
    if (args.repeats < 1 or args.sessions < 1 or args.max_steps < least or args.cap <= 0
            or not 0 < args.rel_width < 100):
        raise ConfigError(f"--repeats {args.repeats}, --sessions {args.sessions}, --max-steps "
                          f"{args.max_steps}, --cap {args.cap:g}, --rel-width {args.rel_width:g}: "
                          "need repeats >= 1, sessions >= 1, "
                          f"max-steps >= {least}, cap > 0 and 0 < rel-width < 100")
    if not 0 <= args.transfer_cpu < float("inf"):
        raise ConfigError(f"--transfer-cpu {args.transfer_cpu}: must be a finite number >= 0")
    checks.cluster_name(args.cluster)
    out = checks.output_dir(args.out)
    if args.resimulate:
        return _resimulate(args, out)
    graphs = [resolve_graph(g, out) for g in args.graphs]  # calibrate() checks their steps
    from gplace.calibrate import CalibrateConfig, GraphSource, calibrate
    from gplace.real.measurer import RealConfig
    from gplace.real.procs import load_task_spec
    sources = [GraphSource(*g) for g in graphs]
    protocol = ProtocolConfig(rel_width=args.rel_width / 100, max_steps=args.max_steps,
                              min_timed_s=0.0,  # --max-steps caps every placement's steps
                              max_s_per_placement=args.cap, sessions=args.sessions)
    config = CalibrateConfig(placements=args.placements, max_units=args.units,
                             step_overhead=not args.no_overhead,
                             transfer_cpu_s_per_byte=args.transfer_cpu / 1e9,
                             transfer_cpu_at=args.transfer_cpu_at, repeats=args.repeats,
                             real=RealConfig(protocol=protocol, verbose=False,
                                             allow_unsafe=args.allow_unsafe, fetch=args.loss))
    tasks = load_task_spec(args.tasks) if args.tasks else None
    log = lambda s: print(f"gplace calibrate: {s}", file=sys.stderr, flush=True)  # noqa: E731
    report = calibrate(sources, args.cluster, config, out, tasks=tasks, log=log)
    return _print(report, out, args.json)


def _resimulate(args, out: Path) -> int:
    from gplace.calibrate import CalibrateConfig, GraphSource
    from gplace.resimulate import resimulate
    path = out / "calibration.json"
    try:
        names = [g["name"] for g in json.loads(path.read_text())["graphs"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"--resimulate: {path} is not a calibration run ({e})") from None
    missing = [n for n in names if not (out / "profiles" / f"{n}.profile.json.gz").is_file()]
    if missing:  # before the graphs are built and profiled
        raise ConfigError(f"--resimulate: {out / 'profiles' / (missing[0] + '.profile.json.gz')}"
                          f" is missing: re-simulating needs the profiles of the run in {out}")
    sources = [GraphSource(*resolve_graph(n, out)) for n in names]
    config = CalibrateConfig(max_units=args.units, step_overhead=not args.no_overhead,
                             transfer_cpu_s_per_byte=args.transfer_cpu / 1e9,
                             transfer_cpu_at=args.transfer_cpu_at)
    log = lambda s: print(f"gplace calibrate: {s}", file=sys.stderr, flush=True)  # noqa: E731
    report = resimulate(sources, out, args.cluster, config, log=log)
    return _print(report, out, args.json)


def _print(report, out: Path, as_json: bool) -> int:
    """The table on stdout (or the report as one JSON object)."""
    if as_json:
        print(plain_json(report.to_json()))
        return 0
    print(f"{'graph':<14} {'family':<8} {'ops':>5} {'units':>5} {'n':>3} {'tau':>6} {'rho':>6} "
          f"{'med.err':>8} {'real-vs-real tau':>17} {'s/placement':>12}  load (others, load avg)")
    for g in report.graphs:
        n = int(sum(r == "" for r in g.reasons))
        load = "; ".join(f"{f.others:.0%}, {f.load1:.1f}" for f in g.load)
        print(f"{g.name:<14} {g.family:<8} {g.ops:>5} {g.units:>5} {n:>3} {g.kendall_tau:>6.3f} "
              f"{g.spearman_rho:>6.3f} {g.median_rel_error:>8.1%} {g.repeat_tau:>17.3f} "
              f"{g.seconds_per_placement:>12.1f}  {load}")
    print(f"{'overall':<14} {'':<8} {'':>5} {'':>5} {'':>3} {report.kendall_tau:>6.3f} "
          f"{report.spearman_rho:>6.3f} {report.median_rel_error:>8.1%} "
          f"{report.repeat_tau:>17.3f}   (pooled tau {report.pooled_kendall_tau:.3f})")
    print(f"link: latency {report.link.latency_s * 1e6:.0f} us, bandwidth "
          f"{report.link.bandwidth / 1e6:.0f} MB/s; plot: {out / 'calibration.png'}")
    print(f"simulated: bandwidth {report.effective_bandwidth / 1e6:.0f} MB/s, receive CPU "
          f"{report.recv_cpu_s * 1e6:.0f} us + {report.recv_cpu_s_per_byte * 1e9:.2f} ms/MB "
          "on the receiving task")
    return 0
