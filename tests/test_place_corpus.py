"""Placed corpus graphs (test split) run in TensorFlow on two logical CPU devices with the
loss of the original graph, and their ops run where the placement put them (issue 8)."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "datasets" / "corpus"

RUN = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, sys.argv[2])
    import tensorflow as tf
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
    from gplace.profiler import import_with_initializer
    out = {}
    for name in ("orig", "placed"):
        gd = tf.compat.v1.GraphDef()
        gd.ParseFromString(open(sys.argv[1] + f"/{name}.pb", "rb").read())
        g, init = import_with_initializer(gd)
        with tf.compat.v1.Session(graph=g) as s:
            s.run(init)
            meta = tf.compat.v1.RunMetadata()
            loss = s.run("step_loss:0", options=tf.compat.v1.RunOptions(
                trace_level=tf.compat.v1.RunOptions.FULL_TRACE), run_metadata=meta)
        ran = {n.node_name: d.device for d in meta.step_stats.dev_stats for n in d.node_stats}
        out[name] = {"loss": float(loss), "ran": ran}
    print(json.dumps(out))
""")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["nmt_2l", "transformer_2l_d256", "inception_v3_b8_96"])
def test_placed_test_split_graph_runs_with_the_same_loss(name, tmp_path, two_cpu_cluster):
    if not (CORPUS / f"{name}.pb").exists():
        pytest.skip(f"{name}.pb is not built (python -m datasets.build --only {name})")
    from gplace.place import place
    cluster = two_cpu_cluster
    r = place(CORPUS / f"{name}.pb", cluster=cluster, finetune=0, progress=False)
    if len(set(r.placement.values())) < 2:  # the fastest placement may use one CPU only:
        r.unit_placement = np.arange(r.problem.num_units) % 2  # split it to test both devices
    r.export(tmp_path / "out")
    (tmp_path / "orig.pb").write_bytes((CORPUS / f"{name}.pb").read_bytes())
    (tmp_path / "placed.pb").write_bytes((tmp_path / "out" / "placed.pb").read_bytes())
    proc = subprocess.run([sys.executable, "-c", RUN, str(tmp_path), str(ROOT)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["placed"]["loss"] == pytest.approx(out["orig"]["loss"], rel=1e-5)
    want, ran = r.placement, out["placed"]["ran"]
    checked = [n for n in ran if n in want]
    assert len(checked) > 0.5 * len(want)
    wrong = [n for n in checked if not ran[n].endswith(want[n].split("device:")[-1])]
    assert not wrong, wrong[:5]
