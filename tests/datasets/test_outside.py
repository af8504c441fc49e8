"""The graphs outside the corpus: new families and builders, and training steps gplace imports."""

import math

import numpy as np
import pytest

from datasets.outside import OUTSIDE, check_outside
from datasets.registry import GraphSpec

SMALLEST = "capsnet_b16_32_rgb"  # 690 ops


def _import(spec: GraphSpec, tmp_path):
    import gplace
    path = tmp_path / f"{spec.name}.pb"
    path.write_bytes(spec.build().SerializeToString(deterministic=True))
    return gplace.load_graph(str(path))


def _assert_training_step(graph, name):
    names, types = graph.names.astype(str), set(graph.op_types.tolist())
    grads = np.char.startswith(names, "gradients")
    assert grads.any() and (~grads).any(), name                  # backward and forward
    assert any(t.startswith("ResourceApply") for t in types), (name, sorted(types))
    assert "step_loss" in names.tolist() and graph.summary()["flops"] > 0


def test_outside_families_and_builders_are_not_in_the_corpus():
    check_outside()
    assert 8 <= len(OUTSIDE) <= 10 and len({s.family for s in OUTSIDE}) == 5
    assert all(sum(s.family == f for s in OUTSIDE) in (1, 2) for f in {s.family for s in OUTSIDE})


@pytest.mark.parametrize("spec", [
    GraphSpec("x", "resnet", "outside:capsnet"),             # a corpus family
    GraphSpec("x", "new", "mixer:mlp_mixer"),                # a corpus builder
    GraphSpec("quick_mlp", "new", "outside:capsnet"),        # a corpus graph's name
])
def test_check_outside_refuses_what_the_corpus_has(spec):
    with pytest.raises(ValueError):
        check_outside([spec])


def test_smallest_spec_is_a_training_step_gplace_imports(tmp_path):
    spec = next(s for s in OUTSIDE if s.name == SMALLEST)
    graph = _import(spec, tmp_path)
    assert 400 <= graph.num_ops <= 8000 and graph.num_groups > 0
    _assert_training_step(graph, spec.name)
    assert "ResourceApplyRMSProp" in set(graph.op_types.tolist())


def test_chunked_scan_is_the_unrolled_recurrence():
    import tensorflow as tf

    from datasets.models.outside import _scan_chunked, _scan_loop
    rng = np.random.default_rng(0)
    dtA = tf.constant(-rng.uniform(0.01, 1.0, (2, 12, 3, 4)), tf.float32)
    dBx, C = (tf.constant(rng.normal(size=s), tf.float32) for s in ((2, 12, 3, 4), (2, 12, 4)))
    loop = _scan_loop(tf.exp(dtA), dBx, C).numpy()
    for chunk in (1, 4, 5, 12):
        np.testing.assert_allclose(_scan_chunked(dtA, dBx, C, chunk).numpy(), loop, rtol=1e-4,
                                   atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("spec", OUTSIDE, ids=[s.name for s in OUTSIDE])
def test_every_spec_imports_at_its_size(spec, tmp_path):
    graph = _import(spec, tmp_path)
    assert 400 <= graph.num_ops <= 8000, (spec.name, graph.num_ops)
    _assert_training_step(graph, spec.name)


TINY = {
    "conformer": dict(blocks=1, d_model=32, heads=2, kernel=7, batch=2, frames=32, mels=16,
                      sub_channels=8, classes=10),
    "capsnet": dict(batch=2, size=20, conv_filters=16, primary_types=4, decoder=(32, 64)),
    "perceiver": dict(cross_attends=2, self_blocks=1, latents=8, d_latent=32, heads=2, batch=2,
                      inputs=64, d_input=16, classes=10),
    "ssm_lm": dict(layers=1, d_model=16, d_state=4, batch=2, length=12, vocab=50,
                   scan="chunked", chunk=4),
    "dcgan": dict(batch=2, size=16, latent=8, width=8),
}


@pytest.mark.slow
@pytest.mark.parametrize("builder", sorted(TINY))
def test_a_tiny_step_runs_and_updates_every_variable(builder):
    import tensorflow as tf

    from datasets.models import outside
    gd = getattr(outside, builder)(**TINY[builder], optimizer="sgd")
    with tf.Graph().as_default() as g:
        tf.compat.v1.import_graph_def(gd, name="")
        handles = [op.outputs[0] for op in g.get_operations() if op.type == "VarHandleOp"]
        reads = [tf.raw_ops.ReadVariableOp(resource=h, dtype=h.op.get_attr("dtype"))
                 for h in handles]
        with tf.compat.v1.Session(graph=g) as sess:
            for h in handles:  # the step graph has no initializers: give every variable a value
                shape = [d.size for d in h.op.get_attr("shape").dim]
                sess.run(tf.raw_ops.AssignVariableOp(
                    resource=h, value=tf.random.normal(shape, stddev=0.5)))
            before = sess.run(reads)
            loss = sess.run("step_loss:0")
            after = sess.run(reads)
    assert math.isfinite(float(loss)), builder
    changed = [not np.array_equal(a, b) for a, b in zip(before, after)]
    assert all(changed), [h.op.name for h, c in zip(handles, changed) if not c]
