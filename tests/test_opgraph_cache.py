"""The OpGraph cache: a graph read back equals a fresh import, a file placed again never starts
TensorFlow, and anything that could make an entry stale (the importer, the options, the bytes)
misses."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gplace import opgraph_cache
from gplace.graph import _ARRAY_FIELDS
from gplace.importer import load_graph

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "gplace" / "examples" / "small_resnet.pb"
NMT = ROOT / "datasets" / "corpus" / "nmt_2l.pb"  # TF1 loops: frames, back edges


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv(opgraph_cache.ENV, str(folder))
    return folder


def same_graph(a, b):
    for name in _ARRAY_FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name

    def meta(g):
        m = json.loads(json.dumps(g.meta))
        for key in ("seconds", "cached"):
            m["import"].pop(key, None)
        return m
    assert meta(a) == meta(b)


@pytest.mark.parametrize("path", [EXAMPLE, NMT], ids=["example", "nmt_2l"])
def test_a_cached_graph_equals_the_fresh_import(cache, path):
    fresh = load_graph(path)
    first = opgraph_cache.load_graph(path)   # imports and writes the entry
    again = opgraph_cache.load_graph(path)   # reads it
    assert "cached" not in first.meta["import"] and "cached" in again.meta["import"]
    assert len(list(cache.glob("*.npz"))) == 1
    same_graph(fresh, first)
    same_graph(fresh, again)


def test_the_same_bytes_elsewhere_hit_under_their_own_name(cache, tmp_path):
    opgraph_cache.load_graph(EXAMPLE)
    copy = tmp_path / "mine.pb"
    shutil.copy(EXAMPLE, copy)
    graph = opgraph_cache.load_graph(copy)
    assert "cached" in graph.meta["import"]
    assert graph.meta["name"] == "mine" and graph.meta["source"] == str(copy)
    assert opgraph_cache.load_graph(copy, name="given").meta["name"] == "given"


def test_changed_bytes_options_or_importer_miss(cache, tmp_path, monkeypatch):
    opgraph_cache.load_graph(EXAMPLE)
    assert "cached" not in opgraph_cache.load_graph(EXAMPLE, unknown_dim=2).meta["import"]
    edited = tmp_path / "edited.pb"
    edited.write_bytes(EXAMPLE.read_bytes() + b"\x12\x00")  # one more (empty) node: another file
    assert opgraph_cache.entry_key(edited, edited.read_bytes(), {}) != opgraph_cache.entry_key(
        EXAMPLE, EXAMPLE.read_bytes(), {})
    monkeypatch.setattr(opgraph_cache, "importer_version", lambda: "a changed importer")
    assert "cached" not in opgraph_cache.load_graph(EXAMPLE).meta["import"]
    assert len(list(cache.glob("*.npz"))) == 3


def test_the_importer_version_follows_its_sources():
    version = opgraph_cache.importer_version()
    assert version == opgraph_cache.importer_version()
    from gplace.importer import IMPORTER_VERSION
    assert version.startswith(f"{IMPORTER_VERSION}-")


def test_a_corrupt_entry_is_imported_again_and_rewritten(cache):
    opgraph_cache.load_graph(EXAMPLE)
    (entry,) = cache.glob("*.npz")
    entry.write_bytes(b"not a zip file")
    graph = opgraph_cache.load_graph(EXAMPLE)
    assert "cached" not in graph.meta["import"]
    same_graph(graph, opgraph_cache.load_graph(EXAMPLE))


def test_off_and_unwritable_folders_import_as_usual(tmp_path, monkeypatch):
    monkeypatch.setenv(opgraph_cache.ENV, "off")
    assert opgraph_cache.cache_folder() is None
    assert "cached" not in opgraph_cache.load_graph(EXAMPLE).meta["import"]
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(opgraph_cache.ENV, str(blocker / "cache"))  # cannot be made
    assert opgraph_cache.load_graph(EXAMPLE).num_ops == 699


def test_the_platform_folder(monkeypatch, tmp_path):
    monkeypatch.delenv(opgraph_cache.ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    if sys.platform.startswith("linux"):
        assert opgraph_cache.cache_folder() == tmp_path / "gplace" / "opgraphs"


def test_bad_input_is_still_refused_before_any_cache_work(cache, tmp_path):
    from gplace.errors import GraphError
    empty = tmp_path / "empty.pb"
    empty.write_bytes(b"")
    with pytest.raises(GraphError, match="empty"):
        opgraph_cache.load_graph(empty)
    assert not cache.exists()


def test_placing_a_file_again_never_starts_tensorflow(cache, tmp_path):
    env = {**os.environ, opgraph_cache.ENV: str(cache)}
    code = ("import sys; from gplace.place import place; "
            f"r = place({str(EXAMPLE)!r}, cluster='post-4gpu', progress=False); "
            f"r.export({str(tmp_path / 'o')!r}); "
            "print('tensorflow' in sys.modules, r.step_time_s)")
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, check=True).stdout.split() for _ in range(2)]
    assert runs[0][0] == "True" and runs[1][0] == "False"
    assert runs[0][1] == runs[1][1]


def test_a_prefetch_imports_in_another_process_and_the_load_reads_its_entry(cache):
    pending = opgraph_cache.prefetch(EXAMPLE)
    assert pending is not None
    opgraph_cache.finish(pending)
    assert len(list(cache.glob("*.npz"))) == 1
    graph = opgraph_cache.load_graph(EXAMPLE)
    assert "cached" in graph.meta["import"]
    same_graph(graph, load_graph(EXAMPLE))
    assert opgraph_cache.prefetch(EXAMPLE) is None  # cached already


def test_nothing_is_prefetched_for_bad_files_or_without_a_cache(cache, tmp_path, monkeypatch):
    from gplace.errors import GraphError
    garbage = tmp_path / "garbage.pb"
    garbage.write_bytes(b"\x08\x96\x01 not a graph")
    pending = opgraph_cache.prefetch(garbage)  # it parses only there: it fails there
    with pytest.raises(GraphError) as there:
        opgraph_cache.finish(pending)
    with pytest.raises(GraphError) as here:
        opgraph_cache.load_graph(garbage)
    assert str(there.value) == str(here.value) and "garbage.pb" in str(here.value)
    assert not list(cache.glob("*.npz"))
    assert opgraph_cache.prefetch(tmp_path / "missing.pb") is None
    assert opgraph_cache.prefetch(tmp_path / "model.pt2") is None
    monkeypatch.setenv(opgraph_cache.ENV, "off")
    assert opgraph_cache.prefetch(EXAMPLE) is None


def test_the_folder_keeps_the_entries_written_last(cache):
    cache.mkdir()
    names = [f"{k:064x}.npz" for k in range(5)]  # entries are named by a sha256
    for k, name in enumerate(names):
        (cache / name).write_bytes(b"x")
        os.utime(cache / name, (1000 + k, 1000 + k))
    opgraph_cache._prune(cache, keep=3)
    assert sorted(p.name for p in cache.glob("*.npz")) == names[2:]


def test_pruning_leaves_files_the_cache_did_not_write(cache):
    """GPLACE_CACHE_DIR may name a folder of the user's own .npz files: only entries are
    pruned."""
    cache.mkdir()
    mine = [cache / f"my_experiment_{k}.npz" for k in range(3)]
    for k, path in enumerate(mine):
        path.write_bytes(b"data")
        os.utime(path, (k, k))  # older than any entry
    opgraph_cache.load_graph(EXAMPLE)
    opgraph_cache._prune(cache, keep=0)
    assert all(path.exists() for path in mine) and not list(cache.glob("[0-9a-f]" * 64 + ".npz"))


def test_a_pt2_step_is_cached_per_optimizer_and_trust(cache, tmp_path, rewrite_pt2):
    """The joint trace of a .pt2 is the slow part of placing it: the OpGraph is kept, keyed by
    the file's bytes, the optimizer and trust. A file refused without --trust-pt2 stays refused
    after an import with it."""
    example = ROOT / "gplace" / "examples" / "torch" / "cnn.pt2"
    first = opgraph_cache.load_graph(example, optimizer="adam")
    again = opgraph_cache.load_graph(example, optimizer="adam")
    assert "cached" not in first.meta["import"] and "cached" in again.meta["import"]
    same_graph(first, again)
    sgd = opgraph_cache.load_graph(example)
    assert "cached" not in sgd.meta["import"] and sgd.num_ops < first.num_ops
    pickled = rewrite_pt2(example, tmp_path / "pickled.pt2", "model_weights_config.json",
                          lambda data: data.replace(b'"use_pickle": false',
                                                    b'"use_pickle": true', 1))
    from gplace.errors import GraphError
    try:
        opgraph_cache.load_graph(pickled, trust=True)
    except GraphError:
        pass  # torch may not read the edited weights: what matters is the refusal below
    with pytest.raises(GraphError, match="stored pickled"):
        opgraph_cache.load_graph(pickled)


def test_a_signature_keys_its_own_entry_and_a_program_refuses_one_even_when_cached(
        cache, tmp_path, tf2_step, save_with_predict):
    from gplace.errors import GraphError
    path = save_with_predict(tf2_step, tmp_path / "m")
    train = opgraph_cache.load_graph(path)
    predict = opgraph_cache.load_graph(path, signature="predict")
    assert len(list(cache.glob("*.npz"))) == 2
    assert opgraph_cache.load_graph(path, signature="predict").meta["import"]["cached"]
    assert (train.meta["import"]["signature"], predict.meta["import"]["signature"]) == (
        "train", "predict")
    program = ROOT / "gplace" / "examples" / "torch" / "cnn.pt2"
    opgraph_cache.load_graph(program)
    with pytest.raises(GraphError, match="a PyTorch program has no signatures"):
        opgraph_cache.load_graph(program, signature="train")


def test_the_python_api_reads_a_file_it_imported_before_from_the_cache(cache):
    import gplace
    first = gplace.load_graph(EXAMPLE)
    again = gplace.load_graph(EXAMPLE)
    assert "cached" not in first.meta["import"] and "cached" in again.meta["import"]
    same_graph(first, again)
    with pytest.raises(TypeError, match="unexpected keyword argument 'optimiser'"):
        gplace.load_graph(EXAMPLE, optimiser="adam")  # not hidden by the cached entry


def test_an_exported_program_is_cached_by_what_torch_export_save_writes(cache):
    """Placing an in-memory program again skips tracing its step: the same program, exported
    again, hits; another optimizer or other weights' shapes miss."""
    torch = pytest.importorskip("torch")
    from gplace.examples.torch.models import SmallGPT

    def program(width=64):
        torch.manual_seed(0)
        tokens = (torch.randint(0, 256, (4, 32)), torch.randint(0, 256, (4, 32)))
        return torch.export.export(SmallGPT(d=width), tokens)

    first = opgraph_cache.load_graph(program(), optimizer="adam")
    again = opgraph_cache.load_graph(program(), optimizer="adam")
    assert "cached" not in first.meta["import"] and "cached" in again.meta["import"]
    same_graph(first, again)
    named = opgraph_cache.load_graph(program(), optimizer="adam", name="mine")
    assert (named.meta["name"], named.meta["source"]) == ("mine", "<ExportedProgram>")
    assert "cached" not in opgraph_cache.load_graph(program(), optimizer="sgd").meta["import"]
    assert "cached" not in opgraph_cache.load_graph(program(96), optimizer="adam").meta["import"]
    assert len(list(cache.glob("*.npz"))) == 3
