import pytest

from gplace.real.safety import UnsafeOpError, check_safe, unsafe_ops


def graph_with(*ops):
    from gplace.tfimport import tensorflow
    tf = tensorflow()
    gd = tf.compat.v1.GraphDef()
    for i, op in enumerate(ops):
        gd.node.add(name=f"n{i}", op=op)
    return gd


def test_refuses_file_and_python_ops_naming_them():
    gd = graph_with("Const", "ReadFile", "PyFunc")
    with pytest.raises(UnsafeOpError, match=r"'n1' of type ReadFile.*and 1 more.*allow_unsafe"):
        check_safe(gd)
    assert unsafe_ops(gd) == [("n1", "ReadFile"), ("n2", "PyFunc")]


def test_allow_unsafe_and_safe_graphs_pass():
    check_safe(graph_with("ReadFile"), allow_unsafe=True)
    check_safe(graph_with("Const", "MatMul", "AssignVariableOp"))


def test_function_library_is_checked():
    gd = graph_with("Const")
    fn = gd.library.function.add()
    fn.signature.name = "f"
    fn.node_def.add(name="w", op="WriteFile")
    with pytest.raises(UnsafeOpError, match="f/w"):
        check_safe(gd)
