"""The one command, end to end on the quick corpus: graphs, profiles, manifest, importer."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gplace.profile import CostProfile

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def quick_corpus(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("corpus")
    proc = subprocess.run([sys.executable, "-m", "datasets.build", "--quick", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "[3/3]" in proc.stdout
    return out


def test_every_quick_graph_has_a_graph_and_a_profile(quick_corpus):
    from datasets.registry import QUICK
    for spec in QUICK:
        assert (quick_corpus / f"{spec.name}.pb").stat().st_size > 0
        assert (quick_corpus / f"{spec.name}.profile.json.gz").exists()


def test_profiles_explain_at_least_90_percent_of_the_step(quick_corpus):
    for path in sorted(quick_corpus.glob("*.profile.json.gz")):
        prof = CostProfile.load(path)
        # Per step: that step's op times against its span. On a loaded machine (CI shares
        # the cores with nothing, a developer's machine may not) the ratio of medians,
        # prof.coverage, drops below it: see gplace/profiler.py.
        assert prof.meta["step_coverage"] >= 0.9, (path.name, prof.meta)
        assert 0.0 < prof.coverage <= 1.05, (path.name, prof.coverage)
        assert prof.meta["op_coverage"] >= 0.9, (path.name, prof.meta["op_coverage"])
        assert prof.meta["traced_steps"] >= 5


def test_manifest_lists_every_graph_with_its_split(quick_corpus):
    rows = yaml.safe_load((quick_corpus / "manifest.yaml").read_text())["graphs"]
    assert {r["name"] for r in rows} == {"quick_mlp", "quick_cnn", "quick_gpt"}
    for r in rows:
        assert r["split"] in ("train", "validation", "test") and r["ops"] > 0
        assert r["step_time_s"] > 0 and r["param_bytes"] > 0


def test_a_second_run_skips_what_is_complete(quick_corpus):
    proc = subprocess.run([sys.executable, "-m", "datasets.build", "--only", "quick_mlp",
                           "--out", str(quick_corpus)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and "skipped" in proc.stdout, proc.stdout + proc.stderr


def test_graphs_are_deterministic(tmp_path):
    code = ("import sys; from pathlib import Path; from datasets.registry import GRAPHS; "
            "from datasets.worker import build_graph; "
            "build_graph(GRAPHS['quick_cnn'], Path(sys.argv[1]))")
    for name in ("a.pb", "b.pb"):
        subprocess.run([sys.executable, "-c", code, str(tmp_path / name)], cwd=ROOT, check=True,
                       timeout=120, env={"PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3",
                                         **_path_env()})
    assert (tmp_path / "a.pb").read_bytes() == (tmp_path / "b.pb").read_bytes()


def _path_env() -> dict:
    import os
    return {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}


def test_graphs_import_with_gplace(quick_corpus):
    import gplace
    try:
        from gplace import importer  # noqa: F401
    except ImportError as e:
        pytest.skip(f"gplace importer not available yet ({e})")
    for path in sorted(quick_corpus.glob("*.pb")):
        graph = gplace.load_graph(str(path))
        prof = CostProfile.load(path.with_name(path.name.replace(".pb", ".profile.json.gz")))
        _, found = prof.times_for(graph.names)
        assert graph.num_ops > 0 and found.mean() >= 0.9, (path.name, found.mean())
        assert graph.summary()["flops"] > 0
