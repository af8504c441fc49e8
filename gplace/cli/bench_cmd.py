"""``gplace bench``: every placer at the same budget and seeds; tables and learning curves."""

from __future__ import annotations

import argparse
from pathlib import Path

from gplace.cli import checks
from gplace.io import plain_json


def add_parser(sub, name: str) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help="compare placers at equal sample budgets",
                       description="Run every method on every graph and cluster with the same "
                                   "budget and seeds; write results.md, results.csv and curve "
                                   "PNGs to --out. Step times are simulated (estimates). A "
                                   "first Ctrl-C writes the tables of the runs finished by "
                                   "then (exit code 130).")
    p.add_argument("--graphs", nargs="+", required=True, metavar="MODEL",
                   help="graph files (.pb, .pbtxt, .meta, .pt2, .npz) or SavedModel folders")
    p.add_argument("--cluster", nargs="+", default=["post-4gpu"], metavar="C",
                   help="preset names or YAML files (default: post-4gpu)")
    p.add_argument("--methods", default="post,pg,random,hill,single",
                   help="comma-separated placer names (default: %(default)s); results.md's "
                        "'vs best heuristic' is against the best of the heuristics named here "
                        "(add single and heft for the usual reference); optimal runs CP-SAT "
                        "for its own time limit (60 s), not --budget")
    p.add_argument("--budget", type=checks.count(1, checks.MAX_SAMPLES, "samples per method "
                                                 "and seed"), default=2400,
                   help="samples per method and seed (1 to 10**6; default 2400)")
    p.add_argument("--seeds", type=checks.count(1, checks.MAX_SEEDS, "seeds per method"),
                   default=3, help="seeds per sampling method (default 3)")
    p.add_argument("--units", type=checks.count(0, 10**6, "units"), default=64,
                   help="coarsen to at most this many units; 0 keeps colocation groups, as "
                        "gplace place does (default 64: coarser problems, other step times)")
    p.add_argument("--out", default="bench-out", help="output directory (default bench-out)")
    p.add_argument("--json", action="store_true", help="print the rows as one JSON object")
    return p


def run(args) -> int:
    from gplace.errors import ConfigError
    names = [m.strip() for m in args.methods.split(",")]
    if not any(names):
        raise ConfigError(f"--methods {args.methods!r} names no method; give comma-separated "
                          f"placer names such as post,random,hill,single")
    if not all(names):
        raise ConfigError(f"--methods {args.methods!r} has an empty name between its commas")
    methods = tuple(dict.fromkeys(names))
    for graph in args.graphs:
        checks.model_path(graph)
    for cluster in args.cluster:
        checks.cluster_name(cluster)
    checks.output_dir(args.out)
    from gplace.bench import BenchConfig, markdown_table, run_bench, summarize, write_outputs
    cfg = BenchConfig(graphs=tuple(args.graphs), clusters=tuple(args.cluster),
                      methods=methods,
                      budget=args.budget, seeds=args.seeds, units=args.units or None)
    runs, meta, stopped = run_bench(cfg)
    if stopped and not runs:
        raise KeyboardInterrupt  # nothing finished: "interrupted", as before the first run
    rows = summarize(runs, meta)
    files = write_outputs(Path(args.out), runs, rows, cfg, meta)
    if args.json:
        print(plain_json({"budget": cfg.budget, "seeds": cfg.seeds, "results": rows}))
    else:
        print(markdown_table(rows))
        print("wrote " + ", ".join(str(f) for f in files))
    return 130 if stopped else 0  # 130: the shell's code for a Ctrl-C
