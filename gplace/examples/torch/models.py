"""Five small PyTorch training steps of different families, for gplace's PyTorch front end.

Each module's ``forward`` takes one example batch and returns the scalar loss, which is what
``gplace.torchfront`` imports (it derives the backward and adds the optimizer). Sizes are small
so that export, import and the tests stay fast on a CPU; ``EXAMPLES`` maps a name to a builder
returning ``(module, batch)``, seeded.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn


class SmallCNN(nn.Module):
    """Two conv-batchnorm-ReLU blocks, max pooling, a linear classifier (a VGG-style CNN)."""

    def __init__(self, classes: int = 10, width: int = 16):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, 2 * width, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(2 * width)
        self.fc = nn.Linear(2 * width * 8 * 8, classes)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)   # (batch, width, 16, 16)
        h = F.max_pool2d(F.relu(self.bn2(self.conv2(h))), 2)   # (batch, 2 width, 8, 8)
        return F.cross_entropy(self.fc(h.flatten(1)), y)


class Block(nn.Module):
    """A pre-norm transformer block: causal self-attention and an MLP (nanoGPT's Block)."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / (d // self.heads) ** 0.5)  # (b, heads, t, t)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class SmallGPT(nn.Module):
    """A two-layer GPT language model with next-token cross-entropy (after nanoGPT)."""

    def __init__(self, vocab: int = 256, d: int = 64, heads: int = 4, layers: int = 2,
                 context: int = 32):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(context, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln(x))                     # (batch, t, vocab)
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


class LSTMClassifier(nn.Module):
    """Token embedding, a two-layer LSTM, the last hidden state classified."""

    def __init__(self, vocab: int = 500, d: int = 32, hidden: int = 64, classes: int = 5):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.lstm = nn.LSTM(d, hidden, num_layers=2, batch_first=True)
        self.fc = nn.Linear(hidden, classes)

    def forward(self, tokens: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.emb(tokens))               # (batch, t, hidden)
        return F.cross_entropy(self.fc(out[:, -1]), y)


class RecSys(nn.Module):
    """A DLRM-style click model: sparse features through embedding tables, dense features
    through an MLP, pairwise dot-product interactions, a top MLP, binary cross-entropy."""

    def __init__(self, tables: tuple[int, ...] = (1000, 500, 200), d: int = 16, dense: int = 13):
        super().__init__()
        self.tables = nn.ModuleList(nn.Embedding(n, d) for n in tables)
        self.bottom = nn.Sequential(nn.Linear(dense, 64), nn.ReLU(), nn.Linear(64, d))
        pairs = (len(tables) + 1) * len(tables) // 2
        self.top = nn.Sequential(nn.Linear(d + pairs, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        z = [self.bottom(dense)] + [t(sparse[:, i]) for i, t in enumerate(self.tables)]
        z = torch.stack(z, dim=1)                          # (batch, features, d)
        dots = z @ z.transpose(1, 2)                       # (batch, features, features)
        i, j = torch.triu_indices(z.shape[1], z.shape[1], offset=1)
        h = torch.cat([z[:, 0], dots[:, i, j]], dim=1)
        return F.binary_cross_entropy_with_logits(self.top(h).squeeze(1), y)


class GCN(nn.Module):
    """A two-layer graph convolutional network (Kipf & Welling, ICLR 2017) from torch-geometric,
    node classification on one graph. Self-loops come with the edges: GCNConv's own
    ``add_self_loops`` selects edges by a boolean mask, an output of data-dependent size that
    the joint graph cannot hold."""

    def __init__(self, features: int = 32, hidden: int = 64, classes: int = 7):
        super().__init__()
        from torch_geometric.nn import GCNConv
        self.conv1 = GCNConv(features, hidden, add_self_loops=False)
        self.conv2 = GCNConv(hidden, classes, add_self_loops=False)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.conv1(x, edge_index))
        return F.cross_entropy(self.conv2(h, edge_index), y)


def cnn() -> tuple[nn.Module, tuple]:
    return SmallCNN(), (torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,)))


def gpt() -> tuple[nn.Module, tuple]:
    return SmallGPT(), (torch.randint(0, 256, (4, 32)), torch.randint(0, 256, (4, 32)))


def lstm() -> tuple[nn.Module, tuple]:
    return LSTMClassifier(), (torch.randint(0, 500, (8, 8)), torch.randint(0, 5, (8,)))


def recsys() -> tuple[nn.Module, tuple]:
    sparse = torch.stack([torch.randint(0, n, (32,)) for n in (1000, 500, 200)], dim=1)
    return RecSys(), (torch.randn(32, 13), sparse, torch.rand(32).round())


def gnn() -> tuple[nn.Module, tuple]:
    nodes, edges = 100, 400
    loops = torch.arange(nodes).repeat(2, 1)
    edge_index = torch.cat([torch.randint(0, nodes, (2, edges)), loops], dim=1)
    return GCN(), (torch.randn(nodes, 32), edge_index, torch.randint(0, 7, (nodes,)))


EXAMPLES: dict[str, Callable[[], tuple[nn.Module, tuple]]] = {
    "cnn": cnn, "gpt": gpt, "lstm": lstm, "recsys": recsys, "gnn": gnn}


def build(name: str, seed: int = 0) -> tuple[nn.Module, tuple]:
    """The example ``name`` (one of EXAMPLES) with its batch, weights and data drawn from ``seed``."""
    if name not in EXAMPLES:
        raise KeyError(f"unknown example {name!r}; choose one of {', '.join(EXAMPLES)}")
    torch.manual_seed(seed)
    return EXAMPLES[name]()
