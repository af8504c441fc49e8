"""Reading a graph file without TensorFlow (reader.read_graph_def(lean=True)): TensorBoard's
copies of the protos have TF's fields, recursively, and give the same bytes."""

import subprocess
import sys
from pathlib import Path

import pytest

from gplace.importer.reader import read_graph_def

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "gplace" / "examples" / "small_resnet.pb"
SHARED = ROOT.parent / "shared" / "testdata" / "tf-grappler"


def fields(descriptor, seen=None) -> dict:
    """Every message reachable from ``descriptor``: its fields' (name, number, type, label),
    the package prefix left out."""
    seen = {} if seen is None else seen
    name = descriptor.full_name.split(".", 1)[1]
    if name in seen:
        return seen
    seen[name] = sorted((f.name, f.number, f.type, f.label) for f in descriptor.fields)
    for f in descriptor.fields:
        if f.message_type is not None:
            fields(f.message_type, seen)
    return seen


def test_tensorboards_protos_have_tensorflows_fields():
    from tensorboard.compat.proto import graph_pb2, meta_graph_pb2
    from tensorflow.core.framework import graph_pb2 as tf_graph_pb2
    from tensorflow.core.protobuf import meta_graph_pb2 as tf_meta_graph_pb2
    for lean, tf in ((graph_pb2.GraphDef, tf_graph_pb2.GraphDef),
                     (meta_graph_pb2.MetaGraphDef, tf_meta_graph_pb2.MetaGraphDef)):
        assert fields(lean.DESCRIPTOR) == fields(tf.DESCRIPTOR)


def graph_files():
    files = [EXAMPLE, *sorted((ROOT / "datasets" / "corpus").glob("nmt_2l.pb"))]
    return files + sorted(SHARED.glob("*.pbtxt"))[:6] if SHARED.is_dir() else files


@pytest.mark.parametrize("path", graph_files(), ids=lambda p: p.name)
def test_lean_reading_gives_the_same_graph_bytes(path):
    lean, kind = read_graph_def(path, lean=True)
    full, full_kind = read_graph_def(path)
    assert kind == full_kind
    assert lean.SerializeToString(deterministic=True) == full.SerializeToString(deterministic=True)


def test_lean_reading_does_not_start_tensorflow():
    code = ("import sys; from gplace.importer.reader import read_graph_def; "
            f"g = read_graph_def({str(EXAMPLE)!r}, lean=True)[0]; "
            "print(type(g).__module__, 'tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["tensorboard.compat.proto.graph_pb2", "False"]
