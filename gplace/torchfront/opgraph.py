"""A StepGraph as an OpGraph (gplace.graph).

Ops are the FX nodes (placeholders, ``get_attr`` constants and calls); a ``getitem`` node is
not an op but output ``i`` of the op it indexes, as a multi-output TensorFlow op. Names say
the pass the way the TensorFlow importer's graphs do: ``params/<fqn>``, ``buffers/<fqn>``,
``optimizer/<fqn>/<state>``, ``inputs/<arg>``, ``gradients/<node>`` for the backward,
``optimizer/<fqn>/<kind>`` for the update (``sgd``, ``momentum``, ``adam`` or ``adamw``), the
FX node name for the forward.

Colocation (a hard constraint, as gplace.importer.colocation says; the rules TensorFlow applies
to a variable's consumers, here made explicit):

1. a parameter, its optimizer state, its update, and the additions that accumulate its
   gradient from several uses (a tied weight) form one group;
2. an op whose output replaces a buffer (batch norm's running statistics, updated in place in
   eager PyTorch) sits with that buffer.
"""

from __future__ import annotations

import operator

import numpy as np
import torch
from torch import fx

from gplace.graph import OpGraph
from gplace.torchfront.flops import graph_flops
from gplace.torchfront.record import module_paths
from gplace.torchfront.optypes import ROLE_TYPE, aten_name, tf_type
from gplace.torchfront.step import StepGraph


class UnionFind:
    """Disjoint sets over 0..n-1 (union by smaller root, path halving)."""

    def __init__(self, n: int):
        self.parent = list(range(n))

    def find(self, x: int) -> int:
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)

    def labels(self) -> np.ndarray:
        """Group ids 0.. in order of first appearance."""
        roots = [self.find(i) for i in range(len(self.parent))]
        first: dict[int, int] = {}
        return np.asarray([first.setdefault(r, len(first)) for r in roots], np.int64)


def is_getitem(node: fx.Node) -> bool:
    return node.op == "call_function" and node.target is operator.getitem


def is_output_of(node: fx.Node) -> bool:
    """A getitem that picks an output of an op (not of another getitem's tuple)."""
    return is_getitem(node) and not is_getitem(node.args[0])


def op_nodes(step: StepGraph) -> list[fx.Node]:
    """The FX nodes that are ops, in graph (topological) order."""
    return [n for n in step.module.graph.nodes if n.op != "output" and not is_output_of(n)]


def source_of(node: fx.Node) -> tuple[fx.Node, int]:
    """(op node, output index) that a value node stands for."""
    if is_output_of(node):
        return node.args[0], int(node.args[1])
    return node, 0


def _outputs(val) -> list:
    return list(val) if isinstance(val, (tuple, list)) else [val]


def _describe(value) -> tuple[str, int, tuple[int, ...] | None]:
    """(dtype name, bytes, shape) of one output value."""
    if isinstance(value, torch.Tensor):
        shape = tuple(int(d) for d in value.shape)
        return str(value.dtype).removeprefix("torch."), value.numel() * value.element_size(), shape
    if value is None:
        return "none", 0, ()
    return "int64", 8, ()


def op_names(step: StepGraph, nodes: list[fx.Node]) -> list[str]:
    """The OpGraph name of every op node (see the module docstring)."""
    placeholders = [n for n in nodes if n.op == "placeholder"]
    fqn = iter([*(f"params/{p}" for p in step.param_names),
                *(f"buffers/{b}" for b in step.buffer_names),
                *(f"optimizer/{s.rsplit('.', 1)[0]}/{s.rsplit('.', 1)[1]}"
                  for s in step.state_names),
                *(f"inputs/{i}" for i in step.input_names)])
    by_placeholder = {n.name: next(fqn) for n in placeholders}
    names = []
    for node in nodes:
        role = step.role.get(node.name, "forward")
        if node.op == "placeholder":
            names.append(by_placeholder[node.name])
        elif role == "optimizer":
            names.append(f"optimizer/{step.owner[node.name]}/{step.optimizer.kind}")
        elif role == "backward":
            names.append(f"gradients/{node.name}")
        else:
            names.append(node.name)
    return names


def to_op_graph(step: StepGraph, name: str, source: str = "") -> OpGraph:
    """The OpGraph of ``step``; ``meta["torch"]`` keeps the FX node of every op, its ATen name
    and its role, and the FLOPs torch's counter covers."""
    nodes = op_nodes(step)
    index = {n.name: i for i, n in enumerate(nodes)}
    outs = [_outputs(n.meta.get("val")) for n in nodes]
    described = [[_describe(v) for v in o] for o in outs]
    flat = [d for row in described for d in row]
    out_ptr = np.concatenate([[0], np.cumsum([len(r) for r in described])]).astype(np.int64)
    dims = [d[2] or () for d in flat]
    edges = sorted({(index[source_of(a)[0].name], source_of(a)[1], index[n.name])
                    for n in nodes for a in n.all_input_nodes})
    e = np.asarray(edges, np.int64).reshape(-1, 3)
    out_bytes = np.asarray([d[1] for d in flat], np.int64)
    aten = [_aten(step, n) for n in nodes]
    flops = graph_flops(nodes, step.optimizer.flops_per_element)
    modules = module_paths(step)
    none = np.zeros(0, np.int64)
    graph = OpGraph(
        names=np.asarray(op_names(step, nodes), dtype=str),
        op_types=np.asarray([_tf_type(step, n, a) for n, a in zip(nodes, aten)], dtype=str),
        devices=np.full(len(nodes), "", dtype=str),
        flops=flops.sum(axis=1), param_bytes=_param_bytes(step, nodes, outs),
        group=colocation_groups(step, nodes, index),
        out_ptr=out_ptr, out_dtype=np.asarray([d[0] for d in flat], dtype=str),
        out_bytes=out_bytes,
        out_rank=np.asarray([len(d[2]) if d[2] is not None else -1 for d in flat], np.int64),
        dim_ptr=np.concatenate([[0], np.cumsum([len(d) for d in dims])]).astype(np.int64),
        out_dims=np.fromiter((x for d in dims for x in d), np.int64),
        edge_src=e[:, 0].copy(), edge_dst=e[:, 2].copy(), edge_src_out=e[:, 1].copy(),
        edge_bytes=out_bytes[out_ptr[e[:, 0]] + e[:, 1]] if len(e) else none,
        edge_back=np.zeros(len(e), bool), ctrl_src=none, ctrl_dst=none,
        ctrl_back=np.zeros(0, bool),
        meta={"name": name, "source": source, "torch": {
            "fx_nodes": [n.name for n in nodes], "aten": aten,
            "roles": [step.role.get(n.name, "forward") for n in nodes],
            "counted_flops": flops[:, 0].tolist(),
            "module": [modules.get(n.name, "") for n in nodes],
            "optimizer": step.optimizer.as_dict()}})
    return graph.validate()


def _aten(step: StepGraph, node: fx.Node) -> str:
    if node.op == "placeholder":
        return step.role[node.name]
    if node.op == "get_attr":
        return "constant"
    return aten_name(node.target)


def _tf_type(step: StepGraph, node: fx.Node, aten: str) -> str:
    role = step.role.get(node.name)
    if role in ROLE_TYPE and node.op == "placeholder":
        return ROLE_TYPE[role]
    if role == "optimizer":
        return step.optimizer.tf_type
    if node.op == "get_attr":
        return "Const"
    return tf_type(aten)


def _param_bytes(step: StepGraph, nodes: list[fx.Node], outs: list) -> np.ndarray:
    """Bytes of the variables each op owns: parameters, buffers and optimizer state live in
    their placeholders. A parameter no op reads holds none: it is not part of the step, and
    the second entry of a tied pair is the first's memory in the model."""
    return np.asarray([_describe(o[0])[1] if step.role.get(n.name) in ("param", "buffer",
                                                                         "state")
                       and step.owner.get(n.name) not in step.unread else 0
                       for n, o in zip(nodes, outs)], np.int64)


def colocation_groups(step: StepGraph, nodes: list[fx.Node], index: dict[str, int]) -> np.ndarray:
    """(ops,) group ids by the rules of the module docstring."""
    uf = UnionFind(len(nodes))
    by_name = {n.name: n for n in step.module.graph.nodes}
    param_node = {step.owner[n.name]: n for n in nodes if step.role.get(n.name) == "param"}
    for node in nodes:
        owner = step.owner.get(node.name)
        if owner is not None and node is not param_node.get(owner):
            uf.union(index[node.name], index[param_node[owner].name])
    for param, grad in step.grad_of.items():
        for op in _accumulation(by_name[grad]):
            uf.union(index[op.name], index[param_node[param].name])
    buffers = [n for n in nodes if step.role.get(n.name) == "buffer"]
    for node, name in zip(buffers, step.buffer_names):
        if name in step.buffer_update:
            producer, _ = source_of(by_name[step.buffer_update[name]])
            uf.union(index[producer.name], index[node.name])
    return uf.labels()


def _accumulation(grad: fx.Node) -> list[fx.Node]:
    """The additions that sum a gradient's contributions: the gradient node when it is an
    ``aten.add``, and, recursively, its inputs that are additions used only there."""
    node, _ = source_of(grad)
    if node.target is not torch.ops.aten.add.Tensor:
        return []
    found, stack = [], [node]
    while stack:
        n = stack.pop()
        found.append(n)
        stack.extend(a for a in n.all_input_nodes
                     if a.target is torch.ops.aten.add.Tensor and len(a.users) == 1)
    return found
