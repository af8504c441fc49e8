"""The experts archives the repository ships: every entry is an expert of a graph of its own
corpus, a non-empty row of device indices, so that a fresh clone's restore
(gplace.gnn.experts.restore_archive) fills the cache of that corpus and nothing else."""

from pathlib import Path

import numpy as np
import pytest

from gplace.gnn.corpus import list_corpus
from gplace.gnn.experts import EXPERT_FILE

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("corpus", ["pretrain/corpus139", "datasets"])
def test_every_archived_expert_names_a_graph_of_its_corpus(corpus):
    folder = ROOT / corpus
    names = {g.name for g in list_corpus(folder)}
    with np.load(folder / "experts.npz") as archive:
        keys = archive.files
        assert keys
        for key in keys:
            m = EXPERT_FILE.match(key)
            assert m is not None, key
            assert m.group(1) in names, key
            a = archive[key]
            assert a.ndim == 1 and a.size > 0 and a.dtype.kind in "iu" and a.min() >= 0, key
