"""tf.cond's functional If, lowered to Switch and Merge as TensorFlow runs it: names, what TF
computes with the lowered graph, the cost of both branches, and the colocation groups of a
Keras mixed-precision step (whose whole optimizer update is one If)."""

import numpy as np
import pytest

import gplace
from gplace.importer import functions, graph_def_of
from gplace.report import source_graph_def
from gplace.summary import import_note
from gplace.tfimport import tensorflow

tf = tensorflow()
BATCH, IN, HIDDEN, OUT = 8, 16, 32, 4


def cond_step():
    """(ConcreteFunction, variables): a step whose logits come from a tf.cond; its gradient
    is a second conditional (a StatelessIf)."""
    rng = np.random.default_rng(0)
    w1 = tf.Variable(rng.normal(size=(IN, HIDDEN)).astype(np.float32))
    w2 = tf.Variable(rng.normal(size=(HIDDEN, OUT)).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec((BATCH, IN)), tf.TensorSpec((BATCH,), tf.int32)])
    def step(x, y):
        with tf.GradientTape() as tape:
            h = tf.nn.relu(x @ w1)
            logits = tf.cond(tf.reduce_sum(h) > 0.0, lambda: h @ w2, lambda: tf.tanh(h) @ w2)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
        g1, g2 = tape.gradient(loss, [w1, w2])
        w1.assign_sub(0.1 * g1)
        w2.assign_sub(0.1 * g2)
        return loss
    return step.get_concrete_function(), [w1, w2]


@pytest.fixture(scope="module")
def cond():
    concrete, variables = cond_step()
    return concrete, variables, gplace.load_graph(concrete)


def test_the_if_ops_are_lowered_with_their_branches_inlined(cond):
    _, _, g = cond
    types, names = g.op_types.tolist(), g.names.tolist()
    assert not {"If", "StatelessIf"} & set(types)
    lowered = g.meta["import"]["lowered_conds"]
    assert sorted(lowered) == ["cond", "gradient_tape/cond/StatelessIf"]
    assert g.meta["import"]["kept_function_ops"] == {}
    for name, branches in lowered.items():
        assert types[names.index(name)] == "IdentityN"  # consumers of the If are untouched
        assert types[names.index(name + "/switch_pred")] == "Switch"
        assert types[names.index(name + "/branch_executed")] == "Merge"
        for side, fname in zip(("then", "else"), branches):
            assert any(n.startswith(f"{name}/{side}/") for n in names)
            assert g.meta["import"]["inlined_functions"][fname] == 1
    forward = [n for n, t in zip(names, types) if t == "MatMul" and n.startswith("cond/")]
    assert sorted(forward) == ["cond/else/cond/matmul", "cond/then/cond/matmul"]


def test_both_branches_are_costed_as_in_a_tf1_cond(cond):
    """The simulator knows no dead branch: a TF1 cond's Switch/Merge branches are both charged,
    and so are a lowered If's (a kept If got the larger branch)."""
    _, _, g = cond
    names = g.names.tolist()
    matmul = 2.0 * BATCH * HIDDEN * OUT
    assert g.flops[names.index("cond/then/cond/matmul")] == matmul
    assert g.flops[names.index("cond/else/cond/matmul")] == matmul
    assert g.flops[names.index("cond/else/cond/Tanh")] == 4.0 * BATCH * HIDDEN


def test_the_size_check_counts_the_lowered_ops(cond):
    concrete, _, _ = cond
    gd = graph_def_of(concrete)
    library = {f.signature.name: f for f in gd.library.function}
    lowered, _ = functions.inline_functions(gd)
    assert functions.inlined_size(gd, library) == len(lowered.node)


@pytest.mark.parametrize("positive", [True, False])
def test_tensorflow_runs_the_lowered_graph_as_the_function(cond, positive):
    """What placed.pb holds: the lowered graph run in place of the tf.function, on inputs that
    take each branch, gives the same loss and the same updated variables."""
    concrete, variables, _ = cond
    lowered = source_graph_def(concrete)  # what placed.pb is made of
    x = tf.ones((BATCH, IN)) if positive else tf.zeros((BATCH, IN))
    y = tf.range(BATCH) % OUT
    start = [v.numpy() for v in variables]
    want = concrete(x, y).numpy()
    want_vars = [v.numpy() for v in variables]
    for v, value in zip(variables, start):
        v.assign(value)

    def run_lowered(x, y):
        captured = {inner.name: tf.identity(outer) for outer, inner in concrete.graph.captures}
        feeds = {concrete.inputs[0].name: x, concrete.inputs[1].name: y}
        return tf.graph_util.import_graph_def(lowered, input_map={**feeds, **captured},
                                              return_elements=[concrete.outputs[0].name])
    specs = [tf.TensorSpec((BATCH, IN)), tf.TensorSpec((BATCH,), tf.int32)]
    got = tf.compat.v1.wrap_function(run_lowered, specs)(x, y)[0].numpy()
    assert np.allclose(got, want)
    assert all(np.allclose(v.numpy(), w) for v, w in zip(variables, want_vars))
    assert positive == any(not np.allclose(w, s) for w, s in zip(want_vars, start))


def test_an_if_tensorflow_does_not_lower_stays_one_op(cond):
    """Without ``_lower_using_switch_merge`` TF runs the If whole, and so does gplace."""
    concrete, _, _ = cond
    gd = graph_def_of(concrete)
    for node in gd.node:
        if node.op in functions.IF_OPS:
            del node.attr[functions.LOWER_ATTR]
    g = gplace.load_graph(gd)
    assert sorted(set(g.op_types.tolist()) & {"If", "StatelessIf"}) == ["If", "StatelessIf"]
    assert g.meta["import"]["lowered_conds"] == {}
    assert "functional If" in g.meta["import"]["kept_function_ops"]["cond"]
    assert "lowered to Switch" not in import_note(g)


def test_lowered_names_move_aside_for_a_taken_name(cond):
    concrete, _, _ = cond
    gd = graph_def_of(concrete)
    gd.node.add(name="cond/switch_pred", op="NoOp")
    lowered, report = functions.inline_functions(gd)
    names = {n.name for n in lowered.node}
    assert {"cond_lowered/switch_pred", "cond_lowered/then", "cond"} <= names
    assert len(names) == len(lowered.node)
    assert "cond" in report.lowered


def test_the_note_says_what_was_lowered(cond):
    _, _, g = cond
    assert "2 tf.cond If ops lowered to Switch and Merge" in import_note(g)


def keras_step(policy: str, as_graph_def: bool = False):
    """A Keras 3 training step as a tf.function; under mixed_float16 the LossScaleOptimizer
    applies the update inside one tf.cond (skipped when a gradient is not finite).
    ``as_graph_def``: imported from its GraphDef, as from a .pb (no captured shapes)."""
    keras = pytest.importorskip("keras")
    keras.mixed_precision.set_global_policy(policy)
    try:
        model = keras.Sequential([keras.Input((IN,)), keras.layers.Dense(HIDDEN, "relu"),
                                  keras.layers.Dense(OUT, dtype="float32")])
        optimizer = keras.optimizers.Adam(1e-3)
        if policy == "mixed_float16":
            optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer)
        optimizer.build(model.trainable_variables)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function(input_signature=[tf.TensorSpec((BATCH, IN)), tf.TensorSpec((BATCH,), tf.int32)])
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
            scaled = optimizer.scale_loss(loss)
        optimizer.apply(tape.gradient(scaled, model.trainable_variables),
                        model.trainable_variables)
        return loss
    function = step.get_concrete_function()
    if as_graph_def:
        return gplace.load_graph(function.graph.as_graph_def(add_shapes=True))
    return gplace.load_graph(function)


def variable_groups(g) -> tuple[int, int]:
    """(variables, colocation groups that hold them)."""
    held = g.param_bytes > 0
    return int(held.sum()), len(set(g.group[held].tolist()))


def test_a_mixed_precision_step_keeps_one_group_per_variable():
    """Each variable with its update forms its own group, as in the same step in float32: the
    loss scale's If no longer ties them all together."""
    mixed, full = keras_step("mixed_float16"), keras_step("float32")
    variables, groups = variable_groups(mixed)
    assert groups == variables > 1
    assert mixed.meta["import"]["lowered_conds"]
    assert variables - variable_groups(full)[0] == 2  # the loss scale and its step counter
    assert variable_groups(full)[1] == variable_groups(full)[0]


def test_variables_read_only_inside_the_lowered_cond_keep_their_bytes():
    """From a .pb the captured variables' shapes come from their reads; Adam's slots are read
    only inside the cond, behind a Switch and an Identity."""
    mixed = keras_step("mixed_float16", as_graph_def=True)
    full = keras_step("float32", as_graph_def=True)
    extra = int(mixed.param_bytes.sum() - full.param_bytes.sum())
    assert 0 < extra <= 16  # the loss scale and its step counter; the slots as in float32

