"""Graph neural networks with message passing in TF ops: gathers along an edge list, per-edge
transforms, ``unsorted_segment_sum`` back to nodes. Variants: GCN (Kipf & Welling 2017, degree
normalized), GIN (Xu et al. 2019, MLP after the sum), GAT (Velickovic et al. 2018, softmax over
each node's incoming edges) and MPNN (Gilmer et al. 2017, edge-conditioned messages). The input
graph is random per step (uniform edges), node classification loss."""

from __future__ import annotations

import tensorflow as tf

from datasets.models.tfops import Net, class_loss
from datasets.tfstep import training_step_graph


def segment_softmax(logits, seg, n: int):
    top = tf.math.unsorted_segment_max(logits, seg, n)
    e = tf.exp(logits - tf.gather(top, seg))
    return e / (tf.gather(tf.math.unsorted_segment_sum(e, seg, n), seg) + 1e-9)


def mp_layer(net: Net, kind: str, h, src, dst, n: int, d: int, heads: int, name: str):
    with tf.name_scope(name):
        if kind == "gcn":
            deg = tf.math.unsorted_segment_sum(tf.ones_like(dst, tf.float32), dst, n) + 1.0
            m = tf.gather(net.dense(h, d, "w", bias=False), src) * tf.gather(deg ** -0.5, src)[:, None]
            return tf.nn.relu(tf.math.unsorted_segment_sum(m, dst, n) * (deg ** -0.5)[:, None])
        if kind == "gin":
            agg = h + tf.math.unsorted_segment_sum(tf.gather(h, src), dst, n)
            return tf.nn.relu(net.dense(net.dense(agg, d, "mlp1", tf.nn.relu), d, "mlp2"))
        if kind == "gat":
            z = tf.reshape(net.dense(h, d, "w", bias=False), (n, heads, d // heads))
            a_src = tf.reduce_sum(z * net.var("a_src", (heads, d // heads)), -1)
            a_dst = tf.reduce_sum(z * net.var("a_dst", (heads, d // heads)), -1)
            att = segment_softmax(tf.nn.leaky_relu(tf.gather(a_src, src) + tf.gather(a_dst, dst),
                                                   0.2), dst, n)             # (edges, heads)
            m = tf.gather(z, src) * att[:, :, None]
            return tf.nn.elu(tf.reshape(tf.math.unsorted_segment_sum(m, dst, n), (n, d)))
        msg = net.dense(tf.concat([tf.gather(h, src), tf.gather(h, dst)], -1), d, "msg",
                        tf.nn.relu)                                          # mpnn
        return net.dense(tf.concat([h, tf.math.unsorted_segment_sum(msg, dst, n)], -1), d,
                         "update", tf.nn.relu)


def gnn(kind: str, layers: int, hidden: int, nodes: int, edges: int, features: int,
        heads: int = 4, classes: int = 16, optimizer: str = "adam"):
    def build():
        net = Net()
        src = tf.random.uniform((edges,), maxval=nodes, dtype=tf.int32)
        dst = tf.random.uniform((edges,), maxval=nodes, dtype=tf.int32)
        h = net.dense(net.input((nodes, features)), hidden, "embed", tf.nn.relu)
        for i in range(layers):
            h = h + mp_layer(net, kind, h, src, dst, nodes, hidden, heads, f"mp{i}")
        return class_loss(net.dense(h, classes, "head"), classes, (nodes,)), net.variables
    return training_step_graph(build, optimizer=optimizer)
