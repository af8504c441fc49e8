"""NAS cells sampled at random from the DARTS search space (Liu et al. 2019): each cell takes
the two previous cells' outputs, builds ``steps`` nodes that each sum two operations applied to
two earlier states, and concatenates the nodes. Normal and reduction genotypes are drawn per
graph; reduction cells (stride 2) sit at 1/3 and 2/3 of the depth, as in DARTS' networks.
"""

from __future__ import annotations

import random

import tensorflow as tf

from datasets.models.tfops import Net, image_head
from datasets.tfstep import training_step_graph

OPS = ("sep_conv_3x3", "sep_conv_5x5", "dil_conv_3x3", "dil_conv_5x5", "max_pool_3x3",
       "avg_pool_3x3", "skip_connect")


def sample_genotype(rng: random.Random, steps: int) -> list[tuple[str, int, str, int]]:
    """Per node: (op, input, op, input); inputs index 0, 1 (cell inputs) and earlier nodes."""
    return [(rng.choice(OPS), rng.randrange(i + 2), rng.choice(OPS), rng.randrange(i + 2))
            for i in range(steps)]


def apply_op(net: Net, op: str, x, c: int, stride: int, name: str):
    with tf.name_scope(name):
        if op.startswith(("sep", "dil")):
            k, dil = int(op[-1]), 2 if op.startswith("dil") else 1
            h = net.sep_conv(tf.nn.relu(x), c, k, op, stride, dilation=dil)
            if op.startswith("sep"):
                h = net.sep_conv(tf.nn.relu(net.batch_norm(h, "bn0")), c, k, op + "_b")
            return net.batch_norm(h, "bn")
        if op.endswith("pool_3x3"):
            pool = tf.nn.max_pool2d if op.startswith("max") else tf.nn.avg_pool2d
            return pool(x, 3, stride, "SAME")
        if stride == 1:
            return x
        return net.batch_norm(net.conv(tf.nn.relu(x), c, 1, "reduce", 2), "bn")  # skip, stride 2


def cell(net: Net, s0, s1, genotype, c: int, reduction: bool, reduce_prev: bool, name: str):
    with tf.name_scope(name):
        s0 = net.conv_bn_relu(s0, c, 1, "pre0", stride=2 if reduce_prev else 1)
        s1 = net.conv_bn_relu(s1, c, 1, "pre1")
        states = [s0, s1]
        for i, (op_a, in_a, op_b, in_b) in enumerate(genotype):
            stride_a = 2 if reduction and in_a < 2 else 1
            stride_b = 2 if reduction and in_b < 2 else 1
            a = apply_op(net, op_a, states[in_a], c, stride_a, f"node{i}_a")
            b = apply_op(net, op_b, states[in_b], c, stride_b, f"node{i}_b")
            states.append(a + b)
        return tf.concat(states[2:], axis=-1)


def nas_cell_net(cells: int, channels: int, steps: int, batch: int, size: int, seed: int,
                 classes: int = 100, optimizer: str = "momentum"):
    rng = random.Random(seed)
    normal, reduce = sample_genotype(rng, steps), sample_genotype(rng, steps)
    reductions = {cells // 3, 2 * cells // 3}

    def build():
        net = Net()
        s0 = s1 = net.conv_bn_relu(net.input((batch, size, size, 3)), 3 * channels, 3, "stem")
        c, reduce_prev = channels, False
        for i in range(cells):
            red = i in reductions
            c = c * 2 if red else c
            s0, s1 = s1, cell(net, s0, s1, reduce if red else normal, c, red, reduce_prev,
                              f"cell{i}")
            reduce_prev = red
        return image_head(net, s1, classes), net.variables
    return training_step_graph(build, optimizer=optimizer)
