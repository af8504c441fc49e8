"""Functional While loops count the trips the graph fixes (gplace/importer/trips.py)."""

import numpy as np

import gplace
from gplace.tfimport import tensorflow

tf = tensorflow()


def test_a_scan_counts_its_iterations():
    """tf.scan's functional While fixes maximum_iterations to the sequence length: its body's
    FLOPs count that many times; a loop whose trip count the graph does not fix counts once."""
    @tf.function(input_signature=[tf.TensorSpec([16, 8, 8], tf.float32)])
    def scan(xs):
        return tf.scan(lambda acc, x: tf.matmul(acc, x), xs, initializer=tf.eye(8))
    g = gplace.load_graph(scan.get_concrete_function())
    loop = int(np.flatnonzero(np.isin(g.op_types, ["While", "StatelessWhile"]))[0])
    assert any("16 iterations" in n for n in g.meta["import"]["notes"])
    assert g.flops[loop] >= 16 * 2 * 8 * 8 * 8

    w = tf.Variable(tf.eye(8))

    @tf.function(input_signature=[tf.TensorSpec([16, 8, 8], tf.float32)])
    def trained(xs):  # the gradient loop counts to the forward loop's final counter
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.scan(lambda acc, x: tf.matmul(acc, w) + x, xs,
                                         initializer=tf.zeros([8, 8])))
        w.assign_sub(0.1 * tape.gradient(loss, w))
    g = gplace.load_graph(trained.get_concrete_function())
    loops = np.flatnonzero(np.isin(g.op_types, ["While", "StatelessWhile"]))
    assert len(loops) == 2
    assert sum("16 iterations" in n for n in g.meta["import"]["notes"]) == 2
    assert any("one per trip of" in n for n in g.meta["import"]["notes"])
    # the gradient body holds two matmuls of the forward's size per trip
    assert g.flops[loops].min() >= 16 * 2 * 8 * 8 * 8

    @tf.function(input_signature=[tf.TensorSpec([], tf.int32)])
    def open_ended(n):
        return tf.while_loop(lambda i, x: i < n, lambda i, x: (i + 1, x * 2.0), (0, 1.0))[1]
    g = gplace.load_graph(open_ended.get_concrete_function())
    assert any("cost of one iteration" in n for n in g.meta["import"]["notes"])

    @tf.function(input_signature=[tf.TensorSpec([8, 8], tf.float32)])
    def until_small(x):  # exits on its data; maximum_iterations is only a cap
        return tf.while_loop(lambda i, y: tf.norm(y) > 1e-3,
                             lambda i, y: (i + 1, tf.matmul(y, x) * 0.1), (0, x),
                             maximum_iterations=100000)[1]
    g = gplace.load_graph(until_small.get_concrete_function())
    loop = int(np.flatnonzero(np.isin(g.op_types, ["While", "StatelessWhile"]))[0])
    assert g.flops[loop] < 10 * 2 * 8 * 8 * 8
    assert any("at most 100,000" in n for n in g.meta["import"]["notes"])


def test_a_trip_count_folded_from_constants_counts():
    """Keras 3's recurrent layers pass maximum_iterations through a Max over a constant (the
    sequence lengths): the loop counts that many trips, as with a constant."""
    @tf.function(input_signature=[tf.TensorSpec([8, 8], tf.float32)])
    def loop(x):
        trips = tf.reduce_max(tf.constant([3, 12, 5]), axis=tf.range(1))
        return tf.while_loop(lambda i, a: i < 100, lambda i, a: (i + 1, tf.matmul(a, x)),
                             [0, x], maximum_iterations=trips)[1]
    g = gplace.load_graph(loop.get_concrete_function())
    loop_op = int(np.flatnonzero(np.isin(g.op_types, ["While", "StatelessWhile"]))[0])
    assert any("12 iterations" in n for n in g.meta["import"]["notes"])
    assert g.flops[loop_op] >= 12 * 2 * 8 * 8 * 8
