"""Bad input: one clear line on stderr naming the file and the problem, exit status 2."""

import os
import subprocess
import sys

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
    "missing input op": (lambda p: write(p, "dangling.pbtxt",
                                         GOOD_NODE + 'node { name: "b" op: "Identity" input: "zz" }'),
                         "op 'b' has input 'zz', which names a missing op"),
    "cycle that is not a loop": (
        lambda p: write(p, "cycle.pbtxt",
                        'node { name: "a" op: "Identity" input: "b" attr { key: "T" value { type: DT_FLOAT } } }\n'
                        'node { name: "b" op: "Identity" input: "a" attr { key: "T" value { type: DT_FLOAT } } }'),
        "cycle that is not a TF loop: "),
    "SavedModel dir without model": (lambda p: p, "not a SavedModel"),
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


def test_the_installed_command_prints_no_traceback(tmp_path):
    path = write(tmp_path, "random.pb", b"\xff" * 100)
    proc = subprocess.run([sys.executable, "-m", "gplace", "inspect", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "random.pb" in proc.stderr
