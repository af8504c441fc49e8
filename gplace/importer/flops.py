"""FLOPs of one run of each op.

TensorFlow's registered statistics (``ops.get_stats_for_node_def(..., "flops")``: MatMul,
Conv2D and its gradients, BatchMatMul, pooling, BiasAdd, the basic arithmetic) are used where
they exist and the shapes they need are known. Every other op gets the estimate below, from its
output (or largest input) element count ``n``:

- elementwise math and activations, and their gradients: ``n`` x a per-op factor (1 for
  arithmetic, 4 for transcendental functions such as Exp, Tanh, Sigmoid);
- reductions (Sum, Max, Prod, ...): input elements;
- FusedBatchNorm: 10 per element forward (mean, variance, normalize, scale, shift), 12 for its
  gradient; Softmax family and cross-entropy: 5 and 8 per logit;
- Einsum: 2 x the product of every index size in the equation;
- depthwise convolution gradients: 2 x out_backprop elements x kernel height x width;
- optimizer apply ops (ApplyGradientDescent, ApplyMomentum, ApplyAdam, ...): the gradient's
  elements x the update's arithmetic (2 for SGD, 4 momentum, 6 RMSProp, 10 Adam);
- random numbers (RandomUniform, RandomStandardNormal, TruncatedNormal and their stateless
  forms): 4 per uniform, 12 per normal, 16 per truncated normal output element (the counter
  hash and the transform);
- FFTs: 5 n log2(m) for n complex elements transformed over m points (Cooley-Tukey);
- CropAndResize and its gradients: 8 per interpolated element (bilinear weights);
- cuDNN's fused RNNs (CudnnRNN, V2, V3): 2 x gates x hidden x (layer input + hidden) per
  time step, batch row, layer and direction (gates: 4 LSTM, 3 GRU, 1 plain RNN); their
  gradients twice that;
- data movement (Identity, Reshape, Const, Cast, Concat, Gather, ...) and unknown ops: 0 FLOPs;
  their cost comes from the bytes they move (the cost model's memory term).
"""

from __future__ import annotations

import math
import re

import numpy as np

TRANSCENDENTAL = {"Exp", "Log", "Log1p", "Expm1", "Tanh", "Sigmoid", "Sqrt", "Rsqrt", "Erf",
                  "Elu", "Selu", "Softplus", "Softsign", "Sin", "Cos", "Pow", "Gelu",
                  "TanhGrad", "SigmoidGrad", "EluGrad", "SeluGrad", "SoftplusGrad", "SqrtGrad",
                  "RsqrtGrad", "Reciprocal", "ReciprocalGrad", "Inv", "InvGrad", "LeakyRelu",
                  "Erfc", "Erfinv", "Tan", "Atan", "Atan2", "Asin", "Acos", "Sinh", "Cosh",
                  "Asinh", "Acosh", "Atanh", "Lgamma", "Digamma", "Ndtri"}
ELEMENTWISE = {"Add", "AddV2", "Sub", "Mul", "Div", "RealDiv", "DivNoNan", "FloorDiv", "FloorMod",
               "Maximum", "Minimum", "Neg", "Abs", "Square", "SquaredDifference", "Relu",
               "Relu6", "ReluGrad", "Relu6Grad", "LeakyReluGrad", "BiasAdd", "Sign", "Floor",
               "Ceil", "Round", "Select", "SelectV2", "Equal", "NotEqual", "Less", "LessEqual",
               "Greater", "GreaterEqual", "LogicalAnd", "LogicalOr", "LogicalNot", "AddN",
               "ClipByValue", "MulNoNan", "BroadcastGradientArgs", "Xdivy", "Xlogy"}
REDUCTIONS = {"Sum", "Mean", "Max", "Min", "Prod", "All", "Any", "ArgMax", "ArgMin",
              "BiasAddGrad", "L2Loss", "EuclideanNorm"}
PER_ELEMENT = {"FusedBatchNorm": 10, "FusedBatchNormV2": 10, "FusedBatchNormV3": 10,
               "FusedBatchNormGrad": 12, "FusedBatchNormGradV2": 12, "FusedBatchNormGradV3": 12,
               "Softmax": 5, "LogSoftmax": 5,
               "SparseSoftmaxCrossEntropyWithLogits": 8, "SoftmaxCrossEntropyWithLogits": 8,
               "LRN": 10, "LRNGrad": 12,
               "RandomUniform": 4, "RandomUniformInt": 4, "StatelessRandomUniform": 4,
               "StatelessRandomUniformV2": 4, "StatelessRandomUniformInt": 4,
               "StatelessRandomUniformIntV2": 4, "RandomStandardNormal": 12,
               "StatelessRandomNormal": 12, "StatelessRandomNormalV2": 12,
               "TruncatedNormal": 16, "StatelessTruncatedNormal": 16,
               "StatelessTruncatedNormalV2": 16, "CropAndResize": 8,
               "CropAndResizeGradImage": 8, "CropAndResizeGradBoxes": 8}
# FFT ops: how many trailing dimensions each transforms.
FFT_DIMS = {"FFT": 1, "IFFT": 1, "RFFT": 1, "IRFFT": 1, "FFT2D": 2, "IFFT2D": 2, "RFFT2D": 2,
            "IRFFT2D": 2, "FFT3D": 3, "IFFT3D": 3, "RFFT3D": 3, "IRFFT3D": 3}
APPLY = {"GradientDescent": 2, "Momentum": 4, "KerasMomentum": 4, "Adagrad": 4, "AdagradV2": 4,
         "RMSProp": 6, "CenteredRMSProp": 8, "Adam": 10, "AdaMax": 10, "Adadelta": 8,
         "Ftrl": 12, "FtrlV2": 12, "ProximalGradientDescent": 4, "ProximalAdagrad": 6}
_APPLY_RE = re.compile(r"^(?:Resource)?(?:Sparse)?Apply(\w+)$")
# cuDNN's fused RNNs: forward = 1 x their matrix products, the backward pass twice that
CUDNN_RNN = {"CudnnRNN": 1, "CudnnRNNV2": 1, "CudnnRNNV3": 1, "CudnnRNNBackprop": 2,
             "CudnnRNNBackpropV2": 2, "CudnnRNNBackpropV3": 2}


def elements(shape: tuple[int, ...] | None, unknown_dim: int) -> int:
    """Element count with unknown dims counted as ``unknown_dim``; unknown rank counts as 1."""
    if shape is None:
        return 1
    return math.prod(unknown_dim if d < 0 else d for d in shape)


def estimate(op_type: str, out_shapes: list, in_shapes: list, attrs, unknown_dim: int) -> float:
    """The documented estimate of the module docstring for one op."""
    n_out = max((elements(s, unknown_dim) for s in out_shapes), default=0)
    n_in = max((elements(s, unknown_dim) for s in in_shapes), default=0)
    if op_type in ELEMENTWISE:
        return float(max(n_out, n_in) * (len(in_shapes) - 1 if op_type == "AddN" else 1))
    if op_type in TRANSCENDENTAL:
        return 4.0 * max(n_out, n_in)
    if op_type in REDUCTIONS:
        return float(n_in)
    if op_type in PER_ELEMENT:
        return float(PER_ELEMENT[op_type] * max(n_out, n_in))
    if op_type in FFT_DIMS:
        return _fft_flops(FFT_DIMS[op_type], out_shapes + in_shapes, unknown_dim)
    if op_type == "Einsum":
        return _einsum_flops(attrs, in_shapes, unknown_dim)
    if op_type.startswith("DepthwiseConv2dNativeBackprop") and len(in_shapes) == 3:
        kernel = in_shapes[1] if op_type.endswith("Input") else (out_shapes or [None])[0]
        kh_kw = elements(kernel[:2], unknown_dim) if kernel else 1
        return 2.0 * elements(in_shapes[2], unknown_dim) * kh_kw
    if op_type in CUDNN_RNN:
        return CUDNN_RNN[op_type] * _cudnn_rnn_flops(attrs, in_shapes, unknown_dim)
    match = _APPLY_RE.match(op_type)
    if match and match.group(1) in APPLY:
        return float(APPLY[match.group(1)] * n_in)
    return 0.0


def _cudnn_rnn_flops(attrs, in_shapes, unknown_dim) -> float:
    """The forward matrix products of a fused cuDNN RNN: input [T, B, I] (or [B, T, I] when
    not time-major), initial state [layers x directions, B, H]."""
    if len(in_shapes) < 2 or any(s is None or len(s) != 3 for s in in_shapes[:2]):
        return 0.0
    (t, b, i), (ld, _, h) = ([unknown_dim if d < 0 else d for d in s] for s in in_shapes[:2])
    if "time_major" in attrs and not attrs["time_major"].b:
        t, b = b, t
    mode = attrs["rnn_mode"].s.decode() if "rnn_mode" in attrs else "lstm"
    gates = {"lstm": 4, "gru": 3}.get(mode, 1)
    directions = 2 if "direction" in attrs and attrs["direction"].s == b"bidirectional" else 1
    layers = max(ld // directions, 1)
    per_row = i + h + (layers - 1) * (directions * h + h)  # each layer's input and recurrence
    return 2.0 * gates * h * per_row * t * b * directions


def _fft_flops(dims: int, shapes: list, unknown_dim: int) -> float:
    """5 n log2(m) over the largest of ``shapes`` (the complex side), m the points of its last
    ``dims`` dimensions."""
    known = [s for s in shapes if s is not None and len(s) >= dims]
    if not known:
        return 0.0
    shape = max(known, key=lambda s: elements(s, unknown_dim))
    points = elements(shape[len(shape) - dims:], unknown_dim)
    return 5.0 * elements(shape, unknown_dim) * math.log2(points) if points > 1 else 0.0


def _einsum_flops(attrs, in_shapes, unknown_dim) -> float:
    if "equation" not in attrs:
        return 0.0
    lhs = attrs["equation"].s.decode().replace(" ", "").split("->")[0].split(",")
    sizes: dict[str, int] = {}
    for term, shape in zip(lhs, in_shapes):
        letters = term.replace("...", "")
        if shape is None or len(letters) > len(shape):
            continue
        for letter, dim in zip(letters, shape[len(shape) - len(letters):]):
            sizes[letter] = max(sizes.get(letter, 1), unknown_dim if dim < 0 else dim)
    return 2.0 * math.prod(sizes.values()) if sizes else 0.0


def registered_flops(tf_graph, names: list[str]) -> dict[str, float]:
    """FLOPs from TensorFlow's statistics registry, for the ops that have an entry and whose
    shapes are known; others are left out."""
    from tensorflow.python.framework import ops
    registry = ops._stats_registry  # TF keeps it private; get_stats_for_node_def reads it too
    have = {key.split(",")[0] for key in registry.list() if key.endswith(",flops")}
    result = {}
    for name in names:
        op = tf_graph.get_operation_by_name(name)
        if op.type not in have:
            continue
        try:
            value = ops.get_stats_for_node_def(tf_graph, op.node_def, "flops").value
        except (ValueError, TypeError, AttributeError):
            continue  # an unknown dimension: the estimate below takes over
        if value is not None:
            result[name] = float(value)
    return result


def op_flops(nodes, shapes, input_shapes, tf_graph, unknown_dim: int) -> tuple[np.ndarray, int]:
    """(flops per op, number of ops whose figure came from TensorFlow's registry)."""
    names = [n.name for n in nodes]
    from_tf = registered_flops(tf_graph, names) if tf_graph is not None else {}
    flops = np.zeros(len(nodes), np.float64)
    for k, node in enumerate(nodes):
        if node.name in from_tf:
            flops[k] = from_tf[node.name]
        else:
            flops[k] = estimate(node.op, shapes[k], input_shapes[k], node.attr, unknown_dim)
    return flops, len(from_tf)
