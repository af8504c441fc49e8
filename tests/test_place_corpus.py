"""Placed corpus graphs (test split) run in TensorFlow on two logical CPU devices with the
loss of the original graph, and their ops run where the placement put them.

One gap is known and measured: in a looped graph, TensorFlow runs a few loop-boundary ops
(a loop-invariant ``Enter``, a gradient loop's ``Exit``) on another device than the one placed.
Its placer assigns them where the GraphDef says; a later step of the session moves them before
partitioning, with grappler and graph optimization off. That is 3 of about 1,600 ops of
nmt_2l; every other op runs where placed."""

from pathlib import Path

import numpy as np
import pytest

from tests.tf_run import run_orig_and_placed

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "datasets" / "corpus"
LOOP_BOUNDARY = {"Enter", "Exit", "RefEnter", "RefExit"}

@pytest.mark.slow
@pytest.mark.parametrize("name", ["nmt_2l", "transformer_2l_d256", "inception_v3_b8_96"])
def test_placed_test_split_graph_runs_with_the_same_loss(name, tmp_path, two_cpu_cluster):
    if not (CORPUS / f"{name}.pb").exists():
        pytest.skip(f"{name}.pb is not built (python -m datasets.build --only {name})")
    from gplace.place import place
    cluster = two_cpu_cluster
    r = place(CORPUS / f"{name}.pb", cluster=cluster, finetune=0, progress=False)
    if len(set(r.placement.values())) < 2:  # the fastest placement may use one CPU only:
        from dataclasses import replace      # split it to test both devices
        r = replace(r, unit_placement=np.arange(r.problem.num_units) % 2)
    r.export(tmp_path / "out")
    (tmp_path / "orig.pb").write_bytes((CORPUS / f"{name}.pb").read_bytes())
    (tmp_path / "placed.pb").write_bytes((tmp_path / "out" / "placed.pb").read_bytes())
    out = run_orig_and_placed(tmp_path, "step_loss:0")
    assert out["placed"]["loss"] == pytest.approx(out["orig"]["loss"], rel=1e-5)
    want, ran = r.placement, out["placed"]["ran"]
    checked = [n for n in ran if n in want]
    assert len(checked) > 0.5 * len(want)
    wrong = [n for n in checked if not ran[n].endswith(want[n].split("device:")[-1])]
    op_of = {n: op for n, op in zip(r.problem.graph.names, r.problem.graph.op_types)} \
        if wrong else {}
    assert all(op_of[n] in LOOP_BOUNDARY for n in wrong), wrong[:5]
    assert len(wrong) <= 0.005 * len(checked), wrong[:5]
