"""Recurrent sequence models: language models and attentional encoder-decoder NMT.

Keras 3 ``LSTM``/``GRU`` on CPU run ``keras.ops.rnn``, a ``tf.while_loop``; with control flow v1
(``training_step_graph(v1_loops=True)``) that is the Enter/Merge/Switch/NextIteration loop of the
TF1 graphs HDP and Post placed (RNNLM, NMT). Inputs are random token ids.
"""

from __future__ import annotations

import tensorflow as tf

from datasets.tfstep import training_step_graph


def tokens(batch: int, length: int, vocab: int):
    return tf.random.uniform((batch, length), maxval=vocab, dtype=tf.int32)


def token_loss(logits, labels):
    """Mean next-token cross-entropy, named ``loss``."""
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=tf.cast(logits, tf.float32)), name="loss")


def _variables(layers) -> list:
    return [v for layer in layers for v in layer.trainable_variables]


def rnn_lm(cell: str, layers: int, hidden: int, vocab: int, batch: int, length: int,
           optimizer: str = "momentum"):
    """Stacked LSTM or GRU language model (Zaremba et al. 2014 shape: embed, N layers, softmax)."""
    import keras
    rnn = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU}[cell]

    def build():
        x, y = tokens(batch, length, vocab), tokens(batch, length, vocab)
        net = [keras.layers.Embedding(vocab, hidden)]
        net += [rnn(hidden, return_sequences=True) for _ in range(layers)]
        net += [keras.layers.Dense(vocab)]
        h = x
        for layer in net:
            h = layer(h, training=True)
        return token_loss(h, y), _variables(net)
    return training_step_graph(build, optimizer=optimizer)


def attention_nmt(layers: int, hidden: int, vocab: int, batch: int, src_len: int,
                  tgt_len: int, optimizer: str = "sgd"):
    """LSTM encoder-decoder with Luong (dot) attention over the encoder states.

    ``layers`` LSTM layers in the encoder and in the decoder (GNMT/HDP's NMT shapes: 2, 4, 8);
    the decoder is teacher-forced and the attention context is combined with the top decoder
    layer before the softmax (Luong et al. 2015), not fed back as an input.
    """
    import keras
    L = keras.layers

    def build():
        src, tgt_in = tokens(batch, src_len, vocab), tokens(batch, tgt_len, vocab)
        tgt_out = tokens(batch, tgt_len, vocab)
        src_emb, tgt_emb = L.Embedding(vocab, hidden), L.Embedding(vocab, hidden)
        enc = [L.LSTM(hidden, return_sequences=True, return_state=True) for _ in range(layers)]
        dec = [L.LSTM(hidden, return_sequences=True) for _ in range(layers)]
        attn, combine, out = L.Attention(), L.Dense(hidden, activation="tanh"), L.Dense(vocab)
        h, states = src_emb(src), []
        for layer in enc:
            h, *state = layer(h, training=True)
            states.append(state)
        memory, d = h, tgt_emb(tgt_in)
        for layer, state in zip(dec, states):
            d = layer(d, initial_state=state, training=True)
        context = attn([d, memory])
        logits = out(combine(tf.concat([d, context], axis=-1)))
        parts = [src_emb, tgt_emb, *enc, *dec, attn, combine, out]
        return token_loss(logits, tgt_out), _variables(parts)
    return training_step_graph(build, optimizer=optimizer)
