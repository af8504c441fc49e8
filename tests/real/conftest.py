import os
from pathlib import Path

import numpy as np
import pytest


def child_pids() -> list[int]:
    """Live (non-zombie) processes whose parent is this test process."""
    me, out = os.getpid(), []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


def tiny_step_graph(hidden: int = 16, heavy: int = 0):
    """(GraphDef, loss op name) of a 2-layer MLP training step on constant inputs.

    ``heavy`` > 0 adds a chain of ``heavy`` 1024x1024 matmuls to the loss (a step of seconds).
    """
    from gplace.tfimport import tensorflow
    tf = tensorflow()
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(np.linspace(-1, 1, 8 * 4, dtype=np.float32).reshape(8, 4), name="x")
        y = tf.constant(np.linspace(0, 1, 8, dtype=np.float32).reshape(8, 1), name="y")
        w1 = tf.Variable(tf.ones([4, hidden]) * 0.1, name="w1")
        w2 = tf.Variable(tf.ones([hidden, 1]) * 0.1, name="w2")
        h = tf.nn.relu(tf.matmul(x, w1))
        loss = tf.reduce_mean(tf.square(tf.matmul(h, w2) - y))
        if heavy:
            m = tf.ones([1024, 1024]) * 1e-3
            for _ in range(heavy):
                m = tf.matmul(m, m)
            loss = loss + 0.0 * tf.reduce_sum(m)
        train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
        with tf.control_dependencies([train]):
            tf.identity(loss, name="step_loss")
    return g.as_graph_def()


def fixed_steps(steps: int, warmup: int = 1, per_visit: int = 3):
    """A protocol that times exactly ``steps`` steps per placement (no early stop, no cap)."""
    from gplace.real.protocol import ProtocolConfig
    return ProtocolConfig(steps_per_visit=min(per_visit, steps), warmup_per_visit=warmup,
                          min_steps=steps, max_steps=steps, min_timed_s=0.0, rel_width=0.0,
                          max_s_per_placement=1e6)


@pytest.fixture(scope="module")
def procs():
    from gplace.real.procs import LocalProcs
    with LocalProcs(2) as p:
        yield p
