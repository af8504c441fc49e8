"""Variational autoencoders (Kingma & Welling 2014): convolutional or MLP encoder to a Gaussian
latent, the reparameterization trick, a mirrored decoder, reconstruction + KL loss."""

from __future__ import annotations

import tensorflow as tf

from datasets.models.tfops import Net
from datasets.tfstep import training_step_graph


def vae(kind: str, depth: int, width: int, latent: int, batch: int, size: int,
        optimizer: str = "adam"):
    """``kind``: "conv" (``size`` x ``size`` images, stride-2 convs) or "mlp" (``size`` features)."""
    def build():
        net = Net()
        if kind == "conv":
            x = net.input((batch, size, size, 3))
            h = x
            for i in range(depth):
                h = net.conv_bn_relu(h, width * 2 ** i, 3, f"enc{i}", 2)
            shape = [int(s) for s in h.shape]
            h = tf.reshape(h, (batch, -1))
        else:
            x = h = net.input((batch, size))
            for i in range(depth):
                h = net.dense(h, width, f"enc{i}", tf.nn.relu)
        mu, logvar = net.dense(h, latent, "mu"), net.dense(h, latent, "logvar")
        z = mu + tf.exp(0.5 * logvar) * tf.random.normal((batch, latent))
        if kind == "conv":
            d = tf.reshape(net.dense(z, shape[1] * shape[2] * shape[3], "dec_in"), shape)
            for i in reversed(range(depth)):
                s = int(d.shape[1]) * 2
                d = net.conv_bn_relu(tf.image.resize(d, (s, s), "nearest"),
                                     width * 2 ** max(0, i - 1), 3, f"dec{i}")
            recon = net.conv(d, 3, 3, "out")
        else:
            d = z
            for i in range(depth):
                d = net.dense(d, width, f"dec{i}", tf.nn.relu)
            recon = net.dense(d, size, "out")
        rec = tf.reduce_mean(tf.square(recon - x))
        kl = -0.5 * tf.reduce_mean(1 + logvar - tf.square(mu) - tf.exp(logvar))
        return tf.add(rec, kl, name="loss"), net.variables
    return training_step_graph(build, optimizer=optimizer)
