"""Every real TensorFlow test graph in ../shared/testdata/tf-grappler imports."""

import numpy as np
import pytest
from google.protobuf import text_format

import gplace
from gplace.tfimport import tensorflow

FILES_WITHOUT_FUNCTIONS = ["while_loop", "nested_loop", "loops_and_queues", "queues_and_loops",
                           "loops_and_resource_vars", "merge_without_loops", "profiler_graph",
                           "ophint_lstm", "while_loop_var_handle_op"]
LOOP_FRAMES = {"while_loop": 1, "nested_loop": 2, "loops_and_queues": 2, "queues_and_loops": 1,
               "loops_and_resource_vars": 2, "while_loop_var_handle_op": 1, "merge_without_loops": 0}


def graph_def(path):
    gd = tensorflow().compat.v1.GraphDef()
    text_format.Parse(path.read_text(), gd)
    return gd


def test_every_file_imports(testdata):
    files = sorted(testdata.glob("*.pbtxt"))
    assert len(files) >= 14
    for path in files:
        g = gplace.load_graph(path)
        left_out = sum(g.meta["import"]["left_out"].values())  # initializers: importer/step.py
        assert g.num_ops + left_out >= len(graph_def(path).node), path.name
        g.validate()


@pytest.mark.parametrize("name", FILES_WITHOUT_FUNCTIONS)
def test_counts_match_the_graph_def(testdata, name):
    gd = graph_def(testdata / f"{name}.pbtxt")
    g = gplace.load_graph(testdata / f"{name}.pbtxt", whole_graph=True)
    inputs = [i for n in gd.node for i in n.input]
    assert g.num_ops == len(gd.node)
    assert g.num_edges == sum(not i.startswith("^") for i in inputs)
    assert g.num_control_edges == sum(i.startswith("^") for i in inputs)
    assert g.names.tolist() == [n.name for n in gd.node]


@pytest.mark.parametrize("name,frames", sorted(LOOP_FRAMES.items()))
def test_loops_are_found_and_back_edges_marked(testdata, name, frames):
    g = gplace.load_graph(testdata / f"{name}.pbtxt")
    assert g.meta["import"]["loops"] == frames
    next_iteration = np.isin(g.op_types, ["NextIteration", "RefNextIteration"])
    back = g.edge_back
    assert back.sum() == next_iteration[g.edge_src].sum() == (frames > 0) * back.sum()
    assert np.all(g.op_types[g.edge_dst[back]] == "Merge")
    assert len(g.topo_order()) == g.num_ops  # the scheduling view is acyclic


def test_loop_variables_keep_their_shapes(testdata):
    """Grappler's fixed point gives Merge outputs in loops a known shape."""
    g = gplace.load_graph(testdata / "while_loop.pbtxt")
    assert g.meta["import"]["outputs_with_unknown_dims"] < 10


def test_function_calls_are_inlined(testdata):
    g = gplace.load_graph(testdata / "simple_function.pbtxt")
    assert g.meta["import"]["inlined_functions"] == {"MyAdd_55e046a8": 2}
    # The call keeps its name as the IdentityN of the body's results, so consumers still work.
    assert g.op_types[g.index("MyAdd_55e046a8")] == "IdentityN"
    assert "Add" in g.op_types.tolist() or "AddV2" in g.op_types.tolist()


def test_functional_while_is_kept_with_its_body_cost(testdata):
    g = gplace.load_graph(testdata / "function_functional_while.pbtxt")
    kept = g.meta["import"]["kept_function_ops"]
    assert any("While" in why for why in kept.values())
    (op,) = [g.index(name) for name in kept]
    assert g.op_types[op] == "While" and g.flops[op] > 0


def test_recorded_output_shapes_and_conv_flops(testdata):
    """profiler_graph.pbtxt is TensorFlow's own profiler test graph with _output_shapes."""
    path = testdata / "profiler_graph.pbtxt"
    g = gplace.load_graph(path, whole_graph=True)  # TF's profiler counts the initializers too
    tf = tensorflow()
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_def(path), name="")
    opts = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
    opts["output"] = "none"
    expected = tf.compat.v1.profiler.profile(graph, options=opts).total_float_ops
    registered = np.isin(g.op_types, ["Conv2D", "Add", "Mul", "AddV2", "MatMul"])
    assert expected > 0 and g.flops[registered].sum() == expected
    # Variables and their Assign ops (reference edges) share a colocation group.
    assign = g.index("DW/Assign")
    assert g.group[assign] == g.group[g.index("DW")]
    # float32 variables DW 3x3x3x6, DW2 2x2x6x12 and ScalarW: 4 * (162 + 288 + 1) bytes
    assert g.param_bytes.sum() == 1804


def test_loop_variable_control_flow_ops_share_a_group(testdata):
    """TF runs each loop variable's Enter, Merge, Switch, Exit and NextIteration on one device."""
    g = gplace.load_graph(testdata / "while_loop.pbtxt")
    loop_ops = np.isin(g.op_types, ["Enter", "Merge", "Switch", "Exit", "NextIteration"])
    for s, d in zip(g.edge_src, g.edge_dst):
        pair = (g.op_types[s], g.op_types[d])
        if pair in {("Enter", "Merge"), ("NextIteration", "Merge"), ("Merge", "Switch"),
                    ("Switch", "Exit")}:
            assert g.group[s] == g.group[d], (g.names[s], g.names[d])
    assert loop_ops.sum() > np.unique(g.group[loop_ops]).size
