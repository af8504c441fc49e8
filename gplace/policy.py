"""The GNN placement policy (DESIGN.md, "Policy"): per-unit device distributions for any graph
on any device set.

A PyG encoder over the unit graph (GINE layers with edge features, as Hu et al. 2020, with
residual connections and a mean-pooled graph context), a device encoder over device features,
and a head that scores every (unit, device) pair from both embeddings and the pair's cost
features. Logits are (units, devices): the same softmax family as Post's logit table, so Post's
objective (gplace.post) trains it unchanged; one network serves any number and kind of devices.

Checkpoints hold a format version, the constructor arguments and the weights; loading uses
``torch.load(weights_only=True)`` and never unpickles arbitrary objects.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np
import torch
from torch import nn
from torch_geometric.nn import GINEConv

from gplace.errors import ConfigError
from gplace.features import (DEVICE_FEATURES, EDGE_FEATURES, OP_VOCAB, PAIR_FEATURES,
                             UNIT_FEATURES, ProblemFeatures)
from gplace.io import atomic_write

CHECKPOINT_FORMAT = "gplace-policy"
CHECKPOINT_VERSION = 1


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


def mlp(sizes: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


class GNNPolicy(nn.Module):
    def __init__(self, hidden_channels: int = 64, num_layers: int = 3, type_channels: int = 16):
        super().__init__()
        h = hidden_channels
        self.kwargs = {"hidden_channels": h, "num_layers": num_layers,
                       "type_channels": type_channels}
        self.type_embedding = nn.Linear(len(OP_VOCAB), type_channels, bias=False)
        self.unit_in = mlp([UNIT_FEATURES + type_channels, h, h])
        self.convs = nn.ModuleList(GINEConv(mlp([h, h, h]), edge_dim=EDGE_FEATURES)
                                   for _ in range(num_layers))
        self.norms = nn.ModuleList(nn.LayerNorm(h) for _ in range(num_layers))
        self.device_in = mlp([DEVICE_FEATURES, h, h])
        self.head = mlp([3 * h + PAIR_FEATURES, h, h, 1])

    def forward(self, f: FeatureTensors) -> torch.Tensor:
        """(units, devices) logits."""
        x = self.unit_in(torch.cat([f.unit_x, self.type_embedding(f.unit_types)], -1))  # (U, h)
        for conv, norm in zip(self.convs, self.norms):
            x = norm(x + torch.relu(conv(x, f.edge_index, f.edge_attr)))
        context = x.mean(0, keepdim=True).expand_as(x)                                # (U, h)
        d = self.device_in(f.device_x)                                                # (D, h)
        units, devices = x.shape[0], d.shape[0]
        pair = torch.cat([x[:, None].expand(units, devices, -1),
                          context[:, None].expand(units, devices, -1),
                          d[None].expand(units, devices, -1), f.pair_x], -1)          # (U, D, 3h+P)
        return self.head(pair).squeeze(-1)

    # ---- checkpoints ------------------------------------------------------------------------
    def save(self, path: str | os.PathLike, meta: dict | None = None) -> None:
        record = {"format": CHECKPOINT_FORMAT, "format_version": CHECKPOINT_VERSION,
                  "kwargs": dict(self.kwargs), "state_dict": self.state_dict(),
                  "meta": dict(meta or {})}
        atomic_write(path, lambda f: torch.save(record, f), binary=True)

    @classmethod
    def load(cls, path: str | os.PathLike) -> tuple[GNNPolicy, dict]:
        """(policy, meta); ConfigError for a missing, corrupt, foreign or incompatible file."""
        if not os.path.isfile(path):
            raise ConfigError(f"{path}: no such checkpoint file")
        try:
            record = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:  # torch raises pickle, zip and runtime errors for bad files
            raise ConfigError(f"{path}: not a gplace policy checkpoint (cannot read it: "
                              f"{' '.join(str(e).split())[:120]})") from None
        if not isinstance(record, dict) or record.get("format") != CHECKPOINT_FORMAT:
            raise ConfigError(f"{path}: not a gplace policy checkpoint (a file of another kind)")
        if record.get("format_version") != CHECKPOINT_VERSION:
            raise ConfigError(f"{path}: checkpoint format version {record.get('format_version')}, "
                              f"this gplace reads version {CHECKPOINT_VERSION}")
        try:
            policy = cls(**record["kwargs"])
            policy.load_state_dict(record["state_dict"])
        except (TypeError, KeyError, RuntimeError) as e:
            raise ConfigError(f"{path}: checkpoint does not match this policy "
                              f"({' '.join(str(e).split())[:120]})") from None
        return policy.eval(), record.get("meta", {})


def sample(logits: torch.Tensor, count: int, generator: torch.Generator) -> torch.Tensor:
    """(count, units) placements drawn from the per-unit softmaxes."""
    probs = torch.softmax(logits.detach().double(), -1)                    # (U, D)
    return torch.multinomial(probs, count, replacement=True, generator=generator).T


def greedy(logits: torch.Tensor) -> np.ndarray:
    """The most likely device per unit: the zero-shot placement."""
    return logits.detach().argmax(-1).numpy().astype(np.int64)
