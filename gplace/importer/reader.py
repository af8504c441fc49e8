"""Read a GraphDef from a file: binary or text GraphDef, MetaGraphDef, or a SavedModel directory.

Every failure is a GraphError whose message names the file and the problem; protobuf's own
exceptions never escape.
"""

from __future__ import annotations

from pathlib import Path

from google.protobuf import message, text_format

from gplace.errors import GraphError

TEXT_SUFFIXES = (".pbtxt", ".pbtext", ".txt", ".prototxt")
BINARY_SUFFIXES = (".pb", ".graphdef", ".meta")
SUPPORTED = ".pb, .pbtxt, .meta, or a SavedModel directory"


def _protos():
    from tensorflow.core.framework import graph_pb2
    from tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2
    return graph_pb2.GraphDef, meta_graph_pb2.MetaGraphDef, saved_model_pb2.SavedModel


def read_graph_def(path: str | Path):
    """Returns ``(graph_def, kind)`` with kind one of graphdef, metagraph, savedmodel."""
    path = Path(path)
    if not path.exists():
        raise GraphError(f"{path}: no such file or directory")
    if path.is_dir():
        return _read_saved_model_dir(path)
    suffix = path.suffix.lower()
    if suffix not in TEXT_SUFFIXES + BINARY_SUFFIXES:
        raise GraphError(f"{path}: unsupported file type {suffix or '(no suffix)'!r}; "
                         f"expected {SUPPORTED}")
    data = path.read_bytes()
    if not data.strip():
        raise GraphError(f"{path}: the file is empty")
    if suffix in TEXT_SUFFIXES:
        return _parse_text(path, data)
    return _parse_binary(path, data, prefer_meta=(suffix == ".meta"))


def _read_saved_model_dir(path: Path):
    for name, parse in (("saved_model.pb", _parse_binary), ("saved_model.pbtxt", _parse_text)):
        if (path / name).is_file():
            graph_def, _ = parse(path / name, (path / name).read_bytes())
            return graph_def, "savedmodel"
    raise GraphError(f"{path}: a directory, but not a SavedModel (no saved_model.pb inside)")


def _looks_like_graph(graph_def) -> bool:
    return len(graph_def.node) > 0 and all(n.name and n.op for n in graph_def.node)


def _unwrap(proto, path: Path):
    """GraphDef inside a MetaGraphDef or SavedModel; the training graph when tagged "train"."""
    GraphDef, MetaGraphDef, SavedModel = _protos()
    if isinstance(proto, SavedModel):
        metas = list(proto.meta_graphs)
        if not metas:
            raise GraphError(f"{path}: SavedModel holds no meta graph")
        metas.sort(key=lambda m: "train" not in m.meta_info_def.tags)
        return metas[0].graph_def
    if isinstance(proto, MetaGraphDef):
        return proto.graph_def
    return proto


def _candidates(prefer_meta: bool):
    GraphDef, MetaGraphDef, SavedModel = _protos()
    kinds = [(GraphDef, "graphdef"), (MetaGraphDef, "metagraph"), (SavedModel, "savedmodel")]
    return kinds[1:2] + kinds[:1] + kinds[2:] if prefer_meta else kinds


def _parse_binary(path: Path, data: bytes, prefer_meta: bool = False):
    first_error = None
    for cls, kind in _candidates(prefer_meta):
        proto = cls()
        try:
            proto.ParseFromString(data)
        except (message.DecodeError, RuntimeError, ValueError) as e:
            first_error = first_error or e
            continue
        graph_def = _unwrap(proto, path)
        if _looks_like_graph(graph_def):
            return graph_def, kind
    if first_error is not None:
        raise GraphError(f"{path}: truncated or corrupt protobuf, not a readable GraphDef "
                         f"({_one_line(first_error)})")
    raise GraphError(f"{path}: not a TensorFlow GraphDef, MetaGraphDef or SavedModel "
                     "(no ops found)")


def _parse_text(path: Path, data: bytes):
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise GraphError(f"{path}: not a text protobuf (the file is not UTF-8 text)") from None
    first_error = None
    for cls, kind in _candidates(prefer_meta=False):
        proto = cls()
        try:
            text_format.Parse(text, proto)
        except text_format.ParseError as e:
            first_error = first_error or e
            continue
        graph_def = _unwrap(proto, path)
        if _looks_like_graph(graph_def):
            return graph_def, kind
    if first_error is not None:
        raise GraphError(f"{path}: syntax error in text GraphDef: {_one_line(first_error)}")
    raise GraphError(f"{path}: the text GraphDef holds no ops")


def _one_line(error: Exception) -> str:
    text = " ".join(str(error).split())
    return text[:200] or type(error).__name__
