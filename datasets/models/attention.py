"""Self-attention stacks written in TF ops (no Keras MultiHeadAttention, nothing shared with the
Transformer test family's builder): varied heads, widths, depths, pre- or post-norm, causal or
bidirectional, GELU or ReLU feed-forward, optional bfloat16 compute (Vaswani et al. 2017's
block; pre-norm as in GPT-2)."""

from __future__ import annotations

import math

import tensorflow as tf

from datasets.models.tfops import Net, class_loss
from datasets.tfstep import training_step_graph


def self_attention(net: Net, x, heads: int, causal: bool, name: str):
    with tf.name_scope(name):
        b, t, d = (int(s) for s in x.shape)
        qkv = net.dense(x, 3 * d, "qkv")
        q, k, v = (tf.transpose(tf.reshape(z, (b, t, heads, d // heads)), [0, 2, 1, 3])
                   for z in tf.split(qkv, 3, -1))                        # (b, heads, t, dh)
        scores = tf.matmul(q, k, transpose_b=True) * (1.0 / math.sqrt(d // heads))
        if causal:
            mask = tf.linalg.band_part(tf.ones((t, t), scores.dtype), -1, 0)
            scores = scores + (1.0 - mask) * -1e4
        att = tf.matmul(tf.nn.softmax(scores), v)
        return net.dense(tf.reshape(tf.transpose(att, [0, 2, 1, 3]), (b, t, d)), d, "out")


def attn_stack(layers: int, d_model: int, heads: int, ff_mult: int, batch: int, length: int,
               vocab: int, causal: bool, pre_norm: bool, activation: str = "gelu",
               optimizer: str = "adam", precision: str = "float32"):
    act = {"gelu": tf.nn.gelu, "relu": tf.nn.relu}[activation]

    def build():
        net = Net(precision)
        ids = tf.random.uniform((batch, length), maxval=vocab, dtype=tf.int32)
        x = net.embedding(ids, vocab, d_model, "embed") + net.var("pos", (length, d_model), 0.02)
        for i in range(layers):
            with tf.name_scope(f"layer{i}"):
                norm = (lambda h, n: net.layer_norm(h, n))
                h = norm(x, "ln1") if pre_norm else x
                x = x + self_attention(net, h, heads, causal, "attn")
                x = x if pre_norm else norm(x, "ln1")
                h = norm(x, "ln2") if pre_norm else x
                x = x + net.dense(net.dense(h, ff_mult * d_model, "ff1", act), d_model, "ff2")
                x = x if pre_norm else norm(x, "ln2")
        logits = net.dense(net.layer_norm(x, "final_ln"), vocab, "head")
        return class_loss(logits, vocab, (batch, length)), net.variables
    return training_step_graph(build, optimizer=optimizer)
