"""Closed-form step times and peaks, checked in both simulators (STYLE.md item 9)."""

import numpy as np
import pytest

from gplace.cluster import Cluster
from gplace.graph import OpGraph
from gplace.sim import FastSimulator, lower_bound

from tests.sim.helpers import both, cluster, device, problem




def test_chain_on_one_device():
    g = OpGraph.from_lists([0, 0, 0], [8, 8, 8], [(0, 1), (1, 2)])
    r = both(problem(g, cluster(device("a")), [1.0, 2.0, 3.0]), [0, 0, 0])
    assert r.step_time_s == 6.0
    np.testing.assert_array_equal(r.op_start_s, [0.0, 1.0, 3.0])
    assert r.busy_s.tolist() == [6.0]


def test_fork_join_over_two_devices():
    # a -> b (dev0), a -> c (dev1), b, c -> d (dev0); a sends 1e9 B, c sends 2e9 B at 1e9 B/s,
    # latency 0.5 s. a [0,1]; a->dev1 link [1,2] arrives 2.5; b [1,3]; c [2.5,5.5];
    # c->dev0 link [5.5,7.5] arrives 8; d [8,9].
    g = OpGraph.from_lists([0] * 4, [10**9, 0, 2 * 10**9, 0], [(0, 1), (0, 2), (1, 3), (2, 3)])
    r = both(problem(g, cluster(device("x"), device("y"), latency=0.5), [1.0, 2.0, 3.0, 1.0]),
             [0, 0, 1, 0])
    assert r.step_time_s == 9.0
    np.testing.assert_array_equal(r.op_start_s, [0.0, 1.0, 2.5, 8.0])
    np.testing.assert_array_equal(r.transfers.arrive_s, [2.5, 8.0])
    # dev0: a's output [0,3] then c's copy [8,9]: 2e9. dev1: a's copy [2.5,5.5] + c's output
    # [2.5,8] overlap: 3e9.
    assert r.peak_bytes.tolist() == [2 * 10**9, 3 * 10**9]
    assert r.busy_s.tolist() == [4.0, 3.0]


def test_transfer_bound_pair_serializes_on_the_link():
    # a, a2 on dev0 each send 4e9 B to dev1 (1e9 B/s, latency 0.25): a->[1,5] arrives 5.25,
    # a2's transfer is ready at 2 but waits for the link: [5,9] arrives 9.25; b2 [9.25,10.25].
    g = OpGraph.from_lists([0] * 4, [4 * 10**9, 4 * 10**9, 0, 0], [(0, 2), (1, 3)])
    r = both(problem(g, cluster(device("x"), device("y"), latency=0.25), [1.0] * 4),
             [0, 0, 1, 1])
    assert r.step_time_s == 10.25
    np.testing.assert_array_equal(r.transfers.start_s, [1.0, 5.0])
    np.testing.assert_array_equal(r.op_start_s, [0.0, 1.0, 5.25, 9.25])


def test_tensor_crosses_once_per_destination_device():
    # one output read by three ops on dev1: one transfer, not three
    g = OpGraph.from_lists([0] * 4, [10**9, 0, 0, 0], [(0, 1), (0, 2), (0, 3)])
    r = both(problem(g, cluster(device("x"), device("y")), [1.0] * 4), [0, 1, 1, 1])
    assert r.transfers.output.shape[0] == 1
    assert r.step_time_s == 1.0 + 1.0 + 3.0


def test_control_edge_across_devices_costs_latency_only():
    g = OpGraph.from_lists([0, 0], [10**9, 0], control_edges=[(0, 1)])
    r = both(problem(g, cluster(device("x"), device("y"), latency=0.5), [1.0, 1.0]), [0, 1])
    assert r.step_time_s == 2.5
    assert r.transfers.output.shape[0] == 0


def test_oom_and_frees_before_allocations():
    # chain a -> b -> c with 500 B outputs: at t=2 a's output is freed before c's is allocated,
    # so the peak is 1000 (during b), which fits a 1000 B device ...
    g = OpGraph.from_lists([0] * 3, [500, 500, 500], [(0, 1), (1, 2)])
    fits = both(problem(g, cluster(device("x", memory=1000)), [1.0] * 3), [0, 0, 0])
    assert fits.peak_bytes.tolist() == [1000] and not fits.oom
    # ... but 100 B of parameters on a push it over
    g2 = g.replace(param_bytes=np.array([100, 0, 0]))
    over = both(problem(g2, cluster(device("x", memory=1000)), [1.0] * 3), [0, 0, 0])
    assert over.peak_bytes.tolist() == [1100] and over.oom
    # scratch memory counts while the op runs
    temp = both(problem(g, cluster(device("x", memory=1000)), [1.0] * 3,
                        temp=[[0], [1], [0]]), [0, 0, 0])
    assert temp.peak_bytes.tolist() == [1001] and temp.oom


def test_cpu_with_two_lanes():
    # four independent ops of 1, 2, 3, 4 s on one 2-lane device:
    # lane0 [0,1] [1,4], lane1 [0,2] [2,6]
    g = OpGraph.from_lists([0] * 4, [0] * 4)
    r = both(problem(g, cluster(device("cpu", lanes=2)), [1.0, 2.0, 3.0, 4.0]), [0, 0, 0, 0])
    np.testing.assert_array_equal(r.op_start_s, [0.0, 0.0, 1.0, 2.0])
    assert r.step_time_s == 6.0 and r.busy_s.tolist() == [10.0]


def test_first_ready_first_served_ties_by_topological_rank():
    # dev0 is busy with op0 until 3. op3 (ready at 1, after op1) must go before op2 (ready 2),
    # though op2 has the lower id / rank.
    g = OpGraph.from_lists([0] * 5, [0] * 5, [(1, 3), (4, 2)])
    prob = problem(g, cluster(device("x"), device("y")), [3.0, 1.0, 1.0, 1.0, 2.0])
    r = both(prob, [0, 1, 0, 0, 1])
    np.testing.assert_array_equal(r.op_start_s, [0.0, 0.0, 4.0, 3.0, 1.0])


def test_lower_bound_closed_form():
    chain = OpGraph.from_lists([0, 0, 0], [0, 0, 0], [(0, 1), (1, 2)])
    lb = lower_bound(problem(chain, cluster(device("x"), device("y")), [[1.0, 2.0], [2.0, 0.5], [3.0, 3.0]]))
    assert lb.critical_path_s == 4.5 and lb.work_s == 2.25
    assert lb.bound_s == pytest.approx(4.5, rel=1e-8)  # less the bounds' float margin
    free = OpGraph.from_lists([0] * 4, [0] * 4)
    lb = lower_bound(problem(free, cluster(device("x"), device("cpu", lanes=3)), [1.0, 2.0, 3.0, 4.0]))
    assert lb.work_s == 2.5 and lb.critical_path_s == 4.0
    assert lb.bound_s == pytest.approx(4.0, rel=1e-8)


def test_batch_rows_match_single_runs():
    g = OpGraph.from_lists([0] * 4, [10**9, 0, 2 * 10**9, 0], [(0, 1), (0, 2), (1, 3), (2, 3)])
    prob = problem(g, cluster(device("x"), device("y"), latency=0.5), [1.0, 2.0, 3.0, 1.0])
    placements = np.array([[0, 0, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1]])
    batch = FastSimulator(prob).run_batch(placements)
    assert batch.step_time_s.tolist() == [9.0, 7.0, 7.0]
    assert batch.num_transfers.tolist() == [2, 0, 0]


def test_receive_cpu_takes_the_receiving_lane():
    # a (dev0) sends 1e9 B to b (dev1) at 1e9 B/s, latency 0.5: link [1,2], arrives 2.5.
    # c (dev1, no inputs) holds dev1's lane [0,3]. Receiving costs 0.25 s + 0.25 ns/B = 0.5 s
    # of dev1's lane: [3,3.5]; b [3.5,4.5]. Without the receive cost b would run [3,4].
    from gplace.cluster import Link
    g = OpGraph.from_lists([0] * 3, [10**9, 0, 0], [(0, 1)])
    plain = cluster(device("x"), device("y"), latency=0.5)
    charged = Cluster("test", plain.devices, (), Link((), 1e9, 0.5, recv_cpu_s=0.25,
                                                      recv_cpu_s_per_byte=0.25e-9))
    r = both(problem(g, charged, [1.0, 1.0, 3.0]), [0, 1, 1])
    np.testing.assert_array_equal(r.op_start_s, [0.0, 3.5, 0.0])
    assert r.step_time_s == 4.5
    np.testing.assert_array_equal(r.transfers.arrive_s, [2.5])
    assert r.busy_s.tolist() == [1.0, 4.0]  # ops only; the receipt is not an op
    assert both(problem(g, plain, [1.0, 1.0, 3.0]), [0, 1, 1]).step_time_s == 4.0
