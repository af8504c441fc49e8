"""`gplace profile`: a measured profile beside the model that place reads, and bad input as one
line (the allowlist, a step that needs feeds, a profile that exists)."""

import json
from pathlib import Path

import numpy as np
import pytest

from gplace.cli import main
from gplace.profile import CostProfile

ROOT = Path(__file__).resolve().parents[2]
LOOPED = ROOT / "datasets" / "corpus" / "rnn_loop_10.pb"


def test_profile_beside_the_model_counts_loop_runs_and_place_reads_it(tmp_path, capsys):
    model = tmp_path / "rnn_loop_10.pb"
    model.write_bytes(LOOPED.read_bytes())
    assert main(["profile", str(model), "--steps", "1", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    written = tmp_path / "rnn_loop_10.profile.json.gz"
    assert summary["profile"] == str(written) and summary["ops_profiled"] == summary["graph_ops"]
    profile = CostProfile.load(written)
    shipped = CostProfile.load(LOOPED.with_name("rnn_loop_10.profile.json.gz"))
    runs = dict(zip(shipped.op_names.tolist(), shipped.op_runs.tolist()))
    assert [runs[n] for n in profile.op_names.tolist()] == profile.op_runs.tolist()
    assert summary["max_runs_per_op"] == int(profile.op_runs.max()) > 1
    from gplace.cluster import load_cluster
    from gplace.cost import cost_model_for
    from gplace.opgraph_cache import load_graph
    costs = cost_model_for(model).costs(load_graph(model), load_cluster("local-procs"))
    assert costs.measured.all()
    np.testing.assert_array_equal(costs.runs, profile.runs_for(load_graph(model).names))
    assert main(["profile", str(model)]) == 2  # it exists: --force replaces it
    assert "--force replaces it" in capsys.readouterr().err


def test_a_step_whose_input_cannot_be_made_up_or_with_an_unsafe_op_is_one_line(tmp_path,
                                                                              capsys):
    tf = pytest.importorskip("tensorflow")
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, (2, None), name="x")  # made up: (2, 1)
        tf.identity(tf.reduce_sum(x * 2.0), name="step_loss")
    fed = tmp_path / "fed.pb"
    fed.write_bytes(g.as_graph_def().SerializeToString())
    assert main(["profile", str(fed)]) == 0 and (tmp_path / "fed.profile.json.gz").exists()
    capsys.readouterr()
    with g.as_default():
        anything = tf.compat.v1.placeholder(tf.float32, None, name="anything")
        tf.identity(tf.reduce_sum(anything), name="total")
    fed.write_bytes(g.as_graph_def().SerializeToString())
    assert main(["profile", str(fed), "--loss", "total", "--force"]) == 2
    err = capsys.readouterr().err.strip()
    assert "inputs no made-up value can fill: anything (no static rank)" in err
    assert "\n" not in err
    with g.as_default():
        tf.io.write_file("/tmp/never", tf.constant("x"), name="writer")
    unsafe = tmp_path / "unsafe.pb"
    unsafe.write_bytes(g.as_graph_def().SerializeToString())
    assert main(["profile", str(unsafe), "--loss", "step_loss"]) == 2
    assert "WriteFile" in capsys.readouterr().err


def test_a_graph_placed_elsewhere_is_profiled_here_and_another_out_says_where_gplace_reads(
        tmp_path, capsys):
    tf = pytest.importorskip("tensorflow")
    from datasets import tfstep
    def build():
        w = tf.Variable(tf.ones((8, 8)), name="w")
        return tf.reduce_sum(tf.matmul(tf.ones((4, 8)), w), name="loss"), [w]
    gd = tfstep.training_step_graph(build, optimizer="sgd")
    for node in gd.node:  # as exported from a GPU machine
        node.device = "/job:localhost/replica:0/task:0/device:GPU:0"
    model = tmp_path / "gpu_step.pb"
    model.write_bytes(gd.SerializeToString())
    out = tmp_path / "elsewhere.profile.json.gz"
    assert main(["profile", str(model), "--steps", "1", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert out.is_file() and not (tmp_path / "gpu_step.profile.json.gz").exists()
    assert f"gplace reads a model's profile from {tmp_path / 'gpu_step.profile.json.gz'}" in said
    assert CostProfile.load(out).op_names.size > 0


def test_a_step_that_blocks_fails_after_the_timeout(tmp_path, capsys):
    """A dequeue from a queue nothing fills blocked gplace profile for ever."""
    tf = pytest.importorskip("tensorflow")
    g = tf.Graph()
    with g.as_default():
        queue = tf.queue.FIFOQueue(2, tf.float32, shapes=[()])
        tf.identity(queue.dequeue() * 2.0, name="step_loss")
    path = tmp_path / "blocks.pb"
    path.write_bytes(g.as_graph_def().SerializeToString())
    assert main(["profile", str(path), "--timeout", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "DeadlineExceededError" in err and "\n" not in err


def test_a_pytorch_program_is_profiled_with_its_optimizer_and_place_reads_it(tmp_path, capsys):
    """gplace profile model.pt2 --optimizer adam: every op of the step with Adam's updates timed
    here, beside the program, where place (with the same optimizer) prices the CPU by it."""
    from gplace.cluster import load_cluster
    from gplace.cost import cost_model_for
    from gplace.examples.torch.build import export_example
    from gplace.opgraph_cache import load_graph
    model = export_example("gnn", tmp_path)
    assert main(["profile", str(model), "--optimizer", "adam", "--steps", "1", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["optimizer"] == "adam" and summary["ops_profiled"] == summary["graph_ops"]
    profile = CostProfile.load(tmp_path / "gnn.profile.json.gz")
    graph = load_graph(model, optimizer="adam")
    assert sorted(profile.op_names.tolist()) == sorted(graph.names.tolist())
    costs = cost_model_for(model).costs(graph, load_cluster("local-procs"))
    assert costs.measured.all()
    sgd = cost_model_for(model).costs(load_graph(model), load_cluster("local-procs"))
    assert 0 < sgd.measured[:, 0].sum() < len(sgd.measured)  # Adam's update ops are not SGD's
    for argv, needle in ((["--loss", "x"], "--loss, --allow-unsafe and --unknown-dim apply to "
                                           "TensorFlow graphs"),
                         (["--optimizer", "adagrad", "--force"], "unknown optimizer 'adagrad'")):
        assert main(["profile", str(model), *argv]) == 2
        assert needle in capsys.readouterr().err
    assert main(["profile", str(LOOPED), "--optimizer", "adam"]) == 2
    assert "apply to PyTorch (.pt2) models only" in capsys.readouterr().err
