"""Cache keys: a canonical, rounded description of the problem, so that every machine finds
the committed experts."""

from dataclasses import replace

import numpy as np
import pytest

from gplace.cluster import load_cluster
from gplace.gnn.cache import canonical, describe_problem, graph_key
from gplace.gnn.random_clusters import random_cluster


class Graph:  # the size facts a key reads, and outputs (none 16-bit)
    num_ops, num_edges = 120, 300
    out_ptr, out_dtype = np.arange(121), np.full(120, "float32")
    meta = {"import": {"unknown_dim": 1}}


class HalfGraph(Graph):  # one op computes in float16
    out_dtype = np.array(["float16"] + ["float32"] * 119)


def test_floats_past_six_digits_do_not_move_the_key():
    c = random_cluster(1_000_010)
    nudged = replace(c, devices=tuple(replace(d, peak_flops=d.peak_flops * (1 + 1e-9))
                                      for d in c.devices))
    assert repr(nudged) != repr(c)  # what the old repr-hash keyed on
    assert graph_key(nudged, Graph, 40, True) == graph_key(c, Graph, 40, True)


def test_everything_else_moves_the_key():
    c = load_cluster("post-2gpu")
    keys = {graph_key(c, Graph, 40, True), graph_key(c, Graph, 41, True),
            graph_key(c, Graph, 40, False), graph_key(load_cluster("post-4gpu"), Graph, 40, True),
            graph_key(replace(c, devices=c.devices[:1] + (replace(c.devices[1], peak_flops=
                      c.devices[1].peak_flops * 1.001),) + c.devices[2:]), Graph, 40, True)}
    assert len(keys) == 5


def test_half_flops_move_the_key_of_a_graph_with_16_bit_ops_only():
    plain = load_cluster("hetero")
    assert not any(d.half_flops for d in plain.devices)
    c = replace(plain, devices=tuple(replace(d, half_flops=d.peak_flops * 8)
                                     for d in plain.devices))
    assert graph_key(c, Graph, 40, True) == graph_key(plain, Graph, 40, True)
    assert graph_key(c, HalfGraph, 40, True) != graph_key(plain, HalfGraph, 40, True)
    # a 16-bit graph on a cluster without half_flops keeps the key it had before the field
    assert '"half_flops"' not in describe_problem(plain, True, 120, 300, 40, half=True)


def test_a_graph_imported_at_another_size_has_another_key():
    """A None batch sized 64 gives the same ops and edges as sized 1, and other costs: the
    experts searched at batch 1 are not handed back for it."""
    c = load_cluster("post-2gpu")

    class Sized(Graph):
        meta = {"import": {"unknown_dim": 64, "sized_inputs": ["x"]}}

    class Static(Graph):  # asked for 64, nothing to size: the same problem as at 1
        meta = {"import": {"unknown_dim": 64, "sized_inputs": [],
                           "outputs_with_unknown_dims": 0}}

    class Silent(Graph):  # an OpGraph saved before the import recorded its size
        meta = {}

    assert graph_key(c, Sized, 40, True) != graph_key(c, Graph, 40, True)
    assert graph_key(c, Silent, 40, True) == graph_key(c, Static, 40, True) == \
        graph_key(c, Graph, 40, True) == PINNED
    assert '"unknown_dim":64' in describe_problem(c, True, 120, 300, 40, unknown_dim=64)


def test_the_description_is_plain_json_with_six_digit_floats():
    text = describe_problem(random_cluster(7), True, 10, 20, 5)
    assert '"costs":2,' in text and '"scheme":3,' in text and '"units":5' in text
    assert canonical((1 / 3, 2, [np.float64(0.1) * 3])) == ["0.333333", 2, ["0.3"]]


def test_a_preset_key_is_pinned():
    """Changing the description changes every key: bump KEY_SCHEME and migrate the archive."""
    assert graph_key(load_cluster("post-2gpu"), Graph, 40, True) == PINNED


PINNED = "2933742268318862"


@pytest.mark.slow
def test_every_committed_expert_is_found_by_its_problem_key():
    """Each member of the committed archive names a training problem of the default corpus
    by its key, and every training problem has an expert there."""
    from gplace.gnn.config import PretrainConfig
    from gplace.gnn.corpus import load_corpus_graph
    from gplace.gnn.experts import EXPERT_FILE, corpus_archive
    from gplace.gnn.pretrain import cluster_of, graph_ops, problem_specs
    cfg = PretrainConfig()
    problems = set()
    for e, c in problem_specs(cfg, "train"):
        if graph_ops(e) <= cfg.max_graph_ops:
            g = load_corpus_graph(e)
            problems.add((e.name, graph_key(cluster_of(c), g, int(g.group.max()) + 1,
                                            e.profile is not None)))
    with np.load(corpus_archive(cfg.corpus)) as z:
        members = {EXPERT_FILE.match(n).group(1, 2) for n in z.files}
    assert members == problems and len(problems) == 595


def test_a_graph_whose_profile_changed_loses_its_cached_seeds_and_experts(tmp_path):
    """The keys name the problem, not its costs: drop_stale deletes a graph's cached files
    once its profile (or file) changed since the stamp, and nobody else's."""
    import os
    from gplace.gnn.cache import cache_dir, drop_stale
    from gplace.gnn.corpus import list_corpus
    for name in ("a", "a-b"):
        (tmp_path / f"{name}.pb").write_bytes(b"graph " + name.encode())
        (tmp_path / f"{name}.profile.json.gz").write_bytes(b"profile")
    entries = list_corpus(tmp_path)
    cached = []
    for name in ("a", "a-b"):
        for kind, tail in (("seeds", ".npy"), ("experts", "-v3-b400-s0.npy")):
            path = cache_dir(tmp_path / "a.pb", kind) / f"{name}-{'0123456789abcdef'}{tail}"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"x")
            cached.append(path)
    assert drop_stale(entries) == 0 and all(p.exists() for p in cached)  # first stamp
    assert drop_stale(entries) == 0  # unchanged
    profile = tmp_path / "a.profile.json.gz"
    profile.write_bytes(b"PROFILE")
    os.utime(profile, ns=(1, 1))
    assert drop_stale(entries) == 2
    assert [p.exists() for p in cached] == [False, False, True, True]
    assert drop_stale(entries) == 0
