"""MLP-Mixer (Tolstikhin et al. 2021): image patches, then blocks of token-mixing and
channel-mixing MLPs with LayerNorm and residuals; no convolution or attention."""

from __future__ import annotations

import tensorflow as tf

from datasets.models.tfops import Net, class_loss
from datasets.tfstep import training_step_graph


def mlp_mixer(blocks: int, patch: int, d_model: int, token_mlp: int, channel_mlp: int,
              batch: int, size: int, classes: int = 100, optimizer: str = "adam",
              precision: str = "float32"):
    def build():
        net = Net(precision)
        img = net.input((batch, size, size, 3))
        p = tf.image.extract_patches(img, [1, patch, patch, 1], [1, patch, patch, 1],
                                     [1, 1, 1, 1], "VALID")
        tokens = (size // patch) ** 2
        x = net.dense(tf.reshape(p, (batch, tokens, patch * patch * 3)), d_model, "stem")
        for i in range(blocks):
            with tf.name_scope(f"block{i}"):
                h = tf.transpose(net.layer_norm(x, "ln1"), [0, 2, 1])   # (b, d, tokens)
                h = net.dense(net.dense(h, token_mlp, "tok1", tf.nn.gelu), tokens, "tok2")
                x = x + tf.transpose(h, [0, 2, 1])
                h = net.layer_norm(x, "ln2")
                x = x + net.dense(net.dense(h, channel_mlp, "ch1", tf.nn.gelu), d_model, "ch2")
        pooled = tf.reduce_mean(net.layer_norm(x, "final_ln"), axis=1)
        return class_loss(net.dense(pooled, classes, "head"), classes, (batch,)), net.variables
    return training_step_graph(build, optimizer=optimizer)
