"""Expert placements for expert iteration: a long simulated search on one corpus problem,
fed back to pretraining as a cross-entropy target (Post's objective, with an elite
set whose first member is the search's result instead of a heuristic's placement).

The search is the fine-tuning pipeline itself (gplace.gnn.placer: policy rollouts and local
moves, Post's objective) started from a freshly initialized network, i.e. from the
architecture's prior (a list scheduler that judges a unit by its finish time), or from a
pretrained policy for the next round, with the cheap heuristics as seeds. Its result is at
least as fast as the best of them. An expert is a function of (problem, budget, seed,
starting network), so it is cached beside the corpus like the heuristics' seeds.
"""

from __future__ import annotations

import hashlib
import re
import zipfile
from pathlib import Path

import numpy as np

from gplace.errors import ConfigError
from gplace.gnn.config import FinetuneConfig
from gplace.gnn.cache import cache_dir
from gplace.io import atomic_write
from gplace.measure import Measurer
from gplace.problem import PlacementProblem

EXPERT_VERSION = 2  # part of the cache key: bump when the search changes
# The search's fine-tuning settings, fixed whatever FinetuneConfig's defaults become (a cached
# expert is a function of its key alone): zero-shot by the network's own rollouts and every
# drawn local move measured, the rule every archived expert was searched with.
EXPERT_RULE = FinetuneConfig(zero_shot_prior=False, zero_shot_polish=0, local_screen=1,
                             estimate_contention=False)


def search_expert(problem: PlacementProblem, measurer: Measurer, seeds: list[np.ndarray],
                  budget: int, seed: int, hidden_channels: int = 64, num_layers: int = 3,
                  start: str | Path | None = None, order: str = "rank") -> np.ndarray:
    """The best placement a ``budget``-sample fine-tuning search finds (at least as fast as
    the best seed), from an untrained network (its scheduler's op ``order``) or, with
    ``start``, from that policy checkpoint (the next round of expert iteration)."""
    import torch

    from gplace.gnn.placer import GNNPlacer
    from gplace.gnn.policy import GNNPolicy
    # the search trains a network: gradients on even when called under Lightning's
    # validation (inference mode), where a problem may be built on first use
    with torch.inference_mode(False), torch.enable_grad():
        torch.manual_seed(seed)
        policy = (GNNPolicy(hidden_channels, num_layers, order=order) if start is None
                  else GNNPolicy.load(start)[0])
        placer = GNNPlacer(seed=seed, policy=policy, config=EXPERT_RULE)
        return placer.place(problem, measurer, budget, seeds=list(seeds)).placement


def expert_folder(graph_path: str | Path) -> Path:
    """Where the experts of the corpus graph at ``graph_path`` are cached: beside it."""
    return cache_dir(graph_path, "experts")


# a cached expert's file name: {graph}-{problem key}-v{EXPERT_VERSION}-b{budget}-s{seed}[-{start}]
EXPERT_FILE = re.compile(r"^(.+)-([0-9a-f]{16})-v\d+-b\d+-s\d+(-[0-9a-f]{12})?\.npy$")


def start_tag(start: str | Path | None) -> str:
    """Names the search's starting network in cache keys: "prior" or the checkpoint's hash."""
    if start is None:
        return "prior"
    return hashlib.sha1(Path(start).read_bytes()).hexdigest()[:12]


# the tail of an expert searched from the untrained network in dispatch order (a checkpoint's
# order is in its bytes, so its hash tells the orders apart; the prior's name does not)
DISPATCH_PRIOR = hashlib.sha1(b"the prior in dispatch order").hexdigest()[:12]


def expert_name(graph: str, key: str, budget: int, seed: int,
                start: str | Path | None = None, order: str = "rank") -> str:
    """The cache file name of the expert of problem ``key`` (gplace.gnn.cache.problem_key)
    of graph ``graph`` from a ``budget``-sample search with ``seed`` from ``start`` (the
    untrained network in ``order`` if None)."""
    if start is None:
        tail = f"-{DISPATCH_PRIOR}" if order == "dispatch" else ""
    else:
        tail = f"-{start_tag(start)}"
    return f"{graph}-{key}-v{EXPERT_VERSION}-b{budget}-s{seed}{tail}.npy"


def cached_experts(entry, key: str, seed: int, valid=None) -> list[tuple[str, np.ndarray]]:
    """(file name, placement) of every cached expert of problem ``key`` of the corpus graph
    ``entry`` searched with ``seed``, any budget and starting network, by name; a file that
    does not load or that ``valid`` refuses (gplace.gnn.cache.placements_of) is skipped."""
    folder = expert_folder(entry.path)
    stem = f"{entry.name}-{key}-v{EXPERT_VERSION}-"
    found = []
    for f in sorted(folder.glob(f"{stem}*-s{seed}*.npy")):
        if EXPERT_FILE.match(f.name) and f.name[len(stem):-4].split("-")[1] == f"s{seed}":
            try:
                a = np.load(f)
            except (OSError, ValueError, EOFError):
                continue
            if valid is None or valid(a):
                found.append((f.name, a))
    return found


ARCHIVE = "experts.npz"  # a corpus folder's committed experts, restored before a run


def corpus_archive(corpus: str | Path) -> Path | None:
    """The experts archive a corpus folder ships (``experts.npz`` beside its manifest)."""
    path = Path(corpus) / ARCHIVE
    return path if path.is_file() else None


def save_archive(entries, path: str | Path) -> int:
    """Packs every cached expert of the corpus graphs ``entries`` into one compressed
    ``.npz`` (devices as uint8), written atomically; returns how many."""
    arrays = {}
    for e in entries:
        for f in sorted(expert_folder(e.path).glob(f"{e.name}-*.npy")):
            m = EXPERT_FILE.match(f.name)
            if m and m.group(1) == e.name:
                a = np.load(f)
                arrays[f.name] = a.astype(np.uint8) if a.min() >= 0 and a.max() < 256 else a
    atomic_write(path, lambda f: np.savez_compressed(f, **arrays), binary=True)
    return len(arrays)


def restore_archive(entries, path: str | Path) -> tuple[int, int, int]:
    """Writes the archive's experts into the cache of the corpus graphs ``entries`` as int64
    ``.npy`` files (the bytes a search writes), each atomically; returns (written, already
    there, not of these graphs). A cached file is never overwritten."""
    folders = {e.name: expert_folder(e.path) for e in entries}
    written = present = foreign = 0
    try:
        archive = np.load(path)
        names = archive.files
    except (OSError, ValueError, AttributeError, zipfile.BadZipFile) as e:
        raise ConfigError(f"{path}: not an experts archive ({e})") from None
    if names and not any(EXPERT_FILE.match(n) for n in names):
        archive.close()
        raise ConfigError(f"{path}: not an experts archive (none of its {len(names)} entries "
                          f"is named like an expert)")
    with archive:
        for key in names:
            m = EXPERT_FILE.match(key)
            if m is None or m.group(1) not in folders:
                foreign += 1
                continue
            target = folders[m.group(1)] / key
            if target.exists():
                present += 1
                continue
            a = archive[key].astype(np.int64)
            atomic_write(target, lambda f: np.save(f, a), binary=True)
            written += 1
    return written, present, foreign
