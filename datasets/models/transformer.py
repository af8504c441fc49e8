"""Attention models: Transformer encoder-decoder (Vaswani et al. 2017), BERT-like encoders
(masked-LM head) and GPT-like causal decoders, built from Keras 3 layers."""

from __future__ import annotations

from datasets.models.sequence import token_loss, tokens
from datasets.tfstep import training_step_graph


class Block:
    """Pre-norm residual block: self-attention, optional cross-attention, feed-forward."""

    def __init__(self, d_model: int, heads: int, d_ff: int, cross: bool = False):
        import keras
        L = keras.layers
        self.norms = [L.LayerNormalization() for _ in range(3 if cross else 2)]
        self.self_attn = L.MultiHeadAttention(heads, d_model // heads)
        self.cross_attn = L.MultiHeadAttention(heads, d_model // heads) if cross else None
        self.ff = [L.Dense(d_ff, activation="gelu"), L.Dense(d_model)]

    def __call__(self, x, memory=None, causal: bool = False):
        h = self.norms[0](x)
        x = x + self.self_attn(h, h, use_causal_mask=causal, training=True)
        if self.cross_attn is not None:
            h = self.norms[1](x)
            x = x + self.cross_attn(h, memory, training=True)
        h = self.norms[-1](x)
        return x + self.ff[1](self.ff[0](h))

    @property
    def layers(self) -> list:
        return [*self.norms, self.self_attn, *self.ff] + ([self.cross_attn] if self.cross_attn
                                                          else [])


def _embed(vocab: int, length: int, d_model: int):
    import keras
    return keras.layers.Embedding(vocab, d_model), keras.layers.Embedding(length, d_model)


def _apply_embed(emb, ids, length: int):
    import tensorflow as tf
    tok, pos = emb
    return tok(ids) + pos(tf.range(length))[None]


def _variables(layers) -> list:
    return [v for layer in layers for v in layer.trainable_variables]


def stack(layers: int, d_model: int, heads: int, d_ff: int, vocab: int, batch: int,
          length: int, causal: bool, optimizer: str = "adam"):
    """One stack with a token head: BERT-like (``causal=False``) or GPT-like (``causal=True``)."""
    import keras

    def build():
        x, y = tokens(batch, length, vocab), tokens(batch, length, vocab)
        emb, blocks = _embed(vocab, length, d_model), [Block(d_model, heads, d_ff)
                                                       for _ in range(layers)]
        final, head = keras.layers.LayerNormalization(), keras.layers.Dense(vocab)
        h = _apply_embed(emb, x, length)
        for block in blocks:
            h = block(h, causal=causal)
        loss = token_loss(head(final(h)), y)
        return loss, _variables([*emb, final, head, *(l for b in blocks for l in b.layers)])
    return training_step_graph(build, optimizer=optimizer)


def encoder_decoder(layers: int, d_model: int, heads: int, d_ff: int, vocab: int, batch: int,
                    src_len: int, tgt_len: int, optimizer: str = "adam"):
    """The Transformer of Vaswani et al.: ``layers`` encoder and ``layers`` decoder blocks."""
    import keras

    def build():
        src, tgt = tokens(batch, src_len, vocab), tokens(batch, tgt_len, vocab)
        y = tokens(batch, tgt_len, vocab)
        src_emb, tgt_emb = _embed(vocab, src_len, d_model), _embed(vocab, tgt_len, d_model)
        enc = [Block(d_model, heads, d_ff) for _ in range(layers)]
        dec = [Block(d_model, heads, d_ff, cross=True) for _ in range(layers)]
        enc_norm, dec_norm = keras.layers.LayerNormalization(), keras.layers.LayerNormalization()
        head = keras.layers.Dense(vocab)
        m = _apply_embed(src_emb, src, src_len)
        for block in enc:
            m = block(m)
        m, h = enc_norm(m), _apply_embed(tgt_emb, tgt, tgt_len)
        for block in dec:
            h = block(h, memory=m, causal=True)
        loss = token_loss(head(dec_norm(h)), y)
        parts = [*src_emb, *tgt_emb, enc_norm, dec_norm, head,
                 *(l for b in enc + dec for l in b.layers)]
        return loss, _variables(parts)
    return training_step_graph(build, optimizer=optimizer)
