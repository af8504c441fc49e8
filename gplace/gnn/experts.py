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
from pathlib import Path

import numpy as np

from gplace.measure import Measurer
from gplace.problem import PlacementProblem

EXPERT_VERSION = 1  # part of the cache key: bump when the search changes


def search_expert(problem: PlacementProblem, measurer: Measurer, seeds: list[np.ndarray],
                  budget: int, seed: int, hidden_channels: int = 64, num_layers: int = 3,
                  start: str | Path | None = None) -> np.ndarray:
    """The best placement a ``budget``-sample fine-tuning search finds (at least as fast as
    the best seed), from an untrained network or, with ``start``, from that policy checkpoint
    (the next round of expert iteration)."""
    import torch

    from gplace.gnn.placer import GNNPlacer
    from gplace.gnn.policy import GNNPolicy
    # the search trains a network: gradients on even when called under Lightning's
    # validation (inference mode), where a problem may be built on first use
    with torch.inference_mode(False), torch.enable_grad():
        torch.manual_seed(seed)
        policy = (GNNPolicy(hidden_channels, num_layers) if start is None
                  else GNNPolicy.load(start)[0])
        placer = GNNPlacer(seed=seed, policy=policy)
        return placer.place(problem, measurer, budget, seeds=list(seeds)).placement


def expert_folder(graph_path: str | Path) -> Path:
    """Where the experts of the corpus graph at ``graph_path`` are cached: beside it."""
    return Path(graph_path).parent / ".gplace-cache" / "experts"


# a cached expert's file name: {graph}-{problem key}-v{EXPERT_VERSION}-b{budget}-s{seed}[-{start}]
EXPERT_FILE = re.compile(r"^(.+)-[0-9a-f]{16}-v\d+-b\d+-s\d+(-[0-9a-f]{12})?\.npy$")


def start_tag(start: str | Path | None) -> str:
    """Names the search's starting network in cache keys: "prior" or the checkpoint's hash."""
    if start is None:
        return "prior"
    return hashlib.sha1(Path(start).read_bytes()).hexdigest()[:12]
