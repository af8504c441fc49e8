import numpy as np
import pytest

from gplace.cluster import load_cluster
from gplace.errors import ConfigError
from gplace.graph import OpGraph
from gplace.problem import CoarsenConfig, PlacementProblem, coarsen_units
from gplace.sim.random_graphs import RandomDagConfig, random_dag


def test_units_are_colocation_groups_and_expand():
    g = OpGraph.from_lists([1e6] * 4, [4] * 4, [(0, 1), (1, 2), (2, 3)], group=[5, 5, 7, 9])
    p = PlacementProblem.build(g, load_cluster("post-2gpu"))
    assert p.num_units == 3 and p.unit_of_op.tolist() == [0, 0, 1, 2]
    assert p.expand(np.array([2, 0, 1])).tolist() == [2, 2, 0, 1]
    assert p.expand(np.array([[2, 0, 1], [0, 0, 0]])).shape == (2, 4)
    assert p.from_op_devices(np.array([2, 2, 0, 1])).tolist() == [2, 0, 1]
    with pytest.raises(ConfigError, match="colocation group 0"):
        p.from_op_devices(np.array([2, 1, 0, 1]))
    with pytest.raises(ConfigError, match="colocation group 0"):
        p.from_names({"op0": "gpu0", "op1": "gpu1", "op2": "cpu", "op3": "cpu"})
    with pytest.raises(ConfigError, match="no device for op 'op3'"):
        p.from_names({"op0": "gpu0", "op2": "cpu"})
    with pytest.raises(ConfigError, match="device index"):
        p.expand(np.array([3, 0, 0]))


def test_random_placements_are_seeded():
    p = PlacementProblem.build(random_dag(RandomDagConfig(ops=50), 0), load_cluster("post-4gpu"))
    np.testing.assert_array_equal(p.random_placements(4, 1), p.random_placements(4, 1))
    assert p.random_placements(4, 1).shape == (4, p.num_units)


def test_coarsening_merges_light_units_into_their_heaviest_neighbour():
    # units 0-1 exchange 1000 B, 1-2 exchange 10 B; unit 1 is the lightest: it joins unit 0
    g = OpGraph.from_lists([0, 0, 0], [1000, 10, 0], [(0, 1), (1, 2)])
    units = coarsen_units(g, g.group, np.array([5.0, 1.0, 3.0]), 2)
    assert units.tolist() == [0, 0, 1]


def test_coarsening_never_splits_groups_and_reaches_the_limit():
    g = random_dag(RandomDagConfig(ops=300), 4)
    p = PlacementProblem.build(g, load_cluster("post-4gpu"), coarsen=CoarsenConfig(max_units=16))
    assert p.num_units == 16 and set(p.unit_of_op.tolist()) == set(range(16))
    for grp in np.unique(g.group):
        assert np.unique(p.unit_of_op[g.group == grp]).size == 1


@pytest.mark.parametrize("seed", range(3))
def test_unit_traffic_sums_every_edge_between_two_units(seed):
    g = random_dag(RandomDagConfig(ops=60, back_edges=3), seed)
    rng = np.random.default_rng(seed)
    g = g.replace(group=rng.integers(0, 12, g.num_ops))  # several ops per unit
    p = PlacementProblem.build(g, load_cluster("post-4gpu"))
    u = p.unit_of_op
    want: dict[tuple[int, int], list] = {}
    for s, d, b in zip(g.edge_src, g.edge_dst, g.edge_bytes):
        if u[s] != u[d]:
            want.setdefault((u[s], u[d]), [0, False])[0] += int(b)
            want[(u[s], u[d])][1] = True
    for s, d in zip(g.ctrl_src, g.ctrl_dst):
        if u[s] != u[d]:
            want.setdefault((u[s], u[d]), [0, False])
    t = p.unit_traffic()
    got = {(int(a), int(b)): [int(n), bool(k)] for a, b, n, k in zip(*t)}
    assert got == {k: v for k, v in want.items()} and len(want) > 10
    assert list(zip(t.src, t.dst)) == sorted(zip(t.src, t.dst))

