"""Training-step graphs built from Keras models: a CNN with batch norm, an LSTM with TF1 loops,
and a small Transformer block; counts, colocation and FLOPs against TensorFlow's own figures."""

import numpy as np
import pytest

import gplace
from gplace.tfimport import tensorflow

tf = tensorflow()
keras = pytest.importorskip("keras")
tfstep = pytest.importorskip("datasets.tfstep")


def cnn():
    return keras.Sequential([keras.layers.Conv2D(8, 3), keras.layers.BatchNormalization(),
                             keras.layers.ReLU(), keras.layers.MaxPooling2D(),
                             keras.layers.Flatten(), keras.layers.Dense(10)])


def lstm():
    return keras.Sequential([keras.layers.Embedding(50, 8), keras.layers.LSTM(16),
                             keras.layers.Dense(10)])


def transformer():
    inp = keras.Input((12, 16))
    x = keras.layers.MultiHeadAttention(2, 8)(inp, inp)
    x = keras.layers.LayerNormalization()(x + inp)
    x = keras.layers.Dense(16, activation="relu")(keras.layers.GlobalAveragePooling1D()(x))
    return keras.Model(inp, keras.layers.Dense(5)(x))


BUILDERS = {
    "cnn": lambda: tfstep.keras_classifier_step(cnn, (16, 16, 3), 10, 4),
    "lstm": lambda: tfstep.keras_classifier_step(lstm, (6,), 10, 4, input_dtype=tf.int32),
    "transformer": lambda: tfstep.keras_classifier_step(transformer, (12, 16), 5, 4),
}


_BUILT: dict = {}


def build(name: str):
    """(name, GraphDef, OpGraph), built once per test session."""
    if name not in _BUILT:
        gd = BUILDERS[name]()
        _BUILT[name] = (name, gd, gplace.load_graph(gd, name=name))
    return _BUILT[name]


@pytest.fixture(params=sorted(BUILDERS))
def built(request):
    return build(request.param)


def tf_flops(gd) -> int:
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(gd, name="")
    opts = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
    opts["output"] = "none"
    return tf.compat.v1.profiler.profile(graph, options=opts).total_float_ops


def test_counts_match_the_graph_def(built):
    _, gd, g = built
    inputs = [i for n in gd.node for i in n.input]
    assert g.num_ops == len(gd.node)
    assert g.num_edges == sum(not i.startswith("^") for i in inputs)
    assert g.num_control_edges == sum(i.startswith("^") for i in inputs)


def test_training_step_has_forward_backward_and_update(built):
    _, _, g = built
    types = set(g.op_types.tolist())
    assert "ResourceApplyMomentum" in types
    assert any(name.startswith("gradients/") for name in g.names.tolist())


def test_every_variable_consumer_shares_the_variable_group(built):
    _, _, g = built
    variables = np.flatnonzero(g.op_types == "VarHandleOp")
    assert variables.size > 0
    resource = g.out_dtype[g.out_ptr[g.edge_src] + g.edge_src_out] == "resource"
    for src, dst in zip(g.edge_src[resource], g.edge_dst[resource]):
        assert g.group[src] == g.group[dst], (g.names[src], g.names[dst])
    # Momentum slots are colocated with their variable (loc:@ from TF's slot creator), and
    # two different model variables are not merged by accident.
    slots = np.char.endswith(g.names[variables].astype(str), "/Momentum")
    assert 0 < slots.sum() <= (~slots).sum()
    assert np.unique(g.group[variables]).size == (~slots).sum()


def test_flops_of_registered_ops_equal_tensorflows_profiler(built):
    name, gd, g = built
    from tensorflow.python.framework import ops
    registered = {k.split(",")[0] for k in ops._stats_registry.list() if k.endswith(",flops")}
    mine = g.flops[np.isin(g.op_types, list(registered))].sum()
    if name == "lstm":  # TF's profiler skips ops inside loops whose shapes it cannot resolve
        assert mine >= tf_flops(gd) > 0
    else:
        assert mine == tf_flops(gd) > 0
    # Ops without a TF statistic still get an estimate (documented in gplace/importer/flops.py).
    assert g.flops.sum() > mine


def test_lstm_has_tf1_loops_with_back_edges():
    _, _, g = build("lstm")
    assert g.meta["import"]["loops"] >= 1
    assert g.edge_back.sum() >= 1
    assert len(g.topo_order()) == g.num_ops


def test_einsum_flops_by_hand():
    _, _, g = build("transformer")
    einsum = g.flops[g.op_types == "Einsum"]
    # attention scores: batch 4 x heads 2 x 12 queries x 12 keys x 8 dims x 2 (multiply-add)
    assert 2 * 4 * 2 * 12 * 12 * 8 in einsum.tolist()


def test_matmul_flops_by_hand():
    with tf.Graph().as_default() as graph:
        a = tf.random.normal([32, 64])
        b = tf.random.normal([64, 16])
        tf.matmul(a, b, name="mm")
    g = gplace.load_graph(graph)
    assert g.flops[g.index("mm")] == 2 * 32 * 64 * 16
    assert g.out_bytes[g.out_ptr[g.index("mm")]] == 32 * 16 * 4
