"""The child process that runs placed graphs for :class:`gplace.real.measurer.RealMeasurer`.

    python -m gplace.real.runner PARENT_PID  < job, then commands

Reads the job from stdin (:mod:`gplace.real.job`): one JSON line (target, fetch, op names, TF
device strings, timeout, threads, cores), the step GraphDef and the (B, ops) device index per
op as .npy; nothing goes through the file system, so a killed run leaves no folder behind.
Then it serves one JSON command per line, in the order the parent's protocol
(:mod:`gplace.real.protocol`) wants, and answers each with one JSON line:

    {"open": i, "devices": [d, ...]}   -> {"i", "ok", "loss"}   a session for the placement
                                                                 (device index per op; without
                                                                 "devices": the job's row i)
    {"run": i, "warmup": w, "steps": k} -> {"i", "ok", "times"}  w untimed, k timed steps
    {"close": i}                       -> {"i", "ok"}

or ``{"i", "ok": false, "error", "error_type"}`` (``error_type``: the exception's class name,
e.g. ``AbortedError``, which the parent may retry in a new session). Sessions stay open
between commands, so interleaving the placements costs no re-import, and the child serves one
measurer for its whole life (TF is imported once); each session has its own variables
(``isolate_session_state``). A crash, a hang or a dead server is the parent's to notice;
this process only reports what TensorFlow says. It asks the kernel to kill it when its
parent dies, as the TF servers do (:func:`gplace.real.procs.die_with_parent`), so a SIGKILLed
``gplace`` leaves no runner.

Opening a placement: NodeDef.device written into a copy of the GraphDef, variables initialized
as the profiler does (``gplace.profiler.import_with_initializer``), one step fetching the loss
(the first step after initialization: compared across placements by the tests). Timed steps
run the train op alone (no tensor goes back to the client); the time of a step is the wall
time of ``Session.run``.
"""

from __future__ import annotations

import json
import os
import sys
import time

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")  # the profiler's kernels (gplace.profiler)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from gplace.errors import tf_error_message  # noqa: E402 - imports no TensorFlow


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


def session_config(job: dict):
    """The profiler's session settings (its threads, no graph rewrites) with every device
    TensorFlow sees here: the profiler hides the GPUs to time this CPU alone, a placement
    runs where it says."""
    from gplace import profiler as prof
    config = prof.session_config(prof.ProfileConfig(inter_op_threads=job["threads"],
                                                    intra_op_threads=job["threads"]))
    del config.device_count["GPU"]
    if job["target"]:  # the servers own their thread pools (gplace.real.procs)
        config.use_per_session_threads = False
        config.isolate_session_state = True  # each open placement has its own variables
    config.operation_timeout_in_ms = int(job["timeout_s"] * 1000)
    return config


class Placed:
    """One placement's open session: its graph, the op to run and the run options."""

    def __init__(self, tf, graph_def, job: dict, op_device):
        from gplace import profiler as prof
        placed = placed_graph_def(graph_def, job["op_names"], job["tf_devices"], op_device)
        g, init = prof.import_with_initializer(placed)
        config = session_config(job)
        self.options = tf.compat.v1.RunOptions(timeout_in_ms=int(job["timeout_s"] * 1000))
        self.op = g.get_operation_by_name(job["fetch"])
        self.session = tf.compat.v1.Session(target=job["target"], graph=g, config=config)
        self.feeds = prof.placeholder_feeds(g)  # the step's inputs, made up as variables are
        try:
            self.session.run(init, options=self.options)
            out = self.op.outputs[0] if self.op.outputs else None
            loss = (self.session.run(out, self.feeds, options=self.options) if out is not None
                    else None)
        except BaseException:
            self.session.close()
            raise
        self.loss = None if loss is None else float(loss.reshape(-1)[0])

    def run(self, warmup: int, steps: int) -> list[float]:
        for _ in range(warmup):
            self.session.run(self.op, self.feeds, options=self.options)
        times = []
        for _ in range(steps):
            t0 = time.perf_counter()
            self.session.run(self.op, self.feeds, options=self.options)
            times.append(time.perf_counter() - t0)
        return times


def run_one(tf, graph_def, job: dict, op_device) -> dict:
    """One placement from start to end: open, ``job["warmup"]`` + ``job["steps"]`` steps."""
    placed = Placed(tf, graph_def, job, op_device)
    try:
        times = placed.run(job["warmup"], job["steps"])
    finally:
        placed.session.close()
    return {"ok": True, "times": times, "loss": placed.loss}


def serve(tf, graph_def, job: dict, placements, commands) -> None:
    """Answers ``commands`` (JSON lines) until they end; see the module docstring."""
    open_: dict[int, Placed] = {}
    try:
        for line in commands:
            if not line.strip():
                continue
            cmd = json.loads(line)
            i = cmd.get("open", cmd.get("run", cmd.get("close")))
            try:
                if "open" in cmd:
                    devices = cmd["devices"] if "devices" in cmd else placements[i]
                    open_[i] = Placed(tf, graph_def, job, devices)
                    record = {"ok": True, "loss": open_[i].loss}
                elif "run" in cmd:
                    record = {"ok": True, "times": open_[i].run(cmd["warmup"], cmd["steps"])}
                else:
                    placed = open_.pop(i, None)
                    if placed is not None:
                        placed.session.close()
                    record = {"ok": True}
            except tf.errors.OpError as e:
                record = _error(e, tf_error_message(e.message))
            except Exception as e:  # noqa: BLE001 - reported to the parent, not swallowed
                record = _error(e, tf_error_message(str(e)))
            print(json.dumps({"i": i, **record}), flush=True)
    finally:
        for placed in open_.values():
            placed.session.close()
        if job["target"]:
            try:  # free what the servers still hold of these placements
                tf.compat.v1.Session.reset(job["target"])
            except tf.errors.OpError:
                pass


def main(argv: list[str]) -> int:
    from gplace.real.job import read_job
    from gplace.real.procs import die_with_parent
    die_with_parent(int(argv[0]) if argv else 0)
    job, graph_bytes, placements = read_job(sys.stdin.buffer)  # before TF: the parent waits
    if job.get("cores"):  # off the servers' cores where the machine has cores to spare
        os.sched_setaffinity(0, job["cores"])
    from gplace.tfimport import tensorflow
    tf = tensorflow()
    graph_def = tf.compat.v1.GraphDef()
    graph_def.ParseFromString(graph_bytes)
    print(json.dumps({"ready": True}), flush=True)
    serve(tf, graph_def, job, placements, (l.decode() for l in sys.stdin.buffer))
    return 0


def _error(e: BaseException, message: str) -> dict:
    """A failed command's reply; the parent decides by ``error_type`` whether to retry."""
    kind = type(e).__name__
    return {"ok": False, "error": f"{kind}: {message}", "error_type": kind}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
