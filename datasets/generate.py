"""The generated part of a build: graphs and their statistics in chunks of graphs per worker
process (datasets.genworker), then profiles for as many small graphs as a budget allows.

Progress is one line per graph as its worker reports it. Resumable: a graph whose ``.pb`` and
``.stats.json`` exist with its current recipe hash is skipped (the recipe hash is the cache key;
a changed recipe rebuilds the graph).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from datasets import graphstats
from datasets.registry import GraphSpec

ROOT = Path(__file__).resolve().parent.parent

# Profiled only when small enough to run here in seconds to minutes: optimizer updates of big
# embedding tables are dense (22 s a step for a 2M-row table with Adam), and a 2-core machine
# shared with other jobs has no memory to spare.
PROFILE_MAX_OPS = 15_000
PROFILE_MAX_PARAM_BYTES = 512 * 2 ** 20
# A step of 1.5 TFLOP (gnn_08: message passing over 50k nodes) takes minutes here, and a profile
# runs 8 steps: graphs above this are left estimated, and profiling goes cheapest (FLOPs) first.
PROFILE_MAX_FLOPS = 100e9
CHUNK_TIMEOUT_PER_GRAPH_S = 900


def is_built(spec: GraphSpec, out: Path) -> bool:
    stats = graphstats.read(out / f"{spec.name}.pb")
    return (out / f"{spec.name}.pb").exists() and stats is not None and \
        stats.get("recipe_hash") == spec.recipe_hash


def run_chunk(names: list[str], out: Path, profile: bool, report) -> list[dict]:
    """Runs one genworker over ``names``; ``report(result)`` is called per finished graph."""
    cmd = [sys.executable, "-m", "datasets.genworker", str(out), *(["--profile"] * profile),
           *names]
    env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0", "TF_CPP_MIN_LOG_LEVEL": "3",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    timer = threading.Timer(CHUNK_TIMEOUT_PER_GRAPH_S * len(names), proc.kill)
    timer.start()
    results = []
    try:
        for line in proc.stdout:
            if line.startswith("{"):
                results.append(json.loads(line))
                report(results[-1])
    finally:
        timer.cancel()
        proc.wait()
    seen = {r["name"] for r in results}
    for name in names:
        if name not in seen:  # the process died or timed out before this graph
            results.append({"name": name, "error": f"worker exit {proc.returncode} before it"})
            report(results[-1])
    return results


def _chunks(names: list[str], size: int) -> list[list[str]]:
    """``size`` graphs per process, but a keras.applications graph in a process of its own: TF
    names its functions and custom gradients from process-wide counters, so such a graph's bytes
    depend on what its process built before it (a fresh process gives the same bytes every time;
    tests/datasets rebuilds graphs to the manifest's sha256)."""
    from datasets.registry import GRAPHS
    alone = [[n] for n in names if GRAPHS[n].builder == "cnn:keras_app"]
    rest = [n for n in names if GRAPHS[n].builder != "cnn:keras_app"]
    return [rest[i:i + size] for i in range(0, len(rest), size)] + alone


def _run(todo: list[str], out: Path, profile: bool, jobs: int, chunk: int, deadline: float,
         label: str) -> list[dict]:
    start, done, results, lock = time.time(), [0], [], threading.Lock()

    def report(r: dict) -> None:
        with lock:
            done[0] += 1
            elapsed = time.time() - start
            eta = elapsed / done[0] * (len(todo) - done[0])
            what = (f"FAILED ({r['error']})" if "error" in r else
                    f"{r['ops']} ops, {r['total_s']:.0f}s" +
                    (f", step {r['step_time_s'] * 1e3:.1f} ms" if r.get("step_time_s") else ""))
            print(f"[{label} {done[0]}/{len(todo)}] {r['name']}: {what}, elapsed {elapsed:.0f}s,"
                  f" eta {eta:.0f}s", flush=True)

    def one(names: list[str]) -> list[dict]:
        if time.time() > deadline:
            return [{"name": n, "deferred": True} for n in names]
        return run_chunk(names, out, profile, report)

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        for rs in pool.map(one, _chunks(todo, chunk)):
            results.extend(rs)
    return results


def build_all(specs: list[GraphSpec], out: Path, force: bool, jobs: int, chunk: int,
              deadline: float) -> list[dict]:
    """Builds missing generated graphs and the stats of every graph that has a .pb."""
    out.mkdir(parents=True, exist_ok=True)
    todo = [s.name for s in specs if (force or not is_built(s, out))
            and (s.generator or (out / f"{s.name}.pb").exists())]
    if force:
        for name in todo:
            graphstats.sidecar_path(out / f"{name}.pb").unlink(missing_ok=True)
    print(f"generate: {len(specs) - len(todo)} of {len(specs)} graphs built, {len(todo)} to do",
          flush=True)
    return _run(todo, out, False, jobs, chunk, deadline, "build")


def profile_some(specs: list[GraphSpec], out: Path, jobs: int, deadline: float) -> list[dict]:
    """Profiles built, unprofiled generated graphs, fewest FLOPs first, until ``deadline``."""
    todo = []
    for s in specs:
        stats = graphstats.read(out / f"{s.name}.pb")
        if stats and not (out / f"{s.name}.profile.json.gz").exists() and \
                stats["ops"] <= PROFILE_MAX_OPS and stats["flops"] <= PROFILE_MAX_FLOPS and \
                stats["param_bytes"] <= PROFILE_MAX_PARAM_BYTES:
            todo.append((stats["flops"], stats["ops"], s.name))
    names = [n for *_, n in sorted(todo)]
    print(f"profile: {len(names)} generated graphs small enough to profile", flush=True)
    return _run(names, out, True, jobs, 2, deadline, "profile")
