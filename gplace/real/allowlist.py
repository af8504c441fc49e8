"""The op types gplace runs for real without ``--allow-unsafe``: ops whose effects are known.

An allowlist, not a denylist (issue 14): TensorFlow keeps adding ops that read or write files
(``ExperimentalDatasetToTFRecord``, ``SnapshotChunkDataset``, ``DistributedSave``), carry code
(``DatasetFromGraph``) or reach the network, and a list of the dangerous ones is always one op
behind. Listed here: math, NN kernels, control flow, variables and optimizer updates, random
numbers, in-memory containers, and the parts of tf.data that read no file. Left out on purpose:
every reader, writer, saver, summary, debug and print op, Python and RPC ops, image and proto
codecs (``EncodeProto`` loads a descriptor file), ``ImmutableConst`` (maps a file),
``RecordInput``, and collective / send / receive ops (TF inserts its own when it partitions).
Names follow ``tf.raw_ops`` of TensorFlow 2.21.
"""

# element-wise math, reductions, linear algebra, shapes and array manipulation
MATH = frozenset({
    "Abs", "Acos", "Acosh", "Add", "AddN", "AddV2", "All", "Any", "ApproximateEqual", "ArgMax",
    "ArgMin", "Asin", "Asinh", "Atan", "Atan2", "Atanh", "BatchToSpace", "BatchToSpaceND",
    "Betainc", "Bincount", "Bitcast", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BroadcastArgs",
    "BroadcastGradientArgs", "BroadcastTo", "Bucketize", "Cast", "Ceil", "Cholesky",
    "CholeskyGrad", "ClipByValue", "Complex", "ComplexAbs", "Concat", "ConcatOffset",
    "ConcatV2", "Conj", "ConjugateTranspose", "Cos", "Cosh", "Cross", "Cumprod", "Cumsum",
    "CumulativeLogsumexp", "DeepCopy", "DepthToSpace", "Diag", "DiagPart", "Digamma", "Div",
    "DivNoNan", "DynamicPartition", "DynamicStitch", "EditDistance", "Eig", "Empty", "Equal",
    "Erf", "Erfc", "Erfinv", "Exp", "ExpandDims", "Expm1", "FFT", "FFT2D", "FFT3D", "FFTND",
    "Fill", "Fingerprint", "Floor", "FloorDiv", "FloorMod", "Gather", "GatherNd", "GatherV2",
    "Greater", "GreaterEqual", "HistogramFixedWidth", "IFFT", "IFFT2D", "IFFT3D", "IFFTND",
    "IRFFT", "IRFFT2D", "IRFFT3D", "IRFFTND", "Igamma", "IgammaGradA", "Igammac", "Imag",
    "InplaceAdd", "InplaceSub", "InplaceUpdate", "Inv", "InvGrad", "Invert",
    "InvertPermutation", "IsFinite", "IsInf", "IsNan", "LeftShift", "Less", "LessEqual",
    "Lgamma", "LinSpace", "ListDiff", "Log", "Log1p", "LogicalAnd", "LogicalNot", "LogicalOr",
    "LowerBound", "Lu", "MatrixBandPart", "MatrixDeterminant", "MatrixDiag", "MatrixDiagPart",
    "MatrixDiagPartV2", "MatrixDiagPartV3", "MatrixDiagV2", "MatrixDiagV3", "MatrixExponential",
    "MatrixInverse", "MatrixLogarithm", "MatrixSetDiag", "MatrixSetDiagV2", "MatrixSetDiagV3",
    "MatrixSolve", "MatrixSolveLs", "MatrixSquareRoot", "MatrixTriangularSolve", "Max",
    "Maximum", "Mean", "Min", "Minimum", "MirrorPad", "MirrorPadGrad", "Mod", "Mul", "MulNoNan",
    "Ndtri", "Neg", "NextAfter", "NotEqual", "NthElement", "OneHot", "OnesLike", "Pack", "Pad",
    "PadV2", "ParallelConcat", "ParallelDynamicStitch", "Polygamma", "PopulationCount", "Pow",
    "Prod", "Qr", "RFFT", "RFFT2D", "RFFT3D", "RFFTND", "Range", "Rank", "Real", "RealDiv",
    "Reciprocal", "ReciprocalGrad", "Reshape", "ReverseSequence", "ReverseV2", "RightShift",
    "Rint", "Roll", "Round", "Rsqrt", "RsqrtGrad", "SegmentMax", "SegmentMaxV2", "SegmentMean",
    "SegmentMin", "SegmentMinV2", "SegmentProd", "SegmentProdV2", "SegmentSum", "SegmentSumV2",
    "Select", "SelectV2", "SelfAdjointEig", "SelfAdjointEigV2", "Shape", "ShapeN", "Sign",
    "Sin", "Sinh", "Size", "Slice", "SpaceToBatch", "SpaceToBatchND", "SpaceToDepth",
    "SparseAdd", "SparseAddGrad", "SparseBincount", "SparseConcat", "SparseCountSparseOutput",
    "SparseCross", "SparseCrossHashed", "SparseCrossV2", "SparseDenseCwiseAdd",
    "SparseDenseCwiseDiv", "SparseDenseCwiseMul", "SparseFillEmptyRows",
    "SparseFillEmptyRowsGrad", "SparseMatrixAdd", "SparseMatrixMul", "SparseMatrixNNZ",
    "SparseMatrixOrderingAMD", "SparseMatrixSoftmax", "SparseMatrixSoftmaxGrad",
    "SparseMatrixSparseCholesky", "SparseMatrixTranspose", "SparseMatrixZeros",
    "SparseReduceMax", "SparseReduceMaxSparse", "SparseReduceSum", "SparseReduceSumSparse",
    "SparseReorder", "SparseReshape", "SparseSegmentMean", "SparseSegmentMeanGrad",
    "SparseSegmentMeanGradV2", "SparseSegmentMeanWithNumSegments", "SparseSegmentSqrtN",
    "SparseSegmentSqrtNGrad", "SparseSegmentSqrtNGradV2", "SparseSegmentSqrtNWithNumSegments",
    "SparseSegmentSum", "SparseSegmentSumGrad", "SparseSegmentSumGradV2",
    "SparseSegmentSumWithNumSegments", "SparseSlice", "SparseSliceGrad", "SparseSoftmax",
    "SparseSparseMaximum", "SparseSparseMinimum", "SparseSplit", "SparseTensorDenseAdd",
    "SparseTensorToCSRSparseMatrix", "SparseToDense", "SparseToSparseSetOperation", "Split",
    "SplitV", "Sqrt", "SqrtGrad", "Square", "SquaredDifference", "Squeeze", "StridedSlice",
    "StridedSliceGrad", "Sub", "Sum", "Svd", "Tan", "TensorScatterAdd", "TensorScatterMax",
    "TensorScatterMin", "TensorScatterSub", "TensorScatterUpdate", "TensorStridedSliceUpdate",
    "Tile", "TileGrad", "Transpose", "TruncateDiv", "TruncateMod", "Unique", "UniqueV2",
    "UniqueWithCounts", "Unpack", "UnravelIndex", "UnsortedSegmentJoin", "UnsortedSegmentMax",
    "UnsortedSegmentMin", "UnsortedSegmentProd", "UnsortedSegmentSum", "UpperBound", "Where",
    "Xdivy", "Xlog1py", "Xlogy", "ZerosLike", "Zeta",
})

# control flow and function calls (bodies are checked as library functions)
CONTROL_FLOW = frozenset({
    "Assert", "Case", "CheckNumerics", "CheckNumericsV2", "Const", "ControlTrigger",
    "EnsureShape", "Enter", "Exit", "GuaranteeConst", "Identity", "IdentityN", "If", "LoopCond",
    "Merge", "NextIteration", "NoOp", "PartitionedCall", "Placeholder", "PlaceholderV2",
    "PlaceholderWithDefault", "PreventGradient", "RefEnter", "RefExit", "RefIdentity",
    "RefMerge", "RefNextIteration", "RefSelect", "RefSwitch", "Snapshot",
    "StatefulPartitionedCall", "StatelessCase", "StatelessIf", "StatelessWhile", "StopGradient",
    "Switch", "Timestamp", "While", "_Arg", "_Retval",
})

# variables and optimizer updates
VARIABLES = frozenset({
    "AccumulatorApplyGradient", "AccumulatorNumAccumulated", "AccumulatorSetGlobalStep",
    "AccumulatorTakeGradient", "ApplyAdaMax", "ApplyAdadelta", "ApplyAdagrad", "ApplyAdagradDA",
    "ApplyAdagradV2", "ApplyAdam", "ApplyAddSign", "ApplyCenteredRMSProp", "ApplyFtrl",
    "ApplyFtrlV2", "ApplyGradientDescent", "ApplyMomentum", "ApplyPowerSign",
    "ApplyProximalAdagrad", "ApplyProximalGradientDescent", "ApplyRMSProp", "Assign",
    "AssignAdd", "AssignAddVariableOp", "AssignSub", "AssignSubVariableOp", "AssignVariableOp",
    "ConditionalAccumulator", "CountUpTo", "DestroyResourceOp", "DestroyTemporaryVariable",
    "IsVariableInitialized", "ReadVariableOp", "ResourceAccumulatorApplyGradient",
    "ResourceAccumulatorNumAccumulated", "ResourceAccumulatorSetGlobalStep",
    "ResourceAccumulatorTakeGradient", "ResourceApplyAdaMax", "ResourceApplyAdadelta",
    "ResourceApplyAdagrad", "ResourceApplyAdagradDA", "ResourceApplyAdagradV2",
    "ResourceApplyAdam", "ResourceApplyAdamWithAmsgrad", "ResourceApplyAddSign",
    "ResourceApplyCenteredRMSProp", "ResourceApplyFtrl", "ResourceApplyFtrlV2",
    "ResourceApplyGradientDescent", "ResourceApplyKerasMomentum", "ResourceApplyMomentum",
    "ResourceApplyPowerSign", "ResourceApplyProximalAdagrad",
    "ResourceApplyProximalGradientDescent", "ResourceApplyRMSProp",
    "ResourceConditionalAccumulator", "ResourceCountUpTo", "ResourceGather", "ResourceGatherNd",
    "ResourceScatterAdd", "ResourceScatterDiv", "ResourceScatterMax", "ResourceScatterMin",
    "ResourceScatterMul", "ResourceScatterNdAdd", "ResourceScatterNdMax",
    "ResourceScatterNdMin", "ResourceScatterNdSub", "ResourceScatterNdUpdate",
    "ResourceScatterSub", "ResourceScatterUpdate", "ResourceSparseApplyAdadelta",
    "ResourceSparseApplyAdagrad", "ResourceSparseApplyAdagradDA",
    "ResourceSparseApplyAdagradV2", "ResourceSparseApplyCenteredRMSProp",
    "ResourceSparseApplyFtrl", "ResourceSparseApplyFtrlV2", "ResourceSparseApplyKerasMomentum",
    "ResourceSparseApplyMomentum", "ResourceSparseApplyProximalAdagrad",
    "ResourceSparseApplyProximalGradientDescent", "ResourceSparseApplyRMSProp",
    "ResourceStridedSliceAssign", "ScatterAdd", "ScatterDiv", "ScatterMax", "ScatterMin",
    "ScatterMul", "ScatterNd", "ScatterNdAdd", "ScatterNdMax", "ScatterNdMin",
    "ScatterNdNonAliasingAdd", "ScatterNdSub", "ScatterNdUpdate", "ScatterSub", "ScatterUpdate",
    "SparseAccumulatorApplyGradient", "SparseAccumulatorTakeGradient", "SparseApplyAdadelta",
    "SparseApplyAdagrad", "SparseApplyAdagradDA", "SparseApplyAdagradV2",
    "SparseApplyCenteredRMSProp", "SparseApplyFtrl", "SparseApplyFtrlV2", "SparseApplyMomentum",
    "SparseApplyProximalAdagrad", "SparseApplyProximalGradientDescent", "SparseApplyRMSProp",
    "SparseConditionalAccumulator", "StridedSliceAssign", "TemporaryVariable", "VarHandleOp",
    "VarIsInitializedOp", "Variable", "VariableShape", "VariableV2",
})

# random numbers
RANDOM = frozenset({
    "AnonymousSeedGenerator", "DeleteSeedGenerator", "DummySeedGenerator", "Multinomial",
    "ParameterizedTruncatedNormal", "RandomCrop", "RandomGamma", "RandomGammaGrad",
    "RandomIndexShuffle", "RandomPoisson", "RandomPoissonV2", "RandomShuffle",
    "RandomShuffleQueue", "RandomShuffleQueueV2", "RandomStandardNormal", "RandomUniform",
    "RandomUniformInt", "StatefulStandardNormal", "StatefulStandardNormalV2",
    "StatefulTruncatedNormal", "StatefulUniform", "StatefulUniformFullInt",
    "StatefulUniformInt", "StatelessMultinomial", "StatelessParameterizedTruncatedNormal",
    "StatelessRandomBinomial", "StatelessRandomGammaV2", "StatelessRandomGammaV3",
    "StatelessRandomGetAlg", "StatelessRandomGetKeyCounter", "StatelessRandomGetKeyCounterAlg",
    "StatelessRandomNormal", "StatelessRandomNormalV2", "StatelessRandomPoisson",
    "StatelessRandomUniform", "StatelessRandomUniformFullInt",
    "StatelessRandomUniformFullIntV2", "StatelessRandomUniformInt",
    "StatelessRandomUniformIntV2", "StatelessRandomUniformV2",
    "StatelessSampleDistortedBoundingBox", "StatelessShuffle", "StatelessTruncatedNormal",
    "StatelessTruncatedNormalV2", "TruncatedNormal",
})

# in-memory queues, stacks, tensor arrays and lists, hash tables
CONTAINERS = frozenset({
    "AnonymousHashTable", "AnonymousMutableDenseHashTable", "AnonymousMutableHashTable",
    "AnonymousMutableHashTableOfTensors", "EmptyTensorList", "FIFOQueue", "FIFOQueueV2",
    "HashTable", "HashTableV2", "LookupTableExport", "LookupTableExportV2", "LookupTableFind",
    "LookupTableFindV2", "LookupTableImport", "LookupTableImportV2", "LookupTableInsert",
    "LookupTableInsertV2", "LookupTableRemoveV2", "LookupTableSize", "LookupTableSizeV2",
    "MutableDenseHashTable", "MutableDenseHashTableV2", "MutableHashTable",
    "MutableHashTableOfTensors", "MutableHashTableOfTensorsV2", "MutableHashTableV2",
    "PaddingFIFOQueue", "PaddingFIFOQueueV2", "PriorityQueue", "PriorityQueueV2", "QueueClose",
    "QueueCloseV2", "QueueDequeue", "QueueDequeueMany", "QueueDequeueManyV2",
    "QueueDequeueUpTo", "QueueDequeueUpToV2", "QueueDequeueV2", "QueueEnqueue",
    "QueueEnqueueMany", "QueueEnqueueManyV2", "QueueEnqueueV2", "QueueIsClosed",
    "QueueIsClosedV2", "QueueSize", "QueueSizeV2", "StackCloseV2", "StackPopV2", "StackPushV2",
    "StackV2", "TensorArrayClose", "TensorArrayCloseV2", "TensorArrayCloseV3",
    "TensorArrayConcat", "TensorArrayConcatV2", "TensorArrayConcatV3", "TensorArrayGather",
    "TensorArrayGatherV2", "TensorArrayGatherV3", "TensorArrayGrad", "TensorArrayGradV2",
    "TensorArrayGradV3", "TensorArrayGradWithShape", "TensorArrayPack", "TensorArrayRead",
    "TensorArrayReadV2", "TensorArrayReadV3", "TensorArrayScatter", "TensorArrayScatterV2",
    "TensorArrayScatterV3", "TensorArraySize", "TensorArraySizeV2", "TensorArraySizeV3",
    "TensorArraySplit", "TensorArraySplitV2", "TensorArraySplitV3", "TensorArrayUnpack",
    "TensorArrayV2", "TensorArrayV3", "TensorArrayWrite", "TensorArrayWriteV2",
    "TensorArrayWriteV3", "TensorListConcatV2", "TensorListElementShape",
    "TensorListFromTensor", "TensorListGather", "TensorListGetItem", "TensorListLength",
    "TensorListPopBack", "TensorListPushBack", "TensorListReserve", "TensorListResize",
    "TensorListScatterIntoExistingList", "TensorListScatterV2", "TensorListSetItem",
    "TensorListSplit", "TensorListStack",
})

# the parts of tf.data that read no file and run no foreign graph
DATA = frozenset({
    "AnonymousIteratorV2", "AnonymousIteratorV3", "BatchDataset", "BatchDatasetV2",
    "ConcatenateDataset", "DeleteIterator", "FilterDataset", "FlatMapDataset",
    "InterleaveDataset", "IteratorGetNext", "IteratorGetNextAsOptional", "IteratorGetNextSync",
    "IteratorV2", "MakeIterator", "MapDataset", "MaxIntraOpParallelismDataset", "ModelDataset",
    "OptimizeDatasetV2", "OptionalFromValue", "OptionalGetValue", "OptionalHasValue",
    "OptionalNone", "PaddedBatchDatasetV2", "ParallelInterleaveDatasetV4",
    "ParallelMapDatasetV2", "PrefetchDataset", "PrivateThreadPoolDataset", "RangeDataset",
    "RepeatDataset", "ShuffleAndRepeatDatasetV2", "ShuffleDatasetV3", "SkipDataset",
    "TakeDataset", "TensorDataset", "TensorSliceDataset", "ZipDataset",
})

# neural-network kernels and their gradients
NN = frozenset({
    "AvgPool", "AvgPool3D", "AvgPool3DGrad", "AvgPoolGrad", "BatchMatMul", "BatchMatMulV2",
    "BatchMatMulV3", "BatchNormWithGlobalNormalization", "BatchNormWithGlobalNormalizationGrad",
    "BiasAdd", "BiasAddGrad", "BiasAddV1", "BlockLSTM", "BlockLSTMGrad", "BlockLSTMGradV2",
    "BlockLSTMV2", "Conv", "Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropFilterV2",
    "Conv2DBackpropInput", "Conv2DBackpropInputV2", "Conv3D", "Conv3DBackpropFilter",
    "Conv3DBackpropFilterV2", "Conv3DBackpropInput", "Conv3DBackpropInputV2", "CudnnRNN",
    "CudnnRNNBackprop", "CudnnRNNBackpropV2", "CudnnRNNBackpropV3", "CudnnRNNCanonicalToParams",
    "CudnnRNNCanonicalToParamsV2", "CudnnRNNParamsSize", "CudnnRNNParamsToCanonical",
    "CudnnRNNParamsToCanonicalV2", "CudnnRNNV2", "CudnnRNNV3", "DepthwiseConv2dNative",
    "DepthwiseConv2dNativeBackpropFilter", "DepthwiseConv2dNativeBackpropInput", "Dilation2D",
    "Dilation2DBackpropFilter", "Dilation2DBackpropInput", "Einsum", "Elu", "EluGrad",
    "ExtractImagePatches", "ExtractVolumePatches", "FractionalAvgPool", "FractionalAvgPoolGrad",
    "FractionalMaxPool", "FractionalMaxPoolGrad", "FusedBatchNorm", "FusedBatchNormGrad",
    "FusedBatchNormGradV2", "FusedBatchNormGradV3", "FusedBatchNormV2", "FusedBatchNormV3",
    "InTopK", "InTopKV2", "L2Loss", "LRN", "LRNGrad", "LeakyRelu", "LeakyReluGrad",
    "LogSoftmax", "MatMul", "MaxPool", "MaxPool3D", "MaxPool3DGrad", "MaxPool3DGradGrad",
    "MaxPoolGrad", "MaxPoolGradGrad", "MaxPoolGradGradV2", "MaxPoolGradGradWithArgmax",
    "MaxPoolGradV2", "MaxPoolGradWithArgmax", "MaxPoolV2", "MaxPoolWithArgmax", "Relu", "Relu6",
    "Relu6Grad", "ReluGrad", "Selu", "SeluGrad", "Sigmoid", "SigmoidGrad", "Softmax",
    "SoftmaxCrossEntropyWithLogits", "Softplus", "SoftplusGrad", "Softsign", "SoftsignGrad",
    "SparseMatMul", "SparseMatrixMatMul", "SparseMatrixSparseMatMul",
    "SparseSoftmaxCrossEntropyWithLogits", "SparseTensorDenseMatMul", "Tanh", "TanhGrad",
    "TopK", "TopKV2",
})

ALLOWED_OPS = MATH | CONTROL_FLOW | VARIABLES | RANDOM | CONTAINERS | DATA | NN
