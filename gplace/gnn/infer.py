"""Zero-shot placement without torch: the policy's forward (gplace.gnn.policy, ``_scores``) in
numpy, on weights read from the checkpoint once and kept in the user cache.

Importing torch takes about a second at start-up, and a zero-shot placement needs only one
forward of a small network. The weights of a checkpoint are written, float32 as trained, to
``<cache>/policies/<sha256 of the checkpoint's bytes>.npz`` the first time it is used (torch
reads it then); later runs read the arrays alone.

The numpy forward computes torch's function in float32, but its sums run in another order, so
its scores differ from torch's in their last bits (two devices' logits by up to 4e-5). Every
zero-shot placement is therefore made from the numpy scores, GNNPlacer's too
(:func:`policy_weights` reads a policy in memory): `gplace place` without torch, the library's
GNNPlacer and fine-tuning's start are the same placement by construction.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from gplace import stopping
from gplace.errors import ConfigError
from gplace.gnn.config import FinetuneConfig
from gplace.gnn.features import LOOKAHEAD, problem_features
from gplace.gnn.replay import NearReplays
from gplace.gnn.schedule import (DYN_FEATURES, ESTIMATE, GREEDY, SAMPLE, UNIT_EFT,
                                  build_sched, chain_of, heaviest_neighbour, rollout)
from gplace.measure import Measurer
from gplace.placers.base import PlaceResult, Tracker
from gplace.problem import PlacementProblem

WEIGHTS_SCHEME = 3  # bump when the arrays or their names below change
SHIPPED = Path(__file__).resolve().parent.parent / "checkpoints" / "policy.pt"
NO_SHIPPED = f"no shipped checkpoint at {SHIPPED}; run `gplace pretrain` and pass its --out file"


class ScoresNp(NamedTuple):
    """gplace.gnn.policy.Scores as float64 arrays, what gplace.gnn.schedule.rollout takes."""

    s: np.ndarray                  # (units, devices)
    w: np.ndarray                  # (units, DYN_FEATURES)
    head: tuple | None = None      # (a (H, F), b (units, H), v (units, H)) or None


class PolicyWeights(NamedTuple):
    """A checkpoint's constructor arguments and its state_dict as float32 arrays."""

    kwargs: dict
    arrays: dict[str, np.ndarray]

    def linear(self, name: str, x: np.ndarray) -> np.ndarray:
        w, b = self.arrays[f"{name}.weight"], self.arrays.get(f"{name}.bias")
        y = x @ w.T
        return y if b is None else y + b

    def mlp(self, name: str, x: np.ndarray) -> np.ndarray:
        """gplace.gnn.policy.mlp: Linear layers at even indices, ReLU between them."""
        index = (k[len(name) + 1:-len(".weight")] for k in self.arrays
                 if k.startswith(f"{name}.") and k.endswith(".weight"))
        layers = sorted(int(i) for i in index if i.isdigit())
        for i, k in enumerate(layers):
            x = self.linear(f"{name}.{k}", x)
            if i < len(layers) - 1:
                x = np.maximum(x, 0)
        return x


# ---- the forward ---------------------------------------------------------------------------
def scores(weights: PolicyWeights, f) -> ScoresNp:
    """GNNPolicy._scores of ``f`` (gplace.gnn.features.ProblemFeatures), in float32 like torch's
    (:func:`as_float64` makes them what Scores.numpy returns)."""
    p, scale = weights.arrays, np.float32(weights.kwargs.get("scale", 10.0))
    types = (weights.linear("type_embedding", f.unit_types) if "type_embedding.weight" in p
             else np.zeros((f.unit_x.shape[0], 0), np.float32))                   # (U, T)
    x = weights.mlp("unit_in", np.concatenate([f.unit_x, types], -1))              # (U, h)
    for i in range(weights.kwargs.get("num_layers", 3)):
        x = _layer_norm(x + np.maximum(_gine(weights, f"convs.{i}", x, f.edge_index,
                                             f.edge_attr), 0), p[f"norms.{i}.weight"],
                        p[f"norms.{i}.bias"])
    context = x.mean(0, keepdims=True)                                              # (1, h)
    d = weights.mlp("device_in", f.device_x)                                        # (D, h)
    s = _pair_scores(weights, x, context, d, f.pair_x)                              # (U, D)
    s = s + scale * p["look0"] * f.pair_x[..., LOOKAHEAD]
    unit = np.concatenate([x, np.broadcast_to(context, x.shape)], -1)               # (U, 2h)
    w = scale * p["w0"] + weights.mlp("weight_head", unit)                          # (U, F)
    head = None
    if "head_a" in p:
        head = (p["head_a"], weights.mlp("head_b", unit), scale * weights.mlp("head_v", unit))
    return ScoresNp(s, w, head)


def _gine(weights: PolicyWeights, name: str, x, edge_index, edge_attr) -> np.ndarray:
    """gplace.gnn.gine.GINE: nn((1 + eps) x_i + sum_{j -> i} relu(x_j + lin(e_ji)))."""
    src, dst = edge_index[0], edge_index[1]
    messages = np.maximum(x[src] + weights.linear(f"{name}.lin", edge_attr), 0)   # (E, h)
    out = np.zeros_like(x)
    if len(dst):  # the sum per target: segments of the edges sorted by target
        order = np.argsort(dst, kind="stable")
        targets, starts = np.unique(dst[order], return_index=True)
        out[targets] = np.add.reduceat(messages[order], starts, axis=0)
    eps = weights.arrays[f"{name}.eps"]
    return weights.mlp(f"{name}.nn", out + (1 + eps) * x)


def _layer_norm(x, gamma, beta, eps: float = 1e-5) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + x.dtype.type(eps)) * gamma + beta


def _pair_scores(weights: PolicyWeights, x, context, d, pair_x) -> np.ndarray:
    """GNNPolicy._pair_scores: the first layer split by input block."""
    first_w, first_b = weights.arrays["pair_head.0.weight"], weights.arrays["pair_head.0.bias"]
    h = x.shape[1]
    wx, wc, wd, wp = (first_w[:, :h], first_w[:, h:2 * h], first_w[:, 2 * h:3 * h],
                      first_w[:, 3 * h:])
    hidden = ((x @ wx.T)[:, None] + (context @ wc.T + first_b)[:, None]
              + (d @ wd.T)[None] + pair_x @ wp.T)                                   # (U, D, h)
    for k in (2, 4):
        hidden = weights.linear(f"pair_head.{k}", np.maximum(hidden, 0))
    return hidden[..., 0]


def tempered(sc: ScoresNp, temperature: float) -> ScoresNp:
    """gplace.gnn.learn.tempered: the logits divided by ``temperature``, in the scores' dtype."""
    if temperature == 1.0:
        return sc
    t = sc.s.dtype.type(temperature)
    head = sc.head if sc.head is None else (sc.head[0], sc.head[1], sc.head[2] / t)
    return ScoresNp(sc.s / t, sc.w / t, head)


def as_float64(sc: ScoresNp) -> ScoresNp:
    """The scores as the float64 arrays gplace.gnn.schedule.rollout takes."""
    return ScoresNp(sc.s.astype(np.float64), sc.w.astype(np.float64),
                    None if sc.head is None else tuple(a.astype(np.float64) for a in sc.head))


# ---- the weights and their cache -----------------------------------------------------------
def weights_cache(checkpoint: Path) -> Path | None:
    """The cached arrays' file of a checkpoint (its bytes' hash); None when the cache is off or
    the file cannot be read."""
    from gplace.opgraph_cache import user_cache
    folder = user_cache("policies")
    if folder is None:
        return None
    try:
        digest = hashlib.sha256(checkpoint.read_bytes()).hexdigest()
    except OSError:
        return None  # unreadable: the checkpoint's own reader says why
    return folder / f"{digest}-{WEIGHTS_SCHEME}.npz"


def load_weights(checkpoint: str | os.PathLike | None = None) -> PolicyWeights:
    """The checkpoint's weights (default: the shipped one), from the cache when there; else
    read with torch (every check of GNNPolicy.load) and written there."""
    path = Path(checkpoint) if checkpoint is not None else SHIPPED
    if path == SHIPPED and not path.is_file():
        raise ConfigError(NO_SHIPPED)
    if not path.is_file():
        from gplace.gnn.policy import GNNPolicy  # its message for a missing file
        GNNPolicy.load(path)
    entry = weights_cache(path)
    cached = _read(entry) if entry is not None else None
    if cached is not None:
        return cached
    from gplace.gnn.policy import GNNPolicy
    policy, _ = GNNPolicy.load(path)
    weights = policy_weights(policy)
    if entry is not None:
        _write(entry, weights)
    return weights


def is_cached(checkpoint: str | os.PathLike) -> bool:
    """Whether a checkpoint's weights are in the cache (it was read with torch before)."""
    entry = weights_cache(Path(checkpoint))
    return entry is not None and _read(entry) is not None


def _read(entry: Path) -> PolicyWeights | None:
    try:
        with np.load(entry) as z:
            arrays = {k: z[k] for k in z.files if not k.startswith("__")}
            kwargs = json.loads(str(z["__kwargs__"]))
            digest = str(z["__digest__"])
        if digest != _digest(kwargs, arrays):
            return None  # damaged: read with torch again
        return PolicyWeights(kwargs, arrays)
    except Exception:  # noqa: BLE001 - missing, truncated, empty or foreign: read with torch
        return None


def _digest(kwargs: dict, arrays: dict) -> str:
    """sha256 of an entry's contents: an entry damaged on disk is read again, not used."""
    h = hashlib.sha256(json.dumps(kwargs, sort_keys=True).encode())
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        h.update(f"{k}:{a.dtype.str}:{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _write(entry: Path, weights: PolicyWeights) -> None:
    from gplace.io import atomic_write
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(entry, lambda f: np.savez(
            f, __kwargs__=json.dumps(weights.kwargs),
            __digest__=_digest(weights.kwargs, weights.arrays), **weights.arrays), binary=True)
    except OSError:
        pass  # a read-only or full cache folder: the next run reads the checkpoint again


# ---- zero-shot placement --------------------------------------------------------------------
def best_rollout(sched, sc: ScoresNp, rollouts: int, seed: int,
                 both_orders: bool = True, prior: ScoresNp | None = None,
                 progress=None) -> np.ndarray:
    """The best of the greedy rollout and ``rollouts`` sampled ones (in chunks of 16) by a list
    schedule's makespan estimate; nothing is measured. With ``both_orders`` the list scheduler
    runs in HEFT's rank order (sampling seeds ``[seed, chunk, 17]``) and in the simulator's
    dispatch order (``[seed, chunk, 19]``), ``rollouts`` + 1 each, and every placement is
    ranked by the dispatch-order estimate, which follows the simulator (pretrain/ORDER.md:
    1.001x on the best known placements, where the rank-order estimate is 1.155x): the
    rank-order ones are replayed (ESTIMATE) in dispatch order to get it, and every one where
    ``sched.contention`` (the replays then book transfers on the links). Without it, only
    ``sched``'s own order and its own estimate. ``prior`` (with ``both_orders``): as many
    rollouts again of these scores in the order that is not ``sched``'s (seeds ``[seed, chunk,
    23]``). ``progress("rollout batches", done, total)``: after each batch (a greedy rollout,
    or up to 16 sampled ones)."""
    judge = sched._replace(dispatch=True) if both_orders else sched
    runs = ([(sched._replace(dispatch=False), 17, sc), (judge, 19, sc)] if both_orders
            else [(sched, 17, sc)])
    if both_orders and prior is not None:
        runs.append((sched._replace(dispatch=not sched.dispatch), 23, prior))
    best, best_est = None, np.inf

    def estimate(a, ro) -> np.ndarray:
        if a.dispatch == judge.dispatch and not (a.dispatch and a.contention):
            return ro.estimate_s
        return rollout(judge, sc.s, sc.w, ESTIMATE, forced=ro.placements, head=sc.head).estimate_s

    batches, done = len(runs) * (1 + -(-rollouts // 16)), 0
    for a, tail, o in runs:
        greedy_ro = rollout(a, o.s, o.w, GREEDY, head=o.head)
        est = estimate(a, greedy_ro)[0]
        if best is None or est < best_est:  # the greedy rollout even where no estimate is finite
            best, best_est = greedy_ro.placements[0], est
        done += 1
        if progress is not None:
            progress("rollout batches", done, batches)
        left, chunk = rollouts, 0
        while left > 0 and not stopping.requested():  # in chunks: the rollouts' decision
            # features take memory; a Ctrl-C (gplace.stopping) keeps the best so far
            count, chunk_seed = min(left, 16), [seed, chunk, tail]
            ro = rollout(a, o.s, o.w, SAMPLE, count=count, seed=chunk_seed, head=o.head)
            est = estimate(a, ro)
            k = int(np.argmin(est))
            if est[k] < best_est:
                best, best_est = ro.placements[k], est[k]
            left, chunk = left - count, chunk + 1
            done += 1
            if progress is not None:
                progress("rollout batches", done, batches)
    return best


def zero_shot(weights: PolicyWeights, features, sched, seed: int,
              config: FinetuneConfig, progress=None) -> np.ndarray:
    """The zero-shot placement of a problem (its ``features`` and scheduler arrays ``sched``):
    :func:`best_rollout` under the numpy scores at the fine-tuning temperature, then
    :func:`polish`-ed (``config.zero_shot_polish`` estimates), the estimates with link
    contention where ``config.estimate_contention``; nothing is measured."""
    sched = sched._replace(contention=config.estimate_contention)
    sc = as_float64(tempered(scores(weights, features), config.learn.temperature))
    prior = None
    if config.zero_shot_prior:
        prior = as_float64(tempered(prior_scores(weights, features), config.learn.temperature))
    best = best_rollout(sched, sc, config.zero_shot_rollouts, seed, config.zero_shot_both_orders,
                        prior, progress)
    return polish(sched, best, config.zero_shot_polish, seed, config.chain_moves, progress)


POLISH_BATCH = 16  # moves estimated together (in parallel over numba's threads)


def polish(sched, placement: np.ndarray, estimates: int, seed: int,
           chain: float = 0.5, progress=None) -> np.ndarray:
    """Hill climbing on the dispatch-order list schedule's makespan estimate, from
    ``placement``, ``estimates`` replays in all (nothing is measured). Each round estimates
    POLISH_BATCH moves of the current placement, the moves of fine-tuning's local search
    without the policy: one unit, or with probability ``chain`` a chain of it and its
    heaviest-traffic neighbours (a geometric number of steps), to another device drawn
    uniformly, where the unit memory estimate (``sched.need``) still fits; the best move is
    kept if it lowers the estimate. Each move's replay resumes from the current placement's
    state before the move's first unit is decided (gplace.gnn.replay: the same estimate as a
    whole replay). Seeded by ``[seed, 29]``. ``progress("replays", done, total)``: before
    each round and at the end."""
    nu, nd = sched.num_units, sched.num_devices
    if estimates <= 0 or nd < 2 or nu == 0:
        return placement
    best = np.asarray(placement, np.int64).copy()
    near = NearReplays(sched, best)
    best_est = near.estimate_s
    used = np.bincount(best, weights=sched.need, minlength=nd)
    heaviest = heaviest_neighbour(sched)
    rng = np.random.default_rng([seed, 29])
    rounds = -(-estimates // POLISH_BATCH)
    for r in range(rounds):
        if stopping.requested():  # Ctrl-C (gplace.stopping): the best so far
            break
        if progress is not None:
            progress("replays", min(r * POLISH_BATCH, estimates), estimates)
        cands = np.repeat(best[None], POLISH_BATCH, axis=0)
        for row in range(POLISH_BATCH):
            u, d = int(rng.integers(nu)), int(rng.integers(nd - 1))
            d += d >= best[u]
            moved = np.unique(chain_of(u, heaviest, rng, chain))
            moved = moved[best[moved] != d]
            if used[d] + sched.need[moved].sum() <= sched.capacity[d]:
                cands[row, moved] = d
        est = near.estimates(cands)
        k = int(np.argmin(est))
        if est[k] < best_est:
            best, best_est = cands[k].copy(), est[k]
            used = np.bincount(best, weights=sched.need, minlength=nd)
            near = near.rebased(best)
    if progress is not None:
        progress("replays", estimates, estimates)
    return best


def prior_scores(weights: PolicyWeights, features) -> ScoresNp:
    """The untrained network's scores of ``features``, whatever its encoder's weights: the
    initial decision weights (each unit to the device where it finishes first; GNNPolicy's
    w0) and the lookahead prior at its initial weight (look0 = -1)."""
    scale = np.float32(weights.kwargs.get("scale", 10.0))
    units = features.pair_x.shape[0]
    w = np.zeros((units, DYN_FEATURES), np.float32)
    w[:, UNIT_EFT] = -scale
    return ScoresNp(-scale * features.pair_x[..., LOOKAHEAD], w, None)


def policy_weights(policy) -> PolicyWeights:
    """A GNNPolicy's (torch module in memory) constructor arguments and weights."""
    return PolicyWeights(dict(policy.kwargs), {k: v.detach().numpy().astype(np.float32)
                                               for k, v in policy.state_dict().items()})


class ZeroShotPlacer:
    """GNNPlacer.place with no fine-tuning budget and simulated measurements, without torch: the
    same zero-shot placement, start and result (see the module docstring)."""

    name = "gnn"

    def __init__(self, seed: int = 0, checkpoint: str | os.PathLike | None = None,
                 config: FinetuneConfig | None = None):
        self.seed, self.checkpoint = seed, checkpoint
        self.weights = load_weights(checkpoint)
        self.config = config or FinetuneConfig()

    def zero_shot(self, problem: PlacementProblem, features=None, sched=None,
                  progress=None) -> np.ndarray:
        """GNNPlacer.zero_shot's placement."""
        features = features if features is not None else problem_features(problem)
        sched = sched if sched is not None else build_sched(
            problem, dispatch=self.weights.kwargs.get("order") == "dispatch")
        return zero_shot(self.weights, features, sched, self.seed, self.config, progress)

    def place(self, problem: PlacementProblem, measurer: Measurer, budget: int = 0,
              seeds: list[np.ndarray] = (), progress=None,
              start: np.ndarray | None = None, zero_progress=None) -> PlaceResult:
        """GNNPlacer.place with ``budget`` 0: the zero-shot placement and the best start."""
        if budget:
            raise ConfigError("the numpy policy places zero-shot only; fine-tuning needs torch "
                              "(gplace.gnn.placer.GNNPlacer)")
        tracker = Tracker(problem, measurer, 0)
        zero = start if start is not None else self.zero_shot(problem, progress=zero_progress)
        candidates = np.stack([zero, *seeds])
        m = measurer.measure(candidates)  # zero-shot and seeds: no samples charged
        for p, t, ok in zip(candidates, m.step_time_s, m.feasible):
            if ok:
                tracker.offer_free(p, float(t))
        times = np.where(m.feasible, m.step_time_s, np.inf)
        return tracker.result("gnn", zero,
                              zero_shot_step_time_s=float(times[0]),
                              start_step_time_s=float(times.min()), zero_shot_placement=zero)
