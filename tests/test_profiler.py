"""The step_stats-to-profile mapping: hand-made StepStats with known figures, then a real tiny
graph, and the batch-norm state updates that a training step must keep."""

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
from tensorflow.core.framework import step_stats_pb2  # noqa: E402

from datasets import tfstep  # noqa: E402
from gplace import profiler  # noqa: E402
from gplace.profile import CostProfile  # noqa: E402


def node(name, start_ns, op_end_ns, out_bytes=(), temp=0, all_end_ns=None):
    ns = step_stats_pb2.NodeExecStats(node_name=name, all_start_nanos=start_ns,
                                      op_end_rel_nanos=op_end_ns,
                                      all_end_rel_nanos=all_end_ns or op_end_ns + 100)
    for b in out_bytes:
        ns.output.add().tensor_description.allocation_description.requested_bytes = b
    ns.memory_stats.temp_memory_size = temp
    return ns


def step(*nodes):
    ss = step_stats_pb2.StepStats()
    ss.dev_stats.add(device="/cpu:0").node_stats.extend(nodes)
    return ss


def test_step_op_stats_sums_loop_executions_and_strips_suffixes():
    ss = step(node("_SOURCE", 0, 10),
              node("a", 1000, 2000, out_bytes=(40, 8), temp=64),
              node("loop/body", 4000, 500, out_bytes=(16,)),
              node("loop/body", 5000, 700, out_bytes=(32,)),
              node("b:Recv", 6000, 300))
    stats = profiler.step_op_stats(ss, {"a", "loop/body", "b"})
    assert set(stats) == {"a", "loop/body", "b"}          # _SOURCE is not a graph op
    assert stats["a"].time_s == pytest.approx(2e-6)
    assert (stats["a"].output_bytes, stats["a"].temp_bytes) == (48, 64)
    assert stats["loop/body"].time_s == pytest.approx(1.2e-6)   # 500 + 700 ns, one step
    assert stats["loop/body"].output_bytes == 32                 # largest execution
    assert (stats["loop/body"].runs, stats["a"].runs) == (2, 1)  # executions in the step
    assert stats["b"].time_s == pytest.approx(3e-7)


def test_step_span_is_first_start_to_last_end():
    ss = step(node("a", 1000, 2000, all_end_ns=2500), node("b", 4000, 300, all_end_ns=600))
    assert profiler.step_span_s(ss) == pytest.approx((4600 - 1000) * 1e-9)


def test_aggregate_takes_the_median_and_counts_missing_ops_as_zero():
    steps = [profiler.step_op_stats(step(node("a", 0, t), node("s", 0, 10)), {"a", "s"})
             for t in (1000, 3000, 2000)]
    steps.append(profiler.step_op_stats(step(node("a", 0, 2500)), {"a", "s"}))  # s not taken
    names, times, out, temp, runs = profiler.aggregate(steps)
    assert names == ["a", "s"]
    np.testing.assert_allclose(times, [2.25e-6, 10e-9])
    assert out.dtype == np.int64 and temp.dtype == np.int64
    np.testing.assert_array_equal(runs, [1, 1])   # median of s's runs (1, 1, 1, 0)


def tiny_step():
    def build():
        x = tf.random.normal((64, 128), seed=1)
        w1 = tf.Variable(tf.random.normal((128, 256)), name="w1")
        w2 = tf.Variable(tf.random.normal((256, 10)), name="w2")
        loss = tf.reduce_mean(tf.square(tf.matmul(tf.nn.relu(tf.matmul(x, w1)), w2)),
                              name="loss")
        return loss, [w1, w2]
    return tfstep.training_step_graph(build, optimizer="sgd")


def test_profile_of_a_tiny_graph_names_graph_ops_and_round_trips(tmp_path):
    gd = tiny_step()
    cfg = profiler.ProfileConfig(warmup_steps=1, traced_steps=3, timed_steps=1)
    prof = profiler.profile_graph(gd, "tiny", cfg=cfg)
    graph_names = {n.name for n in gd.node}
    matmuls = {n.name for n in gd.node if n.op == "MatMul"}
    assert set(prof.op_names.tolist()) <= graph_names
    assert matmuls <= set(prof.op_names.tolist())          # forward and gradient MatMuls
    assert prof.meta["op_coverage"] > 0.9 and prof.step_time_s > 0
    assert 0.3 < prof.coverage <= 1.0 + 1e-9                # op times fit inside the step span
    assert prof.device_kind == "cpu" and "logical cores" in prof.machine
    prof.save(tmp_path / "tiny.profile.json.gz")
    back = CostProfile.load(tmp_path / "tiny.profile.json.gz")
    np.testing.assert_array_equal(back.op_names, prof.op_names)
    np.testing.assert_allclose(back.op_time_s, prof.op_time_s)
    assert (prof.op_runs == 1).all()                        # no loop: every op ran once
    np.testing.assert_array_equal(back.op_runs, prof.op_runs)


def loop_step():
    """A tf.while_loop of 7 iterations (TF1 control flow) inside a training step."""
    def build():
        w = tf.Variable(tf.random.normal((16, 16), seed=2), name="w")
        def body(i, h):
            return i + 1, tf.tanh(tf.matmul(h, w, name="step_matmul"))
        _, h = tf.compat.v1.while_loop(lambda i, h: i < 7, body,
                                       [tf.constant(0), tf.ones((4, 16))])
        return tf.reduce_mean(h, name="loss"), [w]
    return tfstep.training_step_graph(build, optimizer="sgd")  # v1 loops: Enter, NextIteration


def test_loop_ops_count_one_run_per_iteration():
    gd = loop_step()
    assert any(n.op == "NextIteration" for n in gd.node)
    runs = profiler.count_runs(gd)
    body = [n.name for n in gd.node if n.name.endswith("step_matmul")]
    assert body and {runs[b] for b in body} == {7}          # forward body: once per iteration
    outside = [n.name for n in gd.node if n.op == "ApplyGradientDescent"
               or n.op == "ResourceApplyGradientDescent"]
    assert outside and {runs[o] for o in outside} == {1}


def test_a_lowered_functional_while_is_its_ops_time_and_its_loop_conds_count_its_trips():
    ss = step(node("while", 0, 0),  # a graph op named like the loop's prefix stays its own
              node("while/body/_1/MatMul", 1000, 400), node("while/body/_1/MatMul", 2000, 600),
              node("while/LoopCond/_9", 3000, 5), node("while/LoopCond/_9", 3500, 5),
              node("while/LoopCond/_9", 3900, 5),
              node("while/body/_1/inner/LoopCond/_3", 4000, 5),  # a nested loop's: not a trip
              node("while_1/body/_2/Tanh", 5000, 50),  # another op's prefix, not a loop
              node("other", 6000, 70))
    loops = frozenset({"while"})
    stats = profiler.step_op_stats(ss, {"while", "other"}, loops)
    assert set(stats) == {"while", "other"}
    assert stats["while"].time_s == pytest.approx(1.02e-6)  # 0 + 400 + 600 + 3 x 5 + 5 ns
    assert stats["while"].runs == 1 and stats["while"].loop_conds == 3
    assert profiler.loop_trips([stats, stats], loops) == {"while": 2}


def while_step_graph(trips: int = 7):
    """A TF1-style training step with a TF2 (functional) while_loop whose trip count the graph
    does not fix: its bound is a PlaceholderWithDefault."""
    from tensorflow.python.ops import while_v2
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [8, 32], name="x")
        w = v1.get_variable("w", [32, 32], use_resource=True)
        n = v1.placeholder_with_default(tf.constant(trips), [], name="n")
        # while_v2 itself: tf.while_loop builds TF1 loops once another test turned v2 off
        _, h = while_v2.while_loop(lambda i, h: i < n,
                                   lambda i, h: (i + 1, tf.tanh(tf.matmul(h, w))), [0, x])
        v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(h), name="train")
    return graph.as_graph_def()


def test_a_profile_measures_a_functional_while_and_its_trips_scale_its_estimates():
    from gplace.cluster import load_cluster
    from gplace.cost import CostModel
    from gplace.importer import load_graph
    from gplace.problem import PlacementProblem
    from gplace.summary import loop_caveat
    gd = while_step_graph(7)
    loops = [n.name for n in gd.node if n.op in ("While", "StatelessWhile")]
    assert len(loops) == 2  # the loop and its gradient's
    graph = load_graph(gd, name="wl")
    assert sorted(graph.meta["import"]["while_counted_once"]) == sorted(loops)
    profile = profiler.profile_graph(gd, "wl", "train", profiler.ProfileConfig(traced_steps=2))
    assert profile.meta["loop_trips"] == {name: 7 for name in loops}
    times, found = profile.times_for(np.asarray(loops))
    assert found.all() and (times > 0).all()
    cluster = load_cluster("post-4gpu")
    plain, scaled = (PlacementProblem.build(graph, cluster, CostModel(profiles=p))
                     for p in ([], [profile]))
    at = [graph.index(name) for name in loops]
    gpu = 1  # roofline on a K80: 7 trips' worth
    assert scaled.costs.time_s[at, gpu] == pytest.approx(7 * plain.costs.time_s[at, gpu])
    assert "counted as one iteration" in loop_caveat(graph, plain)
    assert "trips from the profile" in loop_caveat(graph, scaled) and \
        "counted as one iteration" not in loop_caveat(graph, scaled)


def bn_model(keras):
    """Functional, as keras.applications are: classic tf-keras then builds the model once on a
    Placeholder, with batch-norm updates of its own that the step must not pick up."""
    L = keras.layers
    inp = keras.Input((8, 8, 3))
    out = L.Dense(10)(L.Flatten()(L.BatchNormalization()(L.Conv2D(4, 3)(inp))))
    return keras.Model(inp, out)


@pytest.mark.parametrize("module", ["keras", "tf_keras"])
def test_batch_norm_moving_averages_are_part_of_the_step(module):
    keras = pytest.importorskip(module)
    gd = tfstep.keras_classifier_step(lambda: bn_model(keras), (8, 8, 3), 10, 4)
    nodes = {n.name: n for n in gd.node}
    deps = {i.lstrip("^") for i in nodes["step_loss"].input if i.startswith("^")}
    moving = {n.name for n in gd.node if n.op in tfstep.ASSIGN_TYPES
              and any("moving_mean" in i or "moving_variance" in i for i in n.input[:1])}
    assert len(moving) == 2, moving                         # one update per moving statistic
    assert moving <= deps
    assert not any("Initializer" in name for name in nodes)  # initializers are pruned
    assert not any(n.op == "Placeholder" for n in gd.node)   # the step runs without feeds
