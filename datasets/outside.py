"""Graphs of architectures outside the corpus: how the placer does on what it has never seen.

Five architectures (``datasets/models/outside.py``), two graphs each, varying size, batch and
optimizer: a Conformer speech encoder, a capsule network with dynamic routing, a Perceiver, a
selective state-space language model (unrolled and chunked scans) and a DCGAN step that trains
both players. None of their families or builders is a family or builder of the corpus
(``datasets/manifest.yaml``, ``datasets/registry.py``, ``datasets/families.py``):
:func:`check_outside` enforces it. They are not part of ``GRAPHS`` and are never profiled by
``python -m datasets.build``; build one with ``spec.build()``.
"""

from __future__ import annotations

from pathlib import Path

from datasets.registry import GraphSpec

MANIFEST = Path(__file__).resolve().parent / "manifest.yaml"


def _spec(name: str, family: str, builder: str, **kwargs) -> GraphSpec:
    return GraphSpec(name, family, f"outside:{builder}", kwargs)


OUTSIDE = [
    # Conformer (Gulati et al. 2020): 4x subsampled log-mel frames, per-frame softmax
    _spec("conformer_2b_d144_b8_f200", "conformer", "conformer", blocks=2, d_model=144,
          heads=4, kernel=31, batch=8, frames=200, optimizer="adam"),
    _spec("conformer_4b_d256_b4_f400", "conformer", "conformer", blocks=4, d_model=256,
          heads=4, kernel=31, batch=4, frames=400, optimizer="momentum"),
    # CapsNet (Sabour et al. 2017): 3 routing iterations, margin loss + reconstruction
    _spec("capsnet_b32_28", "capsnet", "capsnet", batch=32, size=28, channels=1,
          optimizer="adam"),
    _spec("capsnet_b16_32_rgb", "capsnet", "capsnet", batch=16, size=32, channels=3,
          conv_filters=128, decoder=[1024, 2048], optimizer="rmsprop"),
    # Perceiver (Jaegle et al. 2021): latents cross-attend to a byte array, no weight sharing
    _spec("perceiver_2x2_l128_in2048_b8", "perceiver", "perceiver", cross_attends=2,
          self_blocks=2, latents=128, d_latent=256, heads=8, batch=8, inputs=2048,
          optimizer="adam"),
    _spec("perceiver_2x4_l256_in4096_b4", "perceiver", "perceiver", cross_attends=2,
          self_blocks=4, latents=256, d_latent=384, heads=8, batch=4, inputs=4096,
          d_input=128, optimizer="adagrad"),
    # selective diagonal SSM language model (S4D / Mamba style)
    _spec("ssm_loop_2l_d128_len32_b8", "ssm", "ssm_lm", layers=2, d_model=128, d_state=16,
          batch=8, length=32, scan="loop", optimizer="adam"),
    _spec("ssm_chunked_3l_d128_len128_b8", "ssm", "ssm_lm", layers=3, d_model=128,
          d_state=16, batch=8, length=128, scan="chunked", chunk=32, optimizer="sgd"),
    # DCGAN (Radford et al. 2016): both players' losses and updates in one step
    _spec("dcgan_b16_32", "gan", "dcgan", batch=16, size=32, width=64, optimizer="adam"),
    _spec("dcgan_b64_64", "gan", "dcgan", batch=64, size=64, width=64, optimizer="rmsprop"),
]


def corpus_families_and_builders() -> tuple[set[str], set[str]]:
    """Every family and builder of the corpus: the manifest's rows, the registry's hand-written,
    quick and generated specs, and the procedural families."""
    import yaml

    from datasets.families import FAMILIES
    from datasets.registry import GRAPHS
    families = {s.family for s in GRAPHS.values()} | {f.name for f in FAMILIES}
    builders = {s.builder for s in GRAPHS.values()} | {f.builder for f in FAMILIES}
    for row in yaml.safe_load(MANIFEST.read_text())["graphs"]:
        families.add(row["family"])
        if row.get("builder"):
            builders.add(row["builder"])
    return families, builders


def check_outside(specs: list[GraphSpec] | None = None) -> None:
    """Raises ValueError if a spec's family or builder is a family or builder of the corpus,
    if its builder is not in ``datasets.models.outside``, or if its name is taken."""
    from datasets.registry import GRAPHS
    specs = OUTSIDE if specs is None else specs
    families, builders = corpus_families_and_builders()
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate outside graph names in {names}")
    for s in specs:
        if s.family in families:
            raise ValueError(f"{s.name}: family {s.family!r} is a corpus family")
        if s.builder in builders or s.builder.split(":")[-1] in families:
            raise ValueError(f"{s.name}: builder {s.builder!r} is a corpus builder or family")
        if not s.builder.startswith("outside:"):
            raise ValueError(f"{s.name}: builder {s.builder!r} is not in datasets.models.outside")
        if s.name in GRAPHS:
            raise ValueError(f"{s.name}: a corpus graph has this name")
