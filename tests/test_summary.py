"""PlaceSummary: the --json keys and their order, the speed-ups, immutability."""

import dataclasses
import json
import math

import numpy as np
import pytest

from gplace.summary import BestHeuristic, PlaceSummary

# The keys `gplace place --json` printed before the summary was typed (plus "out", added by
# the CLI); scripts read them.
JSON_KEYS = ["graph", "ops", "units", "cluster", "cluster_choice", "devices", "step_time_s",
             "single_device_s", "best_heuristic", "lower_bound_s", "zero_shot_step_time_s",
             "samples", "wall_s", "measure", "costs", "step_times", "groups", "chosen"]


def summary(**changes) -> PlaceSummary:
    s = PlaceSummary(
        graph="g", ops=10, units=4, cluster="c", cluster_choice="cluster c (given)",
        devices=("cpu", "gpu0"), step_time_s=0.02, single_device_s=0.05,
        best_heuristic=BestHeuristic("heft", 0.025), lower_bound_s=0.01,
        zero_shot_step_time_s=0.03, samples=7, wall_s=1.5, measure="sim", costs="measured",
        step_times="simulated, an estimate", groups=4, chosen="heft")
    return dataclasses.replace(s, **changes)


def test_as_dict_keeps_the_json_keys_in_order_and_plain_types():
    d = summary().as_dict()
    assert list(d) == JSON_KEYS
    assert d["devices"] == ["cpu", "gpu0"]
    assert d["best_heuristic"] == {"name": "heft", "step_time_s": 0.025}
    assert json.loads(json.dumps(d)) == d
    assert summary().to_json() == d


def test_speedups():
    s = summary()
    assert s.speedup_vs_single == pytest.approx(2.5)
    assert s.speedup_vs_best_heuristic == pytest.approx(1.25)
    none_fits = summary(best_heuristic=BestHeuristic(None, None))
    assert math.isnan(none_fits.speedup_vs_best_heuristic)
    assert none_fits.as_dict()["best_heuristic"] == {"name": None, "step_time_s": None}


def test_the_single_device_line_and_intervals_read_right_for_real_measurements():
    from gplace.summary import summary_text
    text = summary_text(summary(single_device_s=0.02, measure="real"), None, {
        "chosen": (0.02, 0.019, 0.021), "zero-shot": (0.03, 0.029, float("inf"))})
    assert "single device    20.000 ms (as fast)" in text  # not "(1.00x slower)"
    assert "zero-shot        30.000 ms [one visit: no interval] (measured again" in text
    assert "single device    50.000 ms (2.50x slower)" in summary_text(summary())
    assert "(1.25x faster)" in summary_text(summary(single_device_s=0.016))
    failed = summary_text(summary(measure="real"), None, {"gnn": (float("inf"),) + (
        float("nan"),) * 2})
    assert "fine-tuned best  - (failed when measured again)" in failed


def test_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        summary().step_time_s = 0.0


# ---- the notes place() writes into the summary (gplace.summary) ------------------------------
def test_a_functions_graph_written_without_shapes_is_flagged(tf2_step):
    import gplace
    """as_graph_def() without add_shapes: the variables reach the file shapeless; place's
    summary says so and how to write it."""
    from gplace.summary import shape_caveat
    module = tf2_step
    bare = gplace.load_graph(module.train.get_concrete_function().graph.as_graph_def())
    assert bare.meta["import"]["shapeless_variables"] == 2
    assert "add_shapes=True" in shape_caveat(bare)
    shaped = gplace.load_graph(module.train.get_concrete_function())
    assert shaped.meta["import"]["shapeless_variables"] == 0 and shape_caveat(shaped) == ""


def test_ops_with_kernels_of_one_kind_are_named_and_a_placement_without_their_kernel_flagged():
    import gplace
    from gplace.tfimport import tensorflow
    tf = tensorflow()
    v1 = tf.compat.v1
    """StringFormat has only a CPU kernel, CudnnRNN only a GPU one: the import records them,
    and place's summary warns when the placement puts one where its kernel is not (the
    simulator does not model kernels)."""
    from gplace.cluster import load_cluster
    from gplace.summary import kernel_warning
    from gplace.problem import PlacementProblem
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [4], name="x")
        loss = tf.reduce_sum(tf.square(x), name="loss")
        tf.identity(tf.strings.format("loss {}", loss), name="report")
        h = v1.placeholder(tf.float32, [1, 2, 3], name="h")
        tf.raw_ops.CudnnRNN(input=v1.placeholder(tf.float32, [5, 2, 3]), input_h=h, input_c=h,
                            params=v1.placeholder(tf.float32, [96]), name="rnn")
    g = gplace.load_graph(graph.as_graph_def())
    assert g.meta["import"]["cpu_only_ops"] == {"StringFormat": 1}
    assert g.meta["import"]["gpu_only_ops"] == {"CudnnRNN": 1}
    problem = PlacementProblem.build(g, load_cluster("post-2gpu"))
    cpu = next(k for k, d in enumerate(problem.cluster.devices) if "CPU" in d.tf_device)
    gpu = next(k for k, d in enumerate(problem.cluster.devices) if "GPU" in d.tf_device)
    on_cpu, on_gpu = (kernel_warning(g, problem, problem.single_device(d)) for d in (cpu, gpu))
    assert "1 op with no GPU kernel in TensorFlow (StringFormat) is placed on a GPU" in on_gpu
    assert "CudnnRNN" not in on_gpu
    assert "1 op with no CPU kernel in TensorFlow (CudnnRNN) is placed on a CPU" in on_cpu
    assert "StringFormat" not in on_cpu


def test_the_import_note_names_xla_and_a_graph_that_does_not_train():
    import gplace
    from gplace.summary import import_note
    from gplace.tfimport import tensorflow
    tf = tensorflow()
    w = tf.Variable(tf.ones([4, 4]))

    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.matmul(x, w))
        w.assign_sub(0.1 * tape.gradient(loss, w))
        return loss
    spec = [tf.TensorSpec([2, 4], tf.float32)]
    plain = gplace.load_graph(tf.function(step, input_signature=spec).get_concrete_function())
    assert import_note(plain) == ""
    whole = tf.function(step, input_signature=spec, jit_compile=True).get_concrete_function()
    inner = tf.function(step, jit_compile=True)
    outer = tf.function(lambda x: inner(x) * 2, input_signature=spec).get_concrete_function()
    for compiled in (gplace.load_graph(whole), gplace.load_graph(outer)):
        assert "a function of the step asks XLA to compile" in import_note(compiled)
    predict = tf.function(lambda x: tf.matmul(x, w), input_signature=spec)
    note = import_note(gplace.load_graph(predict.get_concrete_function()))
    assert note.startswith("no optimizer update in the graph")


def test_the_costs_say_how_16_bit_ops_are_priced(tmp_path):
    from dataclasses import replace

    from gplace.cluster import load_cluster
    from gplace.graph import OpGraph
    from gplace.place import place
    g = OpGraph.from_lists([4e10] * 6, [1 << 20] * 6, [(i, i + 1) for i in range(5)], name="h")
    g = g.replace(out_dtype=np.array(["float16"] * 6))
    plain = load_cluster("hetero")
    fast = replace(plain, devices=tuple(replace(d, half_flops=125e12) if d.kind == "v100" else d
                                        for d in plain.devices))
    slow_r, fast_r = (place(g, cluster=c, progress=False, polish=0) for c in (plain, fast))
    assert "6 ops in float16 or bfloat16 at the fp32 peak" in slow_r.summary.costs
    assert ("6 ops in float16 or bfloat16 at the tensor-core peak (half_flops) on v100-0, "
            "v100-1") in fast_r.summary.costs
    assert fast_r.step_time_s < slow_r.step_time_s / 4  # compute-bound matrix products
