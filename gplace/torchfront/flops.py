"""FLOPs of each node of a step graph.

Where ``torch.utils.flop_counter`` has a formula (matrix products, convolutions and their
backward, attention), the node gets exactly that count, computed from the shapes in
``node.meta["val"]``: the figure FlopCounterMode would report for the same op, except a grouped
convolution's weight gradient, which the counter counts as if the convolution were not grouped
(``groups`` times too many: 48x on a depthwise layer of 48 channels) and which is counted here
as its forward (:func:`_grouped_conv_backward`). Fused attention
kernels it has no formula for (the CPU flash kernel) get the same products' count
(:func:`attention_flops`). Every other
node gets gplace's estimate for the matching TensorFlow op (gplace/importer/flops.py): output
elements x 1 for arithmetic, x 4 for transcendental functions, input elements for reductions,
10 / 12 per element for normalization forward / backward, 5 for softmax, 8 for the losses,
the optimizer's arithmetic per parameter element for updates, 0 for data movement.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch import fx
from torch.utils._pytree import tree_map
from torch.utils.flop_counter import flop_registry

from gplace.torchfront.optypes import aten_name

ARITHMETIC = {"add", "sub", "rsub", "mul", "div", "neg", "relu", "threshold_backward",
              "maximum", "minimum", "clamp", "clamp_min", "where", "masked_fill", "square",
              "pow", "abs", "hardtanh", "hardtanh_backward", "sigmoid_backward",
              "tanh_backward", "addcmul", "addcdiv", "lerp", "leaky_relu", "eq", "ne", "lt",
              "le", "gt", "ge", "bitwise_not", "bitwise_and", "logical_not", "sign"}
TRANSCENDENTAL = {"exp", "log", "tanh", "sigmoid", "sqrt", "rsqrt", "erf", "gelu",
                  "gelu_backward", "silu", "silu_backward", "softplus", "log1p", "expm1",
                  "reciprocal", "sin", "cos"}
REDUCTIONS = {"sum", "mean", "amax", "amin", "max", "min", "prod", "argmax", "argmin",
              "logsumexp", "var", "std", "embedding_dense_backward", "index_add",
              "scatter_add", "index_put"}
PER_ELEMENT = {"native_batch_norm": 10, "_native_batch_norm_legit_functional": 10,
               "_native_batch_norm_legit_no_training": 10, "native_layer_norm": 10,
               "native_batch_norm_backward": 12, "native_layer_norm_backward": 12,
               "_softmax": 5, "_log_softmax": 5, "_softmax_backward_data": 5,
               "_log_softmax_backward_data": 5, "nll_loss_forward": 8, "nll_loss_backward": 8,
               "binary_cross_entropy_with_logits": 8, "max_pool2d_with_indices": 4,
               "max_pool2d_with_indices_backward": 4, "avg_pool2d": 4,
               "avg_pool2d_backward": 4, "native_group_norm": 10,
               "native_group_norm_backward": 12, "mse_loss": 3, "mse_loss_backward": 3,
               "smooth_l1_loss": 4, "smooth_l1_loss_backward": 4, "huber_loss": 4,
               "huber_loss_backward": 4, "native_dropout": 5, "native_dropout_backward": 1,
               "bernoulli": 4}


class NodeFlops(NamedTuple):
    counted: float    # from torch.utils.flop_counter's formula (0 when it has none)
    estimated: float  # gplace's estimate, for nodes without a formula


def _numel(x) -> int:
    return int(x.numel()) if isinstance(x, torch.Tensor) else 0


def _tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


def node_flops(node: fx.Node, update_flops_per_element: int = 2) -> NodeFlops:
    """The FLOPs of one call_function node (0 for the rest)."""
    if node.op != "call_function":
        return NodeFlops(0.0, 0.0)
    packet = getattr(node.target, "overloadpacket", None)
    if packet is not None and packet in flop_registry:
        args, kwargs = tree_map(_val, (node.args, node.kwargs))
        count = flop_registry[packet]
        if packet is torch.ops.aten.convolution_backward and len(args) > 10 and args[9] > 1:
            return NodeFlops(_grouped_conv_backward(count, args, kwargs, node), 0.0)
        return NodeFlops(float(count(*args, **kwargs, out_val=node.meta.get("val"))), 0.0)
    name = aten_name(node.target)
    if "scaled_dot_product" in name and "attention" in name:
        return NodeFlops(0.0, attention_flops(name, node.args))
    out = max((_numel(t) for t in _tensors(node.meta.get("val"))), default=0)
    inputs = max((_numel(a.meta.get("val")) for a in node.all_input_nodes), default=0)
    if packet is None and name.endswith("_update"):  # gplace.torchfront.optim
        return NodeFlops(0.0, float(out * update_flops_per_element))
    if name in ARITHMETIC:
        return NodeFlops(0.0, float(out))
    if name in TRANSCENDENTAL:
        return NodeFlops(0.0, float(4 * out))
    if name in REDUCTIONS:
        return NodeFlops(0.0, float(inputs))
    return NodeFlops(0.0, float(PER_ELEMENT.get(name, 0) * max(out, inputs)))


def _grouped_conv_backward(count, args, kwargs, node) -> float:
    """convolution_backward with ``groups`` > 1: the counter's input gradient, and its weight
    gradient divided by ``groups`` (it contracts every input channel with every output
    channel, where each group's output channels read only that group's inputs)."""
    val, mask = node.meta.get("val"), list(args[10])
    both = float(count(*args, **kwargs, out_val=val))
    without_weight = [*args[:10], [mask[0], False, *mask[2:]], *args[11:]]
    inputs_only = float(count(*without_weight, **kwargs, out_val=val))
    return inputs_only + (both - inputs_only) / args[9]


def attention_flops(name: str, args) -> float:
    """Fused attention kernels the counter has no formula for (the CPU flash kernel
    ``_scaled_dot_product_flash_attention_for_cpu`` and its backward): Q K^T and P V,
    2 b h Lq Lk (d + dv) forward, twice that backward (dP, dV, dQ, dK)."""
    backward = name.endswith("_backward")  # (grad_out, query, key, value, ...)
    q, k, v = (_val(a) for a in (args[1:4] if backward else args[:3]))
    if not all(isinstance(t, torch.Tensor) and t.dim() >= 2 for t in (q, k, v)):
        return 0.0
    heads = _numel(q) // (q.shape[-2] * q.shape[-1]) if q.shape[-2] * q.shape[-1] else 0
    forward = 2.0 * heads * q.shape[-2] * k.shape[-2] * (q.shape[-1] + v.shape[-1])
    return 2.0 * forward if backward else forward


def _val(x):
    return x.meta.get("val") if isinstance(x, fx.Node) else x


def graph_flops(nodes: list[fx.Node], update_flops_per_element: int) -> np.ndarray:
    """(nodes, 2) float64: counted and estimated FLOPs of each node."""
    rows = [node_flops(n, update_flops_per_element) for n in nodes]
    return np.asarray(rows, np.float64).reshape(len(nodes), 2)


def reference_flops(module: torch.nn.Module, batch) -> float:
    """FLOPs of one forward and backward of ``module`` on ``batch`` as FlopCounterMode counts
    them in eager mode: the figure the imported graph's counted FLOPs should match. oneDNN is
    off: its fused CPU kernels (an LSTM's ``mkldnn_rnn_layer``) have no formula, so the counter
    would miss their matrix products; without it they run as the ATen ops the graph holds."""
    from torch.utils.flop_counter import FlopCounterMode
    counter = FlopCounterMode(display=False)
    from gplace.torchfront.step import without_onednn
    with without_onednn(), counter:
        module(*batch).backward()
    return float(counter.get_total_flops())
