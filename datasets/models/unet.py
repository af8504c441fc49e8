"""Encoder-decoders with skip connections (U-Net, Ronneberger et al. 2015): ``levels`` down
steps of conv blocks and pooling, a bottleneck, and up steps (transposed conv or resize)
that concatenate the encoder's feature map of the same resolution; per-pixel softmax loss."""

from __future__ import annotations

import tensorflow as tf

from datasets.models.tfops import Net, class_loss
from datasets.tfstep import training_step_graph


def block(net: Net, x, c: int, convs: int, name: str):
    with tf.name_scope(name):
        for i in range(convs):
            x = net.conv_bn_relu(x, c, 3, f"conv{i}")
        return x


def up(net: Net, x, c: int, mode: str, name: str):
    with tf.name_scope(name):
        b, h, w, cin = (int(d) for d in x.shape)
        if mode == "transpose":
            k = net.var("kernel", (2, 2, c, cin))
            return tf.nn.conv2d_transpose(x, k, (b, 2 * h, 2 * w, c), 2)
        return net.conv(tf.image.resize(x, (2 * h, 2 * w), "nearest"), c, 1, "proj")


def unet(levels: int, width: int, convs: int, batch: int, size: int, up_mode: str = "transpose",
         classes: int = 8, optimizer: str = "adam"):
    def build():
        net = Net()
        x, skips = net.input((batch, size, size, 3)), []
        for lv in range(levels):
            x = block(net, x, width * 2 ** lv, convs, f"down{lv}")
            skips.append(x)
            x = tf.nn.max_pool2d(x, 2, 2, "VALID")
        x = block(net, x, width * 2 ** levels, convs, "bottleneck")
        for lv in reversed(range(levels)):
            x = up(net, x, width * 2 ** lv, up_mode, f"up{lv}")
            x = block(net, tf.concat([x, skips[lv]], -1), width * 2 ** lv, convs, f"dec{lv}")
        logits = net.conv(x, classes, 1, "head")
        return class_loss(logits, classes, (batch, size, size)), net.variables
    return training_step_graph(build, optimizer=optimizer)
