"""Measure the per-op costs of one training-step GraphDef on this machine's CPU.

Method (the measurement Post, Placeto and Baechi profile with):
TensorFlow ``RunMetadata.step_stats`` under ``RunOptions(trace_level=FULL_TRACE)``, with
inter-op and intra-op threads both 1 so that ops run one at a time on one core and an op's time
is its own, not a share of a contended pool. Warm-up steps first (allocator growth, first-run
kernel setup), then ``traced_steps`` traced steps; an op's time is the median over those steps
of the sum of its executions in the step (ops inside a TF1 loop run once per iteration).

Names stay honest: grappler is off (``disable_meta_optimizer``), the classic graph optimizer runs
at L0 (no constant folding, CSE or inlining), and the caller sets ``TF_ENABLE_ONEDNN_OPTS=0``
before importing TensorFlow (no oneDNN fusions), so step_stats node names are GraphDef node
names; a ``:suffix`` is stripped and names outside the graph (``_SOURCE``) are dropped.

Fields, per op and traced step, then the median over steps:
- time: ``op_end_rel_nanos`` (node start to kernel end; excludes the tracer's own
  bookkeeping after the kernel, which ``all_end_rel_nanos`` includes);
- output bytes: sum of ``output[].tensor_description.allocation_description.requested_bytes``
  of one execution (the largest, for loop ops); forwarding ops (Identity, Reshape) report the
  bytes of the buffer they pass on;
- temp bytes: ``memory_stats.temp_memory_size`` (scratch the kernel allocated and freed);
- runs: how many times the op executed in the step (``CostProfile.op_runs``): the iterations of
  the TF1 loops around it, 1 outside loops. The simulator runs a loop body once with these
  summed times, and repeats a transfer or a roofline estimate by the runs (``gplace.cost``).

A functional While (TF2's ``tf.while_loop``) is one op of the graph, and TensorFlow runs it
lowered, its cond and body inlined under the op's name: the times of those nodes are the While
op's time, and the runs of its LoopCond (one per trip, one to exit) give its trips per step,
``meta["loop_trips"]``, which scale its estimates on other devices where the graph does not fix
the trip count (``gplace.cost``).

Step time (``CostProfile.step_time_s``): the median over the traced steps of the step's span in
step_stats (first op start to last op end), the same steps the op times come from, so
``coverage`` = sum of op times / step time is the share of the step the kernels explain; the rest
is executor overhead between ops (~1-4 us per op here). The Python ``session.run`` call around a
step adds 1-6 ms more (quick_mlp: 21 ms wall, 16 ms span): ``meta["traced_wall_s"]``. Tracing
also slows small kernels (its tracking allocator: MobileNetV2 at batch 8 on 96x96 sums to 0.150 s
of kernel time traced against a 0.113 s untraced step), so ``meta["untraced_step_time_s"]``,
the median wall time of ``timed_steps`` untraced steps, is the step time to compare real
placements with.

On a loaded machine a descheduled thread lands in one op of one step; per-op medians drop such
outliers while the span median keeps the typical one, so ``coverage`` falls below the per-step
figure. ``meta["step_coverage"]`` is the median over traced steps of (that step's op times /
that step's span), robust to this.
"""

from __future__ import annotations

import platform
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import date

import numpy as np

from gplace.profile import CostProfile


@dataclass(frozen=True)
class ProfileConfig:
    warmup_steps: int = 2     # untraced; first steps allocate and set up kernels
    traced_steps: int = 5     # FULL_TRACE steps; per-op medians over these (at least 5)
    timed_steps: int = 5      # untraced steps: meta["untraced_step_time_s"], tracing-free
    inter_op_threads: int = 1  # one op at a time: op times are not shares of a pool
    intra_op_threads: int = 1  # one core per kernel: comparable across graphs, no contention
    op_timeout_s: float = 600.0  # a blocking op (a queue nothing fills) fails instead of hanging


@dataclass
class OpStats:
    """What one traced step says about one op."""
    time_s: float = 0.0
    output_bytes: int = 0
    temp_bytes: int = 0
    runs: int = 0
    loop_conds: int = 0  # a functional While: its lowered LoopCond's runs (trips + 1)


def step_op_stats(step_stats, graph_names: set[str],
                  loops: frozenset[str] = frozenset()) -> dict[str, OpStats]:
    """Per-op stats of one traced step; names are stripped of ``:...`` and kept if in the graph.
    A functional While of ``loops`` runs lowered (tensorflow/core/common_runtime/
    lower_while_op.cc: its cond and body inlined under ``<while name>/``, one execution per
    iteration): those nodes' times are its time, and its LoopCond's runs count its trips."""
    stats: dict[str, OpStats] = {}
    for dev in step_stats.dev_stats:
        for ns in dev.node_stats:
            name = ns.node_name.split(":")[0]
            loop = None if name in graph_names else _owning_loop(name, loops)
            if name not in graph_names and loop is None:
                continue
            s = stats.setdefault(loop or name, OpStats())
            end = ns.op_end_rel_nanos or ns.op_end_rel_micros * 1000
            s.time_s += end * 1e-9
            if loop is not None:  # the While op runs once per step, its body once per trip
                s.runs = 1
                s.loop_conds += name.startswith(f"{loop}/LoopCond/")
                continue
            s.runs += 1
            out = sum(o.tensor_description.allocation_description.requested_bytes
                      for o in ns.output)
            s.output_bytes = max(s.output_bytes, out)
            s.temp_bytes = max(s.temp_bytes, ns.memory_stats.temp_memory_size)
    return stats


def _owning_loop(name: str, loops: frozenset[str]) -> str | None:
    """The outermost While of ``loops`` whose lowered nodes ``name`` is one of, or None."""
    if not loops:
        return None
    parts = name.split("/")
    for k in range(1, len(parts)):
        if "/".join(parts[:k]) in loops:
            return "/".join(parts[:k])
    return None


def loop_trips(steps: list[dict[str, OpStats]], loops: frozenset[str]) -> dict[str, int]:
    """{While op: median trips per step} of the loops the traced steps ran lowered."""
    seen = sorted(n for n in loops if any(st.get(n) and st[n].loop_conds for st in steps))
    return {n: int(np.median([max((st[n].loop_conds if n in st else 0) - 1, 0)
                              for st in steps])) for n in seen}


def step_span_s(step_stats) -> float:
    """First node start to last node end of one traced step, in seconds."""
    starts, ends = [], []
    for dev in step_stats.dev_stats:
        for ns in dev.node_stats:
            start = ns.all_start_nanos or ns.all_start_micros * 1000
            starts.append(start)
            ends.append(start + (ns.all_end_rel_nanos or ns.all_end_rel_micros * 1000))
    return (max(ends) - min(starts)) * 1e-9 if starts else 0.0


def aggregate(steps: list[dict[str, OpStats]]) -> tuple[list[str], np.ndarray, np.ndarray,
                                                         np.ndarray, np.ndarray]:
    """(names, time_s, output_bytes, temp_bytes, runs): per-op medians over steps, in name order.

    An op missing from a step (an untaken Switch branch) counts as 0 in that step.
    """
    names = sorted(set().union(*steps)) if steps else []
    zero = OpStats()
    def med(field):
        return np.median([[getattr(s.get(n, zero), field) for n in names] for s in steps], axis=0)
    if not names:
        return names, np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(
            0, np.int64)
    return (names, med("time_s").astype(np.float64), med("output_bytes").astype(np.int64),
            med("temp_bytes").astype(np.int64), med("runs").astype(np.int64))


def machine_description() -> str:
    """CPU model and core count, without the host name."""
    model = platform.processor() or "unknown cpu"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import os
    return f"{model}, {os.cpu_count()} logical cores, {platform.system()} {platform.machine()}"


def session_config(cfg: ProfileConfig):
    import tensorflow as tf
    conf = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=cfg.inter_op_threads,
                                    intra_op_parallelism_threads=cfg.intra_op_threads,
                                    use_per_session_threads=True,
                                    device_count={"GPU": 0},  # this CPU's times, one per op
                                    operation_timeout_in_ms=int(cfg.op_timeout_s * 1000))
    conf.graph_options.rewrite_options.disable_meta_optimizer = True
    opts = conf.graph_options.optimizer_options
    opts.opt_level = tf.compat.v1.OptimizerOptions.L0
    opts.do_common_subexpression_elimination = False
    opts.do_constant_folding = False
    opts.do_function_inlining = False
    return conf


def import_with_initializer(graph_def):
    """(graph, init_op): the GraphDef under its own names, plus one op that sets every variable.

    The step graph has no initializers; values do not change op times, so variables get small
    random normals (floats) or zeros (ints) under ``gplace_init/``, which the traced step never
    runs.
    """
    import tensorflow as tf
    g = tf.Graph()
    with g.as_default():
        tf.compat.v1.set_random_seed(0)
        tf.graph_util.import_graph_def(graph_def, name="")
        inits = []
        for n in graph_def.node:
            if n.op not in ("VarHandleOp", "VariableV2"):
                continue
            dtype = tf.as_dtype(n.attr["dtype"].type)
            shape = tf.TensorShape(n.attr["shape"].shape)
            with tf.name_scope("gplace_init/"):
                value = (tf.random.normal(shape, stddev=0.02, dtype=dtype)
                         if dtype.is_floating else tf.zeros(shape, dtype))
                var = g.get_operation_by_name(n.name).outputs[0]
                inits.append(tf.raw_ops.AssignVariableOp(resource=var, value=value)
                             if n.op == "VarHandleOp" else tf.compat.v1.assign(var, value).op)
        init = tf.group(*inits, name="gplace_init/all")
    return g, init


# DT_FLOAT, DOUBLE, INT32, UINT8, INT16, INT8, INT64, BOOL, BFLOAT16, UINT16, HALF, UINT32,
# UINT64 (tensorflow/core/framework/types.proto): the inputs placeholder_feeds can make up
FEEDABLE = frozenset({1, 2, 3, 4, 5, 6, 9, 10, 14, 17, 19, 22, 23})
PLACEHOLDERS = ("Placeholder", "PlaceholderV2")  # a PlaceholderWithDefault needs no value


def unfeedable(graph_def) -> list[str]:
    """'name (why)' of each placeholder placeholder_feeds cannot fill: a dtype without numbers
    (string, resource, variant) or a shape of unknown rank."""
    out = []
    for n in graph_def.node:
        if n.op not in PLACEHOLDERS:
            continue
        if n.attr["dtype"].type not in FEEDABLE:
            out.append(f"{n.name} (dtype {n.attr['dtype'].type}: not a number)")
        elif "shape" not in n.attr or n.attr["shape"].shape.unknown_rank:
            out.append(f"{n.name} (no static rank)")
    return out


def placeholder_feeds(graph, unknown_dim: int = 1) -> dict:
    """{placeholder tensor: value} for every placeholder of the tf.Graph without a default:
    the step's inputs (a TF2 signature's arguments, a TF1 graph's feeds), made up like the
    variables' values: small random normals for floats, zeros otherwise (valid ids and
    labels), each unknown dimension ``unknown_dim``, as the importer sizes it. Values do not
    change most ops' times; a step whose work depends on them (a loop bound or a size fed as
    an input) runs with these."""
    rng = np.random.default_rng(0)
    feeds = {}
    for op in graph.get_operations():
        if op.type not in PLACEHOLDERS:
            continue
        t = op.outputs[0]
        shape = [unknown_dim if d is None else d for d in t.shape.as_list()]
        kind = t.dtype.as_numpy_dtype
        feeds[t] = ((0.02 * rng.standard_normal(shape)).astype(kind) if t.dtype.is_floating
                    else np.zeros(shape, kind))
    return feeds


def profile_graph(graph_def, name: str, fetch: str = "step_loss",
                  cfg: ProfileConfig = ProfileConfig()) -> CostProfile:
    """Runs the step graph and returns its CostProfile (see the module docstring)."""
    import tensorflow as tf
    loops = frozenset(n.name for n in graph_def.node if n.op in ("While", "StatelessWhile"))
    with _step_session(graph_def, fetch, cfg) as (sess, target, options, graph_names, feeds):
        for _ in range(cfg.warmup_steps):
            sess.run(target, feeds)
        steps, spans, traced_wall = [], [], []
        for _ in range(cfg.traced_steps):
            md = tf.compat.v1.RunMetadata()
            t0 = time.perf_counter()
            sess.run(target, feeds, options=options, run_metadata=md)
            traced_wall.append(time.perf_counter() - t0)
            steps.append(step_op_stats(md.step_stats, graph_names, loops))
            spans.append(step_span_s(md.step_stats))
        timed = []
        for _ in range(cfg.timed_steps):
            t0 = time.perf_counter()
            sess.run(target, feeds)
            timed.append(time.perf_counter() - t0)
    names, times, out_bytes, temp_bytes, runs = aggregate(steps)
    step_time = float(np.median(spans))
    meta = {
        "tf_version": tf.__version__, **asdict(cfg),
        "step_time_source": "median step_stats span (first op start to last op end) of the"
                            " traced steps",
        "traced_wall_s": float(np.median(traced_wall)),
        "untraced_step_time_s": float(np.median(timed)) if timed else None,
        "timed_step_times_s": [round(t, 6) for t in timed],
        "op_time_field": "op_end_rel_nanos",
        "graph_ops": len(graph_names), "ops_seen": len(names),
        "op_coverage": len(names) / max(1, len(graph_names)),
        "time_coverage": float(times.sum() / step_time) if step_time > 0 else 0.0,
        "step_coverage": float(np.median([sum(o.time_s for o in st.values()) / sp
                                          for st, sp in zip(steps, spans) if sp > 0] or [0.0])),
        "onednn_opts": __import__("os").environ.get("TF_ENABLE_ONEDNN_OPTS", "unset"),
        "grappler": "off (disable_meta_optimizer, L0)",
        **({"loop_trips": trips} if (trips := loop_trips(steps, loops)) else {}),
        "date": date.today().isoformat(),
    }
    return CostProfile(graph=name, device_kind="cpu", machine=machine_description(),
                       op_names=np.asarray(names, dtype=str), op_time_s=times,
                       op_output_bytes=out_bytes, op_temp_bytes=temp_bytes,
                       step_time_s=step_time, meta=meta, op_runs=runs)


def count_runs(graph_def, fetch: str = "step_loss", cfg: ProfileConfig = ProfileConfig()
               ) -> dict[str, int]:
    """{op name: executions in one traced step} (the trip counts of the TF1 loops around each
    op; ops that did not run are absent), after one untraced step. The counts, not the times,
    of :func:`profile_graph`, for a profile measured before it recorded them."""
    import tensorflow as tf
    loops = frozenset(n.name for n in graph_def.node if n.op in ("While", "StatelessWhile"))
    with _step_session(graph_def, fetch, cfg) as (sess, target, options, graph_names, feeds):
        sess.run(target, feeds)
        md = tf.compat.v1.RunMetadata()
        sess.run(target, feeds, options=options, run_metadata=md)
    return {n: s.runs for n, s in step_op_stats(md.step_stats, graph_names, loops).items()}


@contextmanager
def _step_session(graph_def, fetch: str, cfg: ProfileConfig):
    """(session with every variable set, the fetched op, FULL_TRACE run options, the graph's
    op names, the placeholders' values) for the step graph, in :func:`session_config`'s
    session."""
    import tensorflow as tf
    g, init = import_with_initializer(graph_def)
    target = g.get_operation_by_name(fetch)
    options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    with tf.compat.v1.Session(graph=g, config=session_config(cfg)) as sess:
        sess.run(init)
        yield sess, target, options, {n.name for n in graph_def.node}, placeholder_feeds(g)
