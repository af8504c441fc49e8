"""Colocation groups: the ops TensorFlow forces onto one device, a hard
constraint and the unit of placement. Three rules, merged with union-find:

1. explicit: ``_class: "loc:@x"`` on op y puts y with x;
2. implicit: every consumer of a resource handle or of a reference tensor (``float32_ref``)
   lives with its producer, hence with the variable (TF's placer colocates them at run time);
3. TF1 loops: the control-flow ops of one loop variable (Enter -> Merge, NextIteration ->
   Merge, Merge -> Switch, Switch -> Exit) run on one device. Measured: a placed NMT training
   step that split them ran them where the Merge was, whatever NodeDef.device said
   (tests/test_place_corpus.py).

Not modelled: after TF's placer has honoured these groups, a TF1 loop may still see a few of its
boundary ops (a loop-invariant Enter, a gradient loop's Exit) run on another device: 3 of about
1,600 ops of the corpus' nmt_2l (tests/test_place_corpus.py bounds it).
"""

from __future__ import annotations

import numpy as np


class UnionFind:
    def __init__(self, n: int):
        self.parent = np.arange(n)

    def find(self, x: int) -> int:
        parent = self.parent
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:  # path compression
            parent[x], x = root, parent[x]
        return int(root)

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)

    def labels(self) -> np.ndarray:
        """Group id per element, numbered 0.. in order of first appearance."""
        roots = np.array([self.find(i) for i in range(len(self.parent))], np.int64)
        _, first, inverse = np.unique(roots, return_index=True, return_inverse=True)
        rank = np.argsort(np.argsort(first))
        return rank[inverse].astype(np.int64)


_LOOP_PAIRS = {("Enter", "Merge"), ("NextIteration", "Merge"), ("Merge", "Switch"),
               ("Switch", "Exit")}
_LOOP_PAIRS |= {("Ref" + a, b) for a, b in _LOOP_PAIRS} | {(a, "Ref" + b) for a, b in _LOOP_PAIRS}


def colocation_groups(nodes, index: dict[str, int], edge_src, edge_dst, edge_dtype) -> np.ndarray:
    uf = UnionFind(len(nodes))
    for k, node in enumerate(nodes):
        if "_class" in node.attr:
            for entry in node.attr["_class"].list.s:
                target = entry.decode(errors="replace")
                if target.startswith("loc:@") and target[5:] in index:
                    uf.union(k, index[target[5:]])
    for s, d, dtype in zip(edge_src.tolist(), edge_dst.tolist(), edge_dtype.tolist()):
        if dtype == "resource" or dtype.endswith("_ref") or \
                (nodes[s].op, nodes[d].op) in _LOOP_PAIRS:
            uf.union(s, d)
    return uf.labels()
