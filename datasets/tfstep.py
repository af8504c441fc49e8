"""Build a flat training-step GraphDef (forward, backward, optimizer update) from a Keras model.

TF1 graph mode with ``tf.compat.v1.train`` optimizers gives one flat graph with VarHandleOp
variables, ResourceApply* updates and, with control flow v1, Enter/Merge/Switch/NextIteration
loops, which is what Post and HDP placed. Keras 3 variables wrap a ``tf.Variable`` in ``.value``.

State updates (batch-norm moving averages, Keras 3 seed-generator states) are assign ops that
nothing in the train op depends on; they are kept by a control dependency of ``step_loss``.
Keras 3 writes them as ``AssignVariableOp``; classic tf-keras as ``AssignSubVariableOp``
(``AssignMovingAvg``). They are told apart from variable initializers by what they compute: an
update's value reads a variable (or depends on something that does), an initializer's never does.
"""

from __future__ import annotations

import os
from typing import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402

OPTIMIZERS = {
    "sgd": lambda: tf.compat.v1.train.GradientDescentOptimizer(0.01),
    "momentum": lambda: tf.compat.v1.train.MomentumOptimizer(0.01, 0.9),
    "adam": lambda: tf.compat.v1.train.AdamOptimizer(1e-3),
    "rmsprop": lambda: tf.compat.v1.train.RMSPropOptimizer(1e-3),
    "adagrad": lambda: tf.compat.v1.train.AdagradOptimizer(0.01),
}

ASSIGN_TYPES = frozenset({"AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp",
                          "Assign", "AssignAdd", "AssignSub"})
READ_TYPES = frozenset({"ReadVariableOp", "VariableV2", "ResourceGather", "ResourceGatherNd"})


def _tf_variable(v):
    return getattr(v, "value", v) if not isinstance(v, tf.Variable) else v


def _reaches(ops: list, hit: Callable) -> dict:
    """op -> whether ``hit`` holds for it or for any op its data inputs come from.

    Creation order is not topological (a v1 cond rewires an op's inputs to Switch ops made after
    it), so this walks the inputs depth-first; a loop back-edge under way counts as no hit.
    """
    memo: dict = {}
    for root in ops:
        stack = [(root, False)]
        while stack:
            op, inputs_done = stack.pop()
            if inputs_done:
                memo[op] = bool(hit(op) or any(memo.get(t.op) for t in op.inputs))
            elif op not in memo:
                memo[op] = None                     # under way
                stack.append((op, True))
                stack.extend((t.op, False) for t in op.inputs if t.op not in memo)
    return memo


def state_updates(ops: list) -> list:
    """The assign ops among ``ops`` whose assigned value reads a variable.

    Updates that need a feed are left out: classic tf-keras builds a functional model once on
    its ``keras.Input`` placeholder, with batch-norm updates of its own that no step runs.
    """
    reads = _reaches(ops, lambda op: op.type in READ_TYPES)
    fed = _reaches(ops, lambda op: op.type == "Placeholder")
    return [op for op in ops if op.type in ASSIGN_TYPES and not fed[op]
            and any(reads[t.op] for t in op.inputs[1:])]


def training_step_graph(build: Callable[[], tuple], optimizer: str = "momentum",
                        v1_loops: bool = True, seed: int = 0) -> tf.compat.v1.GraphDef:
    """Calls ``build()`` inside a fresh graph; it returns ``(loss, variables)``.

    The result is pruned to what one training step runs: the optimizer's train op, the loss and
    every state update (batch-norm moving averages) created while building; variable
    initializers are dropped. Inputs are random tensors built inside ``build``, so the graph
    runs with no feeds.
    """
    if v1_loops:
        tf.compat.v1.disable_control_flow_v2()
    g = tf.Graph()
    with g.as_default():
        tf.compat.v1.set_random_seed(seed)
        loss, variables = build()
        updates = state_updates(g.get_operations())
        var_list = [_tf_variable(v) for v in variables]
        train = OPTIMIZERS[optimizer]().minimize(loss, var_list=var_list, name="train_step")
        with tf.control_dependencies([train] + updates):
            step = tf.identity(loss, name="step_loss")
    gd = g.as_graph_def()
    return tf.compat.v1.graph_util.extract_sub_graph(gd, [step.op.name])


def classifier_loss(logits, labels):
    """Mean sparse softmax cross-entropy in float32, named ``loss``."""
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=tf.cast(logits, tf.float32)), name="loss")


def keras_classifier_step(model_fn: Callable[[], object], input_shape: tuple[int, ...],
                          num_classes: int, batch: int, optimizer: str = "momentum",
                          v1_loops: bool = True, input_dtype=tf.float32) -> tf.compat.v1.GraphDef:
    """The training step of a Keras classifier on random inputs and labels."""
    def build():
        if input_dtype.is_integer:
            x = tf.random.uniform((batch, *input_shape), maxval=num_classes, dtype=input_dtype)
        else:
            x = tf.random.normal((batch, *input_shape), dtype=input_dtype)
        y = tf.random.uniform((batch,), maxval=num_classes, dtype=tf.int32)
        model = model_fn()
        logits = model(x, training=True)
        return classifier_loss(logits, y), model.trainable_variables
    return training_step_graph(build, optimizer=optimizer, v1_loops=v1_loops)
