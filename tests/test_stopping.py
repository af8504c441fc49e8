"""A first Ctrl-C ends a search with its best so far; a second one interrupts."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gplace import stopping
from gplace.stopping import stop_on_interrupt

EXAMPLE = Path(__file__).resolve().parents[1] / "gplace" / "examples" / "small_resnet.pb"


def ctrl_c():
    os.kill(os.getpid(), signal.SIGINT)


@pytest.fixture
def python_sigint():
    """Python's own SIGINT handler, whatever this process inherited (a job started in the
    background by a non-interactive shell ignores SIGINT, and the block then keeps ignoring
    it on the second Ctrl-C)."""
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, inherited)


def test_the_first_ctrl_c_sets_the_flag_and_the_second_interrupts(capsys, python_sigint):
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        with stop_on_interrupt():
            assert not stopping.requested()
            ctrl_c()
            assert stopping.requested()
            assert "stopping: the best placement so far" in capsys.readouterr().err
            ctrl_c()
    assert signal.getsignal(signal.SIGINT) is before and not stopping.requested()


def test_the_flag_belongs_to_its_block():
    with stop_on_interrupt(None):
        ctrl_c()
        with stop_on_interrupt(None):
            assert not stopping.requested()  # a new search inside: not asked to stop yet
        assert stopping.requested()
    assert not stopping.requested()


def test_a_stopped_tracker_hands_out_no_more_samples():
    from gplace.placers import SimMeasurer
    from gplace.cluster import load_cluster
    from gplace.placers.base import Tracker
    from gplace.problem import PlacementProblem
    from gplace.sim.random_graphs import RandomDagConfig, random_dag
    problem = PlacementProblem.build(random_dag(RandomDagConfig(ops=30), 0),
                                     load_cluster("post-2gpu"))
    tracker = Tracker(problem, SimMeasurer(problem), 10)
    rows = np.zeros((3, problem.num_units), np.int64)
    with stop_on_interrupt(None):
        tracker.evaluate(rows)
        ctrl_c()
        assert tracker.left == 0 and tracker.stopped
        assert tracker.evaluate(rows).step_time_s.size == 0
        info = tracker.result("t", rows[0]).info
    assert info["stopped_at"] == 3 and info["budget"] == 10
    assert tracker.left == 7  # outside the block nothing asks to stop


def test_place_returns_the_best_so_far_after_a_ctrl_c(monkeypatch):
    import gplace.placers.base as base
    from gplace.place import place
    evaluate = base.Tracker.evaluate
    calls = []

    def evaluate_then_ctrl_c(self, placements):
        calls.append(len(placements))
        m = evaluate(self, placements)
        if len(calls) == 2:
            ctrl_c()
        return m

    monkeypatch.setattr(base.Tracker, "evaluate", evaluate_then_ctrl_c)
    r = place(EXAMPLE, cluster="post-4gpu", finetune=300, progress=False, polish=0, log=None)
    s = r.summary
    assert s.samples == sum(calls[:2]) < 300
    assert s.stopped == f"by Ctrl-C after {s.samples} of 300 samples: the best placement found so far"
    assert s.step_time_s <= s.best_heuristic.step_time_s and np.isfinite(s.step_time_s)
    assert "stopped" not in place(EXAMPLE, cluster="post-4gpu", progress=False,
                                  polish=0).summary.as_dict()


@pytest.mark.slow
def test_the_command_writes_the_best_so_far_and_exits_130(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "gplace", "place", str(EXAMPLE),
                             "--finetune", "100000", "--out", str(out), "--polish", "0",
                             "--progress"],  # its bar says when the samples have begun
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in iter(proc.stderr.readline, ""):  # the first samples are measured
        if "fine-tuning" in line or "sample" in line:
            break
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-2000:]
    assert "stopped          by Ctrl-C after" in stdout
    assert (out / "placed.pb").exists() and (out / "placement.json").exists()
    assert "Stopped by Ctrl-C after" in (out / "report.html").read_text()


def test_off_the_main_thread_nothing_is_asked_to_stop():
    import threading
    seen = []
    with stop_on_interrupt(None):
        ctrl_c()
        worker = threading.Thread(target=lambda: seen.append(stopping.requested()))
        worker.start()
        worker.join()
        assert stopping.requested()
    assert seen == [False]


def test_a_solver_that_took_the_sigint_itself_stops_the_search_and_says_so(capsys):
    with stop_on_interrupt(kept="its best so far"):
        stopping.request()
        assert stopping.requested()
        stopping.request()  # asked already: no second line
    assert capsys.readouterr().err.count("gplace: stopping: its best so far") == 1
    stopping.request()  # outside a block: nothing to stop
    assert not stopping.requested()


def test_bench_keeps_the_runs_done_before_a_ctrl_c_and_drops_the_one_it_cut(monkeypatch):
    import gplace.placers.base as base
    from gplace.bench import BenchConfig, run_bench
    evaluate, calls = base.Tracker.evaluate, []

    def evaluate_then_ctrl_c(self, placements):
        calls.append(self)
        if len({id(t) for t in calls}) == 2:  # the second run's first batch
            ctrl_c()
        return evaluate(self, placements)

    monkeypatch.setattr(base.Tracker, "evaluate", evaluate_then_ctrl_c)
    cfg = BenchConfig(graphs=(str(EXAMPLE),), clusters=("post-2gpu",),
                      methods=("random", "single"), budget=30, seeds=3)
    runs, meta, stopped = run_bench(cfg, log=None)
    assert stopped and [(r.method, r.seed, r.samples) for r in runs] == [("random", 0, 30)]
