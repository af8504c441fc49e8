"""Build the corpus: every graph's training-step GraphDef, its statistics and, as far as the
budget allows, its measured CPU profile.

    python -m datasets.build [--quick] [--out DIR] [--only NAME ...] [--force] [--jobs N]
                             [--graphs N] [--budget MIN] [--profile-budget MIN]

Hand-written graphs (registry.FULL) are built and profiled by ``datasets.worker``, one process
per graph; generated graphs (registry.GENERATED) are built by ``datasets.genworker``, a chunk
per process, without a profile (estimated costs). Then, within ``--profile-budget`` minutes,
the cheapest (fewest FLOPs) unprofiled generated graphs are profiled. Every graph gets a
``.stats.json`` (datasets.graphstats; the importer validates it). Processes run under
timeouts. Resumable: a graph whose ``.pb`` and profile exist is skipped unless ``--force``;
every file is written atomically. Graphs are deterministic (fixed seeds), so a graph is
rebuilt bit for bit (tests/datasets checks it); profiles are measurements and differ from run
to run. Ends by writing the manifest (datasets/manifest.yaml for the default corpus,
DIR/manifest.yaml otherwise).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from datasets import generate, manifest
from datasets.registry import GraphSpec, select

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "datasets" / "corpus"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m datasets.build", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="the 3 small test graphs (< 1 min)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="corpus directory")
    p.add_argument("--only", nargs="+", metavar="NAME", help="build only these graphs")
    p.add_argument("--force", action="store_true", help="rebuild and re-profile what exists")
    p.add_argument("--jobs", type=int, default=1,
                   help="graphs profiled at once; each uses one core (default 1: no contention)")
    p.add_argument("--graphs", type=int, metavar="N",
                   help="only the first N graphs of the corpus (hand-written first, then the "
                        "generated ones round-robin over families)")
    p.add_argument("--budget", type=float, metavar="MIN",
                   help="start no new graph after MIN minutes; rerun to resume")
    p.add_argument("--profile-budget", type=float, default=0.0, metavar="MIN",
                   help="minutes for profiling generated graphs, fewest FLOPs first (default 0: "
                        "generated graphs keep estimated costs)")
    p.add_argument("--chunk", type=int, default=8,
                   help="generated graphs per worker process (default 8)")
    return p.parse_args(argv)


def is_complete(spec: GraphSpec, out: Path) -> bool:
    return (out / f"{spec.name}.pb").exists() and (out / f"{spec.name}.profile.json.gz").exists()


def run_worker(spec: GraphSpec, out: Path, force: bool) -> dict:
    """Runs the worker process for one graph; returns its result line or the failure."""
    cmd = [sys.executable, "-m", "datasets.worker", spec.name, str(out)] + (["--force"] * force)
    env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0", "TF_CPP_MIN_LOG_LEVEL": "3",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=spec.timeout_s)
    except subprocess.TimeoutExpired:
        return {"name": spec.name, "error": f"timed out after {spec.timeout_s} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"name": spec.name, "error": f"exit {proc.returncode}: " + " | ".join(tail)}
    return json.loads(lines[-1])


def progress(i: int, n: int, result: dict, start: float) -> str:
    head = f"[{i}/{n}] {result['name']}"
    elapsed = f"elapsed {time.time() - start:.0f}s"
    if "error" in result:
        return f"{head}: FAILED ({result['error']}) {elapsed}"
    if result.get("skipped"):
        return f"{head}: complete, skipped {elapsed}"
    if result.get("deferred"):
        return f"{head}: deferred (budget spent) {elapsed}"
    return (f"{head}: {result['ops']} ops, step {result['step_time_s'] * 1e3:.1f} ms, "
            f"coverage {result['coverage']:.2f} (per step {result.get('step_coverage') or 0:.2f}), "
            f"{result['total_s']:.0f}s, {elapsed}")


def build(specs: list[GraphSpec], out: Path, force: bool = False, jobs: int = 1,
          deadline: float = float("inf")) -> list[dict]:
    """Builds and profiles ``specs`` into ``out``; returns one result per spec."""
    out.mkdir(parents=True, exist_ok=True)
    start, done, results = time.time(), 0, []

    def one(spec: GraphSpec) -> dict:
        if not force and is_complete(spec, out):
            return {"name": spec.name, "skipped": True}
        if time.time() > deadline:
            return {"name": spec.name, "deferred": True}
        return run_worker(spec, out, force)

    # Largest graphs first, so that a parallel run does not end on one long graph.
    order = sorted(specs, key=lambda s: -s.timeout_s)
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        for result in pool.map(one, order):
            done += 1
            results.append(result)
            print(progress(done, len(specs), result, start), flush=True)
    return results


def manifest_path(out: Path) -> Path:
    return ROOT / "datasets" / "manifest.yaml" if out.resolve() == DEFAULT_OUT else out / "manifest.yaml"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start = time.time()
    deadline = start + 60 * args.budget if args.budget else float("inf")
    specs = select(args.only, args.quick)[: args.graphs]
    hand = [s for s in specs if not s.generator]
    gen = [s for s in specs if s.generator]
    results = build(hand, args.out, args.force, args.jobs, deadline) if hand else []
    results += generate.build_all(hand + gen, args.out, args.force, args.jobs, args.chunk,
                                  deadline)
    if gen and args.profile_budget > 0:
        generate.profile_some(gen, args.out, args.jobs, time.time() + 60 * args.profile_budget)
    rows = manifest.write(manifest_path(args.out), specs, args.out, refresh=args.force)
    deferred = sum(bool(r.get("deferred")) for r in results)
    print(f"built in {time.time() - start:.0f}s" + (f"; {deferred} deferred by the budget "
          "(rerun to resume)" if deferred else ""), flush=True)
    failed = sorted({r["name"] for r in results if "error" in r})
    print(f"manifest: {manifest_path(args.out)} ({len(rows)} graphs)"
          + (f"; FAILED: {failed}" if failed else ""), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
