"""Runs an original and a placed GraphDef in TensorFlow on two logical CPU devices, in a child
process (TF's device set is fixed once per process): their losses and where each op ran."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, sys.argv[2])
    import tensorflow as tf
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
    from gplace.profiler import import_with_initializer
    loss_name, init_name = sys.argv[3], sys.argv[4]
    out = {}
    for name in ("orig", "placed"):
        gd = tf.compat.v1.GraphDef()
        gd.ParseFromString(open(sys.argv[1] + f"/{name}.pb", "rb").read())
        g, init = import_with_initializer(gd)
        with tf.compat.v1.Session(graph=g) as s:
            s.run(init_name or init)
            meta = tf.compat.v1.RunMetadata()
            loss = s.run(loss_name, options=tf.compat.v1.RunOptions(
                trace_level=tf.compat.v1.RunOptions.FULL_TRACE), run_metadata=meta)
        ran = {n.node_name: d.device for d in meta.step_stats.dev_stats for n in d.node_stats}
        out[name] = {"loss": float(loss), "ran": ran}
    print(json.dumps(out))
""")


def run_orig_and_placed(folder: Path, loss: str, init: str = "") -> dict:
    """{"orig"|"placed": {"loss", "ran": {op: device}}} for ``folder``/orig.pb and placed.pb;
    ``init``: the graph's own initializer op (default: gplace.profiler's random one)."""
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(folder), str(ROOT), loss, init],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
