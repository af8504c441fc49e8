"""Procedural residual networks: per stage a random number of basic or bottleneck blocks of a
random width, optional squeeze-and-excitation (Hu et al. 2018); He et al. 2016's block shapes,
the depths and widths drawn per graph."""

from __future__ import annotations

import random

import tensorflow as tf

from datasets.models.tfops import Net, image_head
from datasets.tfstep import training_step_graph


def squeeze_excite(net: Net, x, ratio: int = 4):
    with tf.name_scope("se"):
        c = int(x.shape[-1])
        s = tf.reduce_mean(x, axis=[1, 2])
        s = tf.sigmoid(net.dense(net.dense(s, max(4, c // ratio), "fc1", tf.nn.relu), c, "fc2"))
        return x * s[:, None, None, :]


def res_block(net: Net, x, c: int, stride: int, bottleneck: bool, se: bool, name: str):
    with tf.name_scope(name):
        if bottleneck:
            h = net.conv_bn_relu(x, c // 4, 1, "a")
            h = net.conv_bn_relu(h, c // 4, 3, "b", stride)
            h = net.batch_norm(net.conv(h, c, 1, "c"), "bn_c")
        else:
            h = net.conv_bn_relu(x, c, 3, "a", stride)
            h = net.batch_norm(net.conv(h, c, 3, "b"), "bn_b")
        if se:
            h = squeeze_excite(net, h)
        if stride != 1 or int(x.shape[-1]) != c:
            x = net.batch_norm(net.conv(x, c, 1, "proj", stride), "bn_proj")
        return tf.nn.relu(x + h)


def resnet_gen(stages: int, max_blocks: int, width: int, bottleneck: bool, se: bool, batch: int,
               size: int, seed: int, classes: int = 100, optimizer: str = "momentum"):
    rng = random.Random(seed)
    plan = [(rng.randint(1, max_blocks), width * 2 ** s * rng.choice((1, 1, 2)))
            for s in range(stages)]

    def build():
        net = Net()
        x = net.conv_bn_relu(net.input((batch, size, size, 3)), width, 3, "stem", 2)
        for s, (blocks, c) in enumerate(plan):
            for b in range(blocks):
                x = res_block(net, x, c, 2 if b == 0 and s > 0 else 1, bottleneck, se,
                              f"stage{s}_block{b}")
        return image_head(net, x, classes), net.variables
    return training_step_graph(build, optimizer=optimizer)
