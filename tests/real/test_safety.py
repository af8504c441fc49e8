"""The allowlist both ways: every op of the corpus and the shared test graphs passes; each op
that touches files, carries code or reaches the network is refused by name and type, before
any TF process starts."""

from pathlib import Path

import pytest

from gplace.real.safety import UnsafeOpError, check_safe, unsafe_ops
from tests.real.conftest import child_pids

ROOT = Path(__file__).resolve().parents[2]

# Ops that read or write files, carry code or reach the network: the newer tf.data ones a
# denylist is always behind on, and the classic readers, writers, savers and Python ops.
DANGEROUS = [
    "ExperimentalDatasetToTFRecord", "ExperimentalCSVDataset", "ExperimentalLMDBDataset",
    "ExperimentalSqlDataset", "ExperimentalMatchingFilesDataset", "RecordInput",
    "SnapshotChunkDataset", "SnapshotDatasetReader", "SnapshotNestedDatasetReader",
    "ListSnapshotChunksDataset", "DistributedSave", "FileSystemSetConfiguration", "EncodeProto",
    "DatasetFromGraph", "ReadFile", "WriteFile", "PyFunc", "EagerPyFunc", "PrintV2",
    "ImmutableConst", "SaveV2", "RestoreV2", "DataServiceDatasetV4",
]


def graph_with(*ops):
    from gplace.tfimport import tensorflow
    tf = tensorflow()
    gd = tf.compat.v1.GraphDef()
    for i, op in enumerate(ops):
        gd.node.add(name=f"n{i}", op=op)
    return gd


def test_refuses_ops_off_the_list_naming_them():
    gd = graph_with("Const", "ReadFile", "PyFunc")
    with pytest.raises(UnsafeOpError, match=r"'n1' of type ReadFile .*2 such ops in all, of "
                                            r"types PyFunc, ReadFile;.*--allow-unsafe"):
        check_safe(gd)
    assert unsafe_ops(gd) == [("n1", "ReadFile"), ("n2", "PyFunc")]
    with pytest.raises(UnsafeOpError, match=r"'n2' of type WriteFile "):  # not n1, AsString
        check_safe(graph_with("Const", "AsString", "WriteFile"))


@pytest.mark.parametrize("op", DANGEROUS)
def test_each_dangerous_op_is_refused(op):
    with pytest.raises(UnsafeOpError, match=f"'n1' of type {op} "):
        check_safe(graph_with("Const", op))


def test_allow_unsafe_and_safe_graphs_pass():
    check_safe(graph_with("ReadFile"), allow_unsafe=True)
    check_safe(graph_with("Const", "MatMul", "AssignVariableOp", "ResourceApplyAdam"))


def test_function_library_is_checked_and_its_calls_pass():
    gd = graph_with("Const", "f")  # a call of the library function f
    fn = gd.library.function.add()
    fn.signature.name = "f"
    fn.node_def.add(name="m", op="MatMul")
    check_safe(gd)
    fn.node_def.add(name="w", op="WriteFile")
    with pytest.raises(UnsafeOpError, match="'f/w' of type WriteFile"):
        check_safe(gd)
    with pytest.raises(UnsafeOpError, match="'n1' of type g"):
        check_safe(graph_with("Const", "g"))  # not in the library: an unknown op


def library_function(gd, name: str, *body_ops: str):
    fn = gd.library.function.add()
    fn.signature.name = name
    for i, op in enumerate(body_ops):
        fn.node_def.add(name=f"b{i}", op=op)
    return gd


@pytest.mark.parametrize("function,body,refused", [
    ("ReadFile", ["NoOp"], "'n1' of type ReadFile .*the library function ReadFile does not "
                           "count: it shares its name with TensorFlow's op ReadFile"),
    ("MatMul", ["WriteFile"], "'MatMul/b0' of type WriteFile"),  # an allowed name, a bad body
    ("MatMul", ["NoOp"], None),       # either resolution is harmless
    ("my_step", ["MatMul"], None),    # no op has this name: a call
])
def test_a_call_is_safe_only_if_both_the_function_and_any_op_of_its_name_are(function, body,
                                                                              refused):
    """TF resolves a NodeDef.op that names a library function to the function; the check
    does not rely on TF refusing a function named like one of its ops."""
    gd = library_function(graph_with("Const", function), function, *body)
    if refused is None:
        check_safe(gd)
    else:
        with pytest.raises(UnsafeOpError, match=refused):
            check_safe(gd)


def shipped_graphs(testdata_dir: Path) -> list[Path]:
    return sorted((ROOT / "datasets" / "corpus").glob("*.pb")) + sorted(
        testdata_dir.glob("*.pbtxt"))


def test_every_corpus_and_shared_test_graph_passes(testdata):
    from gplace.importer.reader import read_graph_def
    paths = shipped_graphs(testdata)
    assert len(paths) > 50
    refused = {p.name: unsafe_ops(read_graph_def(p)[0]) for p in paths}
    assert {k: v for k, v in refused.items() if v} == {}


def test_dangerous_graph_is_refused_before_any_process_starts():
    import gplace
    from gplace.cluster import load_cluster
    from gplace.problem import PlacementProblem
    from gplace.real.measurer import RealMeasurer
    from tests.real.conftest import tiny_step_graph
    clean = tiny_step_graph()
    hostile = type(clean)()
    hostile.CopyFrom(clean)
    hostile.node.add(name="exfiltrate", op="ExperimentalDatasetToTFRecord")
    problem = PlacementProblem.build(gplace.load_graph(hostile, name="tiny"),
                                     load_cluster("local-procs"))
    before = child_pids()
    with pytest.raises(UnsafeOpError, match="'exfiltrate' of type ExperimentalDatasetToTFRecord"):
        RealMeasurer(problem, hostile)
    assert child_pids() == before
    clean_problem = PlacementProblem.build(gplace.load_graph(clean, name="tiny"),
                                           load_cluster("local-procs"))
    assert "exfiltrate" not in {n.name for n in RealMeasurer(clean_problem, hostile).graph_def.node}
    assert child_pids() == before  # what runs is the step placed: a node beside it never does
