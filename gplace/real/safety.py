"""Refuse to run graphs whose ops touch the file system or run arbitrary code.

A real measurement executes the user's graph. Ops below can read or write files, call back into
Python, or reach the network; :func:`check_safe` refuses them (naming the op) unless the caller
passes ``allow_unsafe=True``. Function bodies in the library are checked too, since TF runs
them. The list follows TF's own op registry (tf.raw_ops) for I/O, Python and RPC ops.
"""

from __future__ import annotations

from gplace.errors import GplaceError

UNSAFE_OPS = frozenset({
    # file system
    "ReadFile", "WriteFile", "MatchingFiles", "MatchingFilesDataset", "FixedLengthRecordReader",
    "FixedLengthRecordReaderV2", "TextLineReader", "TextLineReaderV2", "TFRecordReader",
    "TFRecordReaderV2", "WholeFileReader", "WholeFileReaderV2", "LMDBReader", "IdentityReader",
    "TextLineDataset", "TFRecordDataset", "FixedLengthRecordDataset", "FixedLengthRecordDatasetV2",
    "TFRecordDatasetV2", "CSVDataset", "CSVDatasetV2", "SqlDataset", "LMDBDataset",
    "Save", "SaveSlices", "SaveV2", "Restore", "RestoreSlice", "RestoreV2", "MergeV2Checkpoints",
    "ShardedFilename", "ShardedFilenames", "WriteSummary", "WriteScalarSummary",
    "WriteHistogramSummary", "WriteImageSummary", "WriteAudioSummary", "WriteGraphSummary",
    "WriteRawProtoSummary", "CreateSummaryFileWriter", "CreateSummaryDbWriter", "FlushSummaryWriter",
    "ImportEvent", "DatasetToTFRecord", "SaveDataset", "SaveDatasetV2", "LoadDataset",
    "SnapshotDataset", "SnapshotDatasetV2", "CacheDataset", "CacheDatasetV2",
    "InitializeTableFromTextFile", "InitializeTableFromTextFileV2", "DebugIdentity",
    "DebugIdentityV2", "DebugIdentityV3", "DebugNanCount", "DebugNumericSummary",
    "DebugNumericSummaryV2", "Print", "PrintV2",  # PrintV2 can write to a file path
    "ImmutableConst", "LoadAndRemapMatrix", "GenerateVocabRemapping", "DecodeProtoV2",
    # arbitrary code, network
    "PyFunc", "PyFuncStateless", "EagerPyFunc", "Rpc", "TryRpc", "RpcServer", "RpcClient",
    "RpcCall", "RpcCheckStatus", "DataServiceDataset", "DataServiceDatasetV2",
    "DataServiceDatasetV3", "DataServiceDatasetV4", "RegisterDataset", "RegisterDatasetV2",
})


class UnsafeOpError(GplaceError):
    """The graph holds an op that touches the file system or runs arbitrary code."""


def unsafe_ops(graph_def) -> list[tuple[str, str]]:
    """(node name, op type) of every unsafe op, in the graph and in its function library."""
    found = [(n.name, n.op) for n in graph_def.node if n.op in UNSAFE_OPS]
    for fn in graph_def.library.function:
        found += [(f"{fn.signature.name}/{n.name}", n.op) for n in fn.node_def
                  if n.op in UNSAFE_OPS]
    return found


def check_safe(graph_def, allow_unsafe: bool = False) -> None:
    """Raises UnsafeOpError naming the first unsafe op unless ``allow_unsafe``."""
    found = unsafe_ops(graph_def)
    if found and not allow_unsafe:
        name, op = found[0]
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise UnsafeOpError(f"refusing to run the graph: op {name!r} of type {op} touches the "
                            f"file system or runs arbitrary code{more}; pass allow_unsafe=True "
                            f"(gplace calibrate --allow-unsafe) if you trust this graph")
