"""WaveNet (van den Oord et al. 2016): stacks of dilated causal 1-D convolutions with gated
tanh/sigmoid units, residual and skip connections, and a per-step softmax over quantized
samples; one of GDP's benchmark families."""

from __future__ import annotations

import tensorflow as tf

from datasets.models.tfops import Net, class_loss
from datasets.tfstep import training_step_graph


def wavenet(stacks: int, layers_per_stack: int, residual: int, skip: int, batch: int,
            length: int, kernel: int = 2, classes: int = 256, optimizer: str = "adam"):
    def build():
        net = Net()
        x = net.conv1d(net.input((batch, length, 1)), residual, kernel, "causal_in")
        skips = []
        for s in range(stacks):
            for i in range(layers_per_stack):
                with tf.name_scope(f"s{s}_l{i}"):
                    d = 2 ** i
                    f = tf.tanh(net.conv1d(x, residual, kernel, "filter", dilation=d))
                    g = tf.sigmoid(net.conv1d(x, residual, kernel, "gate", dilation=d))
                    z = f * g
                    skips.append(net.conv1d(z, skip, 1, "skip"))
                    x = x + net.conv1d(z, residual, 1, "res")
        h = tf.nn.relu(tf.add_n(skips))
        h = tf.nn.relu(net.conv1d(h, skip, 1, "post1"))
        logits = net.conv1d(h, classes, 1, "post2")
        return class_loss(logits, classes, (batch, length)), net.variables
    return training_step_graph(build, optimizer=optimizer)
