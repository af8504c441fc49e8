"""Multi-branch modules and mixtures of experts, both wide rather than deep.

``multibranch``: a stack of modules that each split the input into parallel paths of varied
depth, width and kernel size and concatenate them (split-transform-merge, as in ResNeXt and
Inception; written here from scratch, no code shared with the inception builder). ``moe``: MLP
blocks whose feed-forward is a softly gated mixture of ``experts`` parallel experts
(Shazeer et al. 2017, dense dispatch with top-k gates).
"""

from __future__ import annotations

import random

import tensorflow as tf

from datasets.models.tfops import Net, class_loss, image_head
from datasets.tfstep import training_step_graph


def branch_plan(rng: random.Random, modules: int, max_branches: int, max_depth: int):
    """Per module, per branch: a list of (kernel, width multiplier) layers."""
    return [[[(rng.choice((1, 3, 5)), rng.choice((0.5, 1.0, 1.5)))
              for _ in range(rng.randint(1, max_depth))]
             for _ in range(rng.randint(2, max_branches))] for _ in range(modules)]


def multibranch(kind: str, modules: int, max_branches: int, max_depth: int, width: int,
                batch: int, size: int, seed: int, classes: int = 100,
                optimizer: str = "momentum"):
    """``kind``: "conv" (images, pooling every third module) or "dense" (vectors)."""
    plan = branch_plan(random.Random(seed), modules, max_branches, max_depth)

    def layer(net, h, k, c, name):
        if kind == "conv":
            return net.conv_bn_relu(h, c, k, name)
        return tf.nn.relu(net.layer_norm(net.dense(h, c, name), name + "_ln"))

    def build():
        net = Net()
        if kind == "conv":
            x = net.conv_bn_relu(net.input((batch, size, size, 3)), width, 3, "stem", 2)
        else:
            x = net.dense(net.input((batch, size)), width, "stem", tf.nn.relu)
        for m, branches in enumerate(plan):
            with tf.name_scope(f"module{m}"):
                outs = []
                for b, layers in enumerate(branches):
                    h = x
                    for li, (k, mult) in enumerate(layers):
                        h = layer(net, h, k, max(4, int(width * mult)), f"b{b}_l{li}")
                    outs.append(h)
                x = layer(net, tf.concat(outs, axis=-1), 1, width, "merge")
                if kind == "conv" and m % 3 == 2 and x.shape[1] > 4:
                    x = tf.nn.max_pool2d(x, 2, 2, "VALID")
        if kind == "conv":
            return image_head(net, x, classes), net.variables
        return class_loss(net.dense(x, classes, "head"), classes, (batch,)), net.variables
    return training_step_graph(build, optimizer=optimizer)


def moe(layers: int, experts: int, top_k: int, d_model: int, d_ff: int, batch: int,
        features: int, classes: int = 100, optimizer: str = "adam", precision: str = "float32"):
    """Residual blocks: LayerNorm, gate softmax, top-k mask, weighted sum of expert MLPs."""
    def build():
        net = Net(precision)
        x = net.dense(net.input((batch, features)), d_model, "stem")
        for i in range(layers):
            with tf.name_scope(f"block{i}"):
                h = net.layer_norm(x, "ln")
                gates = tf.nn.softmax(tf.cast(net.dense(h, experts, "gate"), tf.float32))
                kth = tf.math.top_k(gates, top_k).values[:, -1:]
                gates = tf.where(gates >= kth, gates, tf.zeros_like(gates))
                gates = tf.cast(gates / tf.reduce_sum(gates, -1, keepdims=True), net.dtype)
                outs = [net.dense(net.dense(h, d_ff, f"e{e}_in", tf.nn.relu), d_model,
                                  f"e{e}_out") for e in range(experts)]
                x = x + tf.einsum("be,bed->bd", gates, tf.stack(outs, axis=1))
        return class_loss(net.dense(x, classes, "head"), classes, (batch,)), net.variables
    return training_step_graph(build, optimizer=optimizer)
