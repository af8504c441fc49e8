"""Simulator speed: op-events per second of the fast (numba) and the reference simulator.

    python benchmarks/sim_speed.py [GRAPH] [--cluster post-4gpu] [--ops 10000] [--batch 200]
                                   [--repeats 5] [--threads 2]

GRAPH is a gplace .npz or anything gplace.load_graph reads; without it, a seeded random DAG of
--ops ops. One op-event = one op executed; transfers are counted separately. Goals (issue 4):
>= 5 M op-events/s on one core, < 5 ms per 10,000-op placement. Figures are medians of wall
times over --repeats batches (the machine may be shared); "threads" is FastSimulator(threads=)
over the rows of the batch, reported apart from the one-core figure.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("graph", nargs="?")
    parser.add_argument("--cluster", default="post-4gpu")
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--reference", type=int, default=2, help="placements for the reference")
    parser.add_argument("--repeats", type=int, default=5, help="timed batches (median)")
    parser.add_argument("--threads", type=int, default=2, help="threads of the parallel line")
    args = parser.parse_args()
    os.environ.setdefault("NUMBA_NUM_THREADS", str(max(1, args.threads)))

    from gplace.cli.simulate_cmd import load_model
    from gplace.cluster import load_cluster
    from gplace.problem import PlacementProblem
    from gplace.sim import FastSimulator, simulate_reference
    from gplace.sim.random_graphs import RandomDagConfig, random_dag

    graph = load_model(args.graph) if args.graph else random_dag(RandomDagConfig(ops=args.ops), 0)
    problem = PlacementProblem.build(graph, load_cluster(args.cluster))
    placements = problem.random_placements(args.batch, seed=0)
    n = graph.num_ops

    t0 = time.perf_counter()
    sim = FastSimulator(problem)
    build_s = time.perf_counter() - t0
    sim.run_batch(placements[:1])  # numba compile or cache load
    fast_s, batch = _median_time(sim.run_batch, placements, args.repeats)
    cpu_s = _median_time(sim.run_batch, placements, args.repeats, time.thread_time)[0]
    single = [_median_time(sim.run_batch, p[None], 1)[0] for p in placements[:20]]
    par = FastSimulator(problem, threads=args.threads)
    par.run_batch(placements[:2])
    par_s, par_batch = _median_time(par.run_batch, placements, args.repeats)
    assert all((x == y).all() for x, y in zip(batch, par_batch)), "threads changed the results"

    t0 = time.perf_counter()
    for p in placements[:args.reference]:
        ref = simulate_reference(problem, p)
    ref_s = (time.perf_counter() - t0) / args.reference
    assert ref.step_time_s == batch.step_time_s[args.reference - 1], "fast != reference"

    print(f"graph {graph.meta.get('name', '?')}: {n} ops, {graph.num_edges} edges, "
          f"{problem.num_units} units; cluster {problem.cluster.name} "
          f"({problem.num_devices} devices); transfers/placement {batch.num_transfers.mean():.0f}")
    print(f"arrays built once:       {build_s * 1e3:.1f} ms")
    print(f"fast, batch of {args.batch}:     {n * args.batch / fast_s / 1e6:.2f} M op-events/s, "
          f"{n * args.batch / fast_s / 1e6 * (1 + batch.num_transfers.mean() / n):.2f} M events/s "
          f"(ops + transfers); {n * args.batch / cpu_s / 1e6:.2f} M op-events/s in CPU time")
    print(f"fast, {args.threads} threads:       {n * args.batch / par_s / 1e6:.2f} M op-events/s "
          f"({par_s / args.batch * 1e3:.2f} ms each in the batch)")
    print(f"fast, one placement:     {np.median(single) * 1e3:.2f} ms median "
          f"({fast_s / args.batch * 1e3:.2f} ms each in the batch)")
    print(f"reference:               {n / ref_s / 1e6:.3f} M op-events/s, {ref_s * 1e3:.0f} ms "
          f"per placement")
    print(f"speed-up fast/reference: {ref_s / (fast_s / args.batch):.0f}x")


def _median_time(fn, arg, repeats: int, clock=time.perf_counter):
    """(median seconds of fn(arg) over ``repeats`` calls by ``clock``, the last result). CPU
    time (time.thread_time) is less disturbed than wall time by other jobs on the machine."""
    times = []
    for _ in range(repeats):
        t0 = clock()
        out = fn(arg)
        times.append(clock() - t0)
    return float(np.median(times)), out


if __name__ == "__main__":
    main()
