"""Read a GraphDef from a file: binary or text GraphDef, MetaGraphDef, or a SavedModel directory.

Every failure is a GraphError whose message names the file and the problem; protobuf's own
exceptions never escape.
"""

from __future__ import annotations

import errno
import functools
from pathlib import Path

from google.protobuf import message, text_format

from gplace.errors import GraphError

TEXT_SUFFIXES = (".pbtxt", ".pbtext", ".txt", ".prototxt")
BINARY_SUFFIXES = (".pb", ".graphdef", ".meta")
SUPPORTED = (".pb, .pbtxt, .meta, a SavedModel directory, a PyTorch program (.pt2) or a "
             "saved OpGraph (.npz)")
KERAS_SUFFIXES = (".keras", ".h5", ".hdf5")


def _protos(lean: bool = False):
    """The GraphDef, MetaGraphDef and SavedModel classes: TensorFlow's, or with ``lean`` the
    copies TensorBoard ships (the same fields, tests/importer/test_lean_protos.py), which load
    in milliseconds instead of starting TensorFlow; TensorBoard has no SavedModel, so a
    SavedModel is never read lean."""
    if lean:
        try:
            from tensorboard.compat.proto import graph_pb2, meta_graph_pb2
            return graph_pb2.GraphDef, meta_graph_pb2.MetaGraphDef, None
        except ImportError:
            pass
    from gplace.tfimport import tensorflow
    tensorflow()  # quietly: the protos' package import loads TF's libraries and their log lines
    from tensorflow.core.framework import graph_pb2
    from tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2
    return graph_pb2.GraphDef, meta_graph_pb2.MetaGraphDef, saved_model_pb2.SavedModel


def read_graph_def(path: str | Path, lean: bool = False):
    """Returns ``(graph_def, kind)`` with kind one of graphdef, metagraph, savedmodel.
    ``lean``: without starting TensorFlow where possible (see _protos): the GraphDef is then
    TensorBoard's class, for code that only reads, edits and writes it."""
    return read_graph(path, lean)[:2]


def read_graph(path: str | Path, lean: bool = False):
    """``(graph_def, kind, meta)``: read_graph_def's pair and, for a MetaGraphDef or
    SavedModel, what runs it (:func:`_meta_info`: its signatures and its saver); {} for a
    GraphDef."""
    file, data = read_graph_file(path)
    if file.name == "saved_model.pbtxt" or (file.name == "saved_model.pb" and Path(path).is_dir()):
        protos = _protos()
        parse = _parse_text if file.suffix == ".pbtxt" else _parse_binary
        graph_def, _, meta = parse(file, data, protos)
        return graph_def, "savedmodel", meta
    parse = _parse_text if file.suffix.lower() in TEXT_SUFFIXES else functools.partial(
        _parse_binary, prefer_meta=(file.suffix.lower() == ".meta"))
    if lean and _protos(lean)[2] is None:
        try:
            return parse(file, data, _protos(lean))
        except GraphError:
            pass  # maybe a SavedModel message; TF's classes read it or say what is wrong
    return parse(file, data, _protos())


def read_graph_file(path: str | Path) -> tuple[Path, bytes]:
    """(the file, its bytes) of a graph file, or of the saved_model.pb(txt) of a SavedModel
    directory, checked for everything that needs no parsing: it exists, has a known type, is a
    readable regular file and is not empty. Cheap: TensorFlow is not imported."""
    path = Path(path)
    check_exists(path)
    if path.is_dir():
        inside = [path / n for n in ("saved_model.pb", "saved_model.pbtxt") if (path / n).is_file()]
        if not inside:
            raise GraphError(f"{path}: a directory, but not a SavedModel (no saved_model.pb "
                             f"inside)")
        path = inside[0]
    elif path.suffix.lower() in KERAS_SUFFIXES:
        raise GraphError(f"{path}: a Keras model file holds a model, not a training step; save "
                         "a tf.function that trains it as a SavedModel, or write its concrete "
                         "function's graph with add_shapes=True (README: a TF2 or Keras step)")
    elif path.suffix.lower() not in TEXT_SUFFIXES + BINARY_SUFFIXES:
        raise GraphError(f"{path}: unsupported file type {path.suffix.lower() or '(no suffix)'!r}"
                         f"; expected {SUPPORTED}")
    data = _read_bytes(path)
    if not data.strip():
        raise GraphError(f"{path}: the file is empty")
    return path, data


def checkpoint_of(source, kind: str) -> str | None:
    """Where the variables of a graph read from ``source`` (a path) as ``kind`` are saved: a
    SavedModel's ``variables/variables``, a TF1 Saver's prefix beside its ``.meta`` file;
    None where it cannot be told."""
    if not isinstance(source, (str, Path)) or str(source).startswith("<"):
        return None
    path = Path(source)
    if kind == "savedmodel":
        return str((path if path.is_dir() else path.parent) / "variables" / "variables")
    if kind == "metagraph" and path.suffix == ".meta":
        return str(path.with_suffix(""))
    return None


def check_exists(path: Path) -> None:
    """A GraphError naming why ``path`` cannot be looked at: missing, a symbolic link loop,
    a dangling link, a folder on the way that cannot be entered."""
    try:
        path.stat()
    except OSError as e:
        if e.errno == errno.ENOENT:
            dangling = path.is_symlink()
            raise GraphError(f"{path}: " + ("a symbolic link to a missing file" if dangling
                                            else "no such file or directory")) from None
        if e.errno == errno.ELOOP:
            raise GraphError(f"{path}: a loop of symbolic links (too many levels of symbolic "
                             f"links)") from None
        raise GraphError(f"{path}: cannot look at it ({e.strerror or e})") from None


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
    return graph_def is not None and len(graph_def.node) > 0 and all(
        n.name and n.op for n in graph_def.node)


def _unwrap(proto, protos):
    """``(graph_def, meta)``: the GraphDef inside a MetaGraphDef or SavedModel (the training
    graph when one is tagged "train"; None for a SavedModel without meta graphs) and what
    runs it (:func:`_meta_info`); a GraphDef is its own, with {}."""
    GraphDef, MetaGraphDef, SavedModel = protos
    if SavedModel is not None and isinstance(proto, SavedModel):
        metas = sorted(proto.meta_graphs, key=lambda m: "train" not in m.meta_info_def.tags)
        return (metas[0].graph_def, _meta_info(metas[0])) if metas else (None, {})
    if isinstance(proto, MetaGraphDef):
        return proto.graph_def, _meta_info(proto)
    return proto, {}


def _meta_info(meta_graph) -> dict:
    """``{"signatures": {name: {"inputs": {key: tensor}, "outputs": {key: tensor}}},
    "saver": {"filename_tensor": ..., "restore_op": ...}}`` (the saver where the meta graph
    names one: what restores its variables from a checkpoint)."""
    signatures = {name: {part: {key: tensor.name for key, tensor in
                                sorted(getattr(sig, part).items()) if tensor.name}
                         for part in ("inputs", "outputs")}
                  for name, sig in sorted(meta_graph.signature_def.items())}
    saver = meta_graph.saver_def
    restore = {"filename_tensor": saver.filename_tensor_name,
               "restore_op": saver.restore_op_name} if saver.restore_op_name else None
    return {"signatures": signatures, "saver": restore}


def _candidates(protos, prefer_meta: bool):
    GraphDef, MetaGraphDef, SavedModel = protos
    kinds = [(GraphDef, "graphdef"), (MetaGraphDef, "metagraph"), (SavedModel, "savedmodel")]
    kinds = [k for k in kinds if k[0] is not None]
    return kinds[1:2] + kinds[:1] + kinds[2:] if prefer_meta else kinds


def _first_graph(parse, errors, protos, prefer_meta: bool = False):
    """``((graph_def, kind, meta), None, None)`` for the first message kind that
    ``parse(proto)`` fills with ops; else ``(None, the first parse error, the GraphDef if it
    parsed)``."""
    first_error, plain = None, None
    for cls, kind in _candidates(protos, prefer_meta):
        proto = cls()
        try:
            parse(proto)
        except errors as e:
            first_error = first_error or e
            continue
        graph_def, meta = _unwrap(proto, protos)
        if _looks_like_graph(graph_def):
            return (graph_def, kind, meta), None, None
        plain = proto if kind == "graphdef" and proto.ListFields() else plain
    return None, first_error, plain


def _no_graph(path: Path, graph_def) -> GraphError:
    """Why a GraphDef that parsed is not a graph: no ops, or ops without a name or type."""
    if not graph_def.node:
        return GraphError(f"{path}: the GraphDef holds no ops")
    k, node = next((k, n) for k, n in enumerate(graph_def.node) if not (n.name and n.op))
    missing = "name" if not node.name else "type"
    return GraphError(f"{path}: op {k} of the GraphDef has no {missing}")


def _parse_binary(path: Path, data: bytes, protos, prefer_meta: bool = False):
    found, error, plain = _first_graph(lambda proto: proto.ParseFromString(data),
                                       (message.DecodeError, RuntimeError, ValueError),
                                       protos, prefer_meta)
    if found:
        return found
    bad_text = _non_utf8_node_field(data)
    if bad_text:
        raise GraphError(f"{path}: {bad_text} is not UTF-8 text; TensorFlow op names, types "
                         f"and inputs must be")
    if plain is not None:
        raise _no_graph(path, plain)
    if error is not None:
        raise GraphError(f"{path}: truncated or corrupt protobuf, not a readable GraphDef "
                         f"({_one_line(error)})")
    raise GraphError(f"{path}: not a TensorFlow GraphDef, MetaGraphDef or SavedModel "
                     "(no ops found)")


def _parse_text(path: Path, data: bytes, protos):
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise GraphError(f"{path}: not a text protobuf (the file is not UTF-8 text)") from None
    found, error, plain = _first_graph(lambda proto: text_format.Parse(text, proto),
                                       (text_format.ParseError, RecursionError), protos)
    if found:
        return found
    if plain is not None and plain.node:
        raise _no_graph(path, plain)
    if isinstance(error, RecursionError):
        raise GraphError(f"{path}: the text GraphDef nests messages deeper than a GraphDef "
                         "does") from None
    if error is not None:
        raise GraphError(f"{path}: syntax error in text GraphDef: {_one_line(error)}")
    raise GraphError(f"{path}: the text GraphDef holds no ops")


def _one_line(error: Exception) -> str:
    text = " ".join(str(error).split())
    return text[:200] or type(error).__name__


# ---- a GraphDef's strings, read without protobuf: protobuf says only "Error parsing" -------
_NODE_STRINGS = {1: "name", 2: "type", 3: "input", 4: "device"}  # NodeDef's string fields


def _non_utf8_node_field(data: bytes) -> str | None:
    """'an op's name (b'ok\\xffame')' when a NodeDef string field of the GraphDef in ``data``
    is not UTF-8 (protobuf refuses the message then); None if all are, or it is no GraphDef."""
    try:
        for number, wire, node in _fields(data):
            if number != 1 or wire != 2:  # GraphDef.node
                continue
            for field, kind, value in _fields(node):
                if field in _NODE_STRINGS and kind == 2:
                    try:
                        value.decode("utf-8")
                    except UnicodeDecodeError:
                        return f"an op's {_NODE_STRINGS[field]} ({value[:40]!r})"
    except (ValueError, IndexError):
        return None
    return None


def _fields(data: bytes):
    """(field number, wire type, value) of each field of a protobuf message; the value is the
    bytes of a length-delimited field, else None. ValueError on a truncated message."""
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        wire = key & 7
        value = None
        if wire == 0:
            _, i = _varint(data, i)
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
        elif wire == 2:
            n, i = _varint(data, i)
            value, i = data[i:i + n], i + n
        else:
            raise ValueError(f"wire type {wire}")
        if i > len(data):
            raise ValueError("truncated")
        yield key >> 3, wire, value


def _varint(data: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while shift < 64:
        byte = data[i]
        result |= (byte & 0x7F) << shift
        i += 1
        if not byte & 0x80:
            return result, i
        shift += 7
    raise ValueError("varint too long")
