"""The grown corpus (issue 15): its size and split in the manifest, held-out families, recipes,
and graphs that import and validate (a sample by default, all with -m slow)."""

import random
from pathlib import Path

import pytest

from datasets import manifest
from datasets.families import FAMILIES, check_holdout
from datasets.manifest import TEST_FAMILIES, VALIDATION_FAMILIES
from datasets.registry import FULL, GENERATED, GRAPHS

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "datasets" / "manifest.yaml"
CORPUS = ROOT / "datasets" / "corpus"
ROWS = list(manifest.load(MANIFEST).values())


def test_corpus_recipe_has_300_graphs_from_30_families_24_in_train():
    specs = FULL + GENERATED
    train = {s.family for s in specs if manifest.split_of(s.family) == "train"}
    assert len(specs) >= 300 and len({s.family for s in specs}) >= 30 and len(train) >= 24


def test_manifest_lists_300_graphs_from_30_families_24_in_train():
    if len(ROWS) < len(FULL) + len(GENERATED):
        pytest.skip(f"manifest lists {len(ROWS)} of {len(FULL) + len(GENERATED)} graphs: "
                    "python -m datasets.build builds the rest")
    families = {r["family"] for r in ROWS}
    train = {r["family"] for r in ROWS if r["split"] == "train"}
    assert len(ROWS) >= 300 and len(families) >= 30 and len(train) >= 24, \
        (len(ROWS), len(families), len(train))


def test_no_family_in_two_splits_and_held_out_families_are_the_hand_written_graphs():
    split = {}
    for r in ROWS:
        assert split.setdefault(r["family"], r["split"]) == r["split"], r["name"]
    held_out = {r["name"] for r in ROWS if r["split"] != "train"}
    assert held_out == {s.name for s in FULL
                        if s.family in TEST_FAMILIES + VALIDATION_FAMILIES}


def test_generated_families_hold_out_test_and_validation_builders():
    held = {s.builder for s in FULL if s.family in TEST_FAMILIES + VALIDATION_FAMILIES}
    check_holdout(FAMILIES, held)          # raises naming the family that breaks the split
    assert len(GENERATED) == sum(f.count for f in FAMILIES)


def test_rows_say_how_costs_are_known_and_match_their_recipe():
    for r in ROWS:
        assert r["costs"] in ("measured", "estimated"), r["name"]
        assert (r["costs"] == "measured") == bool(r["profile"]), r["name"]
        assert r["recipe_hash"] == GRAPHS[r["name"]].recipe_hash, r["name"]
        assert r["ops"] > 0 and r["depth"] > 0 and 0 <= r["param_share"] <= 1, r["name"]


def test_recipes_are_seeded():
    again = {f"{f.name}_{i:02d}": f.recipe(i) for f in FAMILIES for i in range(f.count)}
    assert again == {s.name: s.kwargs for s in GENERATED}


def _imports(row):
    import gplace
    path = CORPUS / row["graph"]
    if not path.exists():
        pytest.skip(f"{path.name} not built here: python -m datasets.build")
    graph = gplace.load_graph(str(path)).validate()
    assert graph.num_ops == row["ops"], row["name"]


@pytest.mark.parametrize("row", random.Random(0).sample(
    [r for r in ROWS if r["ops"] < 4000], 6), ids=lambda r: r["name"])
def test_sampled_graphs_import_and_validate(row):
    _imports(row)


@pytest.mark.slow
@pytest.mark.parametrize("row", ROWS, ids=lambda r: r["name"])
def test_every_graph_imports_and_validates(row):
    _imports(row)
