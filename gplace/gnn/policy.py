"""The GNN placement policy: the scores that drive the learned list scheduler
(:mod:`gplace.gnn.schedule`).

A PyG encoder over the unit graph (GINE layers with edge features, Hu et al. 2020, residual
connections, a mean-pooled graph context) and a device encoder read the problem once. Two heads
then give, for each unit u (colocation group) and device d:

* ``s[u, d]``: a static score from both embeddings and the pair's cost features;
* ``w[u]``: the unit's weights on the decision features ``phi`` that the scheduler computes from
  the partial schedule (finish times, transfer delays, memory, traffic),
  ``w = scale x (w0 + head(u))``.

At the unit's decision the device logits are ``s[u, d] + w[u] . phi[u, d]``. Both heads start at
zero and ``w0`` starts at -1 (times ``scale``) on the unit's earliest finish time (the start on
the device plus the whole colocation group's time there), so an untrained network's greedy
rollout is a list scheduler in HEFT's order that judges a group by all of its work, not by its
first op as HEFT does. ``s`` also holds ``scale x look0 x lookahead[u, d]`` (gplace.gnn.features
``LOOKAHEAD``: the unit's transfers to its neighbours' fastest devices, on the finish time's
scale), ``look0`` learned from -1: the prior weighs a transfer still to come as it weighs
finish time. That prior alone places the validation problems at 0.80x the best cheap
heuristic (geomean of 24; HEFT's own criterion: 1.29x; pretrain/README.md). Learning starts
there and moves away from it where that pays. One network serves any graph and device set.

Checkpoints hold a format version, the constructor arguments and the weights; loading uses
``torch.load(weights_only=True)`` and never unpickles arbitrary objects. A loaded policy runs
its message passing with :mod:`gplace.gnn.gine` (plain torch, equal to PyG's GINEConv bit for
bit), so placing never imports torch_geometric; a policy built new uses PyG's layer.
"""

from __future__ import annotations

import math
import os
import warnings
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from gplace.errors import ConfigError
from gplace.gnn.config import ORDERS
from gplace.gnn.features import (DEVICE_FEATURES, EDGE_FEATURES, LOOKAHEAD, OP_VOCAB,
                                 PAIR_FEATURES, UNIT_FEATURES, ProblemFeatures)
from gplace.gnn.schedule import DYN_FEATURES, UNIT_EFT
from gplace.io import atomic_write, read_checkpoint

CHECKPOINT_FORMAT = "gplace-policy"
CHECKPOINT_VERSION = 2  # 2: list-scheduler policy (scores s and decision weights w)


class FeatureTensors(NamedTuple):
    unit_x: torch.Tensor      # (units, UNIT_FEATURES)
    unit_types: torch.Tensor  # (units, vocab)
    edge_index: torch.Tensor  # (2, edges)
    edge_attr: torch.Tensor   # (edges, EDGE_FEATURES)
    device_x: torch.Tensor    # (devices, DEVICE_FEATURES)
    pair_x: torch.Tensor      # (units, devices, PAIR_FEATURES)

    @classmethod
    def from_numpy(cls, f: ProblemFeatures) -> FeatureTensors:
        return cls(*(torch.as_tensor(a) for a in f))


class Scores(NamedTuple):
    s: torch.Tensor  # (units, devices) static scores
    w: torch.Tensor  # (units, DYN_FEATURES) weights on the decision features
    # The state head (GNNPolicy head_hidden > 0; else None): each decision's logit gains
    # v[u] . relu(a phi[u, d] + b[u]), a nonlinear function of the partial schedule.
    a: torch.Tensor | None = None  # (H, DYN_FEATURES), shared by every unit
    b: torch.Tensor | None = None  # (units, H)
    v: torch.Tensor | None = None  # (units, H)

    def numpy(self) -> tuple[np.ndarray, np.ndarray]:
        return (self.s.detach().double().numpy(), self.w.detach().double().numpy())

    def head_numpy(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(a, b, v) as float64 arrays for gplace.gnn.schedule.rollout, or None."""
        if self.a is None:
            return None
        return tuple(t.detach().double().numpy() for t in (self.a, self.b, self.v))

    def detach(self) -> Scores:
        return Scores(*(None if t is None else t.detach() for t in self))


def mlp(sizes: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def _pyg_conv(seq: nn.Sequential) -> nn.Module:
    from torch_geometric.nn import GINEConv  # imports torch._dynamo: seconds
    conv = GINEConv(seq, edge_dim=EDGE_FEATURES)
    _drop_pyg_templates()
    return conv


def _drop_pyg_templates() -> None:
    """PyG renders each layer class's propagate code into a temporary .py file, imports it and
    leaves the file behind (torch_geometric.template): one more in $TMPDIR per process. The
    module is loaded by then; its file goes."""
    import sys
    import tempfile
    tmp = os.path.realpath(tempfile.gettempdir())
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None) if name.startswith("torch_geometric.") else None
        if path and "_propagate" in name and os.path.dirname(os.path.realpath(path)) == tmp:
            try:
                os.remove(path)
            except OSError:
                pass  # gone already, or another process's


def _lean_conv(seq: nn.Sequential) -> nn.Module:
    from gplace.gnn.gine import GINE
    return GINE(seq, edge_dim=EDGE_FEATURES)


def _autocast() -> tuple[bool, ...]:
    return tuple(torch.is_autocast_enabled(d) for d in ("cpu", "cuda"))


def _same(a: tuple, b: tuple) -> bool:
    """Two forward keys (features, training, autocast, weights) name the same computation."""
    return a[0] is b[0] and a[1:] == b[1:]


def _zero_last(seq: nn.Sequential) -> nn.Sequential:
    nn.init.zeros_(seq[-1].weight)
    nn.init.zeros_(seq[-1].bias)
    return seq


class GNNPolicy(nn.Module):
    def __init__(self, hidden_channels: int = 64, num_layers: int = 3, type_channels: int = 16,
                 scale: float = 10.0, lean: bool = False, head_hidden: int = 0,
                 order: str = "rank"):
        """``lean``: GINE layers of gplace.gnn.gine instead of torch_geometric's GINEConv (the
        same function and parameter names; not a constructor argument of the checkpoint).
        ``type_channels`` 0: the network reads no op types (the unit's numbers only).
        ``head_hidden`` H > 0 adds the state head of :class:`Scores` (its output weights start
        at zero, so an untrained network is the linear policy). ``order``: the order in which
        the list scheduler takes ops, HEFT's upward ``rank`` or the simulator's ``dispatch``
        order (gplace.gnn.schedule.build_sched); the policy's decisions are learned in it."""
        super().__init__()
        h = hidden_channels
        self.kwargs = {"hidden_channels": h, "num_layers": num_layers,
                       "type_channels": type_channels, "scale": scale}
        self.set_order(order)  # rank-order checkpoints keep their arguments: no "order"
        self.scale = scale  # logits = scale x (network outputs of order 1): Adam's steps of
                            # ~lr move a decision weight by ~scale x lr
        self.type_embedding = (nn.Linear(len(OP_VOCAB), type_channels, bias=False)
                               if type_channels else None)
        self.unit_in = mlp([UNIT_FEATURES + type_channels, h, h])
        conv = _lean_conv if lean else _pyg_conv
        self.convs = nn.ModuleList(conv(mlp([h, h, h])) for _ in range(num_layers))
        self.norms = nn.ModuleList(nn.LayerNorm(h) for _ in range(num_layers))
        self.device_in = mlp([DEVICE_FEATURES, h, h])
        self.pair_head = _zero_last(mlp([3 * h + PAIR_FEATURES, h, h, 1]))
        self.weight_head = _zero_last(mlp([2 * h, h, DYN_FEATURES]))
        w0 = torch.zeros(DYN_FEATURES)
        w0[UNIT_EFT] = -1.0  # the unit's earliest finish time (gplace.gnn.schedule)
        self.w0 = nn.Parameter(w0)
        self.look0 = nn.Parameter(torch.tensor(-1.0))  # the lookahead prior's weight
        if head_hidden:
            self.kwargs["head_hidden"] = head_hidden
            self.head_a = nn.Parameter(torch.randn(head_hidden, DYN_FEATURES)
                                       / DYN_FEATURES ** 0.5)
            self.head_b = mlp([2 * h, h, head_hidden])
            self.head_v = _zero_last(mlp([2 * h, h, head_hidden]))

    def set_order(self, order: str) -> None:
        """Makes the scheduler take ops in ``order`` from now on (the same weights)."""
        if order not in ORDERS:
            raise ConfigError(f"order {order!r}: one of {', '.join(ORDERS)}")
        self.order = order
        self.kwargs.pop("order", None)
        if order != "rank":
            self.kwargs["order"] = order

    @property
    def dispatch(self) -> bool:
        """Whether the scheduler takes ops in dispatch order (ProblemState's ``dispatch``)."""
        return self.order == "dispatch"

    def param_groups(self, lr: float, w0_lr_scale: float = 10.0) -> list[dict]:
        """Adam groups: the global decision weights ``w0`` and ``look0`` move every decision
        of every graph, and their gradients average over thousands of decisions, so they take
        larger steps than the network (with one lr w0 moved 0.06 in 270 steps of
        pretraining)."""
        rest = [p for n, p in self.named_parameters() if n not in ("w0", "look0")]
        return [{"params": rest, "lr": lr},
                {"params": [self.w0, self.look0], "lr": lr * w0_lr_scale}]

    def forward(self, f: FeatureTensors) -> Scores:
        """The scores of ``f``. Without gradients they are computed with their graph kept, and
        a call with the same features object, weights and mode as the last one gets the same
        scores: detached when gradients are off, and once with the graph when they are on.
        Fine-tuning scores its policy samples, its local moves and its first update at one set
        of weights, so a round computes two forwards instead of three (the same numbers)."""
        key = (f, self.training, _autocast(), self._weights())
        last = getattr(self, "_last", None)  # (key, scores with their graph or None, detached)
        hit = last is not None and _same(last[0], key)
        if torch.is_grad_enabled():
            if hit and last[1] is not None:
                self._last = (last[0], None, last[2])  # a graph serves one backward pass
                return last[1]
            return self._scores(f)
        if hit:
            return last[2]
        graph = None
        trainable = any(p.requires_grad for p in self.parameters())
        if trainable and not torch.is_inference_mode_enabled():
            with torch.enable_grad():
                graph = self._scores(f)
            scores = graph.detach()
        else:
            scores = self._scores(f)
        self._last = (key, graph, scores)
        return scores

    def _weights(self) -> tuple:
        """Which tensors hold the weights, whether they train, and how often each was changed
        in place (an optimizer step, a load, a swap and back): equal when nothing touched them."""
        return tuple((id(p), p._version, p.requires_grad) for p in self.parameters())

    def __getstate__(self):
        """Copies and pickles leave the last scores behind (they belong to one problem)."""
        return {k: v for k, v in super().__getstate__().items() if k != "_last"}

    def _scores(self, f: FeatureTensors) -> Scores:
        types = [] if self.type_embedding is None else [self.type_embedding(f.unit_types)]
        x = self.unit_in(torch.cat([f.unit_x, *types], -1))                          # (U, h)
        for conv, norm in zip(self.convs, self.norms):
            x = norm(x + torch.relu(conv(x, f.edge_index, f.edge_attr)))
        context = x.mean(0, keepdim=True).expand_as(x)                                # (U, h)
        d = self.device_in(f.device_x)                                                # (D, h)
        s = self._pair_scores(x, context[:1], d, f.pair_x)                           # (U, D)
        s = s + self.scale * self.look0 * f.pair_x[..., LOOKAHEAD]
        unit = torch.cat([x, context], -1)                                            # (U, 2h)
        w = self.scale * self.w0 + self.weight_head(unit)                             # (U, F)
        if not hasattr(self, "head_a"):
            return Scores(s, w)
        return Scores(s, w, self.head_a, self.head_b(unit), self.scale * self.head_v(unit))

    def _pair_scores(self, x, context, d, pair_x) -> torch.Tensor:
        """The pair head on [unit, context, device, pair features], with its first layer split
        by input block: W [x; c; d; p] = W_x x + W_c c + W_d d + W_p p, so the unit and device
        parts are computed once per unit and per device instead of once per (unit, device) pair
        (the same function; 3x faster fine-tuning on a 9,400-group graph)."""
        first, h = self.pair_head[0], x.shape[1]
        wx, wc, wd, wp = first.weight.split([h, h, h, first.weight.shape[1] - 3 * h], dim=1)
        hidden = ((x @ wx.T)[:, None] + (context @ wc.T + first.bias)[:, None]
                  + (d @ wd.T)[None] + pair_x @ wp.T)                                 # (U, D, h)
        return self.pair_head[1:](hidden).squeeze(-1)

    # ---- checkpoints ------------------------------------------------------------------------
    def save(self, path: str | os.PathLike, meta: dict | None = None) -> None:
        record = {"format": CHECKPOINT_FORMAT, "format_version": CHECKPOINT_VERSION,
                  "kwargs": dict(self.kwargs), "state_dict": self.state_dict(),
                  "meta": dict(meta or {})}
        atomic_write(path, lambda f: torch.save(record, f), binary=True)

    @classmethod
    def load(cls, path: str | os.PathLike, lean: bool = True) -> tuple[GNNPolicy, dict]:
        """(policy, meta); ConfigError for a missing, corrupt, foreign or incompatible file.
        ``lean``: see __init__ (the default here: loading is what placing does)."""
        record = read_checkpoint(path, "policy checkpoint")
        if isinstance(record, dict) and "pytorch-lightning_version" in record:
            raise ConfigError(f"{path}: a Lightning training checkpoint, not a policy; "
                              "gplace pretrain writes policies as policy.pt (--out, and one "
                              "in each round's folder); gplace.gnn.lightning_io."
                              "export_checkpoint(ckpt, 'policy.pt') converts this one")
        if not isinstance(record, dict) or record.get("format") != CHECKPOINT_FORMAT:
            raise ConfigError(f"{path}: not a gplace policy checkpoint (a file of another kind)")
        if record.get("format_version") != CHECKPOINT_VERSION:
            raise ConfigError(f"{path}: checkpoint format version {record.get('format_version')}, "
                              f"this gplace reads version {CHECKPOINT_VERSION}")
        kwargs = record.get("kwargs")
        bad = _bad_setting(cls, kwargs)
        if bad:
            raise ConfigError(f"{path}: checkpoint's network setting {bad[:80]} is not one "
                              f"this policy takes")
        try:
            with warnings.catch_warnings():  # torch's notes on odd sizes: the error says it
                warnings.simplefilter("ignore")
                policy = cls(**kwargs, lean=lean)
            policy.load_state_dict(upgraded(record["state_dict"]))
        except (TypeError, KeyError, RuntimeError, ValueError, ConfigError) as e:
            raise ConfigError(f"{path}: checkpoint does not match this policy "
                              f"({' '.join(str(e).split())[:120]})") from None
        return policy.eval(), record.get("meta", {})


def upgraded(state_dict: dict) -> dict:
    """A state_dict saved before the lookahead pair feature (gplace.gnn.features LOOKAHEAD)
    with it added: a zero input column in the pair head and ``look0`` at 0, so that the
    policy places as it did. Others are returned as they are."""
    if not isinstance(state_dict, dict) or "look0" in state_dict or \
            "pair_head.0.weight" not in state_dict:
        return state_dict
    first = state_dict["pair_head.0.weight"]
    if first.ndim != 2 or first.shape[1] != 3 * first.shape[0] + PAIR_FEATURES - 1:
        return state_dict  # another shape: load_state_dict says what does not match
    out = dict(state_dict)
    out["pair_head.0.weight"] = torch.cat([first, first.new_zeros(first.shape[0], 1)], 1)
    out["look0"] = first.new_zeros(())
    return out


def _bad_setting(cls, kwargs) -> str | None:
    """The first of a checkpoint's constructor settings whose type is not its default's (a
    float setting takes an int; numbers must be finite); None when all are fine."""
    import inspect
    if not isinstance(kwargs, dict):
        return "kwargs"
    params = inspect.signature(cls.__init__).parameters
    for key, value in kwargs.items():
        default = params[key].default if key in params else None
        if default is None or default is inspect.Parameter.empty:
            continue  # unknown names and required ones: the constructor says
        want = (int, float) if isinstance(default, float) else type(default)
        if isinstance(value, bool) != isinstance(default, bool) or not isinstance(value, want) \
                or (isinstance(value, float) and not math.isfinite(value)):
            return f"{key}={value!r}"
    return None

