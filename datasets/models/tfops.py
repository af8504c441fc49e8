"""Layers in plain TF ops for the procedural families: each creates resource variables through a
:class:`Net`, which keeps them as the step's ``var_list``.

Plain ops instead of Keras layers: a generated graph builds in seconds (Keras 3 layer tracing
dominates build time) and its structure is exactly what the generator wired. Batch norm uses
batch statistics only (no moving averages), as in a training step that keeps none.
"""

from __future__ import annotations

import math

import tensorflow as tf

DTYPES = {"float32": tf.float32, "bfloat16": tf.bfloat16}


class Net:
    """Variable factory and layer library. ``precision`` is the compute dtype; variables stay
    float32 (master weights) and are cast on read, as mixed-precision training does."""

    def __init__(self, precision: str = "float32"):
        self.variables: list[tf.Variable] = []
        self.dtype = DTYPES[precision]

    def var(self, name: str, shape, scale: float | None = None, cast: bool = True):
        fan_in = max(1, math.prod(shape[:-1]))
        init = tf.random.normal(shape, stddev=scale if scale is not None else fan_in ** -0.5)
        v = tf.Variable(init, name=name)
        self.variables.append(v)
        return tf.cast(v, self.dtype) if cast and self.dtype != tf.float32 else v

    def input(self, shape):
        """Random float input in the compute dtype."""
        return tf.cast(tf.random.normal(shape), self.dtype)

    # dense and normalization ------------------------------------------------------------
    def dense(self, x, units: int, name: str, act=None, bias: bool = True):
        with tf.name_scope(name):
            w = self.var("kernel", (int(x.shape[-1]), units))
            y = tf.tensordot(x, w, 1) if x.shape.rank > 2 else tf.matmul(x, w)
            if bias:
                y = y + self.var("bias", (units,), scale=0.0)
            return act(y) if act else y

    def layer_norm(self, x, name: str):
        with tf.name_scope(name):
            mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
            d = int(x.shape[-1])
            return ((x - mean) * tf.math.rsqrt(var + 1e-5) * self.var("gamma", (d,), 0.0)
                    + self.var("beta", (d,), 0.0))

    def batch_norm(self, x, name: str):
        with tf.name_scope(name):
            axes = list(range(x.shape.rank - 1))
            mean, var = tf.nn.moments(x, axes=axes)
            d = int(x.shape[-1])
            return tf.nn.batch_normalization(x, mean, var, self.var("beta", (d,), 0.0),
                                             self.var("gamma", (d,), 0.0), 1e-5)

    # convolutions ----------------------------------------------------------------------
    def conv(self, x, filters: int, k: int, name: str, stride: int = 1, dilation: int = 1):
        with tf.name_scope(name):
            w = self.var("kernel", (k, k, int(x.shape[-1]), filters))
            if dilation > 1:  # the CPU Conv2D kernel has no dilations: space-to-batch instead
                return tf.nn.convolution(x, w, padding="SAME", dilations=dilation)
            return tf.nn.conv2d(x, w, stride, "SAME")

    def sep_conv(self, x, filters: int, k: int, name: str, stride: int = 1, dilation: int = 1):
        """Depthwise k x k then pointwise 1 x 1 (Chollet 2017)."""
        with tf.name_scope(name):
            c = int(x.shape[-1])
            dw = self.var("depthwise", (k, k, c, 1))
            pw = self.var("pointwise", (1, 1, c, filters))
            rate = [dilation, dilation] if stride == 1 else None
            return tf.nn.separable_conv2d(x, dw, pw, [1, stride, stride, 1], "SAME",
                                          dilations=rate)

    def conv1d(self, x, filters: int, k: int, name: str, dilation: int = 1, causal: bool = True):
        with tf.name_scope(name):
            w = self.var("kernel", (k, int(x.shape[-1]), filters))
            if causal:
                x = tf.pad(x, [[0, 0], [(k - 1) * dilation, 0], [0, 0]])
            return tf.nn.convolution(x, w, padding="VALID" if causal else "SAME",
                                     dilations=dilation)

    def conv_bn_relu(self, x, filters: int, k: int, name: str, stride: int = 1):
        with tf.name_scope(name):
            return tf.nn.relu(self.batch_norm(self.conv(x, filters, k, "conv", stride), "bn"))

    def embedding(self, ids, rows: int, dim: int, name: str):
        with tf.name_scope(name):
            table = self.var("table", (rows, dim), scale=0.02, cast=False)
            out = tf.nn.embedding_lookup(table, ids)
            return tf.cast(out, self.dtype) if self.dtype != tf.float32 else out


def class_loss(logits, classes: int, batch_shape):
    """Mean softmax cross-entropy against random labels, in float32, named ``loss``."""
    labels = tf.random.uniform(batch_shape, maxval=classes, dtype=tf.int32)
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=tf.cast(logits, tf.float32)), name="loss")


def image_head(net: Net, x, classes: int):
    """Global average pool and a dense classifier; returns the loss."""
    pooled = tf.reduce_mean(x, axis=[1, 2])
    return class_loss(net.dense(pooled, classes, "head"), classes, (int(x.shape[0]),))
