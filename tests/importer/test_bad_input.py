"""Bad input: one clear line on stderr naming the file and the problem, exit status 2.

Inputs that crashed TensorFlow or ate memory before they were checked (a recursive function,
a dtype number TF has no dtype for, a port of 10**8) run in a subprocess under limits:
tests/cli/test_robustness.py."""

import os
import subprocess
import sys

import numpy as np
import pytest

from gplace.cli import main

GOOD_NODE = 'node { name: "a" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } } ' \
            'attr { key: "value" value { tensor { dtype: DT_FLOAT float_val: 1.0 } } } }\n'


def write(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


def valid_pb() -> bytes:
    from gplace.tfimport import tensorflow
    tf = tensorflow()
    with tf.Graph().as_default() as g:
        x = tf.random.normal([64, 64], name="x")
        tf.matmul(x, x, name="y")
    return g.as_graph_def().SerializeToString()


def graph_pb(*nodes, library=()) -> bytes:
    """A binary GraphDef of ``nodes`` (name, op, inputs, {attr: dtype enum}) and library
    functions (name, [(node name, op)]); tests/cli/test_robustness.py builds its graphs here."""
    from gplace.tfimport import tensorflow
    gd = tensorflow().compat.v1.GraphDef()
    gd.versions.producer = 1
    for name, op, inputs, types in nodes:
        n = gd.node.add(name=name, op=op, input=inputs)
        for key, dtype in types.items():
            n.attr[key].type = dtype
    for fname, body in library:
        f = gd.library.function.add()
        f.signature.name = fname
        for name, op in body:
            f.node_def.add(name=name, op=op)
    return gd.SerializeToString()


def const_and(inp: str) -> bytes:
    """A Const and an Identity reading ``inp``."""
    return graph_pb(("c", "Const", [], {"dtype": 1}), ("i", "Identity", [inp], {"T": 1}))


def huge_placeholder(attr: str) -> bytes:
    """A Placeholder of shape [2**40, 2**40] (4.8e24 bytes) in its ``shape`` or its recorded
    ``_output_shapes``, and an op that reads it."""
    from gplace.tfimport import tensorflow
    gd = tensorflow().compat.v1.GraphDef()
    p = gd.node.add(name="p", op="Placeholder")
    p.attr["dtype"].type = 1
    shape = p.attr["shape"].shape if attr == "shape" else p.attr[attr].list.shape.add()
    for _ in range(2):
        shape.dim.add(size=2**40)
    gd.node.add(name="q", op="Neg", input=["p"]).attr["T"].type = 1
    return gd.SerializeToString()


def negative_dims(attr: str) -> bytes:
    """A Const whose tensor has dimensions [-5, 3], or a Placeholder of shape [-7, -1]: TF
    refuses both when it builds the graph."""
    from gplace.tfimport import tensorflow
    gd = tensorflow().compat.v1.GraphDef()
    node = gd.node.add(name="c", op="Const" if attr == "value" else "Placeholder")
    node.attr["dtype"].type = 1
    if attr == "value":
        node.attr["value"].tensor.dtype = 1
        shape = node.attr["value"].tensor.tensor_shape
    else:
        shape = node.attr["shape"].shape
    for size in ((-5, 3) if attr == "value" else (-7, -1)):
        shape.dim.add(size=size)
    gd.node.add(name="q", op="Neg", input=["c"]).attr["T"].type = 1
    return gd.SerializeToString()


def loop_link(p):
    (p / "b.pb").symlink_to(p / "a.pb")
    (p / "a.pb").symlink_to(p / "b.pb")
    return p / "a.pb"


def dangling_link(p):
    (p / "gone.pb").symlink_to(p / "nowhere.pb")
    return p / "gone.pb"


CASES = {
    "missing file": (lambda p: p / "nope.pb", "no such file or directory"),
    "empty file": (lambda p: write(p, "empty.pb", b""), "the file is empty"),
    "random bytes": (lambda p: write(p, "random.pb", os.urandom(4096)),
                     "corrupt protobuf|not a TensorFlow GraphDef"),
    "truncated protobuf": (lambda p: write(p, "cut.pb", valid_pb()[:-7]), "truncated or corrupt"),
    "pbtxt syntax error": (lambda p: write(p, "bad.pbtxt", 'node { name: "a" op: "Const" '),
                           "syntax error in text GraphDef: 1:"),
    "unsupported type": (lambda p: write(p, "model.onnx", b"\x08\x01"),
                         "unsupported file type '.onnx'; expected .pb, .pbtxt"),
    "Keras model file": (lambda p: write(p, "model.keras", b"PK\x03\x04"),
                         "a Keras model file holds a model, not a training step"),
    "missing input op": (lambda p: write(p, "dangling.pbtxt",
                                         GOOD_NODE + 'node { name: "b" op: "Identity" input: "zz" }'),
                         "op 'b' has input 'zz', which names a missing op"),
    "cycle that is not a loop": (
        lambda p: write(p, "cycle.pbtxt",
                        'node { name: "a" op: "Identity" input: "b" attr { key: "T" value { type: DT_FLOAT } } }\n'
                        'node { name: "b" op: "Identity" input: "a" attr { key: "T" value { type: DT_FLOAT } } }'),
        "cycle that is not a TF loop: "),
    "SavedModel dir without model": (lambda p: p, "not a SavedModel"),
    "port not a number": (lambda p: write(p, "x.pb", const_and("c:x")),
                          "input 'c:x': the output after ':' must be a number"),
    "port empty": (lambda p: write(p, "e.pb", const_and("c:")), "input 'c:': the output"),
    "port negative": (lambda p: write(p, "n.pb", const_and("c:-1")), "input 'c:-1': the output"),
    "port past the outputs": (lambda p: write(p, "p.pb", const_and("c:1")),
                              r"input 'c:1', but op 'c' \(Const\) has 1 output$"),
    "name with a caret": (lambda p: write(p, "caret.pb", graph_pb(("^x", "NoOp", [], {}))),
                          r"op 0 is named '\^x', which is not a TensorFlow op name"),
    "empty GraphDef": (lambda p: write(p, "zero.pb", graph_pb()), "the GraphDef holds no ops"),
    "op name not UTF-8": (lambda p: write(p, "utf.pb", graph_pb(("okname", "NoOp", [], {}))
                                          .replace(b"okname", b"ok\xffame")),
                          r"an op's name \(b'ok\\xffame'\) is not UTF-8 text"),
    "symbolic link loop": (loop_link, "a loop of symbolic links"),
    "dangling symbolic link": (dangling_link, "a symbolic link to a missing file"),
    "placeholder of 2**80 elements": (lambda p: write(p, "huge.pb", huge_placeholder("shape")),
                                      r"op 'p' placeholder: shape \[1099511627776, "
                                      r"1099511627776\] of float32 is 4.84e\+24 bytes, more "
                                      r"than the 1 PiB"),
    "recorded shape of 2**80 elements": (lambda p: write(p, "rec.pb", huge_placeholder(
        "_output_shapes")), r"op 'p' output 0: shape \[1099511627776, 1099511627776\]"),
    "constant with a negative dimension": (
        lambda p: write(p, "negc.pb", negative_dims("value")),
        r"op 'c': attr 'value' holds a tensor with dimensions \[-5, 3\]; TensorFlow takes sizes "
        r">= 0$"),
    "shape with a dimension below -1": (
        lambda p: write(p, "negp.pb", negative_dims("shape")),
        r"op 'c': attr 'shape' holds a shape with dimensions \[-7, -1\]"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_gives_one_line_and_exit_2(tmp_path, capsys, case):
    make, expected = CASES[case]
    path = make(tmp_path)
    assert main(["inspect", str(path)]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and out == ""
    assert lines[0].startswith("gplace inspect: error: ") and str(path) in lines[0]
    import re
    assert re.search(expected, lines[0]), lines[0]


def test_unknown_op_type_imports_with_a_generic_cost(tmp_path):
    import gplace
    path = write(tmp_path, "custom.pbtxt", GOOD_NODE + 'node { name: "b" op: "MyCustomOp" input: "a" }')
    g = gplace.load_graph(path)
    assert g.num_ops == 2 and g.flops[g.index("b")] == 0.0
    assert "unregistered" in " ".join(g.meta["import"]["notes"])


def test_a_constant_without_its_value_imports_in_a_child_that_lives(tmp_path):
    """Grappler's shape inference aborted the process (a C++ check failure) on a Const
    without its value once TF's own import had refused the graph; run in a child process so
    that an abort fails the test rather than the run."""
    import subprocess
    import sys
    path = tmp_path / "no-value.pb"
    path.write_bytes(graph_pb(("c", "Const", [], {"dtype": 1}), ("train", "NoOp", ["^c"], {})))
    code = f"import gplace; print(gplace.load_graph({str(path)!r}).num_ops)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "2", out.stderr[-300:]


def test_the_installed_command_prints_no_traceback(tmp_path):
    path = write(tmp_path, "random.pb", b"\xff" * 100)
    proc = subprocess.run([sys.executable, "-m", "gplace", "inspect", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "random.pb" in proc.stderr


def test_importing_never_runs_an_op_that_reads_a_file(tmp_path):
    """TF's shape inference evaluates small constant subgraphs: a Reshape whose shape is
    decoded from ReadFile of a constant path would read that file at import (and hang on a
    pipe). The import gives such ops no values, so the file's bytes never reach a shape."""
    from gplace import load_graph
    from gplace.tfimport import tensorflow
    tf = tensorflow()
    secret = tmp_path / "secret"
    secret.write_bytes(np.array([3, 4], np.int32).tobytes())
    graph = tf.Graph()
    with graph.as_default():
        shape = tf.io.decode_raw(tf.io.read_file(str(secret)), tf.int32)
        x = tf.compat.v1.placeholder(tf.float32, [12], name="x")
        tf.identity(tf.reshape(x, shape), name="y")
    g = load_graph(graph.as_graph_def())
    y = g.index("Reshape")
    dims = g.out_dims[g.dim_ptr[g.out_ptr[y]]:g.dim_ptr[g.out_ptr[y] + 1]].tolist()
    assert dims != [3, 4]  # what the file holds
