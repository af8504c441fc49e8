"""The fast simulator's parts on their own: the heap's order, the all-cores batch path, the
memory sweep on larger graphs, and the guard against a stale numba cache."""

import io

import numpy as np
import pytest
from numba import njit

from gplace.cluster import load_cluster
from gplace.cost import OpCosts
from gplace.problem import PlacementProblem
from gplace.sim import FastSimulator, fast, simulate_reference
from gplace.sim.heap import bits, from_bits, pop, push
from gplace.sim.jit_cache import invalidate_stale
from gplace.sim.random_graphs import RandomDagConfig, random_dag


@njit  # no cache: numba's would not follow edits to gplace/sim/heap.py
def _heap_sort(times, keys):
    h = np.zeros(2 * times.shape[0] + 2, np.int64)
    size = 0
    for i in range(times.shape[0]):
        size = push(h, size, bits(times[i]), keys[i])
    out_t, out_k = np.zeros(times.shape[0]), np.zeros(times.shape[0], np.int64)
    for i in range(times.shape[0]):
        out_t[i], out_k[i] = from_bits(h[0]), h[1]
        size = pop(h, size)
    return out_t, out_k


def test_heap_pops_in_time_then_key_order_with_ties():
    rng = np.random.default_rng(0)
    for n in [1, 2, 3, 4, 5, 6, 17, 64, 1000]:
        times = rng.choice([0.0, 2.0 ** -20, 0.5, 1.0, 3.0, 1e9], size=n)  # many exact ties
        keys = rng.permutation(n * 3)[:n].astype(np.int64)
        t, k = _heap_sort(times, keys)
        order = np.lexsort((keys, times))
        np.testing.assert_array_equal(t, times[order])
        np.testing.assert_array_equal(k, keys[order])


def test_all_cores_path_equals_one_core(monkeypatch):
    prob = PlacementProblem.build(random_dag(RandomDagConfig(ops=300), 5), load_cluster("post-4gpu"))
    placements = prob.random_placements(9, seed=4)
    serial = FastSimulator(prob, threads=1).run_batch(placements)
    monkeypatch.setattr(fast, "_PARALLEL_MIN_OPS", 0)  # parallel even for a small batch
    sim = FastSimulator(prob, threads=2)
    assert sim._chunks(9) == 2
    for x, y in zip(serial, sim.run_batch(placements)):
        np.testing.assert_array_equal(x, y)
    assert FastSimulator(prob).threads is None  # the default: all of numba's threads


def test_peaks_of_a_larger_graph_equal_the_reference():
    """Thousands of memory events: many time buckets per device, few of them sorted."""
    prob = PlacementProblem.build(random_dag(RandomDagConfig(ops=2000), 7), load_cluster("post-4gpu"))
    sim = FastSimulator(prob)
    for placement in prob.random_placements(3, seed=8):
        ref = simulate_reference(prob, placement)
        r = sim.run(placement)
        np.testing.assert_array_equal(r.peak_bytes, ref.peak_bytes)
        assert r.step_time_s == ref.step_time_s


def test_stale_cache_files_go_when_sources_change(tmp_path):
    (tmp_path / "fast._batch-1.py311.nbi").write_bytes(b"x")
    (tmp_path / "fast._batch-1.py311.1.nbc").write_bytes(b"x")
    assert invalidate_stale(tmp_path)  # no stamp yet: cleaned, stamped
    assert not list(tmp_path.glob("*.nb?"))
    (tmp_path / "loop.run-9.py311.nbi").write_bytes(b"x")
    assert not invalidate_stale(tmp_path)  # same sources: kept
    assert (tmp_path / "loop.run-9.py311.nbi").exists()
    (tmp_path / "gplace-sim-kernels.sha256").write_text("an older digest")
    assert invalidate_stale(tmp_path) and not (tmp_path / "loop.run-9.py311.nbi").exists()



def test_a_numba_cache_dir_is_cleaned_too(tmp_path, monkeypatch):
    """With NUMBA_CACHE_DIR set numba keeps the kernels there, not beside the sources: a
    stale batch kernel there ran an old scratch layout and crashed."""
    from numba.core import config
    from gplace.sim import jit_cache
    monkeypatch.setattr(config, "CACHE_DIR", str(tmp_path))
    ours = [d for d in jit_cache.cache_dirs() if tmp_path in d.parents]
    assert len(ours) == 1 and ours[0].name.startswith("sim_")
    ours[0].mkdir()
    (ours[0] / "fast._batch-1.py311.nbi").write_bytes(b"x")
    (ours[0] / "gplace-sim-kernels.sha256").write_text("an older digest")
    jit_cache.invalidate_all()
    assert not (ours[0] / "fast._batch-1.py311.nbi").exists()


class _Stream(io.StringIO):
    def __init__(self, tty):
        super().__init__()
        self.tty = tty

    def isatty(self):
        return self.tty


def test_a_cold_cache_is_announced_on_a_terminal_only(tmp_path, monkeypatch):
    from gplace.sim import jit_cache
    monkeypatch.setattr(jit_cache, "locate", lambda: jit_cache.CacheDirs(tmp_path, None, None))
    for tty, says in ((True, True), (False, False)):
        out = _Stream(tty)
        jit_cache.notice_if_cold(out)
        assert ("compiling the simulator" in out.getvalue()) == says
    (tmp_path / "fast._batch-53.py311.nbi").write_bytes(b"x")  # warm: nothing to say
    out = _Stream(True)
    jit_cache.notice_if_cold(out)
    assert out.getvalue() == ""

def test_negative_byte_counts_are_refused():
    """memory.events sums allocations and frees apart, which needs byte counts >= 0."""
    prob = PlacementProblem.build(random_dag(RandomDagConfig(ops=20), 1), load_cluster("post-4gpu"))
    c = prob.costs
    temp = c.temp_bytes.copy()
    temp[3, 0] = -1
    bad = PlacementProblem(prob.graph, prob.cluster,
                           OpCosts(c.time_s, temp, c.output_bytes, c.measured, c.estimated, ()),
                           prob.unit_of_op, prob.num_units)
    with pytest.raises(ValueError, match="negative"):
        FastSimulator(bad)
    FastSimulator(prob)  # the same problem with its own (non-negative) scratch bytes
