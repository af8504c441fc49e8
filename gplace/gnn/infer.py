"""Zero-shot placement without torch: the loaded policy's forward (gplace.gnn.policy, ``_scores``)
in numpy, on weights read from the checkpoint once and kept in the user cache.

Importing torch takes about a second at start-up, and a zero-shot placement needs only one
forward of a small network. The weights of a checkpoint are written, float32 as trained, to
``<cache>/policies/<sha256 of the checkpoint's bytes>.npz`` the first time it is used (torch
reads it then); later runs read the arrays alone.

The numpy forward computes the same function in float32, but its matrix products sum in another
order than torch's (OpenBLAS, not MKL), so the scores differ in their last bits: two devices'
logits by up to 4e-5, a cumulative softmax share by up to 1e-5 (measured on the example and
four corpus graphs). A decision changes only where the logits of the top two devices (greedy)
or a uniform draw and a share's end (sampling) are that close. Every decision of the greedy
rollout and of the rollout returned is checked against margins 4x wider
(:func:`decisions_are_safe`); where one is closer, the scores are computed again with torch,
as GNNPlacer does, and the rollouts repeated. A rollout that is not returned is not checked: a
decision of it that flips could in principle change which rollout is best (its draws fall within
1e-5 of a share's end about once in 10^5 decisions); on the graphs above none of the 64 sampled
rollouts differed. (The torch scores' own last bits depend on the CPU's instruction set, which
selects MKL's kernel.)
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from gplace.errors import ConfigError
from gplace.gnn.config import FinetuneConfig
from gplace.gnn.features import problem_features
from gplace.gnn.schedule import GREEDY, MASKED, SAMPLE, build_sched, rollout
from gplace.measure import Measurer
from gplace.placers.base import PlaceResult, Tracker
from gplace.problem import PlacementProblem

WEIGHTS_SCHEME = 1  # bump when the arrays or their names below change
SHIPPED = Path(__file__).resolve().parent.parent / "checkpoints" / "policy.pt"
# The margins of a decision taken alike by the numpy and torch scores: 4x the largest
# differences measured on the example and 4 corpus graphs (InceptionV3 among them) on two
# clusters: 4e-5 between two devices' logits, 1e-5 in a cumulative softmax share.
SAFE_LOGIT_GAP = 1.6e-4
SAFE_SHARE_GAP = 4e-5


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
    types = weights.linear("type_embedding", f.unit_types)
    x = weights.mlp("unit_in", np.concatenate([f.unit_x, types], -1))              # (U, h)
    for i in range(weights.kwargs.get("num_layers", 3)):
        x = _layer_norm(x + np.maximum(_gine(weights, f"convs.{i}", x, f.edge_index,
                                             f.edge_attr), 0), p[f"norms.{i}.weight"],
                        p[f"norms.{i}.bias"])
    context = x.mean(0, keepdims=True)                                              # (1, h)
    d = weights.mlp("device_in", f.device_x)                                        # (D, h)
    s = _pair_scores(weights, x, context, d, f.pair_x)                              # (U, D)
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
    np.add.at(out, dst, messages)
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
    if not path.is_file():
        from gplace.gnn.placer import load_policy  # its messages for a missing file
        load_policy(checkpoint)
    entry = weights_cache(path)
    cached = _read(entry) if entry is not None else None
    if cached is not None:
        return cached
    from gplace.gnn.policy import GNNPolicy
    policy, _ = GNNPolicy.load(path)
    weights = PolicyWeights(dict(policy.kwargs), {k: v.detach().numpy().astype(np.float32)
                                                  for k, v in policy.state_dict().items()})
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
            arrays = {k: z[k] for k in z.files if k != "__kwargs__"}
            kwargs = json.loads(str(z["__kwargs__"]))
        return PolicyWeights(kwargs, arrays)
    except (OSError, ValueError, KeyError, json.JSONDecodeError):
        return None  # missing, truncated or foreign: read with torch again


def _write(entry: Path, weights: PolicyWeights) -> None:
    from gplace.io import atomic_write
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(entry, lambda f: np.savez(f, __kwargs__=json.dumps(weights.kwargs),
                                               **weights.arrays), binary=True)
    except OSError:
        pass  # a read-only or full cache folder: the next run reads the checkpoint again


# ---- zero-shot placement --------------------------------------------------------------------
class ZeroShot(NamedTuple):
    placement: np.ndarray   # (units,) the best rollout by the list schedule's estimate
    safe: bool              # every decision of every rollout was beyond the safe margins


def best_rollout(sched, sc: ScoresNp, rollouts: int, seed: int) -> ZeroShot:
    """The greedy rollout, or the best of it and ``rollouts`` K sampled ones (in chunks of 16,
    seeds ``[seed, chunk, 17]``) by the list schedule's makespan estimate; ``safe``: whether
    every decision of the greedy rollout and of the one returned is beyond the margins."""
    greedy_ro = rollout(sched, sc.s, sc.w, GREEDY, head=sc.head)
    safe = decisions_are_safe(greedy_ro, sc, None)
    best, best_est, best_ro = greedy_ro.placements[0], greedy_ro.estimate_s[0], None
    left, chunk = rollouts, 0
    while left > 0:  # in chunks: the rollouts' decision features take memory
        count, chunk_seed = min(left, 16), [seed, chunk, 17]
        ro = rollout(sched, sc.s, sc.w, SAMPLE, count=count, seed=chunk_seed, head=sc.head)
        k = int(np.argmin(ro.estimate_s))
        if ro.estimate_s[k] < best_est:
            best, best_est = ro.placements[k], ro.estimate_s[k]
            u01 = np.random.default_rng(chunk_seed).random((count, sched.num_units))[k:k + 1]
            best_ro = (ro._replace(placements=ro.placements[k:k + 1], phi=ro.phi[k:k + 1],
                                   mask=ro.mask[k:k + 1]), u01)
        left, chunk = left - len(ro.estimate_s), chunk + 1
    if best_ro is not None:
        safe = safe and decisions_are_safe(best_ro[0], sc, best_ro[1])
    return ZeroShot(best, safe)


def decision_logits(ro, sc: ScoresNp) -> np.ndarray:
    """(K, units, D) logits at each decision of ``ro``, MASKED where not allowed."""
    phi = ro.phi.astype(np.float64)
    logits = sc.s[None] + np.einsum("kudf,uf->kud", phi, sc.w)
    if sc.head is not None:
        a, b, v = sc.head
        z = np.maximum(np.einsum("kudf,hf->kudh", phi, a) + b[None, :, None, :], 0)
        logits = logits + np.einsum("kudh,uh->kud", z, v)
    return np.where(ro.mask, logits, MASKED)


def decisions_are_safe(ro, sc: ScoresNp, u01: np.ndarray | None) -> bool:
    """Whether every decision of ``ro`` (see gplace.gnn.decision.choose) is beyond the
    margins: greedy (``u01`` None) when the top logit leads the next by SAFE_LOGIT_GAP,
    sampled when the draw ``u01`` lies SAFE_SHARE_GAP or more from both ends of the chosen
    device's cumulative share of the softmax."""
    logits = decision_logits(ro, sc)                                             # (K, U, D)
    if u01 is None:
        if logits.shape[-1] < 2:
            return True
        top2 = np.sort(logits, -1)[..., -2:]
        return bool(np.all((top2[..., 1] - top2[..., 0] > SAFE_LOGIT_GAP)
                           | (top2[..., 0] <= MASKED / 2)))
    e = np.where(ro.mask, np.exp(logits - logits.max(-1, keepdims=True)), 0.0)
    share = e / e.sum(-1, keepdims=True)
    taken = ro.placements[..., None]
    hi = np.take_along_axis(np.cumsum(share, -1), taken, -1)[..., 0]
    lo = hi - np.take_along_axis(share, taken, -1)[..., 0]
    above = (hi - u01 > SAFE_SHARE_GAP) | (hi >= 1 - 1e-12)  # the last device's end: no boundary
    below = (u01 - lo > SAFE_SHARE_GAP) | (lo <= 0)          # nor the first's start
    return bool(np.all(above & below))


class ZeroShotPlacer:
    """GNNPlacer.place with no fine-tuning budget and simulated measurements, without torch: the
    same zero-shot placement, start and result (see the module docstring)."""

    name = "gnn"

    def __init__(self, seed: int = 0, checkpoint: str | os.PathLike | None = None,
                 config: FinetuneConfig | None = None):
        self.seed, self.checkpoint = seed, checkpoint
        self.weights = load_weights(checkpoint)
        self.config = config or FinetuneConfig()

    def zero_shot(self, problem: PlacementProblem, features=None, sched=None) -> np.ndarray:
        """GNNPlacer.zero_shot's placement."""
        features = features if features is not None else problem_features(problem)
        sched = sched if sched is not None else build_sched(
            problem, dispatch=self.weights.kwargs.get("order") == "dispatch")
        sc = as_float64(tempered(scores(self.weights, features), self.config.learn.temperature))
        found = best_rollout(sched, sc, self.config.zero_shot_rollouts, self.seed)
        if found.safe:
            return found.placement
        sc = self._torch_scores(features)  # a near tie: torch decides, as GNNPlacer does
        return best_rollout(sched, sc, self.config.zero_shot_rollouts, self.seed).placement

    def _torch_scores(self, features) -> ScoresNp:
        """GNNPlacer._zero_shot's scores: the torch policy's, tempered, as float64."""
        import torch

        from gplace.gnn.learn import tempered as torch_tempered
        from gplace.gnn.placer import load_policy
        from gplace.gnn.policy import FeatureTensors
        policy, _ = load_policy(self.checkpoint)
        with torch.no_grad():
            out = torch_tempered(policy.train()(FeatureTensors.from_numpy(features)),
                                 self.config.learn.temperature)
        s, w = out.numpy()
        return ScoresNp(s, w, out.head_numpy())

    def place(self, problem: PlacementProblem, measurer: Measurer, budget: int = 0,
              seeds: list[np.ndarray] = (), progress=None) -> PlaceResult:
        """GNNPlacer.place with ``budget`` 0: the zero-shot placement and the best start."""
        if budget:
            raise ConfigError("the numpy policy places zero-shot only; fine-tuning needs torch "
                              "(gplace.gnn.placer.GNNPlacer)")
        tracker = Tracker(problem, measurer, 0)
        zero = self.zero_shot(problem)
        candidates = np.stack([zero, *seeds])
        m = measurer.measure(candidates)  # zero-shot and seeds: no samples charged
        for p, t, ok in zip(candidates, m.step_time_s, m.feasible):
            if ok:
                tracker.offer_free(p, float(t))
        times = np.where(m.feasible, m.step_time_s, np.inf)
        return tracker.result("gnn", zero,
                              zero_shot_step_time_s=float(times[0]),
                              start_step_time_s=float(times.min()), zero_shot_placement=zero)
