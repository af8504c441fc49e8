"""ATen op names onto the TensorFlow op types the shipped policy knows (gplace.gnn.features
``OP_VOCAB``); an ATen op with no TensorFlow counterpart there gets its own name, which the
policy reads as ``<other>``. The ATen name stays in ``OpGraph.meta["torch"]["aten"]``.

Each row pairs ops that do the same work: convolution and its backward with Conv2D and its
filter gradient, addmm/mm with MatMul, batch and layer norm with FusedBatchNormV3 (Keras'
LayerNormalization runs FusedBatchNormV3), views with Reshape, and so on.
"""

from __future__ import annotations

TF_TYPE: dict[str, str] = {
    # matrix products and convolutions
    "mm": "MatMul", "addmm": "MatMul", "linear": "MatMul", "matmul": "MatMul",
    "bmm": "BatchMatMulV2", "baddbmm": "BatchMatMulV2",
    "convolution": "Conv2D", "convolution_backward": "Conv2DBackpropFilter",
    # arithmetic
    "add": "AddV2", "sub": "Sub", "rsub": "Sub", "mul": "Mul", "div": "RealDiv", "neg": "Neg",
    "addcmul": "Mul", "addcdiv": "RealDiv", "lerp": "Mul", "maximum": "Maximum",
    "minimum": "Minimum", "clamp": "Maximum", "clamp_min": "Maximum", "square": "Square",
    "pow": "Square", "sqrt": "Sqrt", "rsqrt": "Rsqrt", "exp": "Exp", "log": "Log",
    "where": "SelectV2", "masked_fill": "SelectV2", "erf": "Erf",
    # activations and their gradients
    "relu": "Relu", "threshold_backward": "ReluGrad", "sigmoid": "Sigmoid",
    "sigmoid_backward": "SigmoidGrad", "tanh": "Tanh", "tanh_backward": "TanhGrad",
    "gelu": "Gelu", "gelu_backward": "Gelu", "hardtanh": "Relu6",
    "hardtanh_backward": "Relu6Grad",
    # normalization, softmax, losses
    "native_batch_norm": "FusedBatchNormV3",
    "_native_batch_norm_legit_functional": "FusedBatchNormV3",
    "_native_batch_norm_legit_no_training": "FusedBatchNormV3",
    "native_batch_norm_backward": "FusedBatchNormGradV3",
    "native_layer_norm": "FusedBatchNormV3", "native_layer_norm_backward": "FusedBatchNormGradV3",
    "_softmax": "Softmax", "_softmax_backward_data": "Softmax",
    "_log_softmax": "LogSoftmax", "_log_softmax_backward_data": "LogSoftmax",
    "nll_loss_forward": "SparseSoftmaxCrossEntropyWithLogits",
    "nll_loss_backward": "SparseSoftmaxCrossEntropyWithLogits",
    # reductions
    "sum": "Sum", "mean": "Mean", "amax": "Max",
    # pooling
    "max_pool2d_with_indices": "MaxPool", "max_pool2d_with_indices_backward": "MaxPoolGrad",
    "avg_pool2d": "AvgPool", "avg_pool2d_backward": "AvgPoolGrad",
    # data movement
    "view": "Reshape", "_unsafe_view": "Reshape", "reshape": "Reshape", "flatten": "Reshape",
    "t": "Transpose", "transpose": "Transpose", "permute": "Transpose",
    "expand": "BroadcastTo", "unsqueeze": "ExpandDims", "squeeze": "Squeeze",
    "cat": "ConcatV2", "stack": "Pack", "unbind": "Unpack", "split": "Split",
    "split_with_sizes": "SplitV", "slice": "StridedSlice", "select": "StridedSlice",
    "slice_backward": "StridedSliceGrad", "select_backward": "StridedSliceGrad",
    "index": "GatherV2", "index_select": "GatherV2", "gather": "GatherV2",
    "embedding": "ResourceGather", "embedding_dense_backward": "UnsortedSegmentSum",
    "_embedding_bag": "ResourceGather", "_embedding_bag_forward_only": "ResourceGather",
    "_embedding_bag_backward": "UnsortedSegmentSum",
    "_embedding_bag_dense_backward": "UnsortedSegmentSum",
    "index_put": "UnsortedSegmentSum", "index_add": "UnsortedSegmentSum",
    "scatter_add": "UnsortedSegmentSum", "constant_pad_nd": "Pad",
    "clone": "Identity", "alias": "Identity", "detach": "Identity", "_to_copy": "Cast",
    "copy": "Identity", "lift_fresh_copy": "Identity",
    # creation
    "ones_like": "OnesLike", "zeros_like": "ZerosLike", "full": "Fill", "full_like": "Fill",
    "zeros": "Fill", "ones": "Fill", "new_zeros": "Fill", "new_ones": "Fill",
    "scalar_tensor": "Const", "arange": "Const", "triu_indices": "Const", "tril": "Const",
    "empty": "Fill",
}

# The placeholder roles of a step graph: parameters, buffers and optimizer state are
# variables (TensorFlow's VarHandleOp), the batch enters as Placeholder.
ROLE_TYPE = {"param": "VarHandleOp", "buffer": "VarHandleOp", "state": "VarHandleOp",
             "input": "Placeholder"}


def aten_name(target) -> str:
    """``aten.convolution_backward.default`` -> ``convolution_backward``; a Python function's
    own name otherwise."""
    packet = getattr(target, "overloadpacket", None)
    if packet is not None:
        return str(packet.__name__).rstrip("_") or str(packet.__name__)
    return getattr(target, "__name__", str(target))


def tf_type(aten: str) -> str:
    """The TensorFlow type for the ATen name ``aten``, or ``aten`` itself when there is none."""
    return TF_TYPE.get(aten, aten)
