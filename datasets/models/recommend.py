"""Recommenders with embedding tables of varied sizes (rows drawn per table, from thousands to
tens of millions): DCN-V2 (Wang et al. 2021, cross layers beside a deep MLP) and two-tower
retrieval (Yi et al. 2019, in-batch softmax). Sparse gathers and sparse optimizer updates; the
largest tables do not fit one K80 (12 GB) with their optimizer slots. Written apart from the
``wide_deep`` validation builder."""

from __future__ import annotations

import tensorflow as tf

from datasets.models.tfops import Net
from datasets.tfstep import training_step_graph


def embed_all(net: Net, batch: int, rows: list[int], dims: list[int], prefix: str):
    out = []
    for i, (r, d) in enumerate(zip(rows, dims)):
        ids = tf.random.uniform((batch,), maxval=r, dtype=tf.int32)
        out.append(net.embedding(ids, r, d, f"{prefix}{i}"))
    return tf.concat(out, axis=1)


def mlp(net: Net, x, widths: list[int], name: str):
    for i, w in enumerate(widths):
        x = net.dense(x, w, f"{name}{i}", tf.nn.relu)
    return x


def dcn(rows: list[int], dims: list[int], cross_layers: int, deep: list[int], dense: int,
        batch: int, optimizer: str = "adagrad"):
    def build():
        net = Net()
        x0 = tf.concat([net.input((batch, dense)), embed_all(net, batch, rows, dims, "t")], 1)
        x, d = x0, int(x0.shape[1])
        for i in range(cross_layers):                      # x_{l+1} = x0 * (W x_l + b) + x_l
            x = x0 * net.dense(x, d, f"cross{i}") + x
        h = tf.concat([x, mlp(net, x0, deep, "deep")], 1)
        logit = net.dense(h, 1, "head")
        label = tf.cast(tf.random.uniform((batch, 1), maxval=2, dtype=tf.int32), tf.float32)
        loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=label,
                                                                      logits=logit), name="loss")
        return loss, net.variables
    return training_step_graph(build, optimizer=optimizer)


def two_tower(user_rows: list[int], item_rows: list[int], dim: int, tower: list[int],
              batch: int, optimizer: str = "adagrad"):
    def build():
        net = Net()
        u = mlp(net, embed_all(net, batch, user_rows, [dim] * len(user_rows), "user"), tower, "u")
        v = mlp(net, embed_all(net, batch, item_rows, [dim] * len(item_rows), "item"), tower, "v")
        u, v = tf.math.l2_normalize(u, -1), tf.math.l2_normalize(v, -1)
        logits = tf.matmul(u, v, transpose_b=True) * 20.0                 # (batch, batch)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.range(batch), logits=logits), name="loss")
        return loss, net.variables
    return training_step_graph(build, optimizer=optimizer)
