"""The exact placer (gplace.placers.optimal, its constraint program in
gplace.placers.cpsat_model): hand-computed optima, exhaustive search on tiny problems, and the
solver's makespan against the re-simulated step time."""

import itertools

import numpy as np
import pytest

pytest.importorskip("ortools")

from gplace.cluster import load_cluster  # noqa: E402
from gplace.graph import OpGraph  # noqa: E402
from gplace.placers import SimMeasurer, get_placer  # noqa: E402
from gplace.placers.base import cheap_heuristics  # noqa: E402
from gplace.placers.cpsat_model import canonical, solve_isolated, OptimalConfig  # noqa: E402
from gplace.problem import PlacementProblem  # noqa: E402
from gplace.sim import FastSimulator, lower_bound  # noqa: E402
from gplace.sim.random_graphs import RandomDagConfig, random_cluster, random_dag  # noqa: E402

from tests.sim.helpers import cluster, device, problem  # noqa: E402

FAST = dict(time_limit_s=20.0, workers=1)


def optimal(prob, **config):
    return get_placer("optimal", **{**FAST, **config}).place(prob, SimMeasurer(prob), 0)


def chain_problem():
    """a -> b -> c, 1e9 B each at 1e9 B/s: on x (1, 4, 1) s, on y (3, 1, 3) s. All on x 6,
    all on y 7, a and c on x with b on y 1 + 1 + 1 + 1 + 1 = 5 (the optimum), b and c on y 6."""
    g = OpGraph.from_lists([0] * 3, [10**9] * 3, [(0, 1), (1, 2)])
    return problem(g, cluster(device("x"), device("y")), [[1.0, 3.0], [4.0, 1.0], [1.0, 3.0]])


def test_three_op_chain_by_hand():
    r = optimal(chain_problem())
    assert r.placement.tolist() == [0, 1, 0] and r.step_time_s == 5.0
    info = r.info
    assert info["status"] == "optimal"
    assert 5.0 - info["rounding_slack_s"] <= info["solver_bound_s"] <= 5.0
    assert info["solver_makespan_s"] == pytest.approx(info["solver_bound_s"])


def test_new_bound_charges_the_chain_its_transfers():
    b = lower_bound(chain_problem())
    assert b.simple_s == pytest.approx(3.0, rel=1e-8)  # every op on its best device, transfers free
    assert b.path_s == pytest.approx(5.0, rel=1e-8) and b.bound_s <= 5.0


def test_links_serialize_transfers():
    """a0, a1 must sit on x (their parameters fit nowhere else), b0, b1 take 100 s there and
    1 s on y; each a sends 4e9 B (4 s) to its b. One link: transfers [1,5] and [5,9], the step
    ends at 10; without the link's queue it would end at 7."""
    g = OpGraph.from_lists([0] * 4, [4 * 10**9, 4 * 10**9, 0, 0], [(0, 2), (1, 3)],
                           param_bytes=[2 * 10**10, 2 * 10**10, 0, 0])
    cl = cluster(device("x"), device("y", memory=10**10))
    prob = problem(g, cl, [[1.0, 1.0], [1.0, 1.0], [100.0, 1.0], [100.0, 1.0]])
    r = optimal(prob)
    assert r.placement.tolist() == [0, 0, 1, 1] and r.step_time_s == 10.0
    assert 10.0 - r.info["rounding_slack_s"] <= r.info["solver_bound_s"] <= 10.0
    free = solve_isolated(prob, 20.0, OptimalConfig(**FAST, links=False), None, 0)
    assert free.status == "optimal"
    assert free.found[-1][0] * free.time_unit_s == pytest.approx(7.0, rel=1e-3)


def test_memory_keeps_a_unit_off_a_small_device():
    g = OpGraph.from_lists([0, 0], [0, 0], [], param_bytes=[10**6, 0])
    prob = problem(g, cluster(device("x", memory=10**5), device("y")), [[1.0, 5.0], [1.0, 5.0]])
    r = optimal(prob)
    assert r.placement.tolist() == [1, 0] and r.step_time_s == 5.0


def tiny(seed: int):
    g = random_dag(RandomDagConfig(ops=9, back_edges=1), seed)
    return PlacementProblem.build(g, random_cluster(3, seed))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("build", ["tiny", "looped_tiny"])
def test_bound_below_the_exhaustive_optimum(seed, build):
    """Every placement of a tiny problem simulated: the solver's proven bound and the new
    lower bound are at most the best feasible step time, and the placer reaches it or more;
    with random op runs (looped_tiny) too: the transfers' repeats keep the model a relaxation
    of the simulator."""
    prob = {"tiny": tiny, "looped_tiny": looped_tiny}[build](seed)
    every = np.array(list(itertools.product(range(prob.num_devices), repeat=prob.num_units)))
    batch = FastSimulator(prob).run_batch(every)
    best = float(np.where(batch.oom, np.inf, batch.step_time_s).min())
    r = optimal(prob)
    assert r.info["status"] == "optimal"
    assert r.info["solver_bound_s"] <= best <= r.step_time_s
    assert lower_bound(prob).bound_s <= best
    assert lower_bound(prob).any_placement_s <= batch.step_time_s.min()


def test_optimum_below_every_heuristic_and_resimulated():
    g = random_dag(RandomDagConfig(ops=24), 7)
    prob = PlacementProblem.build(g, load_cluster("hetero"))
    m = SimMeasurer(prob)
    r = optimal(prob)
    info = r.info
    assert info["status"] == "optimal"
    for h in cheap_heuristics():
        assert info["solver_bound_s"] <= get_placer(h).place(prob, m, 0).step_time_s
    assert r.step_time_s <= info["start_step_time_s"]
    # the solver's optimum is a lower bound on its own placement's simulated time, which
    # exceeds it by at most the list-schedule slack plus rounding
    assert info["solver_makespan_s"] <= info["solver_step_time_s"]
    assert info["solver_step_time_s"] <= (info["solver_makespan_s"] + info["list_schedule_slack_s"]
                                          + info["rounding_slack_s"])


def test_canonical_relabels_interchangeable_devices():
    prob = PlacementProblem.build(random_dag(RandomDagConfig(ops=6), 0), load_cluster("post-4gpu"))
    placement = np.array([3, 3, 0, 2, 4, 1][:prob.num_units])
    out = canonical(prob, placement)
    sim = FastSimulator(prob)
    gpus = sorted({d for d in out.tolist() if d > 0})
    assert gpus == list(range(1, len(gpus) + 1))  # the GPUs used are the first ones
    assert out[0] == 1  # the first GPU used becomes gpu0 (device 1); the CPU keeps its index
    assert sim.run(out).step_time_s == pytest.approx(sim.run(placement).step_time_s, rel=1e-9)


def test_certified_where_the_simulator_meets_the_bound():
    r = optimal(chain_problem())
    info = r.info
    assert info["certified"] and r.step_time_s <= info["solver_bound_s"] + info["rounding_slack_s"]


def test_relaxation_orders_ops_freely():
    """a (10 s, nothing reads it) and b (1 s) must run on x, c (10 s on y, 100 s on x, reads b)
    on y. The
    simulator serves x first-ready-first-served with ties by topological rank: a, then b, so c
    ends at 21 s. The solver's relaxation runs b first: 11 s. Its bound holds (11 <= 21), but
    the placement it proves is not certified: the simulator does not reach that schedule."""
    g = OpGraph.from_lists([0] * 3, [0, 0, 0], [(1, 2)], param_bytes=[2 * 10**9, 2 * 10**9, 0])
    cl = cluster(device("x"), device("y", memory=10**9))
    prob = problem(g, cl, [[10.0, 10.0], [1.0, 1.0], [100.0, 10.0]])
    placement = np.array([0, 0, 1])
    assert FastSimulator(prob).run(placement).step_time_s == 21.0  # a before b on x
    r = optimal(prob, polish=0)
    info = r.info
    assert info["status"] == "optimal" and r.placement.tolist() == [0, 0, 1]
    assert info["solver_makespan_s"] == pytest.approx(11.0, rel=1e-3)
    assert info["solver_step_time_s"] == r.step_time_s == 21.0 and not info["certified"]
    assert info["solver_step_time_s"] <= (info["solver_makespan_s"] + info["list_schedule_slack_s"]
                                          + info["rounding_slack_s"])


@pytest.mark.slow
def test_place_optimal_cli(tmp_path):
    """gplace place --optimal in a subprocess: TensorFlow reads the .pb, so CP-SAT solves in a
    spawned process; the JSON holds the proven bound, at most the returned step time."""
    import json
    import subprocess
    import sys
    from pathlib import Path
    model = Path(__file__).resolve().parents[2] / "gplace" / "examples" / "small_resnet.pb"
    out = subprocess.run([sys.executable, "-m", "gplace", "place", str(model), "--cluster",
                          "hetero", "--optimal", "5", "--json", "--out", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=600, check=True).stdout
    report = json.loads(out)
    exact = report["exact"]
    assert 0 < exact["solver_bound_s"] <= exact["step_time_s"]
    assert exact["solver_bound_s"] >= report["lower_bound_s"] * (1 - 1e-9)


# ---- TF1 loops: a transfer stands for one send per iteration (OpCosts.runs) -----------------
def with_runs(prob, runs):
    import dataclasses
    return dataclasses.replace(prob, costs=prob.costs._replace(runs=np.asarray(runs, np.int64)))


def test_a_loop_makes_the_split_chain_slower():
    """The chain of chain_problem with a's y time 3.5 s: once, a and c on x with b on y is
    still best (5 s). With b a 5-iteration loop body (its 1 s is the loop's), a's tensor
    crosses 5 times: the split takes 1 + 5 + 1 + 1 + 1 = 9 s and all on x (6 s) is best; the
    model charges the 5 sends, so its bound proves 6 s."""
    g = OpGraph.from_lists([0] * 3, [10**9] * 3, [(0, 1), (1, 2)])
    once = problem(g, cluster(device("x"), device("y")), [[1.0, 3.5], [4.0, 1.0], [1.0, 3.0]])
    r = optimal(once)
    assert r.placement.tolist() == [0, 1, 0] and r.step_time_s == 5.0 and r.info["certified"]
    looped = with_runs(once, [1, 5, 1])
    assert FastSimulator(looped).run(np.array([0, 1, 0])).step_time_s == 9.0
    r = optimal(looped)
    info = r.info
    assert r.placement.tolist() == [0, 0, 0] and r.step_time_s == 6.0
    assert info["status"] == "optimal" and info["certified"]
    assert 6.0 - info["rounding_slack_s"] <= info["cp_sat_bound_s"] <= 6.0


def test_a_control_edge_into_a_loop_waits_its_latency_per_run():
    """a (1 s on x, 10 on y) -control-> b (1 s on y, 10 on x), latency 0.5 s, b running 4
    times: the split waits 4 * 0.5 s (4 s in all), and the model knows it."""
    g = OpGraph.from_lists([0, 0], [0, 0], control_edges=[(0, 1)])
    prob = with_runs(problem(g, cluster(device("x"), device("y"), latency=0.5),
                             [[1.0, 10.0], [10.0, 1.0]]), [1, 4])
    r = optimal(prob)
    info = r.info
    assert r.placement.tolist() == [0, 1] and r.step_time_s == 4.0
    assert info["status"] == "optimal" and info["certified"]
    assert 4.0 - info["rounding_slack_s"] <= info["cp_sat_bound_s"] <= 4.0


def model_texts(problems) -> list[str]:
    """The text form of each problem's model (in this process: see model_texts_isolated)."""
    from gplace.placers.cpsat_model import build_model
    models = [build_model(p, 1.0, OptimalConfig()) for p in problems]  # alive while read
    return [str(m.cp.Proto()) for m in models]


def model_texts_isolated(problems) -> list[str]:
    """model_texts in a fresh process where TensorFlow is loaded here (an earlier test read a
    .pb): its protobuf and OR-Tools' clash, as cpsat_model.solve_isolated says."""
    import sys
    if "tensorflow" not in sys.modules:
        return model_texts(problems)
    import multiprocessing
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(model_texts, (problems,))


def test_without_loops_the_model_is_unchanged():
    """Runs of 1 everywhere build the very model (and horizon) of no runs."""
    from gplace.placers.optimal import _serial_s
    problems = []
    for seed in range(3):
        prob = tiny(seed)
        ones = with_runs(prob, np.ones(prob.graph.num_ops))
        assert _serial_s(ones) == _serial_s(prob)
        problems += [ones, prob]
    texts = model_texts_isolated(problems)
    assert texts[0::2] == texts[1::2]
    assert texts[0] != texts[2]


def looped_tiny(seed: int):
    prob = tiny(seed)
    runs = np.random.default_rng(seed).choice([1, 2, 5], size=prob.graph.num_ops)
    return with_runs(prob, runs)




def test_the_callers_sigint_handler_is_back_after_a_solve():
    """CP-SAT takes SIGINT while it solves and leaves the system's default behind: a Ctrl-C
    after it would kill the process instead of reaching Python."""
    import os
    import signal
    hits = []
    before = signal.signal(signal.SIGINT, lambda *_: hits.append(1))
    try:
        optimal(chain_problem())
        os.kill(os.getpid(), signal.SIGINT)
        assert hits == [1]
    finally:
        signal.signal(signal.SIGINT, before)
