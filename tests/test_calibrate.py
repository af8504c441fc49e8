"""Calibration placements and the model adjustments (no TensorFlow run)."""

import numpy as np
import pytest

from gplace.calibrate import (calibration_placements, canonical, interchangeable, scaled_profile,
                              step_overhead_s)
from gplace.cluster import Cluster, Device, Link, load_cluster
from gplace.graph import OpGraph
from gplace.problem import PlacementProblem
from gplace.profile import CostProfile
from gplace.real.links import StepOverhead, fit_link


def test_link_fit():
    sizes = np.array([4e3, 6.4e4, 1e6, 1.6e7])
    latency, bandwidth = fit_link(sizes, 2e-4 + sizes / 5e8)
    assert latency == pytest.approx(2e-4) and bandwidth == pytest.approx(5e8)


def chain_problem(n=40):
    graph = OpGraph.from_lists(np.full(n, 1e6), np.full(n, 4096),
                               edges=[(i, i + 1) for i in range(n - 1)]).replace(
        meta={"name": "chain"})
    return PlacementProblem.build(graph, load_cluster("local-procs"))


def test_calibration_placements_are_distinct_and_cover_the_kinds():
    problem = chain_problem()
    placements, labels = calibration_placements(problem, 24, seed=0)
    assert placements.shape == (24, problem.num_units)
    # distinct up to the two interchangeable tasks: no placement is another's mirror
    assert len({p.tobytes() for p in placements}) == 24
    assert len({p.tobytes() for p in placements} | {(1 - p).tobytes() for p in placements}) == 48
    assert labels[0] == "single:w0" and "single:w1" not in labels
    assert (placements[0] == 0).all()
    assert any(l.startswith("split:") for l in labels) and any(l.startswith("mix:") for l in labels)
    again, _ = calibration_placements(problem, 24, seed=0)
    assert (again == placements).all()


def test_interchangeable_devices_are_those_a_swap_leaves_alike():
    assert interchangeable(load_cluster("local-procs")).tolist() == [0, 0]
    assert interchangeable(load_cluster("hetero")).tolist() == [0, 1, 1, 3, 3]  # cpu, v100s, k80s
    gpu = dict(kind="v100", peak_flops=1e13, mem_bandwidth=9e11, memory_bytes=16 << 30)
    devices = tuple(Device(f"g{i}", f"/job:w/task:0/device:GPU:{i}", **gpu) for i in range(4))
    # g0-g1 share one bus, g2 and g3 each have their own: only g2 and g3 are alike
    links = (Link(("g0", "g1"), 10e9, 1e-5, shared=True),)
    c = Cluster("bus", devices, links, default_link=Link((), 10e9, 1e-5))
    assert interchangeable(c).tolist() == [0, 0, 2, 2]
    slow = Cluster("slow", devices, (Link(("g0", "g3"), 1e9, 1e-5),), Link((), 10e9, 1e-5))
    assert interchangeable(slow).tolist() == [0, 1, 1, 0]  # the slow link's two ends swap


def test_canonical_renames_interchangeable_devices_in_order_of_first_use():
    classes = np.array([0, 1, 1, 1])
    assert canonical(np.array([3, 0, 2, 3]), classes).tolist() == [1, 0, 2, 1]
    assert canonical(np.array([2, 0, 3, 2]), classes).tolist() == [1, 0, 2, 1]
    assert canonical(np.array([0, 0]), classes).tolist() == [0, 0]


def test_step_overhead_by_tasks_used():
    problem = chain_problem(4)
    p = np.array([[0] * problem.num_units, [0] + [1] * (problem.num_units - 1)])
    assert step_overhead_s(problem, p, StepOverhead(1e-3, 3e-3)).tolist() == [1e-3, 3e-3]


def test_scaled_profile_sums_to_the_wall_time():
    prof = CostProfile("g", "cpu", "m", np.array(["a", "b"]), np.array([1.0, 3.0]),
                       np.zeros(2, np.int64), np.zeros(2, np.int64), 4.0,
                       {"untraced_step_time_s": 6.0})
    scaled = scaled_profile(prof)
    assert scaled.op_time_s.tolist() == [1.5, 4.5]
    assert scaled.meta["op_times_scaled_by"] == 1.5


def test_pooled_repeats_estimate_over_all_steps():
    from gplace.calibrate import _pooled
    from gplace.real.measurer import RealResult
    from gplace.real.protocol import ProtocolConfig, estimate
    a = RealResult(1.0, True, (1.0, 1.1, 1.2), 0.5, "")
    b = RealResult(2.0, True, (2.0, 2.1, 2.2), 0.5, "")
    pooled = _pooled([a, b], ProtocolConfig())
    assert pooled.times_s == a.times_s + b.times_s
    assert pooled.step_time_s == pytest.approx(estimate(pooled.times_s))
    failed = RealResult(float("inf"), False, (), None, "boom")
    assert _pooled([a, failed], ProtocolConfig()).reason == "boom"


def test_cli_rejects_too_few_placements_steps_and_unknown_graphs(tmp_path):
    import subprocess
    import sys
    base = [sys.executable, "-m", "gplace", "calibrate", "--cluster", "local-procs",
            "--out", str(tmp_path)]
    few = subprocess.run(base + ["--placements", "5"], capture_output=True, text=True)
    assert few.returncode == 2 and "needs >= 20" in few.stderr
    bad = subprocess.run(base + ["--graphs", "no_such_graph"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown graph 'no_such_graph'" in bad.stderr
    cap = subprocess.run(base + ["--cap", "0"], capture_output=True, text=True)
    assert cap.returncode == 2 and "cap > 0" in cap.stderr
    assert len(cap.stderr.strip().splitlines()) == 1
    # fewer steps than the protocol times before its first stopping check: said in the CLI's
    # terms, not the protocol's
    steps = subprocess.run(base + ["--max-steps", "9"], capture_output=True, text=True)
    assert steps.returncode == 2 and "max-steps >= 15" in steps.stderr


def test_receiver_model_charges_the_latency_and_per_byte_cpu_to_the_receiver():
    from gplace.calibrate import calibrated_cluster
    from gplace.real.links import LinkFit
    fit = LinkFit(2e-4, 2e9, (), (), ())
    folded = calibrated_cluster(load_cluster("local-procs"), fit, 1e-9, "link").default_link
    assert folded.bandwidth == pytest.approx(1 / (0.5e-9 + 1e-9))  # 2 GB/s and 1 ns/B in series
    assert (folded.latency_s, folded.recv_cpu_s) == (2e-4, 0.0)
    recv = calibrated_cluster(load_cluster("local-procs"), fit, 1e-9, "receiver").default_link
    assert (recv.bandwidth, recv.latency_s) == (2e9, 2e-4)
    assert (recv.recv_cpu_s, recv.recv_cpu_s_per_byte) == (2e-4, 1e-9)
    from gplace.errors import ConfigError
    with pytest.raises(ConfigError, match="use 'receiver' or 'link'"):
        calibrated_cluster(load_cluster("local-procs"), fit, 1e-9, "sender")


def test_transfer_cpu_must_be_finite_and_not_negative():
    from gplace.calibrate import calibrated_cluster
    from gplace.errors import ConfigError
    from gplace.real.links import LinkFit
    fit = LinkFit(2e-4, 2e9, (), (), ())
    for bad in (-1e-9, float("nan"), float("inf")):
        for at in ("link", "receiver"):
            with pytest.raises(ConfigError, match="must be finite and >= 0"):
                calibrated_cluster(load_cluster("local-procs"), fit, bad, at)
