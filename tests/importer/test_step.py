"""What the importer keeps of a graph file: the training step, not the initializers or the
checkpoint ops beside it (gplace/importer/step.py); TF2 steps written as a SavedModel or handed
over as a ConcreteFunction keep their colocations, shapes and parameters."""

import numpy as np
import pytest

import gplace
from gplace.place import place
from gplace.tfimport import tensorflow

tf = tensorflow()
v1 = tf.compat.v1


def tf1_step(saver: bool = True, resource: bool = True):
    """A TF1 training step with its initializer (``init``) and a Saver, as a GraphDef."""
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [8, 32], name="x")
        w = v1.get_variable("w", [32, 16], use_resource=resource)
        table = v1.get_variable("table", [5000, 16], use_resource=resource)
        h = tf.matmul(x, w) + tf.reduce_mean(table, axis=0)
        loss = tf.reduce_mean(tf.square(h), name="loss")
        v1.train.AdamOptimizer(0.01).minimize(loss, name="train_op")
        v1.global_variables_initializer()
        if saver:
            v1.train.Saver()
    return graph.as_graph_def()


def test_a_tf1_step_leaves_out_its_initializers_and_its_savers_ops():
    gd = tf1_step()
    graph = gplace.load_graph(gd, name="tf1")
    left = graph.meta["import"]["left_out"]
    assert left.get("variable initializers", 0) > 0 and left.get("checkpoint save/restore", 0) > 0
    names = set(graph.names.tolist())
    assert "init" not in names and "train_op" in names and "loss" in names
    kinds = set(graph.op_types.tolist())
    assert not kinds & {"SaveV2", "RestoreV2", "RandomUniform"}  # the initial values' fill too
    assert "ResourceApplyAdam" in kinds and graph.param_bytes.sum() > 5000 * 16 * 4
    whole = gplace.load_graph(gd, name="tf1", whole_graph=True)
    assert whole.num_ops == len(gd.node) and whole.num_ops - graph.num_ops == sum(left.values())


def test_the_initializers_cost_nothing_in_the_step():
    """Without them the step is what a run of train_op costs: the table's random fill is gone."""
    with_init = gplace.load_graph(tf1_step(saver=False), name="a")
    whole = gplace.load_graph(tf1_step(saver=False), name="a", whole_graph=True)
    assert with_init.flops.sum() < whole.flops.sum() - 4 * 5000 * 16


def test_a_graph_that_is_only_bookkeeping_is_kept_whole():
    graph = tf.Graph()
    with graph.as_default():
        v1.get_variable("w", [4, 4], use_resource=True)
        v1.global_variables_initializer()
    gd = graph.as_graph_def()
    g = gplace.load_graph(gd)
    assert g.num_ops == len(gd.node) and g.meta["import"]["left_out"] == {}


def test_placed_pb_keeps_the_left_out_ops_with_the_device_they_asked_for(tmp_path):
    gd = tf1_step()
    for node in gd.node:
        if node.name == "init":
            node.device = "/device:CPU:0"
    path = tmp_path / "step.pb"
    path.write_bytes(gd.SerializeToString())
    result = place(str(path), cluster="post-2gpu", polish=0)
    assert "checkpoint save/restore" in result.summary.left_out
    files = result.export(tmp_path / "out")
    placed = tf.compat.v1.GraphDef()
    placed.ParseFromString((tmp_path / "out" / "placed.pb").read_bytes())
    by_name = {n.name: n.device for n in placed.node}
    assert len(by_name) == len(gd.node) and by_name["init"] == "/device:CPU:0"
    assert by_name["train_op"] == result.op_devices["train_op"]
    assert any(f.name == "placement.json" for f in files)


def test_a_saved_model_step_keeps_its_colocations_and_leaves_out_its_checkpoint_functions(
        tmp_path, tf2_step):
    module = tf2_step
    tf.saved_model.save(module, str(tmp_path / "sm"), signatures={"train": module.train})
    graph = gplace.load_graph(tmp_path / "sm")
    assert graph.meta["import"]["shape_inference"] == "tensorflow"  # the import into TF works
    assert graph.meta["import"]["left_out"].get("checkpoint save/restore", 0) > 0
    assert not set(graph.op_types.tolist()) & {"SaveV2", "RestoreV2", "MergeV2Checkpoints"}
    result = place(str(tmp_path / "sm"), cluster="post-2gpu", polish=0)
    result.export(tmp_path / "out")
    placed = tf.compat.v1.GraphDef()
    placed.ParseFromString((tmp_path / "out" / "placed.pb").read_bytes())
    with tf.Graph().as_default():  # every loc:@ names a node of the placed graph
        tf.compat.v1.import_graph_def(placed, name="")


def test_the_signature_that_trains_is_the_step_and_the_others_are_left_out(tmp_path, tf2_step,
                                                                          save_with_predict):
    alone = gplace.load_graph(save_with_predict(tf2_step, tmp_path / "a", ("train",)))
    both = gplace.load_graph(save_with_predict(tf2_step, tmp_path / "b"))
    assert both.meta["import"]["signature"] == "train" and both.meta["import"]["trains"]
    assert both.meta["import"]["left_out"]["other signatures"] > 0
    # the same step as the SavedModel that holds it alone: one forward pass, not two
    assert both.num_ops == alone.num_ops and both.flops.sum() == alone.flops.sum()
    assert (both.op_types == "MatMul").sum() == (alone.op_types == "MatMul").sum()
    assert not any("unknown dimensions" in n for n in both.meta["import"]["notes"])
    predict = gplace.load_graph(tmp_path / "b", signature="predict")
    assert predict.meta["import"]["signature"] == "predict"
    assert not predict.meta["import"]["trains"] and predict.num_ops < both.num_ops


def test_several_signatures_and_none_that_trains_ask_for_a_choice(tmp_path, tf2_step,
                                                                  save_with_predict):
    path = save_with_predict(tf2_step, tmp_path / "m", ("predict", "serve"))
    with pytest.raises(gplace.GraphError, match=r"2 signatures \(predict, serve\) and none of "
                                                r"them trains.*--signature NAME"):
        gplace.load_graph(path)
    with pytest.raises(gplace.GraphError, match=r"no signature 'train'; it holds predict, serve"):
        gplace.load_graph(path, signature="train")
    only = gplace.load_graph(save_with_predict(tf2_step, tmp_path / "p", ("predict",)))
    assert only.meta["import"]["signature"] == "predict"
    assert only.meta["import"]["trains"] is False


def test_a_tf1_saved_model_whose_train_op_is_outside_its_signatures_is_kept_whole(tmp_path):
    """A TF1 SavedModel serves its signatures and trains by an op none of them returns: the
    whole graph is the step, the training op in it."""
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [8, 32], name="x")
        w = v1.get_variable("w", [32, 16], use_resource=True)
        y = tf.matmul(x, w, name="y")
        v1.train.AdamOptimizer(0.01).minimize(tf.reduce_mean(tf.square(y)), name="train_op")
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            builder = v1.saved_model.Builder(str(tmp_path / "sm"))
            serve = v1.saved_model.predict_signature_def({"x": x}, {"y": y})
            predict = v1.saved_model.predict_signature_def({"x": x}, {"w": w.read_value()})
            builder.add_meta_graph_and_variables(sess, ["serve"], signature_def_map={
                "serving_default": serve, "weights": predict})
            builder.save()
    g = gplace.load_graph(tmp_path / "sm")
    assert g.meta["import"]["signature"] is None and g.meta["import"]["trains"]
    assert "train_op" in g.names.tolist() and "ResourceApplyAdam" in g.op_types.tolist()
    with pytest.raises(gplace.GraphError, match="the graph has none"):
        gplace.load_graph(tf1_step(saver=False), signature="train")


def test_the_checkpoint_of_a_saved_graph_is_where_tensorflow_saves_it(tmp_path):
    from gplace.importer.reader import checkpoint_of
    (tmp_path / "sm").mkdir()
    assert checkpoint_of(tmp_path / "sm", "savedmodel") == str(tmp_path / "sm/variables/variables")
    assert checkpoint_of(tmp_path / "sm" / "saved_model.pb", "savedmodel") == \
        str(tmp_path / "sm/variables/variables")
    assert checkpoint_of(tmp_path / "model.ckpt.meta", "metagraph") == str(tmp_path / "model.ckpt")
    assert checkpoint_of("<tf.Graph>", "tf.Graph") is None


def test_a_concrete_function_brings_its_variables_shapes_and_bytes(tf2_step):
    module = tf2_step
    graph = gplace.load_graph(module.train.get_concrete_function())
    assert graph.meta["import"]["outputs_with_unknown_dims"] == 0
    assert graph.param_bytes.sum() == 2 * 24 * 12 * 4
    matmuls = graph.op_types == "MatMul"
    assert matmuls.sum() >= 2 and np.all(graph.flops[matmuls] == 2 * 6 * 24 * 12)


def test_a_sink_that_trains_is_the_steps_whatever_its_name_or_reads():
    """A train op named init_1, or a step reading initialized_value() (downstream of an
    IsVariableInitialized check), stays in the step with its loss."""
    for case in ("init_named_train", "initialized_value"):
        graph = tf.Graph()
        with graph.as_default():
            x = v1.placeholder(tf.float32, [8, 4], name="x")
            w = v1.get_variable("w", [4, 4], use_resource=case != "initialized_value")
            value = w.initialized_value() if case == "initialized_value" else w
            loss = tf.reduce_sum(tf.matmul(x, value), name="loss")
            v1.train.GradientDescentOptimizer(0.1).minimize(
                loss, name="init_1" if case == "init_named_train" else "train")
            v1.global_variables_initializer()
        g = gplace.load_graph(graph.as_graph_def())
        names = set(g.names.tolist())
        assert {"loss", "init_1" if case == "init_named_train" else "train"} <= names, case
        assert "init" not in names and np.isin(g.op_types, ["ApplyGradientDescent",
                                                            "ResourceApplyGradientDescent"]).any()


def test_a_concrete_functions_variables_count_however_they_are_read():
    """An embedding read by ResourceGather and optimizer slots read only inside the update op
    have no ReadVariableOp to take a shape from: the captures' handle data gives it."""
    emb = tf.Variable(tf.zeros([1000, 16]), name="emb")
    m = tf.Variable(tf.zeros([1000, 16]), name="m")

    @tf.function(input_signature=[tf.TensorSpec([8], tf.int32)])
    def step(ids):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(tf.gather(emb, ids)))
        grad = tf.convert_to_tensor(tape.gradient(loss, emb))
        tf.raw_ops.ResourceApplyMomentum(var=emb.handle, accum=m.handle, lr=0.1, grad=grad,
                                         momentum=0.9)
        return loss
    g = gplace.load_graph(step.get_concrete_function())
    assert g.param_bytes.sum() == 2 * 1000 * 16 * 4


def none_batch_step(width: int = 32, out: int = 16):
    """A TF1 training step (train op ``train``) whose input ``x`` is [None, width]."""
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, width], name="x")
        w = v1.get_variable("w", [width, out], use_resource=True)
        v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(tf.matmul(x, w)),
                                                        name="train")
    return graph.as_graph_def()


def test_a_none_batch_is_named_with_the_size_it_was_given():
    from gplace.summary import import_note
    for size in (1, 64):
        g = gplace.load_graph(none_batch_step(), unknown_dim=size)
        assert g.meta["import"]["sized_inputs"] == ["x"]
        assert g.out_bytes[g.out_ptr[list(g.names).index("x")]] == size * 32 * 4
        note = import_note(g)
        assert f"1 input with unknown dimensions (x) given size {size} in each" in note
        assert ("give the batch size when the graph is imported (--unknown-dim N" in note) \
            == (size == 1)


def test_a_signature_whose_outputs_are_not_in_the_graph_is_named(tmp_path, tf2_step,
                                                                 save_with_predict):
    from gplace.importer.reader import read_graph
    from gplace.importer.step import choose_signature
    graph_def, _, meta = read_graph(save_with_predict(tf2_step, tmp_path / "m"))
    nodes = list(graph_def.node)
    index = {n.name: k for k, n in enumerate(nodes)}
    outputs = {name: sorted({t.split(":")[0] for t in sig["outputs"].values()})
               for name, sig in meta["signatures"].items()}
    outputs["train"] = ["gone"]
    with pytest.raises(gplace.GraphError, match="signature 'train' returns the outputs of op "
                                                "'gone', which the graph does not hold"):
        choose_signature(nodes, [], [], index, {}, outputs, None)
    outputs["train"] = []
    with pytest.raises(gplace.GraphError, match="signature 'train' returns no tensor"):
        choose_signature(nodes, [], [], index, {}, outputs, "train")


def test_the_step_graph_keeps_what_its_ops_call_and_their_gradients_and_nothing_else():
    """step_graph_def: a kept While keeps its cond and body, and a gradient entry of the body
    keeps its gradient function (TF's import refuses a library missing it); an initializer
    beside the step goes."""
    import gplace
    from gplace.importer.step import step_graph_def
    from gplace.tfimport import tensorflow
    from tensorflow.python.ops import control_flow_util
    tf = tensorflow()
    g, v2 = tf.Graph(), control_flow_util.ENABLE_CONTROL_FLOW_V2
    control_flow_util.ENABLE_CONTROL_FLOW_V2 = True  # a functional While (other tests may
    try:                                              # have turned TF1 loops on)
        with g.as_default():
            x = tf.constant([1.0, 2.0], name="x")
            _, y = tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * 2.0),
                                 [tf.constant(0), x])
            v = tf.compat.v1.Variable(1.0, name="v")
            tf.identity(tf.reduce_sum(y) * v, name="step_loss")
            tf.compat.v1.global_variables_initializer()
    finally:
        control_flow_util.ENABLE_CONTROL_FLOW_V2 = v2
    gd = g.as_graph_def()
    body = next(f for f in gd.library.function if "body" in f.signature.name)
    grad = gd.library.function.add()
    grad.CopyFrom(body)
    grad.signature.name = "body_grad"
    gd.library.gradient.add(function_name=body.signature.name, gradient_func="body_grad")
    gd.library.function.add().signature.name = "unused"
    names = gplace.load_graph(gd, name="loop").names.tolist()
    step = step_graph_def(gd, names)
    assert {n.name for n in step.node} == set(names) and "init" not in names
    kept = {f.signature.name for f in step.library.function}
    assert body.signature.name in kept and "body_grad" in kept and "unused" not in kept
    with tf.Graph().as_default():
        tf.graph_util.import_graph_def(step, name="")  # imports: nothing it needs is missing
