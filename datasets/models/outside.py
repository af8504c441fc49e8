"""Five architectures outside the corpus, to measure the placer on graphs it has never seen
(``datasets/outside.py`` lists the graphs; none of their families or builders is in the corpus).

- Conformer (Gulati et al. 2020, "Conformer: Convolution-augmented Transformer for Speech
  Recognition"): two stride-2 convolutions subsample a (batch, frames, 80) log-mel spectrogram,
  then blocks of half-step feed-forward, multi-head self-attention, a convolution module
  (pointwise conv, GLU, depthwise 1-D conv, batch norm, swish, pointwise conv), a second
  half-step feed-forward and layer norm. Loss: per-frame softmax cross-entropy (no CTC).
- CapsNet (Sabour, Frosst & Hinton 2017, "Dynamic Routing Between Capsules"): a 9 x 9 conv,
  primary capsules (a strided 9 x 9 conv, squashed), a learned transform of every primary
  capsule into every class capsule, routing-by-agreement unrolled for ``routing`` iterations
  (softmax over the couplings, weighted sum, squash, agreement update), margin loss plus the
  paper's masked reconstruction decoder (weight 0.0005).
- Perceiver (Jaegle et al. 2021, "Perceiver: General Perception with Iterative Attention"): a
  learned latent array cross-attends (single head) to a large embedded byte array, then runs
  blocks of latent multi-head self-attention; repeated ``cross_attends`` times with no weight
  sharing; mean-pooled latents feed a classifier.
- Selective state-space language model in the style of S4D / Mamba (Gu et al. 2022, "On the
  Parameterization and Initialization of Diagonal State Space Models"; Gu & Dao 2023, "Mamba"):
  per layer, layer norm, an input projection to a signal and a gate, a short causal depthwise
  conv, input-dependent step size and B, C, the diagonal recurrence
  ``h_t = exp(delta_t A) h_{t-1} + delta_t B_t x_t``, ``y_t = C_t h_t + D x_t``, a SiLU gate,
  an output projection and a residual. The scan is either unrolled over every time step
  (``scan="loop"``) or chunked (``scan="chunked"``): within a chunk, the parallel form with a
  cumulative sum of ``delta A`` and a masked (chunk x chunk) decay matrix, and a Python loop
  carrying the state from chunk to chunk.
- DCGAN (Radford, Metz & Chintala 2016, "Unsupervised Representation Learning with Deep
  Convolutional Generative Adversarial Networks"): generator (dense, then stride-2 transposed
  convs with batch norm and ReLU, tanh output), discriminator (stride-2 convs, batch norm,
  leaky ReLU, a dense logit); the non-saturating losses of both players and both optimizers'
  updates in one step graph (see :func:`dcgan`).
"""

from __future__ import annotations

import math
from typing import Sequence

import tensorflow as tf

from datasets.models.tfops import Net, class_loss
from datasets.tfstep import OPTIMIZERS, state_updates, training_step_graph


def attention(net: Net, q_in, kv_in, heads: int, d: int, name: str):
    """Multi-head attention of ``q_in`` (b, tq, .) over ``kv_in`` (b, tk, .), width ``d``."""
    with tf.name_scope(name):
        b, tq, tk = int(q_in.shape[0]), int(q_in.shape[1]), int(kv_in.shape[1])
        dh = d // heads
        q = tf.transpose(tf.reshape(net.dense(q_in, d, "q"), (b, tq, heads, dh)), [0, 2, 1, 3])
        k, v = (tf.transpose(tf.reshape(z, (b, tk, heads, dh)), [0, 2, 1, 3])
                for z in tf.split(net.dense(kv_in, 2 * d, "kv"), 2, -1))
        att = tf.nn.softmax(tf.matmul(q, k, transpose_b=True) * (1.0 / math.sqrt(dh)))
        out = tf.reshape(tf.transpose(tf.matmul(att, v), [0, 2, 1, 3]), (b, tq, d))
        return net.dense(out, d, "out")


def _feed_forward(net: Net, x, mult: int, name: str, act=tf.nn.gelu):
    with tf.name_scope(name):
        d = int(x.shape[-1])
        h = net.layer_norm(x, "ln")
        return net.dense(net.dense(h, mult * d, "ff1", act), d, "ff2")


# Conformer ---------------------------------------------------------------------------------
def conformer(blocks: int, d_model: int, heads: int, kernel: int, batch: int, frames: int,
              mels: int = 80, sub_channels: int = 64, classes: int = 128,
              optimizer: str = "adam"):
    """``frames`` spectrogram frames of ``mels`` bins, subsampled 4x in time and frequency."""
    def conv_module(net, x, name):
        with tf.name_scope(name):
            b, t, d = (int(s) for s in x.shape)
            h = net.dense(net.layer_norm(x, "ln"), 2 * d, "pw1")
            a, g = tf.split(h, 2, -1)
            h = a * tf.sigmoid(g)                                           # GLU
            w = net.var("depthwise", (kernel, 1, d, 1))
            h = tf.nn.depthwise_conv2d(tf.reshape(h, (b, t, 1, d)), w, [1, 1, 1, 1], "SAME")
            h = tf.nn.silu(net.batch_norm(tf.reshape(h, (b, t, d)), "bn"))  # swish
            return net.dense(h, d, "pw2")

    def build():
        net = Net()
        x = net.input((batch, frames, mels, 1))
        with tf.name_scope("subsample"):
            x = tf.nn.relu(net.conv(x, sub_channels, 3, "conv1", 2))
            x = tf.nn.relu(net.conv(x, sub_channels, 3, "conv2", 2))
            t, f = int(x.shape[1]), int(x.shape[2])
            x = net.dense(tf.reshape(x, (batch, t, f * sub_channels)), d_model, "proj")
        for i in range(blocks):
            with tf.name_scope(f"block{i}"):
                x = x + 0.5 * _feed_forward(net, x, 4, "ff_a", tf.nn.silu)
                h = net.layer_norm(x, "ln_att")
                x = x + attention(net, h, h, heads, d_model, "mhsa")
                x = x + conv_module(net, x, "conv")
                x = x + 0.5 * _feed_forward(net, x, 4, "ff_b", tf.nn.silu)
                x = net.layer_norm(x, "ln_out")
        logits = net.dense(x, classes, "head")
        return class_loss(logits, classes, (batch, int(x.shape[1]))), net.variables
    return training_step_graph(build, optimizer=optimizer)


# CapsNet -----------------------------------------------------------------------------------
def _squash(s, axis: int = -1):
    sq = tf.reduce_sum(tf.square(s), axis=axis, keepdims=True)
    return s * (sq / (1.0 + sq)) * tf.math.rsqrt(sq + 1e-7)


def capsnet(batch: int, size: int = 28, channels: int = 1, conv_filters: int = 256,
            primary_types: int = 32, primary_dim: int = 8, classes: int = 10,
            class_dim: int = 16, routing: int = 3, decoder: Sequence[int] = (512, 1024),
            optimizer: str = "adam"):
    """Sabour et al.'s MNIST CapsNet at ``size`` x ``size`` x ``channels`` input."""
    def build():
        net = Net()
        img = net.input((batch, size, size, channels))
        with tf.name_scope("conv1"):
            h = tf.nn.relu(tf.nn.conv2d(img, net.var("kernel", (9, 9, channels, conv_filters)),
                                        1, "VALID") + net.var("bias", (conv_filters,), 0.0))
        with tf.name_scope("primary"):
            w = net.var("kernel", (9, 9, conv_filters, primary_types * primary_dim))
            h = tf.nn.conv2d(h, w, 2, "VALID") + net.var("bias", (primary_types * primary_dim,),
                                                         0.0)
            n_in = int(h.shape[1]) * int(h.shape[2]) * primary_types
            u = _squash(tf.reshape(h, (batch, n_in, primary_dim)))
        with tf.name_scope("predict"):   # u_hat[b, i, j] = W[i, j] u[b, i]
            w = net.var("W", (n_in, primary_dim, classes * class_dim), 0.01)
            u_hat = tf.matmul(tf.transpose(u, [1, 0, 2]), w)            # (i, b, j * dim)
            u_hat = tf.reshape(tf.transpose(u_hat, [1, 0, 2]), (batch, n_in, classes, class_dim))
        logits = tf.zeros((batch, n_in, classes))
        for r in range(routing):
            with tf.name_scope(f"routing{r}"):
                c = tf.nn.softmax(logits, axis=2)                       # couplings over classes
                v = _squash(tf.reduce_sum(c[..., None] * u_hat, axis=1))  # (b, classes, dim)
                if r < routing - 1:
                    logits = logits + tf.reduce_sum(u_hat * v[:, None], axis=-1)
        with tf.name_scope("margin_loss"):
            labels = tf.random.uniform((batch,), maxval=classes, dtype=tf.int32)
            t = tf.one_hot(labels, classes)
            length = tf.sqrt(tf.reduce_sum(tf.square(v), -1) + 1e-7)
            margin = tf.reduce_sum(t * tf.square(tf.nn.relu(0.9 - length))
                                   + 0.5 * (1 - t) * tf.square(tf.nn.relu(length - 0.1)), -1)
        with tf.name_scope("decoder"):
            masked = tf.reshape(v * t[..., None], (batch, classes * class_dim))
            d = net.dense(masked, decoder[0], "fc1", tf.nn.relu)
            d = net.dense(d, decoder[1], "fc2", tf.nn.relu)
            recon = net.dense(d, size * size * channels, "fc3", tf.sigmoid)
            rec = tf.reduce_sum(tf.square(recon - tf.reshape(img, (batch, -1))), -1)
        return tf.reduce_mean(margin + 0.0005 * rec, name="loss"), net.variables
    return training_step_graph(build, optimizer=optimizer)


# Perceiver ---------------------------------------------------------------------------------
def perceiver(cross_attends: int, self_blocks: int, latents: int, d_latent: int, heads: int,
              batch: int, inputs: int, d_input: int = 64, vocab: int = 256,
              classes: int = 100, optimizer: str = "adam"):
    """``inputs`` bytes (ids < ``vocab``) read by ``latents`` latents of width ``d_latent``;
    ``self_blocks`` latent self-attention blocks after each of the ``cross_attends``."""
    def build():
        net = Net()
        ids = tf.random.uniform((batch, inputs), maxval=vocab, dtype=tf.int32)
        data = net.embedding(ids, vocab, d_input, "embed") + net.var("pos", (inputs, d_input),
                                                                       0.02)
        z = tf.tile(net.var("latents", (1, latents, d_latent), 0.02), (batch, 1, 1))
        for c in range(cross_attends):
            with tf.name_scope(f"cross{c}"):
                z = z + attention(net, net.layer_norm(z, "ln_q"),
                                  net.layer_norm(data, "ln_kv"), 1, d_latent, "attn")
                z = z + _feed_forward(net, z, 1, "mlp")
            for s in range(self_blocks):
                with tf.name_scope(f"latent{c}_{s}"):
                    h = net.layer_norm(z, "ln")
                    z = z + attention(net, h, h, heads, d_latent, "attn")
                    z = z + _feed_forward(net, z, 1, "mlp")
        pooled = tf.reduce_mean(net.layer_norm(z, "final_ln"), axis=1)
        return class_loss(net.dense(pooled, classes, "head"), classes, (batch,)), net.variables
    return training_step_graph(build, optimizer=optimizer)


# Selective state-space model ---------------------------------------------------------------
def _scan_loop(dA, dBx, C):
    """y_t = sum_n C_t h_t, h_t = dA_t h_{t-1} + dBx_t, unrolled: one step per time step."""
    h, ys = None, []
    for t in range(int(dA.shape[1])):
        h = dBx[:, t] if h is None else dA[:, t] * h + dBx[:, t]       # (b, d, n)
        ys.append(tf.reduce_sum(h * C[:, t, None, :], -1))              # (b, d)
    return tf.stack(ys, 1)


def _scan_chunked(dtA, dBx, C, chunk: int):
    """The same recurrence in chunks: inside a chunk, h_t = sum_{s<=t} exp(L_t - L_s) dBx_s
    + exp(L_t) h_in with L the cumulative sum of delta A; chunks carry h from one to the next."""
    b, t, d, n = (int(s) for s in dBx.shape)
    causal = tf.linalg.band_part(tf.ones((chunk, chunk)), -1, 0)[None, :, :, None, None]
    h, ys = None, []
    for start in range(0, t, chunk):
        with tf.name_scope(f"chunk{start // chunk}"):
            L = tf.cumsum(dtA[:, start:start + chunk], axis=1)                 # (b, c, d, n)
            diff = L[:, :, None] - L[:, None, :]                               # (b, c, c, d, n)
            mask = causal[:, :int(L.shape[1]), :int(L.shape[1])]               # a shorter last
            decay = tf.exp(diff * mask - 1e9 * (1.0 - mask))
            hs = tf.reduce_sum(decay * dBx[:, None, start:start + chunk], 2)   # (b, c, d, n)
            if h is not None:
                hs = hs + tf.exp(L) * h[:, None]
            ys.append(tf.reduce_sum(hs * C[:, start:start + chunk, None, :], -1))
            h = hs[:, -1]
    return tf.concat(ys, 1)


def ssm_lm(layers: int, d_model: int, d_state: int, batch: int, length: int,
           vocab: int = 8000, expand: int = 2, conv: int = 4, scan: str = "loop",
           chunk: int = 16, optimizer: str = "adam"):
    """A selective diagonal SSM language model; ``scan``: "loop" or "chunked" (``chunk``)."""
    if scan not in ("loop", "chunked"):
        raise ValueError(f"scan must be 'loop' or 'chunked', not {scan!r}")

    def mixer(net, x, name):
        with tf.name_scope(name):
            d = expand * d_model
            u, gate = tf.split(net.dense(net.layer_norm(x, "ln"), 2 * d, "in_proj"), 2, -1)
            w = net.var("conv", (conv, 1, d, 1))                 # causal depthwise conv
            u = tf.nn.depthwise_conv2d(tf.pad(u, [[0, 0], [conv - 1, 0], [0, 0]])[:, :, None],
                                       w, [1, 1, 1, 1], "VALID")[:, :, 0]
            u = tf.nn.silu(u)
            delta = tf.nn.softplus(net.dense(u, d, "dt"))                       # (b, t, d)
            B, C = net.dense(u, d_state, "B"), net.dense(u, d_state, "C")       # (b, t, n)
            A = -tf.exp(net.var("A_log", (d, d_state), 0.5))                    # S4D-real
            dtA = delta[..., None] * A                                          # (b, t, d, n)
            dBx = (delta * u)[..., None] * B[:, :, None, :]
            y = (_scan_loop(tf.exp(dtA), dBx, C) if scan == "loop"
                 else _scan_chunked(dtA, dBx, C, chunk))
            y = (y + u * net.var("D", (d,), 0.0)) * tf.nn.silu(gate)
            return net.dense(y, d_model, "out_proj")

    def build():
        net = Net()
        ids = tf.random.uniform((batch, length), maxval=vocab, dtype=tf.int32)
        x = net.embedding(ids, vocab, d_model, "embed")
        for i in range(layers):
            x = x + mixer(net, x, f"layer{i}")
        logits = net.dense(net.layer_norm(x, "final_ln"), vocab, "head")
        return class_loss(logits, vocab, (batch, length)), net.variables
    return training_step_graph(build, optimizer=optimizer)


# DCGAN -------------------------------------------------------------------------------------
def dcgan(batch: int, size: int = 64, latent: int = 100, width: int = 64, channels: int = 3,
          optimizer: str = "adam", seed: int = 0):
    """One simultaneous training step of both players on ``size`` x ``size`` images
    (``size`` a power of two >= 8; ``width`` the discriminator's first and the generator's
    last feature width, doubled per stride-2 layer towards the 4 x 4 bottleneck).

    :func:`datasets.tfstep.training_step_graph` minimizes one loss over one variable list; a
    GAN step has two (the discriminator's loss over its weights, the generator's over its
    own), so this builds the same flat graph itself: TF1 graph mode, control flow v1, two
    optimizers from ``OPTIMIZERS``, the batch-norm state updates, pruned to ``step_loss``.
    Both players' gradients are computed before either applies its update (the apply ops
    wait on every gradient), so both read the weights the step started from.
    """
    if size < 8 or size & (size - 1):
        raise ValueError(f"size must be a power of two >= 8, not {size}")
    depth = int(math.log2(size)) - 2                  # stride-2 layers between 4 x 4 and size

    def generator(net, z):
        with tf.name_scope("generator"):
            c = width * 2 ** (depth - 1)
            h = tf.reshape(net.dense(z, 4 * 4 * c, "project", bias=False), (batch, 4, 4, c))
            h = tf.nn.relu(net.batch_norm(h, "bn_in"))
            for i in range(depth):
                out = channels if i == depth - 1 else c // 2
                with tf.name_scope(f"deconv{i}"):
                    s = int(h.shape[1]) * 2
                    w = net.var("kernel", (4, 4, out, c))
                    h = tf.nn.conv2d_transpose(h, w, (batch, s, s, out), 2, "SAME")
                    h = tf.tanh(h) if i == depth - 1 else tf.nn.relu(net.batch_norm(h, "bn"))
                c = out
            return h

    def discriminator(net, x):
        with tf.name_scope("discriminator"):
            h = x
            for i in range(depth):
                h = net.conv(h, width * 2 ** i, 4, f"conv{i}", 2)
                h = tf.nn.leaky_relu(h if i == 0 else net.batch_norm(h, f"bn{i}"), 0.2)
            return net.dense(tf.reshape(h, (batch, -1)), 1, "logit")

    tf.compat.v1.disable_control_flow_v2()
    g = tf.Graph()
    with g.as_default():
        tf.compat.v1.set_random_seed(seed)
        gen, dis = Net(), Net()
        fake = generator(gen, tf.random.normal((batch, latent)))
        real = tf.random.uniform((batch, size, size, channels), -1.0, 1.0)
        # One discriminator: its variables are made on the first call, reused on the second.
        d_real = discriminator(dis, real)
        d_fake = _reuse(dis, lambda: discriminator(dis, fake))
        ce = tf.nn.sigmoid_cross_entropy_with_logits
        d_loss = tf.reduce_mean(ce(labels=tf.ones_like(d_real), logits=d_real)
                                + ce(labels=tf.zeros_like(d_fake), logits=d_fake), name="d_loss")
        g_loss = tf.reduce_mean(ce(labels=tf.ones_like(d_fake), logits=d_fake), name="g_loss")
        loss = tf.add(d_loss, g_loss, name="loss")
        updates = state_updates(g.get_operations())
        d_opt, g_opt = OPTIMIZERS[optimizer](), OPTIMIZERS[optimizer]()
        d_grads = d_opt.compute_gradients(d_loss, var_list=dis.variables)
        g_grads = g_opt.compute_gradients(g_loss, var_list=gen.variables)
        with tf.control_dependencies([gr for gr, _ in d_grads + g_grads]):
            train = tf.group(d_opt.apply_gradients(d_grads, name="train_d"),
                             g_opt.apply_gradients(g_grads, name="train_g"), name="train_step")
        with tf.control_dependencies([train] + updates):
            step = tf.identity(loss, name="step_loss")
    gd = g.as_graph_def()
    return tf.compat.v1.graph_util.extract_sub_graph(gd, [step.op.name])


def _reuse(net: Net, call):
    """Runs ``call`` with ``net.var`` handing back, in creation order, the variables ``net``
    already holds instead of creating new ones: the second application of a network."""
    made, original = iter(list(net.variables)), net.var

    def var(name, shape, scale=None, cast=True):
        v = next(made)
        if tuple(v.shape) != tuple(shape):
            raise ValueError(f"reused variable {v.name} has shape {v.shape}, not {shape}")
        return v
    net.var = var
    try:
        return call()
    finally:
        net.var = original
