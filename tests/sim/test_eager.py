"""``loop.run_eager`` (transfers sent when their op ends) against ``loop.plan`` + ``loop.run``
(every transfer through the heap, in the reference's order): the same schedule to the bit
wherever it holds, and a fall-back wherever its checks fail."""

import numpy as np

from gplace.cluster import load_cluster
from gplace.problem import PlacementProblem
from gplace.sim import FastSimulator, loop, simulate_reference
from gplace.sim.random_graphs import RandomDagConfig, random_dag
from tests.sim.test_equivalence import _case


def _schedule(sim: FastSimulator, placement: np.ndarray, eager: bool):
    """(op starts, op ends, transfers sorted by (output, device)) or None if eager fails."""
    a = sim.arrays
    devs = sim._rows(placement[None], sim.problem.num_units, "units")
    w, busy = loop.new_work(a), np.zeros(a.num_devices)
    if eager:
        loop.place(a, devs, sim._col_unit, 0, w)
        done, nx = loop.run_eager(a, w, sim._shift, busy)
        if done < 0:
            return None
    else:
        nx = loop.plan(a, devs, sim._col_unit, 0, w, sim._shift)
        done = loop.run(a, w, sim._shift, busy)
    assert done == a.num_ops
    order = np.lexsort((w.xd[:nx], w.xj[:nx]))
    x = [c[:nx][order].copy() for c in (w.xj, w.xd, w.xs, w.xf, w.xa)]
    return w.start.copy(), w.end.copy(), busy, x


def test_eager_schedule_equals_the_heap_schedule():
    held = fell_back = 0
    for seed in range(120):
        prob, placement = _case(seed)
        sim = FastSimulator(prob)
        eager = _schedule(sim, placement, True)
        if eager is None:
            fell_back += 1
            continue
        held += 1
        heap = _schedule(sim, placement, False)
        for x, y in zip(eager[:3] + tuple(eager[3]), heap[:3] + tuple(heap[3])):
            np.testing.assert_array_equal(x, y)
    assert held > 60 and fell_back > 0  # both paths are exercised


def test_eager_holds_on_the_benchmark_cluster_and_batches_equal_the_reference():
    prob = PlacementProblem.build(random_dag(RandomDagConfig(ops=1000), 11),
                                  load_cluster("post-4gpu"))
    sim = FastSimulator(prob)
    assert sim.arrays.eager.sum() == 16  # GPU -> x channels; the 4-lane CPU's go by the heap
    placements = prob.random_placements(4, seed=3)
    batch = sim.run_batch(placements)
    for b, p in enumerate(placements):
        assert _schedule(sim, p, True) is not None
        ref = simulate_reference(prob, p)
        assert batch.step_time_s[b] == ref.step_time_s
        np.testing.assert_array_equal(batch.peak_bytes[b], ref.peak_bytes)
        np.testing.assert_array_equal(batch.busy_s[b], ref.busy_s)
