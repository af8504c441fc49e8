"""The corpus: every graph by name, its family, its builder and its profiling settings.

``FULL`` are the hand-written graphs, all profiled; ``GENERATED`` are the procedural
families of ``datasets.families``, built from recipe and seed, profiled as a build
budget allows. Sizes of the hand-written graphs are chosen so that the whole corpus builds and profiles on a 2-core CPU in well under an
hour: variants use 64-128 pixel images and small batches; Inception-V3 and ResNet-50 appear at
batch 32 at full resolution as the classic benchmarks (HDP, Post, Placeto, GDP) did.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from dataclasses import dataclass, field
from typing import Any

from gplace.errors import ConfigError

RECIPE_VERSION = 1  # bump when a builder changes the graph it makes for the same arguments


@dataclass(frozen=True)
class GraphSpec:
    name: str
    family: str               # architecture family: the unit of the train/val/test split
    builder: str              # "module:function" under datasets.models
    kwargs: dict[str, Any] = field(default_factory=dict)
    op_set: str = "keras3"    # "keras3" (decomposed batch norm) or "classic" (tf-keras)
    warmup_steps: int = 2
    traced_steps: int = 5     # >= 5 everywhere (gplace.profiler's rule)
    timed_steps: int = 3
    timeout_s: int = 1200     # per graph, build + profile, in its own process
    quick: bool = False       # part of the --quick corpus (tests), not of the full one
    generator: str = ""       # the datasets.families family that drew it; "" if hand-written
    seed: int | None = None   # that family's recipe seed (random.Random), None if hand-written

    @property
    def recipe_hash(self) -> str:
        """Hash of what determines the graph: builder, arguments, op set, recipe version."""
        recipe = {"builder": self.builder, "kwargs": self.kwargs, "op_set": self.op_set,
                  "version": RECIPE_VERSION}
        return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]

    def build(self):
        """The training-step GraphDef."""
        module, fn = self.builder.split(":")
        return getattr(importlib.import_module(f"datasets.models.{module}"), fn)(**self.kwargs)


def _app(name, family, arch, batch, size, classic=False, **kw):
    steps = {"warmup_steps": 1, "traced_steps": 5, "timed_steps": 1, "timeout_s": 2400} \
        if size >= 224 else {}
    return GraphSpec(name, family, "cnn:keras_app",
                     {"arch": arch, "batch": batch, "size": size, "classic": classic, **kw},
                     op_set="classic" if classic else "keras3", **steps)


def _lm(name, family, cell, layers, hidden, vocab=10000, batch=32, length=20):
    return GraphSpec(name, family, "sequence:rnn_lm", dict(
        cell=cell, layers=layers, hidden=hidden, vocab=vocab, batch=batch, length=length))


def _nmt(name, layers, hidden=256, vocab=8000, batch=32, src_len=20, tgt_len=20):
    return GraphSpec(name, "nmt", "sequence:attention_nmt", dict(
        layers=layers, hidden=hidden, vocab=vocab, batch=batch, src_len=src_len,
        tgt_len=tgt_len))


def _stack(name, family, layers, d, heads, batch=16, length=64, vocab=8000):
    return GraphSpec(name, family, "transformer:stack", dict(
        layers=layers, d_model=d, heads=heads, d_ff=4 * d, vocab=vocab, batch=batch,
        length=length, causal=family == "gpt"))


FULL = [
    # inception (test)
    _app("inception_v3_b32", "inception", "InceptionV3", 32, 299),
    _app("inception_v3_b8_96", "inception", "InceptionV3", 8, 96),
    _app("inception_v3_classic_b8_96", "inception", "InceptionV3", 8, 96, classic=True),
    # resnet
    _app("resnet50_b32", "resnet", "ResNet50", 32, 224),
    _app("resnet50_b16_96", "resnet", "ResNet50", 16, 96),
    _app("resnet101_b8_96", "resnet", "ResNet101", 8, 96),
    _app("resnet50v2_b8_96", "resnet", "ResNet50V2", 8, 96),
    _app("resnet50_classic_b16_96", "resnet", "ResNet50", 16, 96, classic=True),
    # vgg
    _app("vgg16_b8_64", "vgg", "VGG16", 8, 64),
    _app("vgg19_b4_64", "vgg", "VGG19", 4, 64),
    # mobilenet
    _app("mobilenet_v2_b16_96", "mobilenet", "MobileNetV2", 16, 96),
    _app("mobilenet_v2_a05_b32_96", "mobilenet", "MobileNetV2", 32, 96, alpha=0.5),
    _app("mobilenet_v1_b16_96", "mobilenet", "MobileNet", 16, 96),
    _app("mobilenet_v3s_b16_96", "mobilenet", "MobileNetV3Small", 16, 96),
    _app("mobilenet_v2_classic_b16_96", "mobilenet", "MobileNetV2", 16, 96, classic=True),
    # densenet
    _app("densenet121_b8_96", "densenet", "DenseNet121", 8, 96),
    _app("densenet169_b4_64", "densenet", "DenseNet169", 4, 64),
    _app("densenet121_classic_b8_96", "densenet", "DenseNet121", 8, 96, classic=True),
    # xception (validation)
    _app("xception_b8_96", "xception", "Xception", 8, 96),
    _app("xception_b4_128", "xception", "Xception", 4, 128),
    # nasnet
    _app("nasnet_mobile_b8_96", "nasnet", "NASNetMobile", 8, 96),
    _app("nasnet_mobile_b16_64", "nasnet", "NASNetMobile", 16, 64),
    # efficientnet
    _app("efficientnet_b0_b16_96", "efficientnet", "EfficientNetB0", 16, 96),
    _app("efficientnet_b1_b8_96", "efficientnet", "EfficientNetB1", 8, 96),
    # RNN language models
    _lm("lstm_lm_4l_h512", "lstm_lm", "lstm", 4, 512),
    _lm("lstm_lm_2l_h256", "lstm_lm", "lstm", 2, 256),
    _lm("lstm_lm_4l_h256_len40", "lstm_lm", "lstm", 4, 256, length=40),
    _lm("gru_lm_2l_h512", "gru_lm", "gru", 2, 512),
    _lm("gru_lm_4l_h256", "gru_lm", "gru", 4, 256),
    # attentional NMT (test)
    _nmt("nmt_2l", 2),
    _nmt("nmt_4l", 4),
    _nmt("nmt_8l", 8),
    # Transformer encoder-decoder (test)
    GraphSpec("transformer_2l_d256", "transformer", "transformer:encoder_decoder", dict(
        layers=2, d_model=256, heads=4, d_ff=1024, vocab=8000, batch=16, src_len=32,
        tgt_len=32)),
    GraphSpec("transformer_6l_d256", "transformer", "transformer:encoder_decoder", dict(
        layers=6, d_model=256, heads=8, d_ff=1024, vocab=8000, batch=8, src_len=32,
        tgt_len=32)),
    # BERT-like encoders, GPT-like decoders
    _stack("bert_2l_d128", "bert", 2, 128, 2),
    _stack("bert_4l_d256", "bert", 4, 256, 4),
    _stack("bert_6l_d256", "bert", 6, 256, 8, batch=8, length=128),
    _stack("gpt_2l_d128", "gpt", 2, 128, 2),
    _stack("gpt_4l_d256", "gpt", 4, 256, 4),
    _stack("gpt_8l_d256", "gpt", 8, 256, 8, batch=8),
    # recommenders
    GraphSpec("wide_deep_8x100k", "wide_deep", "recsys:wide_deep", dict(
        batch=512, tables=8, rows=100_000, dim=32, dense=13, hidden=[512, 256, 128])),
    GraphSpec("wide_deep_16x200k", "wide_deep", "recsys:wide_deep", dict(
        batch=1024, tables=16, rows=200_000, dim=32, dense=13, hidden=[1024, 512, 256])),
    GraphSpec("dlrm_8x100k", "dlrm", "recsys:dlrm", dict(
        batch=512, tables=8, rows=100_000, dim=32, dense=13, bottom=[256, 128],
        top=[256, 128])),
    GraphSpec("dlrm_26x200k", "dlrm", "recsys:dlrm", dict(
        batch=1024, tables=26, rows=200_000, dim=64, dense=13, bottom=[512, 256],
        top=[1024, 512, 256])),
    # MLPs
    GraphSpec("mlp_3x1024_b256", "mlp", "mlp:mlp", dict(
        batch=256, features=784, hidden=1024, layers=3)),
    GraphSpec("mlp_8x2048_b128", "mlp", "mlp:mlp", dict(
        batch=128, features=1024, hidden=2048, layers=8)),
]

QUICK = [
    GraphSpec("quick_mlp", "mlp", "mlp:mlp", dict(batch=128, features=256, hidden=512, layers=2),
              quick=True, warmup_steps=1, timed_steps=1, timeout_s=300),
    GraphSpec("quick_cnn", "cnn", "mlp:small_cnn", dict(batch=32, size=32, width=32),
              quick=True, warmup_steps=1, timed_steps=1, timeout_s=300),
    GraphSpec("quick_gpt", "gpt", "transformer:stack", dict(
        layers=1, d_model=256, heads=4, d_ff=1024, vocab=4000, batch=16, length=64, causal=True),
        quick=True, warmup_steps=1, timed_steps=1, timeout_s=300),
]



def generated() -> list[GraphSpec]:
    """Every generated graph, round-robin over families (graph 0 of each family, then 1, ...),
    so that a build cut short by ``--graphs`` or a budget still covers every family."""
    from datasets.families import FAMILIES
    specs = []
    for i in range(max(f.count for f in FAMILIES)):
        for f in FAMILIES:
            if i < f.count:
                specs.append(GraphSpec(f"{f.name}_{i:02d}", f.name, f.builder, f.recipe(i),
                                       op_set=f.op_set, timeout_s=1200, generator=f.name,
                                       seed=f.seed(i)))
    return specs


GENERATED = generated()
GRAPHS = {spec.name: spec for spec in FULL + QUICK + GENERATED}


def select(names: list[str] | None, quick: bool) -> list[GraphSpec]:
    """The specs to build: ``names`` if given, else the quick or the full corpus."""
    if not names:
        return QUICK if quick else FULL + GENERATED
    unknown = [n for n in names if n not in GRAPHS]
    if unknown:
        raise ConfigError(f"unknown graph(s) {unknown}; known: {sorted(GRAPHS)}")
    return [GRAPHS[n] for n in names]
