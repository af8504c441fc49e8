"""A placed training step that runs: the step graph cut at every change of device.

Walking the graph in its (topological) node order, each maximal run of consecutive nodes on
one device becomes one partition (``torch.fx.passes.split_module``), numbered in order: every
edge goes from an earlier node to a later one, so from a partition to itself or a later one,
and the partition graph is acyclic. A tensor that a partition needs from another device, or
from a placeholder held on another device, is moved by a :class:`Move` node at the boundary
(``tensor.to(device, copy=True)``: a copy even when two logical devices share one physical
device, as on a CPU-only machine, so that the moving path is the one a GPU run takes).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

import torch
from torch import fx, nn
from torch.fx.passes.split_module import split_module

from gplace.errors import ConfigError
from gplace.torchfront.opgraph import op_names, op_nodes, source_of
from gplace.torchfront.step import StepGraph


class Move(nn.Module):
    """Copies a tensor to ``device``; counts the copies and their bytes."""

    def __init__(self, device: torch.device):
        super().__init__()
        self.device = device
        self.count = 0
        self.bytes = 0

    def forward(self, x):
        if not isinstance(x, torch.Tensor):
            return x
        self.count += 1
        self.bytes += x.numel() * x.element_size()
        return x.to(self.device, copy=True)


def default_device_map(labels) -> dict[str, torch.device]:
    """A torch device for each placement label: ``...GPU:k`` / ``gpuk`` -> ``cuda:k`` where
    CUDA has that device, everything else (and every GPU here without CUDA) -> ``cpu``."""
    result = {}
    for label in labels:
        text = str(label).lower()
        k = next((int(text.rsplit(sep, 1)[1]) for sep in ("gpu:", "gpu")
                  if sep in text and text.rsplit(sep, 1)[1].isdigit()), None)
        cuda = k is not None and torch.cuda.is_available() and k < torch.cuda.device_count()
        result[label] = torch.device(f"cuda:{k}" if cuda else "cpu")
    return result


@dataclass
class PlacedStep:
    """The split step: ``run(inputs)`` takes and returns what StepGraph.run does."""

    step: StepGraph
    module: fx.GraphModule                # top level: partitions and Move nodes
    node_device: dict[str, str]           # FX node name -> placement label
    partitions: list[tuple[str, str]]     # (submodule name, placement label), in order
    device_map: dict[str, torch.device]
    input_labels: list[str]               # placement label of every step input
    moves: list[Move] = field(default_factory=list)

    @property
    def transfers(self) -> int:
        """Tensors moved between devices since this PlacedStep was made."""
        return sum(m.count for m in self.moves)

    def place_inputs(self, inputs) -> list:
        """The inputs copied onto the devices of their placeholders."""
        return [x.to(self.device_map[d]) if isinstance(x, torch.Tensor) else x
                for x, d in zip(inputs, self.input_labels)]

    def run(self, inputs=None) -> tuple:
        """One step; inputs already on their devices are not copied."""
        with torch.no_grad():
            return tuple(self.module(*self.place_inputs(self.step.inputs if inputs is None
                                                        else inputs)))


def node_devices(step: StepGraph, op_devices: dict[str, str]) -> dict[str, str]:
    """FX node name -> placement label, from OpGraph op name -> label (as PlacementResult's
    ``op_devices``); a getitem goes where its op does."""
    nodes = op_nodes(step)
    missing = [n for n in op_names(step, nodes) if n not in op_devices]
    if missing:
        raise ConfigError(f"the placement has no device for {len(missing)} op(s) of the step, "
                          f"e.g. {missing[0]!r}")
    result = {n.name: op_devices[name] for n, name in zip(nodes, op_names(step, nodes))}
    for node in step.module.graph.nodes:
        if node.op == "call_function" and node.name not in result:
            result[node.name] = result[source_of(node)[0].name]
    return result


def _runs(graph: fx.Graph, device: dict[str, str]) -> dict[str, int]:
    """Partition of every call/get_attr node: the index of its run of equal devices."""
    part, current, last = {}, -1, None
    for node in graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        if device[node.name] != last:
            current, last = current + 1, device[node.name]
        part[node.name] = current
    return part


def placed_step(step: StepGraph, op_devices: dict[str, str],
                device_map: dict[str, str | torch.device] | None = None) -> PlacedStep:
    """The PlacedStep of ``step`` under ``op_devices`` (op name -> placement label);
    ``device_map`` maps labels to torch devices (default: :func:`default_device_map`)."""
    device = node_devices(step, op_devices)
    labels = sorted(set(device.values()))
    dmap = default_device_map(labels) if device_map is None else \
        {k: torch.device(v) for k, v in device_map.items()}
    unknown = [lab for lab in labels if lab not in dmap]
    if unknown:
        raise ConfigError(f"device_map has no torch device for {unknown[0]!r}; it maps "
                          f"{', '.join(map(str, dmap)) or 'nothing'}")
    part = _runs(step.module.graph, device)
    split = split_module(step.module, None, lambda n: part[n.name], keep_original_order=True)
    part_label = {f"submod_{part[n]}": device[n] for n in part}
    inputs = [n for n in step.module.graph.nodes if n.op == "placeholder"]
    placed = PlacedStep(step, split, device, [(k, part_label[k]) for k in sorted(
        part_label, key=lambda s: int(s.split("_")[1]))], dmap,
        [device[n.name] for n in inputs])
    _insert_moves(placed, {n.name: device[n.name] for n in inputs}, part_label)
    return placed


def _insert_moves(placed: PlacedStep, input_label: dict[str, str],
                  part_label: dict[str, str]) -> None:
    """A Move before every partition argument that lives on another device."""
    graph = placed.module.graph
    where: dict[str, str] = dict(input_label)
    cache: dict[tuple[str, str], fx.Node] = {}
    for node in list(graph.nodes):
        if node.op == "call_module" and node.target in part_label:
            label = part_label[node.target]
            where[node.name] = label
            node.args = tuple(_moved(placed, graph, a, label, where, cache) for a in node.args)
        elif node.op == "call_function" and node.target is operator.getitem:
            where[node.name] = where[node.args[0].name]
    graph.lint()
    placed.module.recompile()


def _moved(placed: PlacedStep, graph: fx.Graph, arg, label: str, where: dict[str, str],
           cache: dict) -> fx.Node:
    if not isinstance(arg, fx.Node) or where.get(arg.name, label) == label:
        return arg
    key = (arg.name, label)
    if key not in cache:
        name = f"move_{len(placed.moves)}"
        move = Move(placed.device_map[label])
        placed.module.add_submodule(name, move)
        placed.moves.append(move)
        with graph.inserting_after(arg):
            cache[key] = graph.call_module(name, (arg,))
    return cache[key]
