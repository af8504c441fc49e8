"""Recommenders with large embedding tables: Wide & Deep (Cheng et al. 2016) and DLRM
(Naumov et al. 2019). Their parameters sit in a few huge tables read by sparse gathers and
updated by sparse optimizer ops, a placement problem bound by memory, not compute."""

from __future__ import annotations

import tensorflow as tf

from datasets.tfstep import training_step_graph


def _sparse_ids(batch: int, tables: int, rows: int):
    return [tf.random.uniform((batch,), maxval=rows, dtype=tf.int32) for _ in range(tables)]


def _click_loss(logit, batch: int):
    label = tf.cast(tf.random.uniform((batch, 1), maxval=2, dtype=tf.int32), tf.float32)
    return tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=label, logits=logit),
                          name="loss")


def _mlp(widths: list[int], last_linear: bool = True):
    import keras
    return [keras.layers.Dense(w, activation=None if last_linear and i == len(widths) - 1
                               else "relu") for i, w in enumerate(widths)]


def _apply(layers, x):
    for layer in layers:
        x = layer(x)
    return x


def _variables(layers) -> list:
    return [v for layer in layers for v in layer.trainable_variables]


def wide_deep(batch: int, tables: int, rows: int, dim: int, dense: int, hidden: list[int],
              optimizer: str = "adagrad"):
    """A linear model over sparse ids (one weight per row) plus an MLP over their embeddings."""
    import keras

    def build():
        ids, x = _sparse_ids(batch, tables, rows), tf.random.normal((batch, dense))
        wide = [keras.layers.Embedding(rows, 1) for _ in range(tables)]
        deep_emb = [keras.layers.Embedding(rows, dim) for _ in range(tables)]
        deep = _mlp([*hidden, 1])
        wide_logit = tf.add_n([w(i) for w, i in zip(wide, ids)])
        h = tf.concat([x] + [e(i) for e, i in zip(deep_emb, ids)], axis=1)
        loss = _click_loss(wide_logit + _apply(deep, h), batch)
        return loss, _variables(wide + deep_emb + deep)
    return training_step_graph(build, optimizer=optimizer)


def dlrm(batch: int, tables: int, rows: int, dim: int, dense: int, bottom: list[int],
         top: list[int], optimizer: str = "adagrad"):
    """Bottom MLP on dense features, embeddings, pairwise dot interactions, top MLP."""
    import keras

    def build():
        ids, x = _sparse_ids(batch, tables, rows), tf.random.normal((batch, dense))
        emb = [keras.layers.Embedding(rows, dim) for _ in range(tables)]
        bot, topm = _mlp([*bottom, dim], last_linear=False), _mlp([*top, 1])
        z = tf.stack([_apply(bot, x)] + [e(i) for e, i in zip(emb, ids)], axis=1)  # (b, t+1, d)
        dots = tf.matmul(z, z, transpose_b=True)
        iu = [(i, j) for i in range(tables + 1) for j in range(i)]
        flat = tf.gather(tf.reshape(dots, (batch, -1)), [i * (tables + 1) + j for i, j in iu],
                         axis=1)
        loss = _click_loss(_apply(topm, tf.concat([z[:, 0], flat], axis=1)), batch)
        return loss, _variables(emb + bot + topm)
    return training_step_graph(build, optimizer=optimizer)
