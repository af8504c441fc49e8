"""The procedural families: per family a builder and a seeded sampler of its knobs.

Graph ``i`` of family ``f`` draws its recipe from ``random.Random(seed)`` with
``seed = crc32(f"{f}:{i}")``: the same recipe on every machine, so generated graphs can be
rebuilt from (builder, kwargs) instead of committed. Every recipe varies what matters for
placement: batch, input size, width, depth, optimizer (different slot memory) and, where TF
runs it on CPU, bfloat16 compute. The last graph of most families is drawn from a larger range
("xl"): tens of thousands of ops or more memory than a 12 GB K80 holds.

No family here is, or reuses the builder of, a test family (inception, nmt, transformer) or a
validation family (xception, gru_lm, wide_deep): :func:`check_holdout` enforces it.
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass
from typing import Callable

OPTIMIZERS = ("sgd", "momentum", "adam", "rmsprop", "adagrad")
Sampler = Callable[[random.Random, bool], dict]


@dataclass(frozen=True)
class Family:
    name: str
    builder: str             # "module:function" under datasets.models
    sample: Sampler          # (rng, xl) -> builder kwargs, without the optimizer
    count: int = 16
    op_set: str = "tf"       # "tf" (plain TF ops), "keras3" or "classic" (keras.applications)

    def seed(self, i: int) -> int:
        return zlib.crc32(f"{self.name}:{i}".encode())

    def recipe(self, i: int) -> dict:
        rng = random.Random(self.seed(i))
        kwargs = self.sample(rng, i == self.count - 1)
        kwargs.setdefault("optimizer", rng.choice(OPTIMIZERS))
        return kwargs


def log_uniform(rng: random.Random, lo: float, hi: float) -> int:
    return int(round(lo * (hi / lo) ** rng.random()))


def _randwire_conv(rng, xl):
    return dict(graph=rng.choice(("er", "ba", "ws")), nodes=rng.choice((32, 48) if xl else
                (6, 8, 10, 12, 16, 20)), stages=3 if xl else rng.choice((1, 2, 3)),
                width=rng.choice((16, 24, 32)), batch=rng.choice((4, 8, 16)),
                size=rng.choice((32, 64)), seed=rng.randrange(2 ** 31),
                p=rng.choice((0.2, 0.3, 0.5)), k=rng.choice((2, 4, 6)), m=rng.choice((1, 2, 3)))


def _randwire_mlp(rng, xl):
    return dict(graph=rng.choice(("er", "ba", "ws")), nodes=rng.choice((64, 96) if xl else
                (6, 8, 12, 16, 24, 32)), stages=3 if xl else rng.choice((1, 2, 3)),
                width=rng.choice((128, 256, 512, 1024)), batch=rng.choice((32, 64, 128, 256)),
                features=rng.choice((64, 256, 784)), seed=rng.randrange(2 ** 31),
                p=rng.choice((0.1, 0.2, 0.4)), k=rng.choice((2, 4, 6)), m=rng.choice((1, 2, 3)))


def _nas(rng, xl):
    return dict(cells=20 if xl else rng.choice((3, 4, 5, 6, 8)), channels=rng.choice((8, 12, 16)),
                steps=rng.choice((2, 3, 4, 5)), batch=rng.choice((4, 8, 16)),
                size=rng.choice((32, 48)), seed=rng.randrange(2 ** 31))


def _multibranch(rng, xl):
    kind = rng.choice(("conv", "dense"))
    return dict(kind=kind, modules=24 if xl else rng.choice((2, 3, 4, 6, 8)),
                max_branches=rng.choice((2, 4, 6, 8)), max_depth=rng.choice((1, 2, 3, 4)),
                width=rng.choice((16, 32, 48)) if kind == "conv" else rng.choice((128, 256, 512)),
                batch=rng.choice((4, 8, 16)) if kind == "conv" else rng.choice((64, 128, 256)),
                size=rng.choice((32, 64)) if kind == "conv" else rng.choice((128, 512)),
                seed=rng.randrange(2 ** 31))


def _moe(rng, xl):
    return dict(layers=12 if xl else rng.choice((1, 2, 3, 4, 6)),
                experts=64 if xl else rng.choice((2, 4, 8, 16, 32)), top_k=rng.choice((1, 2)),
                d_model=rng.choice((64, 128, 256, 512)), d_ff=rng.choice((128, 256, 512, 1024)),
                batch=rng.choice((64, 128, 256)), features=rng.choice((64, 256)),
                precision=rng.choice(("float32", "float32", "bfloat16")))


def _unet(rng, xl):
    levels = 5 if xl else rng.choice((2, 3, 4))
    return dict(levels=levels, width=rng.choice((8, 16, 32)), convs=rng.choice((1, 2, 3)),
                batch=rng.choice((2, 4, 8)), size=rng.choice((64, 128)) if not xl else 256,
                up_mode=rng.choice(("transpose", "resize")))


def _wavenet(rng, xl):
    return dict(stacks=6 if xl else rng.choice((1, 2, 3)),
                layers_per_stack=rng.choice((4, 6, 8, 10)), residual=rng.choice((16, 32, 64)),
                skip=rng.choice((32, 64, 128)), batch=rng.choice((2, 4, 8)),
                length=rng.choice((256, 512, 1024, 2048)), kernel=rng.choice((2, 3)))


def _resnet_gen(rng, xl):
    return dict(stages=5 if xl else rng.choice((2, 3, 4)), max_blocks=12 if xl else
                rng.choice((1, 2, 3, 4, 6)), width=rng.choice((16, 32, 64)),
                bottleneck=rng.random() < 0.5, se=rng.random() < 0.4,
                batch=rng.choice((4, 8, 16)), size=rng.choice((32, 64, 96)),
                seed=rng.randrange(2 ** 31))


def _rnn(loop: bool):
    def sample(rng, xl):
        length = rng.choice((10, 20, 40, 80)) if loop else (
            120 if xl else rng.choice((5, 10, 15, 20, 30)))
        return dict(cell=rng.choice(("lstm", "rnn", "mgu", "nas")),
                    layers=4 if xl else rng.choice((1, 2, 3)),
                    hidden=rng.choice((64, 128, 256, 512)), vocab=rng.choice((1000, 5000, 20000)),
                    batch=rng.choice((8, 16, 32, 64)), length=length, loop=loop,
                    seed=rng.randrange(2 ** 31), task=rng.choice(("lm", "classify")))
    return sample


def _attn(rng, xl):
    heads = rng.choice((1, 2, 4, 8, 16))
    return dict(layers=48 if xl else rng.choice((1, 2, 3, 4, 6, 8, 12)),
                d_model=heads * rng.choice((16, 32, 64)), heads=heads,
                ff_mult=rng.choice((2, 4)), batch=rng.choice((4, 8, 16, 32)) if not xl else 64,
                length=rng.choice((32, 64, 128, 256)) if not xl else 1024,
                vocab=rng.choice((1000, 8000, 32000)), causal=rng.random() < 0.5,
                pre_norm=rng.random() < 0.7, activation=rng.choice(("gelu", "relu")),
                precision=rng.choice(("float32", "float32", "bfloat16")))


def _gnn(rng, xl):
    nodes = 200_000 if xl else log_uniform(rng, 500, 50_000)
    return dict(kind=rng.choice(("gcn", "gin", "gat", "mpnn")),
                layers=16 if xl else rng.choice((2, 3, 4, 6, 8)),
                hidden=rng.choice((32, 64, 128, 256)), nodes=nodes,
                edges=nodes * rng.choice((2, 4, 8, 16)), features=rng.choice((16, 64, 128)),
                heads=rng.choice((1, 2, 4)))


def _dcn(rng, xl):
    tables = 64 if xl else rng.choice((4, 8, 13, 26))
    hi = 50_000_000 if xl else 2_000_000
    return dict(rows=[log_uniform(rng, 1000, hi) for _ in range(tables)],
                dims=[rng.choice((8, 16, 32, 64)) for _ in range(tables)],
                cross_layers=rng.choice((1, 2, 3, 4)),
                deep=[rng.choice((256, 512, 1024)) for _ in range(rng.choice((2, 3, 4)))],
                dense=13, batch=rng.choice((256, 512, 1024, 2048)))


def _two_tower(rng, xl):
    hi = 40_000_000 if xl else 2_000_000
    return dict(user_rows=[log_uniform(rng, 1000, hi) for _ in range(rng.choice((2, 4, 8)))],
                item_rows=[log_uniform(rng, 1000, hi) for _ in range(rng.choice((2, 4, 8)))],
                dim=rng.choice((16, 32, 64, 128)),
                tower=[rng.choice((128, 256, 512)) for _ in range(rng.choice((1, 2, 3)))],
                batch=rng.choice((256, 512, 1024)))


def _mixer(rng, xl):
    return dict(blocks=32 if xl else rng.choice((2, 4, 6, 8, 12)), patch=rng.choice((4, 8)),
                d_model=rng.choice((64, 128, 256, 512)), token_mlp=rng.choice((64, 128, 256)),
                channel_mlp=rng.choice((256, 512, 1024)), batch=rng.choice((8, 16, 32)),
                size=rng.choice((32, 64)), precision=rng.choice(("float32", "float32", "bfloat16")))


def _vae(rng, xl):
    kind = rng.choice(("conv", "mlp"))
    return dict(kind=kind, depth=rng.choice((2, 3, 4)),
                width=rng.choice((16, 32, 64)) if kind == "conv" else rng.choice((256, 512, 1024)),
                latent=rng.choice((16, 32, 128)), batch=rng.choice((16, 32, 64)),
                size=rng.choice((32, 64)) if kind == "conv" else rng.choice((784, 3072)))


def _app(archs: tuple[str, ...], sizes: tuple[int, ...], classic: bool = False):
    def sample(rng, xl):
        kwargs = dict(arch=rng.choice(archs), batch=rng.choice((4, 8, 16)),
                      size=rng.choice(sizes), classes=rng.choice((100, 1000)))
        return {**kwargs, "classic": True} if classic else kwargs
    return sample


FAMILIES = [
    Family("randwire_conv", "randwire:randwire_conv", _randwire_conv),
    Family("randwire_mlp", "randwire:randwire_mlp", _randwire_mlp),
    Family("nas_cell", "nas:nas_cell_net", _nas),
    Family("multibranch", "branches:multibranch", _multibranch),
    Family("moe", "branches:moe", _moe),
    Family("unet", "unet:unet", _unet),
    Family("wavenet", "wavenet:wavenet", _wavenet),
    Family("resnet_gen", "resgen:resnet_gen", _resnet_gen),
    Family("rnn_unrolled", "recurrent:rnn_model", _rnn(loop=False)),
    Family("rnn_loop", "recurrent:rnn_model", _rnn(loop=True)),
    Family("attn_stack", "attention:attn_stack", _attn),
    Family("gnn", "gnn:gnn", _gnn),
    Family("dcn", "recommend:dcn", _dcn),
    Family("two_tower", "recommend:two_tower", _two_tower),
    Family("mlp_mixer", "mixer:mlp_mixer", _mixer),
    Family("vae", "vae:vae", _vae),
    Family("convnext", "cnn:keras_app", _app(("ConvNeXtTiny",), (32, 64)), 5, "keras3"),
    # Keras 3 has no RegNet (keras.applications lacks it); tf_keras has it: classic op set.
    Family("regnet", "cnn:keras_app", _app(("RegNetX002", "RegNetX004", "RegNetY002",
                                            "RegNetY004", "RegNetX008"), (64, 96), classic=True),
           5, "classic"),
    Family("efficientnet_v2", "cnn:keras_app", _app(("EfficientNetV2B0", "EfficientNetV2B1"),
                                                    (64, 96)), 5, "keras3"),
]

# keras.applications held out with their split's families: near neighbours of test/validation.
HELD_OUT_ARCHS = ("InceptionV3", "InceptionResNetV2", "Xception")


def check_holdout(families: list[Family], held_out_builders: set[str]) -> None:
    """Raises if a family reuses a held-out builder or draws a held-out architecture."""
    from datasets.manifest import split_of
    for f in families:
        if split_of(f.name) != "train":
            raise ValueError(f"generated family {f.name} is a {split_of(f.name)} family")
        if f.builder in held_out_builders and f.builder != "cnn:keras_app":
            raise ValueError(f"{f.name} reuses the held-out builder {f.builder}")
        archs = {f.recipe(i).get("arch") for i in range(f.count)}
        if archs & set(HELD_OUT_ARCHS):
            raise ValueError(f"{f.name} draws held-out architectures {archs & set(HELD_OUT_ARCHS)}")
