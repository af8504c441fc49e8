import os
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
TESTDATA = SHARED / "testdata" / "tf-grappler"


@pytest.fixture
def testdata() -> Path:
    if not TESTDATA.is_dir():
        pytest.skip(f"{TESTDATA} is absent (it ships with the team's shared folder, not the repo)")
    return TESTDATA


@pytest.fixture
def two_cpu_cluster():
    """A cluster of this machine's CPU split into two logical TF devices (CPU:0, CPU:1)."""
    from gplace.cluster import cluster_from_dict
    cpu = {"kind": "cpu", "peak_flops": 1e11, "mem_bandwidth": 2e10, "memory_bytes": 8e9}
    return cluster_from_dict({"name": "two-cpus", "devices": [
        dict(cpu, name="cpu0", tf_device="/job:localhost/replica:0/task:0/device:CPU:0"),
        dict(cpu, name="cpu1", tf_device="/job:localhost/replica:0/task:0/device:CPU:1")],
        "default_link": {"bandwidth": 1e10, "latency_s": 1e-6}}, "test")


@pytest.fixture
def tf2_step():
    """A TF2 training step as a tf.Module: two variables (24 x 12 float32 each), a
    tf.function ``train(x)`` that updates both and returns the loss."""
    from gplace.tfimport import tensorflow
    tf = tensorflow()

    class Step(tf.Module):
        def __init__(self):
            self.w = tf.Variable(tf.random.normal([24, 12]), name="w")
            self.opt = tf.Variable(tf.zeros([24, 12]), name="momentum")

        @tf.function(input_signature=[tf.TensorSpec([6, 24], tf.float32)])
        def train(self, x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(tf.matmul(x, self.w)))
            grad = tape.gradient(loss, self.w)
            self.opt.assign(0.9 * self.opt + grad)
            self.w.assign_sub(0.01 * self.opt)
            return loss
    return Step()



@pytest.fixture
def save_with_predict():
    """``save(module, path, signatures=("train", "predict"))``: tf2_step's module saved as a
    SavedModel with a ``predict`` (and ``serve``, the same function) signature beside
    ``train``; returns ``path``."""
    from gplace.tfimport import tensorflow
    tf = tensorflow()

    def save(module, path, signatures: tuple[str, ...] = ("train", "predict")):
        predict = tf.function(lambda x: {"y": tf.matmul(x, module.w)},
                              input_signature=[tf.TensorSpec([6, 24], tf.float32)])
        functions = {"train": module.train, "predict": predict, "serve": predict}
        tf.saved_model.save(module, str(path), signatures={k: functions[k] for k in signatures})
        return path
    return save


@pytest.fixture
def rewrite_pt2():
    """``rewrite(path, out, suffix, edit)``: a copy of the .pt2 archive at ``path`` written to
    ``out`` whose members ending with ``suffix`` hold ``edit(their bytes)``; returns ``out``."""
    import zipfile

    def rewrite(path, out, suffix, edit):
        with zipfile.ZipFile(path) as src, zipfile.ZipFile(out, "w") as dst:
            for info in src.infolist():
                data = src.read(info.filename)
                dst.writestr(info, edit(data) if info.filename.endswith(suffix) else data)
        return out
    return rewrite


