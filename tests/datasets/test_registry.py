"""The corpus recipe: size, required graphs, and a split that holds families out."""

import pytest

from datasets.manifest import TEST_FAMILIES, VALIDATION_FAMILIES, split_of
from datasets.registry import FULL, GENERATED, GRAPHS, QUICK, select
from gplace.errors import ConfigError


def test_corpus_is_large_and_varied_enough():
    assert len(FULL) >= 40
    assert len({s.family for s in FULL}) >= 12
    assert {s.op_set for s in FULL} == {"keras3", "classic"}
    assert len(GRAPHS) == len(FULL) + len(QUICK) + len(GENERATED)  # names are unique


def test_required_graphs_are_present():
    kw = {s.name: s.kwargs for s in FULL}
    assert kw["inception_v3_b32"] == {**kw["inception_v3_b32"], "batch": 32, "size": 299}
    assert kw["resnet50_b32"]["batch"] == 32 and kw["resnet50_b32"]["arch"] == "ResNet50"
    assert any(s.family == "lstm_lm" and s.kwargs["layers"] == 4 for s in FULL)
    assert sorted(s.kwargs["layers"] for s in FULL if s.family == "nmt") == [2, 4, 8]
    assert any(s.family == "transformer" for s in FULL)
    assert all(s.traced_steps >= 5 for s in FULL + QUICK)


def test_split_holds_families_out():
    assert not set(TEST_FAMILIES) & set(VALIDATION_FAMILIES)
    families = {s.family for s in FULL}
    assert set(TEST_FAMILIES) <= families and set(VALIDATION_FAMILIES) <= families
    assert len(TEST_FAMILIES) >= 3 and len(VALIDATION_FAMILIES) >= 2
    train = {s.family for s in FULL if split_of(s.family) == "train"}
    assert not train & (set(TEST_FAMILIES) | set(VALIDATION_FAMILIES))


def test_unknown_names_are_reported_with_the_known_ones():
    with pytest.raises(ConfigError, match="no_such_graph.*known"):
        select(["no_such_graph"], quick=False)
