"""The corpus: its size and split in the manifest, held-out families, recipes,
the committed graphs are the bytes the manifest names and rebuild to them from their recipe, and
graphs import and validate (a sample by default, all with -m slow)."""

import hashlib
import json
import os
import random
import subprocess
import sys
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


def test_every_listed_graph_is_here_with_the_bytes_the_manifest_names():
    missing = [r["graph"] for r in ROWS if not (CORPUS / r["graph"]).exists()]
    assert not missing, f"{len(missing)} missing, e.g. {missing[:3]}: python -m datasets.build"
    for r in ROWS:
        digest = hashlib.sha256((CORPUS / r["graph"]).read_bytes()).hexdigest()
        assert digest == r["graph_sha256"], r["name"]


def test_test_and_validation_families_are_the_hand_written_graphs_unchanged():
    held = {s.name: s for s in FULL if s.family in TEST_FAMILIES + VALIDATION_FAMILIES}
    rows = {r["name"]: r for r in ROWS if r["family"] in TEST_FAMILIES + VALIDATION_FAMILIES}
    assert set(rows) == set(held)
    for name, r in rows.items():
        assert r["generator"] is None and r["costs"] == "measured", name
        assert r["recipe_hash"] == held[name].recipe_hash and r["split"] != "train", name


def _rebuild(rows, tmp_path, timeout):
    """Rebuilds ``rows`` from their recipe into tmp_path, in processes chunked as the build
    chunks them (datasets.generate._chunks); their sha256s."""
    from datasets.generate import _chunks
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
    for names in _chunks([r["name"] for r in rows], 8):
        proc = subprocess.run([sys.executable, "-m", "datasets.genworker", str(tmp_path),
                               *names], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=timeout)
        results = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
        errors = [r for r in results if "error" in r]
        assert proc.returncode == 0 and len(results) == len(names) and not errors, \
            (errors, proc.stderr[-1000:])
    return {r["name"]: hashlib.sha256((tmp_path / r["graph"]).read_bytes()).hexdigest()
            for r in rows}


def test_a_generated_graph_rebuilds_to_the_bytes_in_the_manifest(tmp_path):
    row = min((r for r in ROWS if r["generator"]), key=lambda r: r["ops"])
    assert _rebuild([row], tmp_path, 300) == {row["name"]: row["graph_sha256"]}


@pytest.mark.slow
def test_one_graph_per_family_rebuilds_to_the_bytes_in_the_manifest(tmp_path):
    smallest = {}
    for r in sorted(ROWS, key=lambda r: r["ops"]):
        smallest.setdefault(r["family"], r)
    rows = list(smallest.values()) + [r for r in ROWS if r["name"] in ("convnext_01", "regnet_02")]
    assert _rebuild(rows, tmp_path, 600) == {r["name"]: r["graph_sha256"] for r in rows}
