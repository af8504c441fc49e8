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
    from gplace.tfimport import tensorflow
    tensorflow()  # quietly: the protos' package import loads TF's libraries and their log lines
    from tensorflow.core.framework import graph_pb2
    from tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2
    return graph_pb2.GraphDef, meta_graph_pb2.MetaGraphDef, saved_model_pb2.SavedModel


def read_graph_def(path: str | Path):
    """Returns ``(graph_def, kind)`` with kind one of graphdef, metagraph, savedmodel."""
    file, data = read_graph_file(path)
    if file.name == "saved_model.pbtxt" or (file.name == "saved_model.pb" and Path(path).is_dir()):
        parse = _parse_text if file.suffix == ".pbtxt" else _parse_binary
        return parse(file, data)[0], "savedmodel"
    if file.suffix.lower() in TEXT_SUFFIXES:
        return _parse_text(file, data)
    return _parse_binary(file, data, prefer_meta=(file.suffix.lower() == ".meta"))


def read_graph_file(path: str | Path) -> tuple[Path, bytes]:
    """(the file, its bytes) of a graph file, or of the saved_model.pb(txt) of a SavedModel
    directory, checked for everything that needs no parsing: it exists, has a known type, is a
    readable regular file and is not empty. Cheap: TensorFlow is not imported."""
    path = Path(path)
    if not path.exists():
        raise GraphError(f"{path}: no such file or directory")
    if path.is_dir():
        inside = [path / n for n in ("saved_model.pb", "saved_model.pbtxt") if (path / n).is_file()]
        if not inside:
            raise GraphError(f"{path}: a directory, but not a SavedModel (no saved_model.pb "
                             f"inside)")
        path = inside[0]
    elif path.suffix.lower() not in TEXT_SUFFIXES + BINARY_SUFFIXES:
        raise GraphError(f"{path}: unsupported file type {path.suffix.lower() or '(no suffix)'!r}"
                         f"; expected {SUPPORTED}")
    data = _read_bytes(path)
    if not data.strip():
        raise GraphError(f"{path}: the file is empty")
    return path, data


def _read_bytes(path: Path) -> bytes:
    """The file's bytes; a GraphError for anything but a readable regular file (a FIFO would
    block, a permission or I/O error would be a traceback)."""
    try:
        if not path.is_file():
            raise GraphError(f"{path}: not a regular file")
        return path.read_bytes()
    except OSError as e:
        raise GraphError(f"{path}: cannot read it ({e.strerror or e})") from None


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


def _first_graph(path: Path, parse, errors, prefer_meta: bool = False):
    """(graph_def, kind) of the first message kind that ``parse(proto)`` fills with ops;
    (None, the first parse error) if none does."""
    first_error = None
    for cls, kind in _candidates(prefer_meta):
        proto = cls()
        try:
            parse(proto)
        except errors as e:
            first_error = first_error or e
            continue
        graph_def = _unwrap(proto, path)
        if _looks_like_graph(graph_def):
            return (graph_def, kind), None
    return None, first_error


def _parse_binary(path: Path, data: bytes, prefer_meta: bool = False):
    found, error = _first_graph(path, lambda proto: proto.ParseFromString(data),
                                (message.DecodeError, RuntimeError, ValueError), prefer_meta)
    if found:
        return found
    if error is not None:
        raise GraphError(f"{path}: truncated or corrupt protobuf, not a readable GraphDef "
                         f"({_one_line(error)})")
    raise GraphError(f"{path}: not a TensorFlow GraphDef, MetaGraphDef or SavedModel "
                     "(no ops found)")


def _parse_text(path: Path, data: bytes):
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise GraphError(f"{path}: not a text protobuf (the file is not UTF-8 text)") from None
    found, error = _first_graph(path, lambda proto: text_format.Parse(text, proto),
                                text_format.ParseError)
    if found:
        return found
    if error is not None:
        raise GraphError(f"{path}: syntax error in text GraphDef: {_one_line(error)}")
    raise GraphError(f"{path}: the text GraphDef holds no ops")


def _one_line(error: Exception) -> str:
    text = " ".join(str(error).split())
    return text[:200] or type(error).__name__
