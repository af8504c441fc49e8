"""The expert cache packed into one archive and written back byte for byte (the cache is not
in git; the default corpus ships its archive, pretrain/corpus139/experts.npz)."""

import numpy as np
from gplace.errors import ConfigError
import pytest

from gplace.gnn.corpus import list_corpus
from gplace.gnn.experts import restore_archive, save_archive


def _expert(folder, graph, budget, tag, devices):
    name = f"{graph}-0123456789abcdef-v1-b{budget}-s0-{tag}.npy"
    np.save(folder / name, np.asarray(devices, np.int64))
    return folder / name


@pytest.fixture
def corpus(tmp_path):
    for g in ("resnet", "resnet_v2"):
        (tmp_path / f"{g}.pb").write_bytes(b"\n\x00")
    folder = tmp_path / ".gplace-cache" / "experts"
    folder.mkdir(parents=True)
    files = [_expert(folder, "resnet", 400, "64eb07965543", [0, 3, 2, 8, 1]),
             _expert(folder, "resnet", 300, "aaaaaaaaaaaa", [1, 1, 1, 1, 0]),
             _expert(folder, "resnet_v2", 400, "64eb07965543", np.arange(300) % 9)]
    (folder / "notes.txt").write_text("not an expert")
    return tmp_path, folder, files


def test_restore_writes_back_the_same_bytes_and_never_overwrites(corpus, tmp_path_factory):
    root, folder, files = corpus
    original = {f.name: f.read_bytes() for f in files}
    archive = tmp_path_factory.mktemp("out") / "experts.npz"
    assert save_archive(list_corpus(root), archive) == 3
    with np.load(archive) as z:
        assert all(z[k].dtype == np.uint8 for k in z.files)  # devices fit a byte
    for f in files:
        f.unlink()
    assert restore_archive(list_corpus(root), archive) == (3, 0, 0)
    assert {f.name: f.read_bytes() for f in files} == original
    files[0].write_bytes(b"changed")
    assert restore_archive(list_corpus(root), archive) == (0, 3, 0)
    assert files[0].read_bytes() == b"changed"  # a cached file is never overwritten


def test_restore_skips_other_corpora_and_refuses_a_bad_archive(corpus, tmp_path_factory):
    root, folder, files = corpus
    archive = tmp_path_factory.mktemp("out") / "experts.npz"
    save_archive(list_corpus(root), archive)
    (root / "resnet_v2.pb").unlink()  # a corpus without that graph
    for f in files:
        f.unlink()
    assert restore_archive(list_corpus(root), archive) == (2, 0, 1)
    assert not files[2].exists()
    junk = archive.with_name("junk.npz")
    junk.write_bytes(b"not a zip")
    with pytest.raises(ConfigError, match="not an experts archive"):
        restore_archive(list_corpus(root), junk)
    other = archive.with_name("other.npz")  # a zip of arrays, none of them experts
    np.savez(other, weights=np.zeros(3))
    with pytest.raises(ConfigError, match="none of its 1 entries is named like an expert"):
        restore_archive(list_corpus(root), other)
