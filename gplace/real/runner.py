"""The child process that runs placed graphs for :class:`gplace.real.measurer.RealMeasurer`.

    python -m gplace.real.runner PARENT_PID  < job

Reads the job from stdin (:mod:`gplace.real.job`): one JSON line (target, fetch,
op names, TF device strings, steps, timeout, the first placement to run), the step GraphDef and
the (B, ops) device index per op as .npy; nothing goes through the file system, so a killed
run leaves no folder behind. For every placement from ``start`` on it prints one JSON line:
``{"index", "ok", "times", "loss"}`` or ``{"index", "ok": false, "error"}``. A crash, a hang or
a dead server is the parent's to notice; this process only has to report what TensorFlow says.
It asks the kernel to kill it when its parent dies, as the TF servers do
(:func:`gplace.real.procs.die_with_parent`), so a SIGKILLed ``gplace`` leaves no runner.

Each placement: NodeDef.device written into a copy of the GraphDef, variables initialized as
the profiler does (``gplace.profiler.import_with_initializer``), one step fetching the loss
(the first step after initialization: compared across placements by the tests), ``warmup``
more untimed steps, then ``steps`` timed steps of the train op alone (no tensor goes back to
the client); the time of a step is the wall time of ``Session.run``.
"""

from __future__ import annotations

import json
import os
import sys
import time

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")  # the profiler's kernels (gplace.profiler)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def placed_graph_def(graph_def, op_names: list[str], tf_devices: list[str], op_device):
    """A copy of ``graph_def`` with NodeDef.device set for every op in ``op_names``."""
    out = type(graph_def)()
    out.CopyFrom(graph_def)
    where = dict(zip(op_names, (tf_devices[int(d)] for d in op_device)))
    for node in out.node:
        dev = where.get(node.name)
        if dev is not None:
            node.device = dev
    return out


def run_one(tf, graph_def, job: dict, op_device) -> dict:
    from gplace import profiler as prof
    ProfileConfig, import_with_initializer, session_config = (
        prof.ProfileConfig, prof.import_with_initializer, prof.session_config)
    placed = placed_graph_def(graph_def, job["op_names"], job["tf_devices"], op_device)
    g, init = import_with_initializer(placed)
    config = session_config(ProfileConfig(inter_op_threads=job["threads"],
                                          intra_op_threads=job["threads"]))
    if job["target"]:  # the servers own their thread pools (gplace.real.procs)
        config.use_per_session_threads = False
    config.operation_timeout_in_ms = int(job["timeout_s"] * 1000)
    options = tf.compat.v1.RunOptions(timeout_in_ms=int(job["timeout_s"] * 1000))
    op = g.get_operation_by_name(job["fetch"])
    loss_tensor = op.outputs[0] if op.outputs else None
    with tf.compat.v1.Session(target=job["target"], graph=g, config=config) as sess:
        sess.run(init, options=options)
        loss = sess.run(loss_tensor, options=options) if loss_tensor is not None else None
        for _ in range(job["warmup"]):
            sess.run(op, options=options)
        times = []
        for _ in range(job["steps"]):
            t0 = time.perf_counter()
            sess.run(op, options=options)
            times.append(time.perf_counter() - t0)
    return {"ok": True, "times": times,
            "loss": None if loss is None else float(loss.reshape(-1)[0])}


def main(argv: list[str]) -> int:
    from gplace.real.job import read_job
    from gplace.real.procs import die_with_parent
    die_with_parent(int(argv[0]) if argv else 0)
    job, graph_bytes, placements = read_job(sys.stdin.buffer)  # before TF: the parent waits
    from gplace.tfimport import tensorflow
    tf = tensorflow()
    graph_def = tf.compat.v1.GraphDef()
    graph_def.ParseFromString(graph_bytes)
    for i in range(job["start"], len(placements)):
        try:
            record = run_one(tf, graph_def, job, placements[i])
        except tf.errors.OpError as e:
            record = {"ok": False, "error": f"{type(e).__name__}: {_tf_message(e.message)}"}
        except Exception as e:  # noqa: BLE001 - reported to the parent, not swallowed
            record = {"ok": False, "error": f"{type(e).__name__}: {_first_line(str(e))}"}
        if job["target"]:
            try:  # free the servers' variables of this placement before the next one
                tf.compat.v1.Session.reset(job["target"])
            except tf.errors.OpError:
                pass
        print(json.dumps({"index": i, **record}), flush=True)
    return 0


def _tf_message(text: str) -> str:
    """The informative line of a TF error (TF 2.x opens with "Graph execution error:")."""
    lines = [l.strip() for l in str(text).splitlines() if l.strip()]
    for l in lines:
        if not l.startswith(("Graph execution error", "Detected at node", "File ", "Traceback")):
            return l[:300]
    return lines[0][:300] if lines else ""


def _first_line(text: str) -> str:
    lines = [l for l in str(text).strip().splitlines() if l.strip()]
    return lines[0][:300] if lines else ""


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
