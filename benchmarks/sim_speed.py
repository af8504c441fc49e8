"""Simulator speed: op-events per second of the fast (numba) and the reference simulator.

    python benchmarks/sim_speed.py [GRAPH] [--cluster post-4gpu] [--ops 10000] [--batch 200]
                                   [--repeats 5] [--threads N] [--no-compile-time]

GRAPH is a gplace .npz or anything gplace.load_graph reads; without it, a seeded random DAG of
--ops ops. One op-event = one op executed; transfers are counted separately. Goals:
>= 10 M op-events/s on one core; a batch spread over all cores at >= 1.8x on 2 cores.

Figures are medians over --repeats batches, in wall time and in CPU time (the machine may be
shared: CPU time is less disturbed by other jobs; the multi-core line's CPU time is the
process's, summed over its threads); the load average is printed before and after, since
other jobs on the cores bend both. An op-event is one op simulated: the time is that of
``run_batch`` on a built simulator (event loop, transfers, memory peaks), not the set-up.
"one core" is FastSimulator(threads=1); "all cores" is the default (numba's threads, one per
core unless NUMBA_NUM_THREADS says otherwise); their ratio is taken in rounds that run the
two back to back. The first-call
lines run a fresh process that builds a 200-op problem and simulates it once, first with an
empty numba cache directory (compiles everything), then again with that cache (loads it).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

_FIRST_CALL = """
import time
t0 = time.perf_counter()
from gplace.cluster import load_cluster
from gplace.problem import PlacementProblem
from gplace.sim import FastSimulator
from gplace.sim.random_graphs import RandomDagConfig, random_dag
p = PlacementProblem.build(random_dag(RandomDagConfig(ops=200), 0), load_cluster("post-4gpu"))
sim = FastSimulator(p)
sim.run_batch(p.random_placements(64, seed=0))
sim.run(p.random_placements(1, seed=1)[0])
print(time.perf_counter() - t0)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("graph", nargs="?")
    parser.add_argument("--cluster", default="post-4gpu")
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--reference", type=int, default=2, help="placements for the reference")
    parser.add_argument("--repeats", type=int, default=5, help="timed batches (median)")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads of the all-cores line (default: numba's, one per core)")
    parser.add_argument("--no-compile-time", action="store_true",
                        help="skip the first-call (cold and cached compile) measurement")
    args = parser.parse_args()
    if args.threads:
        os.environ["NUMBA_NUM_THREADS"] = str(args.threads)

    import numba

    from gplace.cli.models import load_model
    from gplace.cluster import load_cluster
    from gplace.problem import PlacementProblem
    from gplace.sim import FastSimulator, simulate_reference
    from gplace.sim.random_graphs import RandomDagConfig, random_dag

    print(f"load average (1, 5, 15 min): {_load()}")
    graph = load_model(args.graph) if args.graph else random_dag(RandomDagConfig(ops=args.ops), 0)
    problem = PlacementProblem.build(graph, load_cluster(args.cluster))
    placements = problem.random_placements(args.batch, seed=0)
    n, events = graph.num_ops, graph.num_ops * args.batch

    t0 = time.perf_counter()
    one = FastSimulator(problem, threads=1)
    build_s = time.perf_counter() - t0
    one.run_batch(placements[:1])  # numba compile or cache load
    wall_s, batch = _median_time(one.run_batch, placements, args.repeats)
    cpu_s = _median_time(one.run_batch, placements, args.repeats, time.thread_time)[0]
    single = [_median_time(one.run_batch, p[None], 1)[0] for p in placements[:20]]
    every = FastSimulator(problem)
    threads = every._chunks(args.batch)
    every.run_batch(placements[:threads])
    par_s, par_batch = _median_time(every.run_batch, placements, args.repeats)
    par_cpu_s = _median_time(every.run_batch, placements, args.repeats, time.process_time)[0]
    assert all((x == y).all() for x, y in zip(batch, par_batch)), "threads changed the results"
    speedup = _alternating_ratio(one.run_batch, every.run_batch, placements, args.repeats)

    t0 = time.perf_counter()
    for p in placements[:args.reference]:
        ref = simulate_reference(problem, p)
    ref_s = (time.perf_counter() - t0) / args.reference
    assert ref.step_time_s == batch.step_time_s[args.reference - 1], "fast != reference"

    x = batch.num_transfers.mean()
    print(f"graph {graph.meta.get('name', '?')}: {n} ops, {graph.num_edges} edges, "
          f"{problem.num_units} units; cluster {problem.cluster.name} "
          f"({problem.num_devices} devices); transfers/placement {x:.0f}")
    print(f"arrays built once:       {build_s * 1e3:.1f} ms")
    print(f"fast, one core:          {events / wall_s / 1e6:.2f} M op-events/s wall, "
          f"{events / cpu_s / 1e6:.2f} M in CPU time; {events / wall_s / 1e6 * (1 + x / n):.2f} M "
          f"events/s wall counting transfers ({wall_s / args.batch * 1e3:.2f} ms per placement)")
    print(f"fast, all cores ({threads} of {numba.config.NUMBA_NUM_THREADS} threads): "
          f"{events / par_s / 1e6:.2f} M op-events/s wall, {speedup:.2f}x one core (median of "
          f"{args.repeats} rounds alternating the two; {wall_s / par_s:.2f}x from the two blocks' "
          f"medians; process CPU time {par_cpu_s / args.batch * 1e3:.2f} ms per placement)")
    print(f"fast, one placement:     {np.median(single) * 1e3:.2f} ms median")
    print(f"reference:               {n / ref_s / 1e6:.3f} M op-events/s, {ref_s * 1e3:.0f} ms "
          f"per placement; fast is {ref_s / (wall_s / args.batch):.0f}x faster")
    print(f"load average (1, 5, 15 min): {_load()}")
    if not args.no_compile_time:
        cold, cached = _first_call_s()
        print(f"first call (200-op problem, import + build + compile or load + run): "
              f"{cold:.1f} s with an empty numba cache, {cached:.1f} s with it cached "
              f"(load {_load()})")


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _first_call_s() -> tuple[float, float]:
    """(cold, cached) seconds of a fresh process's first simulation (module doc)."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        return tuple(float(subprocess.run([sys.executable, "-c", _FIRST_CALL], env=env,
                                          check=True, capture_output=True, text=True).stdout)
                     for _ in range(2))


def _alternating_ratio(slow, fast, arg, repeats: int) -> float:
    """Median over ``repeats`` rounds of slow(arg)'s wall time over fast(arg)'s, the two run
    back to back in each round: other jobs' load, which comes and goes, then bends both alike
    (timed in two separate blocks, the ratio swung from 1.67x to 1.98x on a quiet machine)."""
    ratios = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        slow(arg)
        t1 = time.perf_counter()
        fast(arg)
        ratios.append((t1 - t0) / (time.perf_counter() - t1))
    return float(np.median(ratios))


def _median_time(fn, arg, repeats: int, clock=time.perf_counter):
    """(median seconds of fn(arg) over ``repeats`` calls by ``clock``, the last result)."""
    times = []
    for _ in range(repeats):
        t0 = clock()
        out = fn(arg)
        times.append(clock() - t0)
    return float(np.median(times)), out


if __name__ == "__main__":
    main()
