"""RealMeasurer on local-procs: same loss as the unplaced graph, infeasible results with reasons,
and no process left behind."""

import os
import signal
import threading
import time

import numpy as np
import pytest

from tests.real.conftest import child_pids, fixed_steps, tiny_step_graph


def problem_for(graph_def, memory_bytes=None):
    import dataclasses
    import gplace
    from gplace.cluster import load_cluster
    from gplace.problem import PlacementProblem
    cluster = load_cluster("local-procs")
    if memory_bytes is not None:
        cluster = dataclasses.replace(cluster, devices=tuple(
            dataclasses.replace(d, memory_bytes=memory_bytes) for d in cluster.devices))
    return PlacementProblem.build(gplace.load_graph(graph_def, name="tiny"), cluster)


def split_placement(problem):
    """Every other unit on task 1; the loss's ops on task 0, the weights' updates split."""
    return (np.arange(problem.num_units) % 2).astype(np.int64)


def test_two_process_placement_gives_the_unplaced_loss(procs):
    from gplace.real.measurer import RealConfig, RealMeasurer
    from gplace.real.runner import run_one
    from gplace.tfimport import tensorflow
    gd = tiny_step_graph()
    problem = problem_for(gd)
    placement = split_placement(problem)
    assert len(np.unique(problem.expand(placement))) == 2
    with RealMeasurer(problem, gd, RealConfig(protocol=fixed_steps(2)), tasks=procs) as m:
        result = m.measure(placement[None])
    assert result.feasible[0], m.last_reasons
    r = m.last_results[0]
    assert len(r.times_s) == 2 and r.step_time_s > 0 and r.reason == ""
    assert r.low_s <= r.step_time_s <= r.high_s
    # the same graph, unplaced, in this process (fixed-seed initializer, constant inputs)
    names = [n.name for n in gd.node]
    job = {"target": "", "fetch": "step_loss", "warmup": 0, "steps": 1, "timeout_s": 60,
           "threads": 1, "cores": None, "op_names": [], "tf_devices": []}
    unplaced = run_one(tensorflow(), gd, job, np.zeros(0, np.int64))
    assert names and r.loss == pytest.approx(unplaced["loss"], rel=1e-6)


def test_placement_over_memory_is_refused_before_running():
    from gplace.real.measurer import RealMeasurer
    gd = tiny_step_graph()
    problem = problem_for(gd, memory_bytes=64)
    before = child_pids()
    with RealMeasurer(problem, gd, tasks=None) as m:  # owns servers it never needs to start
        result = m.measure(np.zeros((1, problem.num_units), np.int64))
        assert m.tasks.procs == []
    assert not result.feasible[0] and np.isinf(result.step_time_s[0])
    assert "out of memory (predicted): w0 needs" in m.last_reasons[0]
    assert child_pids() == before


def test_unsafe_graph_is_refused():
    from gplace.real.measurer import RealMeasurer
    from gplace.real.safety import UnsafeOpError
    from gplace.tfimport import tensorflow
    tf = tensorflow()
    g = tf.Graph()
    with g.as_default():
        tf.io.read_file("/etc/hostname", name="reader")
    with pytest.raises(UnsafeOpError, match="'reader' of type ReadFile"):
        RealMeasurer(problem_for(g.as_graph_def()), g.as_graph_def())


@pytest.mark.slow
def test_server_killed_mid_measurement_is_infeasible_and_nothing_is_left():
    from gplace.real.measurer import RealConfig, RealMeasurer
    gd = tiny_step_graph(heavy=2)  # a step of ~0.1-1 s
    problem = problem_for(gd)
    placement = split_placement(problem)[None]
    before = child_pids()
    m = RealMeasurer(problem, gd, RealConfig(protocol=fixed_steps(1000, warmup=0), timeout_s=300))
    m.tasks.start()
    victim = m.tasks.procs[1].pid
    killer = threading.Timer(15.0, lambda: os.kill(victim, signal.SIGKILL))
    killer.start()
    try:
        dead = m.measure(placement)
        reason = m.last_reasons[0]
        m.config = RealConfig(protocol=fixed_steps(1, warmup=0))
        again = m.measure(placement)  # on restarted servers
    finally:
        killer.cancel()
        m.close()
    assert not dead.feasible[0]
    assert f"server process died: task 1 (pid {victim}) killed by SIGKILL" in reason, reason
    assert again.feasible[0], m.last_reasons
    time.sleep(0.5)
    assert child_pids() == before


@pytest.mark.slow
def test_a_hang_becomes_a_timeout(procs):
    from gplace.real.measurer import RealConfig, RealMeasurer
    from gplace.tfimport import tensorflow
    tf = tensorflow()
    g = tf.Graph()
    with g.as_default():
        q = tf.queue.FIFOQueue(1, tf.float32)
        tf.identity(q.dequeue(), name="step_loss")  # nothing is ever enqueued
    gd = g.as_graph_def()
    problem = problem_for(gd)
    with RealMeasurer(problem, gd, RealConfig(timeout_s=3), tasks=procs) as m:
        result = m.measure(np.zeros((1, problem.num_units), np.int64))
    assert not result.feasible[0]
    assert "DeadlineExceeded" in m.last_reasons[0] or "timed out" in m.last_reasons[0]


@pytest.mark.slow
def test_local_cluster_runs_in_process_without_servers():
    import gplace
    from gplace.cluster import load_cluster
    from gplace.problem import PlacementProblem
    from gplace.real.measurer import RealConfig, RealMeasurer
    gd = tiny_step_graph()
    problem = PlacementProblem.build(gplace.load_graph(gd, name="tiny"), load_cluster("local"))
    with RealMeasurer(problem, gd, RealConfig(protocol=fixed_steps(2, warmup=0))) as m:
        assert m.tasks is None
        result = m.measure(np.zeros((1, problem.num_units), np.int64))
    assert result.feasible[0], m.last_reasons
    assert m.last_results[0].loss is not None


def test_interleaved_placements_keep_their_own_variables(procs):
    """Three placements open at once on the same servers, visited in turn: each session has
    its own variables (isolate_session_state), so each first loss is the unplaced one."""
    from gplace.real.measurer import RealConfig, RealMeasurer
    gd = tiny_step_graph()
    problem = problem_for(gd)
    p = np.stack([np.zeros(problem.num_units, np.int64), np.ones(problem.num_units, np.int64),
                  split_placement(problem)])
    before = child_pids()
    with RealMeasurer(problem, gd, RealConfig(protocol=fixed_steps(4, per_visit=2)),
                      tasks=procs) as m:
        result = m.measure(p)
    assert result.feasible.all(), m.last_reasons
    losses = [r.loss for r in m.last_results]
    assert losses[0] == pytest.approx(losses[1], rel=1e-6) == pytest.approx(losses[2], rel=1e-6)
    assert all(len(r.times_s) == 4 for r in m.last_results)
    assert m.last_load is not None and m.last_load.wall_s > 0
    assert child_pids() == before  # the runner child is gone


def test_the_runner_names_the_error_type_the_measurer_retries(monkeypatch, capsys):
    """A TF error's class goes back with its message: the parent retries by ``error_type``."""
    import json
    from gplace.real import runner
    from gplace.tfimport import tensorflow
    tf = tensorflow()

    class AbortingPlaced:
        loss, session = 0.5, type("S", (), {"close": lambda self: None})()

        def __init__(self, tf, graph_def, job, devices):
            pass

        def run(self, warmup, steps):
            raise tf.errors.AbortedError(None, None, "From /job:worker/replica:0/task:1:\n"
                                         "RecvTensor expects a different device incarnation")
    monkeypatch.setattr(runner, "Placed", AbortingPlaced)
    commands = ['{"open": 0, "devices": [0]}', '{"run": 0, "warmup": 1, "steps": 3}',
                '{"run": 7, "warmup": 1, "steps": 3}']
    runner.serve(tf, None, {"target": ""}, None, commands)
    opened, aborted, missing = [json.loads(l) for l in capsys.readouterr().out.splitlines()]
    assert opened == {"i": 0, "ok": True, "loss": 0.5}
    assert aborted == {"i": 0, "ok": False, "error_type": "AbortedError",
                       "error": "AbortedError: From /job:worker/replica:0/task:1: RecvTensor "
                                "expects a different device incarnation"}
    assert missing["error_type"] == "KeyError"  # not retryable


def test_a_cluster_of_devices_tensorflow_does_not_see_here_is_refused_at_once():
    import gplace
    from gplace.cluster import load_cluster
    from gplace.errors import ConfigError
    from gplace.problem import PlacementProblem
    from gplace.real.measurer import check_local_devices
    graph = gplace.load_graph(tiny_step_graph(), name="tiny")
    post = PlacementProblem.build(graph, load_cluster("post-4gpu"))
    with pytest.raises(ConfigError, match=r"names devices TensorFlow does not see here: "
                       r"gpu0 \(/job:localhost/replica:0/task:0/device:GPU:0\), gpu1 .*; "
                       r"it sees CPU:0\. .*--cluster local-procs"):
        check_local_devices(post, [("CPU", 0)])
    check_local_devices(post, [("CPU", 0)] + [("GPU", i) for i in range(4)])  # a 4-GPU box
    procs = PlacementProblem.build(graph, load_cluster("local-procs"))
    check_local_devices(procs, [("CPU", 0)])  # server tasks: gplace starts them here


def test_a_tf2_saved_model_runs_its_signature_and_a_functions_graph_is_refused(tf2_step,
                                                                               tmp_path):
    """A SavedModel runs the step the import kept (its train signature, inlined, its input
    made up; not its checkpoint functions); a tf.function's GraphDef captures its variables as
    resource placeholders, which nothing can feed: refused before anything runs."""
    import gplace
    from gplace.cluster import load_cluster
    from gplace.errors import ConfigError
    from gplace.problem import PlacementProblem
    from gplace.real.measurer import RealConfig, RealMeasurer, check_runnable
    from gplace.report import source_graph_def
    from gplace.tfimport import tensorflow
    tf = tensorflow()
    graph_def = tf2_step.train.get_concrete_function().graph.as_graph_def(add_shapes=True)
    with pytest.raises(ConfigError, match="variables are captured as resource placeholders"):
        check_runnable(graph_def, [n.name for n in graph_def.node])
    tf.saved_model.save(tf2_step, str(tmp_path / "sm"),
                        signatures={"train": tf2_step.train.get_concrete_function()})
    problem = PlacementProblem.build(gplace.load_graph(tmp_path / "sm"), load_cluster("local"))
    with RealMeasurer(problem, source_graph_def(tmp_path / "sm"),
                      RealConfig(protocol=fixed_steps(2, warmup=0))) as m:
        assert not {"SaveV2", "RestoreV2"} & {n.op for n in m.graph_def.node}
        result = m.measure(np.zeros((1, problem.num_units), np.int64))
    assert result.feasible[0], m.last_reasons
    assert m.last_results[0].loss > 0  # the step ran on a made-up batch


def test_a_none_batch_runs_at_the_size_the_import_gave_it():
    """--unknown-dim N sizes a None batch for the placement; the real step is fed that batch."""
    import gplace
    from gplace.real.measurer import runnable_step
    from tests.importer.test_step import none_batch_step
    graph_def = none_batch_step()
    for size in (1, 8):
        g = gplace.load_graph(graph_def, unknown_dim=size)
        step, _ = runnable_step(graph_def, g.names.tolist(), fetch="train",
                                unknown_dim=size)
        node = next(n for n in step.node if n.name == "x")
        assert [d.size for d in node.attr["shape"].shape.dim] == [size, 32]


def test_the_measurer_runs_a_none_batch_at_the_size_of_the_placed_graph():
    """RealMeasurer reads the size from the problem's graph (place --measure real
    --unknown-dim N): the step it runs and the costs it was placed with agree."""
    import gplace
    from gplace.cluster import load_cluster
    from gplace.problem import PlacementProblem
    from gplace.real.measurer import RealConfig, RealMeasurer
    from tests.importer.test_step import none_batch_step
    graph_def = none_batch_step()
    for size in (1, 8):
        problem = PlacementProblem.build(gplace.load_graph(graph_def, unknown_dim=size),
                                         load_cluster("local"))
        with RealMeasurer(problem, graph_def, RealConfig(protocol=fixed_steps(2, warmup=0),
                                                         fetch="train")) as m:
            node = next(n for n in m.graph_def.node if n.name == "x")
            assert [d.size for d in node.attr["shape"].shape.dim] == [size, 32]
            result = m.measure(np.zeros((1, problem.num_units), np.int64))
        assert result.feasible[0], m.last_reasons
