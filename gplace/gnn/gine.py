"""GINE message passing (Hu et al., "Strategies for Pre-training Graph Neural Networks", ICLR
2020) in plain torch, for placing with a trained policy:

    x_i' = nn((1 + eps) x_i + sum_{j -> i} relu(x_j + lin(e_ji)))

The same arithmetic, operation for operation, as ``torch_geometric.nn.GINEConv`` (index_select
of the sources, a ``scatter_add_`` into zeros for the sum), so the outputs and gradients are equal
bit for bit (tests/gnn/test_gine.py), and the same parameter names, so a checkpoint's
``state_dict`` loads into either. It exists because importing torch_geometric imports
``torch._dynamo`` (seconds at start-up) while placement only needs this forward; pretraining
builds its policies on PyG's layer.
"""

from __future__ import annotations

import torch
from torch import nn


class GINE(nn.Module):
    """``GINEConv(nn, edge_dim=edge_dim)`` with ``eps`` fixed at 0, as the policy uses it."""

    def __init__(self, mlp: nn.Sequential, edge_dim: int):
        super().__init__()
        self.nn = mlp
        self.register_buffer("eps", torch.zeros(1))
        self.lin = nn.Linear(edge_dim, mlp[0].in_features)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor,
                edge_attr: torch.Tensor) -> torch.Tensor:
        src, dst = edge_index[0], edge_index[1]                              # (E,), (E,)
        messages = (x.index_select(0, src) + self.lin(edge_attr)).relu()     # (E, h)
        out = x.new_zeros(x.shape).scatter_add_(0, dst[:, None].expand_as(messages), messages)
        return self.nn(out + (1 + self.eps) * x)                             # (N, h_out)
