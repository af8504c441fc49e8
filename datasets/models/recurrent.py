"""Recurrent cells written in TF ops, unrolled in Python or run in a TF1 ``while_loop``.

Cells: LSTM (Hochreiter & Schmidhuber 1997), a plain tanh RNN, the minimal gated unit (Zhou et
al. 2016) and random NAS-RNN-style cells (Zoph & Le 2017: a binary tree of sum/product merges
of gated projections). GRU is left out: ``gru_lm`` is a validation family. Unrolled graphs grow
with the sequence (the RNNLM graphs of HDP); loops keep one body and an Enter/Merge/Switch
frame (the TF1 control flow Post placed).
"""

from __future__ import annotations

import random

import tensorflow as tf

from datasets.models.tfops import Net, class_loss
from datasets.tfstep import training_step_graph

CELLS = ("lstm", "rnn", "mgu", "nas")
ACTS = {"tanh": tf.tanh, "relu": tf.nn.relu, "sigmoid": tf.sigmoid, "identity": tf.identity}


class Cell:
    """One layer's weights; ``step(x, state) -> (output, state)``; the state is a tuple."""

    def __init__(self, net: Net, kind: str, d_in: int, hidden: int, rng: random.Random,
                 name: str):
        self.kind, self.hidden = kind, hidden
        gates = {"lstm": 4, "rnn": 1, "mgu": 2, "nas": 8}[kind]
        with tf.name_scope(name):
            self.w = net.var("w", (d_in + hidden, gates * hidden))
            self.b = net.var("b", (gates * hidden,), scale=0.0)
        if kind == "nas":  # random tree: pairs of activations, merged by add or mul
            self.acts = [rng.choice(list(ACTS)) for _ in range(8)]
            self.merges = [rng.choice(("add", "mul")) for _ in range(7)]

    def zero_state(self, batch: int):
        n = 2 if self.kind in ("lstm", "nas") else 1
        return tuple(tf.zeros((batch, self.hidden)) for _ in range(n))

    def step(self, x, state):
        z = tf.matmul(tf.concat([x, state[0]], 1), self.w) + self.b
        if self.kind == "lstm":
            i, f, g, o = tf.split(z, 4, 1)
            c = tf.sigmoid(f) * state[1] + tf.sigmoid(i) * tf.tanh(g)
            h = tf.sigmoid(o) * tf.tanh(c)
            return h, (h, c)
        if self.kind == "rnn":
            h = tf.tanh(z)
            return h, (h,)
        if self.kind == "mgu":
            f, g = tf.split(z, 2, 1)
            f = tf.sigmoid(f)
            h = (1 - f) * state[0] + f * tf.tanh(g)
            return h, (h,)
        return self._nas(z, state)

    def _nas(self, z, state):
        level = [ACTS[a](p) for a, p in zip(self.acts, tf.split(z, 8, 1))]
        merges = iter(self.merges)
        while len(level) > 1:
            level = [a + b if next(merges) == "add" else a * b
                     for a, b in zip(level[::2], level[1::2])]
        c = tf.tanh(level[0] + state[1])
        h = tf.tanh(c)
        return h, (h, c)


def rnn_model(cell: str, layers: int, hidden: int, vocab: int, batch: int, length: int,
              loop: bool, seed: int, task: str = "lm", optimizer: str = "momentum"):
    """``task``: "lm" (next-token softmax per step) or "classify" (last state, 10 classes)."""
    rng = random.Random(seed)

    def build():
        net = Net()
        ids = tf.random.uniform((batch, length), maxval=vocab, dtype=tf.int32)
        x = net.embedding(ids, vocab, hidden, "embed")                  # (batch, length, h)
        cells = [Cell(net, cell, hidden, hidden, rng, f"layer{i}") for i in range(layers)]
        h = run_loop(cells, x, batch, length) if loop else run_unrolled(cells, x, batch, length)
        if task == "lm":
            logits = net.dense(h, vocab, "softmax")
            return class_loss(logits, vocab, (batch, length)), net.variables
        return class_loss(net.dense(h[:, -1], 10, "head"), 10, (batch,)), net.variables
    return training_step_graph(build, optimizer=optimizer)


def run_unrolled(cells, x, batch: int, length: int):
    states = [c.zero_state(batch) for c in cells]
    outs = []
    for t in range(length):
        h = x[:, t]
        for i, c in enumerate(cells):
            with tf.name_scope(f"t{t}_layer{i}"):
                h, states[i] = c.step(h, states[i])
        outs.append(h)
    return tf.stack(outs, axis=1)


def run_loop(cells, x, batch: int, length: int):
    """All layers in one TF1 while_loop over time, outputs gathered in a TensorArray."""
    xs = tf.transpose(x, [1, 0, 2])                                      # (length, batch, h)
    init = tuple(s for c in cells for s in c.zero_state(batch))
    sizes = [len(c.zero_state(batch)) for c in cells]
    ta = tf.TensorArray(tf.float32, size=length)

    def body(t, ta, *flat):
        h, out, k = xs[t], [], 0
        for c, n in zip(cells, sizes):
            h, st = c.step(h, tuple(flat[k:k + n]))
            out.extend(st)
            k += n
        return (t + 1, ta.write(t, h), *out)

    res = tf.compat.v1.while_loop(lambda t, *_: t < length, body, (0, ta, *init))
    return tf.transpose(res[1].stack(), [1, 0, 2])
