"""Hostile input through the CLI, as a user meets it: bad files, hostile graphs and YAML, bad
options, bad checkpoints, unwritable outputs, untrusted ops and Ctrl-C.

Every case of CASES runs ``python -m gplace ...`` in a subprocess, under a time limit and a
4 GiB address-space limit so that a regression fails instead of stalling or swapping the
machine, and must end with exit status 2, exactly one line on stderr that says what is wrong,
no traceback, nothing half-written and no process left. CASES is the one table: each entry
holds its command line, with ``{name}`` for a file that :func:`make_files` writes, and what the
line must say. The cases run a few at a time (most fail in under a second, before TensorFlow
or torch is imported); each test then checks its own case.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
TAG = f"gplace-robustness-{uuid.uuid4().hex[:8]}"  # in the environment of every process we start
MEMORY_LIMIT_KB = 4 << 20  # 4 GiB of address space: TF, torch and numba start in under 3
CASE_TIMEOUT_S = 180       # a case that passes takes under 20 s, on a busy machine

# Ops that touch files, carry code or reach the network, missing from a denylist: one graph
# holds them all.
UNTRUSTED_OPS = [
    "ExperimentalDatasetToTFRecord", "ExperimentalCSVDataset", "ExperimentalLMDBDataset",
    "ExperimentalSqlDataset", "ExperimentalMatchingFilesDataset", "RecordInput",
    "SnapshotChunkDataset", "SnapshotDatasetReader", "SnapshotNestedDatasetReader",
    "ListSnapshotChunksDataset", "DistributedSave", "FileSystemSetConfiguration", "EncodeProto",
    "DatasetFromGraph"]
CONST = ('node { name: "x" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } } '
         'attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} '
         'float_val: 1 } } } }\n')
DEVICE = ("  - {name: %s, tf_device: '/device:CPU:%s', kind: %s, peak_flops: %s, "
          "mem_bandwidth: 1e10, memory_bytes: %s, lanes: %s}\n")
LINK = "default_link: {bandwidth: 1e10, latency_s: 1e-6}\n"
# Nine aliases of nine: 9**9 (387 million) leaves from a few hundred bytes of YAML.
LAUGHS = "[" + ", ".join(
    ["&l0 [x, x, x, x, x, x, x, x, x]"] + [f"&l{k} [" + ", ".join([f"*l{k - 1}"] * 9) + "]"
                                          for k in range(1, 9)]) + "]"


class Case(NamedTuple):
    argv: list[str]               # "{name}": a path of make_files; "{tmp}": the folder
    needles: tuple[str, ...]      # all in the one stderr line
    absent: tuple[str, ...] = ()  # paths that must not exist afterwards (nothing half-written)
    python: str | None = None     # run this script (argv as sys.argv[1:]) instead of the CLI


def env() -> dict:
    return {**os.environ, "GPLACE_TEST_TAG": TAG, "PYTHONPATH": str(ROOT)}


def gplace(argv, cwd, python=None, timeout=CASE_TIMEOUT_S) -> subprocess.CompletedProcess:
    """The command under the memory limit; a timeout is a result (exit 124), not an error."""
    cmd = [sys.executable, "-c", python, *argv] if python else [sys.executable, "-m", "gplace",
                                                                  *argv]
    limited = ["/bin/sh", "-c", f'ulimit -v {MEMORY_LIMIT_KB} && exec "$@"', "sh", *cmd]
    try:
        return subprocess.run(limited, cwd=cwd, env=env(), capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as e:
        return subprocess.CompletedProcess(limited, 124, e.stdout or "",
                                           f"timed out after {timeout} s")


def tagged_processes() -> list[int]:
    """Live processes started by this module (their environment carries TAG)."""
    out = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if TAG.encode() in environ.read_bytes():
                stat = (environ.parent / "stat").read_text()
                if stat.rsplit(")", 1)[1].split()[0] != "Z":
                    out.append(int(environ.parent.name))
        except OSError:
            continue
    return out


def cluster_yaml(second: str = "1", kind: str = "cpu", flops: str = "1e11",
                 memory: str = "8e9", lanes: str = "1", name: str = "bad",
                 head: str = "") -> str:
    """A two-CPU cluster YAML; the keywords change its second device, name or first lines."""
    return (f"{head}name: {name}\ndevices:\n" + DEVICE % ("a", 0, "cpu", "1e11", "8e9", 1)
            + DEVICE % ("b", second, kind, flops, memory, lanes) + LINK)


def many_devices(n: int) -> str:
    return ("name: big\ndevices:\n" + "".join(DEVICE % (f"d{i}", i, "cpu", "1e11", "8e9", 1)
                                              for i in range(n)) + LINK)


def read_only_dir(tmp: Path) -> Path:
    """A folder nobody may write in: /sys for root (EACCES there even for root), else a 0555
    folder."""
    if os.geteuid() == 0:
        return Path("/sys")
    path = tmp / "read-only"
    path.mkdir()
    path.chmod(0o555)
    return path


def unreadable_file(tmp: Path) -> Path:
    """A .pb that cannot be read: mode 000, or for root a link to /proc/self/mem (EIO)."""
    path = tmp / "unreadable.pb"
    if os.geteuid() == 0:
        path.symlink_to("/proc/self/mem")
    else:
        path.write_bytes(b"x")
        path.chmod(0)
    return path


def checkpoints(tmp: Path) -> dict[str, Path]:
    """--out paths of pretrain runs whose last.ckpt is empty, junk, cut, evil, foreign or of
    another Lightning model."""
    import torch
    runs = {}
    for name in ("empty", "junk", "cut", "evil", "foreign", "lightning"):
        out = tmp / f"pretrain-{name}" / "policy.pt"
        last = out.parent / "runs" / "policy" / "checkpoints" / "last.ckpt"
        last.parent.mkdir(parents=True)
        runs[name] = out
        if name == "empty":
            last.write_bytes(b"")
        elif name == "junk":
            last.write_bytes(os.urandom(4096))
        elif name == "foreign":
            torch.save({"weights": torch.ones(3)}, last)
        elif name == "lightning":  # a Lightning checkpoint of some other model
            torch.save({"state_dict": {"layer.weight": torch.ones(3)}, "global_step": 7,
                        "pytorch-lightning_version": "2.6.0", "hyper_parameters": {"lr": 0.1}},
                       last)
        elif name == "evil":
            torch.save({"state_dict": {}, "payload": _Evil(str(tmp / "pwned"))}, last)
        else:
            torch.save({"state_dict": {"w": torch.ones(1000)}, "global_step": 1}, last)
            last.write_bytes(last.read_bytes()[:1500])
    return runs


class _Evil:
    """Unpickling this would create a file; weights_only loading must refuse it."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def hostile_graphs() -> dict[str, bytes]:
    """Binary GraphDefs that crashed TensorFlow, ate memory or stalled before the importer
    checked them, and graphs --measure real must refuse or ask about."""
    from tests.importer.test_bad_input import graph_pb
    const = ("c", "Const", [], {"dtype": 1})
    nested = [(f"f{k}", [(f"call{j}", f"f{k + 1}") for j in range(10)]) for k in range(7)]
    return {
        "recursive.pb": graph_pb(("x", "f", [], {}), library=[("f", [("y", "f")])]),
        "mutual.pb": graph_pb(("x", "f", [], {}), library=[("f", [("y", "g")]),
                                                           ("g", [("z", "f")])]),
        "port.pb": graph_pb(const, ("i", "Identity", ["c:100000000"], {"T": 1})),
        "dtype.pb": graph_pb(("p", "Placeholder", [], {"dtype": 999})),
        "nested.pb": graph_pb(("x", "f0", [], {}), library=nested + [("f7", [("n", "NoOp")])]),
        "no-step-op.pb": graph_pb(("train", "NoOp", [], {}), ("other", "NoOp", [], {})),
        "shadow.pb": graph_pb(const, ("r", "ReadFile", [], {}),
                              library=[("ReadFile", [("n", "NoOp")])]),
    }


def make_files(tmp: Path) -> dict[str, str]:
    """Writes every file a case names; returns name -> path (and "tmp" -> the folder)."""
    from gplace.sim.random_graphs import RandomDagConfig, random_dag
    random_dag(RandomDagConfig(ops=20), 1).save(tmp / "tiny.npz")
    random_dag(RandomDagConfig(ops=2000), 1).save(tmp / "wide.npz")
    texts = {
        "tiny.pbtxt": CONST,
        "hostile.pbtxt": CONST + "".join(f'node {{ name: "n{i}" op: "{op}" input: "x" }}\n'
                                         for i, op in enumerate(UNTRUSTED_OPS)),
        "syntax.yaml": "name: x\ndevices: [\n",
        "same-tf.yaml": cluster_yaml(second="0"),
        "kind.yaml": cluster_yaml(kind="k8o"),
        "inf-flops.yaml": cluster_yaml(flops=".inf"),
        "inf-memory.yaml": cluster_yaml(memory=".inf"),
        "huge-memory.yaml": cluster_yaml(memory=str(2**64)),
        "lanes.yaml": cluster_yaml(lanes="1000000000"),
        "laughs-flops.yaml": cluster_yaml(flops="*l8", head=f"description: {LAUGHS}\n"),
        "laughs-memory.yaml": cluster_yaml(memory="*l8", head=f"description: {LAUGHS}\n"),
        "laughs-name.yaml": cluster_yaml(name="*l8", head=f"description: {LAUGHS}\n"),
        "devices.yaml": many_devices(2000),
    }
    blobs = {"empty.pb": b"", "junk.pb": os.urandom(2048), "junk.npz": os.urandom(2048),
             "model.onnx": b"onnx", "a-file": b"not a folder", "empty.pt": b"",
             "junk.pt": os.urandom(512),
             "latin1.yaml": cluster_yaml(name="caf\xe9").encode("latin-1"),
             **hostile_graphs()}
    for name, text in texts.items():
        (tmp / name).write_text(text)
    for name, data in blobs.items():
        (tmp / name).write_bytes(data)
    os.mkfifo(tmp / "fifo.pb")
    (tmp / "loop-a.pb").symlink_to(tmp / "loop-b.pb")
    (tmp / "loop-b.pb").symlink_to(tmp / "loop-a.pb")
    for folder in ("a-dir", "corpus"):
        (tmp / folder).mkdir()
    paths = {p.name: str(p) for p in tmp.iterdir()}
    ro = read_only_dir(tmp)
    ckpt = checkpoints(tmp)
    return {**paths, "tmp": str(tmp), "ro": str(ro), "unreadable": str(unreadable_file(tmp)),
            **{f"ckpt-{k}": str(v) for k, v in ckpt.items()}}


# A disk that fills up after the checks passed: the trace write fails with ENOSPC.
FULL_DISK = """
import errno, sys
import gplace.sim.trace as trace
def full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")
trace.write_trace = full
from gplace.cli import main
sys.exit(main(sys.argv[1:]))
"""

SIM = ["simulate", "{tiny.npz}", "--cluster", "post-2gpu", "--random", "2"]
PLACE = ["place", "{tiny.pbtxt}", "--out", "{tmp}/place-out"]
PRETRAIN = ["pretrain", "--corpus", "{corpus}"]
def real(out: str) -> list[str]:
    """--measure real into a folder of the case's own (the cases run four at a time, and a
    run claims its --out folder)."""
    return ["--measure", "real", "--cluster", "local-procs", "--out", "{tmp}/" + out]


def yaml_case(file: str, *needles: str) -> Case:
    return Case(["simulate", "{tiny.npz}", "--cluster", "{%s}" % file, "--random", "2"], needles)


def resume(name: str, *needles: str) -> Case:
    return Case(PRETRAIN + ["--out", "{ckpt-%s}" % name, "--resume", "--no-progress"], needles,
                ("{tmp}/pwned",))


CASES: dict[str, Case] = {
    # bad files
    "missing model": Case(["place", "missing.pb"], ("missing.pb: no such file",)),
    "unreadable model": Case(["place", "{unreadable}"], ("cannot read it",)),
    "empty model": Case(["inspect", "{empty.pb}"], ("the file is empty",)),
    "corrupt model": Case(["inspect", "{junk.pb}"], ("truncated or corrupt",)),
    "unknown file type": Case(["inspect", "{model.onnx}"], ("unsupported file type '.onnx'",)),
    "fifo as model": Case(["place", "{fifo.pb}"], ("not a regular file",)),
    "symbolic link loop": Case(["place", "{loop-a.pb}"], ("a loop of symbolic links",)),
    "corrupt npz": Case(["simulate", "{junk.npz}", "--cluster", "post-2gpu", "--random", "2"],
                        ("not a gplace graph file",)),
    # hostile graphs: each crashed TF, ate memory or stalled before the importer checked it
    "function calls itself": Case(["inspect", "{recursive.pb}"],
                                  ("library function f calls itself (f -> f)",)),
    "functions call each other": Case(["inspect", "{mutual.pb}"],
                                      ("library function f is recursive (f -> g -> f)",)),
    "port 10**8": Case(["inspect", "{port.pb}"],
                       ("input 'c:100000000', but op 'c' (Const) has 1 output",)),
    "no such dtype": Case(["inspect", "{dtype.pb}"], ("dtype number 999, which is no TensorFlow",)),
    "calls nested 10**7": Case(["inspect", "{nested.pb}"],
                               ("with its function calls inlined has 21,111,111 ops, more than "
                                "the 1,000,000",)),
    # hostile YAML
    "duplicate tf_device": yaml_case("same-tf.yaml", "are the same TF device"),
    "unknown device kind": yaml_case("kind.yaml", "unknown device kind 'k8o'"),
    "infinite peak_flops": yaml_case("inf-flops.yaml", "'peak_flops' = inf is not a finite number"),
    "infinite memory_bytes": yaml_case("inf-memory.yaml",
                                       "'memory_bytes' = inf is not a finite integer"),
    "memory_bytes 2**64": yaml_case("huge-memory.yaml", "= 18446744073709551616 must be in [1, "
                                                        "2**50] (bytes)"),
    "lanes 10**9": yaml_case("lanes.yaml", "'lanes' = 1000000000 must be in [1, 1024]"),
    "billion laughs in peak_flops": yaml_case("laughs-flops.yaml", "aliases are not allowed"),
    "billion laughs in memory_bytes": yaml_case("laughs-memory.yaml", "aliases are not allowed"),
    "billion laughs in name": yaml_case("laughs-name.yaml", "aliases are not allowed"),
    "2,000 devices": yaml_case("devices.yaml", "lists 2,000 entries; gplace takes at most 256"),
    "YAML not UTF-8": yaml_case("latin1.yaml", "not UTF-8 text (byte 0xe9 at offset"),
    "YAML syntax": yaml_case("syntax.yaml", "cannot read cluster YAML (line 3"),
    "unknown cluster": Case(["place", "{tiny.pbtxt}", "--cluster", "post-3gpu"],
                            ("unknown cluster 'post-3gpu'", "post-2gpu")),
    # bad options
    "seed -1": Case(PLACE + ["--seed", "-1"], ("-1 is out of range", "2**32")),
    "seed 2**63": Case(SIM + ["--seed", str(2**63)], ("out of range",)),
    "seed 2**32": Case(["pretrain", "--seed", str(2**32)], ("out of range",)),
    "seed not a number": Case(SIM + ["--seed", "abc"], ("'abc' is not an integer",)),
    "random 0": Case(SIM[:-1] + ["0"], ("--random: 0 is out of range",)),
    "random 10**9": Case(SIM[:-1] + ["1000000000"],
                         ("--random: 1000000000 is out of range", "to 100,000")),
    "random batch over 1 GiB": Case(["simulate", "{wide.npz}", "--cluster", "post-2gpu",
                                     "--random", "100000"],
                                    ("--random 100,000: 1.2 GiB of placements and results",
                                     "give at most")),
    "finetune 10**12": Case(PLACE + ["--finetune", str(10**12)],
                            ("--finetune: 1000000000000 is out of range", "to 1,000,000"),
                            ("{tmp}/place-out",)),
    "memory limit 1.2.3GB": Case(PLACE + ["--memory-limit", "1.2.3GB"],
                                 ("'1.2.3GB' is not a size such as 8GB",)),
    "memory limit .": Case(PLACE + ["--memory-limit", "."], ("'.' is not a size",)),
    "memory limit empty": Case(PLACE + ["--memory-limit", ""], ("empty memory limit",)),
    "memory limit 0": Case(PLACE + ["--memory-limit", "gpu0=0"], ("is 0 bytes",)),
    "bench methods ,": Case(["bench", "--graphs", "{tiny.npz}", "--methods", ",", "--out",
                             "{tmp}/bench-out"], ("--methods ',' names no method",),
                            ("{tmp}/bench-out",)),
    "bench methods with an empty name": Case(
        ["bench", "--graphs", "{tiny.npz}", "--methods", "random,,hill", "--out",
         "{tmp}/bench-out"], ("--methods 'random,,hill' has an empty name between its commas",),
        ("{tmp}/bench-out",)),
    "bench budget 0": Case(["bench", "--graphs", "{tiny.npz}", "--budget", "0"],
                           ("--budget: 0 is out of range",)),
    "unknown option": Case(["place", "{tiny.pbtxt}", "--finetnue", "3"],
                           ("unrecognized arguments: --finetnue",)),
    # unwritable outputs, checked before the work
    "out is a file": Case(["place", "{tiny.pbtxt}", "--out", "{a-file}"],
                          ("exists and is not a folder",)),
    "out under a file": Case(["place", "{tiny.pbtxt}", "--out", "{a-file}/out"],
                             ("is a file, not a folder",)),
    "out read-only": Case(["place", "{tiny.pbtxt}", "--out", "{ro}/gplace-out"],
                          ("cannot write in",), ("{ro}/gplace-out",)),
    "out under read-only": Case(["place", "{tiny.pbtxt}", "--out", "{ro}/a/b"],
                                ("cannot write in",), ("{ro}/a",)),
    "bench out is a file": Case(["bench", "--graphs", "{tiny.npz}", "--out", "{a-file}"],
                                ("exists and is not a folder",)),
    "trace is a folder": Case(SIM + ["--trace", "{a-dir}"], ("is a folder",)),
    "trace read-only": Case(SIM + ["--trace", "{ro}/t.json"], ("cannot write in",),
                            ("{ro}/t.json",)),
    "save is a folder": Case(["inspect", "{tiny.npz}", "--save", "{a-dir}"], ("is a folder",)),
    "disk fills up": Case(SIM + ["--trace", "{tmp}/full.json"],
                          ("could not write the trace", "No space left on device",
                           "printed above"), ("{tmp}/full.json",), python=FULL_DISK),
    # bad checkpoints
    "resume without checkpoint": Case(PRETRAIN + ["--out", "{tmp}/fresh/policy.pt", "--resume"],
                                      ("--resume: no checkpoint at",), ("{tmp}/fresh",)),
    "resume empty": resume("empty", "the checkpoint to resume is empty"),
    "resume junk": resume("junk", "not a PyTorch checkpoint to resume"),
    "resume cut": resume("cut", "not a PyTorch checkpoint to resume (truncated"),
    "resume pickle": resume("evil", "holds Python objects besides tensors"),
    "resume foreign": resume("foreign", "not a checkpoint of gplace pretrain"),
    "resume other model": resume("lightning", "a Lightning checkpoint of another model"),
    "policy empty": Case(PLACE + ["--checkpoint", "{empty.pt}"],
                         ("the policy checkpoint is empty",)),
    "policy junk": Case(PLACE + ["--checkpoint", "{junk.pt}"],
                        ("not a PyTorch policy checkpoint",)),
    "corpus missing": Case(["pretrain", "--corpus", "{tmp}/nope"], ("no such folder",)),
    "imitation without experts": Case(PRETRAIN + ["--samples", "0", "--expert-budget", "0",
                                               "--out", "{tmp}/i.pt"],
                                      ("--samples 0", "--expert-budget"), ("{tmp}/i.pt",)),
    "experts from junk": Case(PRETRAIN + ["--expert-budget", "5", "--expert-from", "{junk.pt}",
                                          "--out", "{tmp}/j.pt"],
                              ("not a PyTorch policy checkpoint",), ("{tmp}/j.pt",)),
    "init from junk": Case(PRETRAIN + ["--init", "{junk.pt}", "--out", "{tmp}/k.pt"],
                           ("not a PyTorch policy checkpoint",), ("{tmp}/k.pt",)),
    "ema decay 1": Case(PRETRAIN + ["--ema-decay", "1"], ("--ema-decay must be in [0, 1)",)),
    "dagger follow 2": Case(PRETRAIN + ["--dagger", "1", "--dagger-follow", "2"],
                            ("--dagger-follow must be in [0, 1]",)),
    "dagger temperature -1": Case(PRETRAIN + ["--dagger", "1", "--dagger-temperature", "-1"],
                                  ("--dagger-temperature must be >= 0",)),
    "temperature 0": Case(PRETRAIN + ["--temperature", "0"], ("--temperature must be > 0",)),
    "order fifo": Case(PRETRAIN + ["--order", "fifo"], ("--order must be rank or dispatch",)),
    "unknown dim 0": Case(PRETRAIN + ["--unknown-dim", "0"], ("--unknown-dim must be >= 1",)),
    # --measure real: untrusted graphs and unknown step ops, refused before any TF process
    "untrusted place": Case(["place", "{hostile.pbtxt}"] + real("real-a"),
                            ("'n0' of type ExperimentalDatasetToTFRecord", "--allow-unsafe",
                             *UNTRUSTED_OPS), ("{tmp}/real-a",)),
    "untrusted calibrate": Case(["calibrate", "--graphs", "{hostile.pbtxt}", "--cluster",
                                 "local-procs", "--out", "{tmp}/hostile-cal"],
                                ("'n0' of type ExperimentalDatasetToTFRecord",
                                 "--allow-unsafe"), ("{tmp}/hostile-cal/profiles",)),
    "function named like an op": Case(["place", "{shadow.pb}"] + real("real-b"),
                                      ("cannot read the body of function ReadFile",
                                       "an op with the same name already exists"),
                                      ("{tmp}/real-b",)),

    "no step op": Case(["place", "{no-step-op.pb}"] + real("real-c"),
                       ("pass --loss NAME", "ops nothing consumes here: train, other"),
                       ("{tmp}/real-c",)),
    "loss not in graph": Case(["place", "{no-step-op.pb}", "--loss", "zz"] + real("real-d"),
                              ("--loss 'zz': the graph has no op of that name",),
                              ("{tmp}/real-d",)),
}


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """Every case, run four at a time: name -> (case with its paths filled in, its
    CompletedProcess)."""
    tmp = tmp_path_factory.mktemp("robustness")
    files = make_files(tmp)
    fill = lambda texts: [re.sub(r"\{([^{}]+)\}", lambda m: files[m[1]], t)  # noqa: E731
                          for t in texts]
    cases = {name: c._replace(argv=fill(c.argv), absent=tuple(fill(c.absent)))
             for name, c in CASES.items()}
    with ThreadPoolExecutor(4) as pool:
        futures = {name: pool.submit(gplace, c.argv, tmp, c.python) for name, c in cases.items()}
        results = {name: (cases[name], f.result()) for name, f in futures.items()}
    yield results
    if os.geteuid() != 0:
        (tmp / "read-only").chmod(0o755)


@pytest.mark.parametrize("name", list(CASES))
def test_one_clear_line_and_exit_2(ran, name):
    case, proc = ran[name]
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert lines[0].startswith(f"gplace {case.argv[0]}: error: "), lines[0]
    for needle in case.needles:
        assert needle in lines[0], lines[0]
    for path in case.absent:
        assert not os.path.lexists(path), f"{path} was written"


@pytest.mark.slow
def test_a_graph_of_over_a_million_ops_is_refused_before_tensorflow_sees_it(tmp_path):
    from gplace.importer.inputs import MAX_OPS
    from gplace.tfimport import tensorflow
    gd = tensorflow().compat.v1.GraphDef()
    for i in range(MAX_OPS + 1):
        gd.node.add(name=f"n{i}", op="NoOp")
    (tmp_path / "big.pb").write_bytes(gd.SerializeToString())
    start = time.monotonic()
    proc = gplace(["inspect", str(tmp_path / "big.pb")], tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "has 1,000,001 ops, more than the 1,000,000 gplace imports" in proc.stderr
    assert time.monotonic() - start < 60


@pytest.mark.slow
def test_300_000_ops_import_in_linear_time(tmp_path):
    """300,000 NoOps (4.9 MB) import in about 40 s on one core (TensorFlow's import_graph_def
    is half of it); the limit leaves room for a busy machine."""
    from gplace.tfimport import tensorflow
    gd = tensorflow().compat.v1.GraphDef()
    for i in range(300_000):
        gd.node.add(name=f"n{i}", op="NoOp")
    (tmp_path / "noops.pb").write_bytes(gd.SerializeToString())
    proc = gplace(["inspect", str(tmp_path / "noops.pb")], tmp_path, timeout=300)
    assert proc.returncode == 0 and "NoOp 300,000" in proc.stdout, proc.stderr[-2000:]


def test_a_failed_run_is_not_reported_as_a_memory_shortfall():
    """--measure real: every placement fits but its run failed; the message says why."""
    import numpy as np
    from gplace.cluster import load_cluster
    from gplace.place import _shortfall_message
    from gplace.placers import PlaceResult
    from gplace.problem import PlacementProblem
    from gplace.real.batch import failed_result
    from gplace.sim.random_graphs import RandomDagConfig, random_dag
    problem = PlacementProblem.build(random_dag(RandomDagConfig(ops=20), 1),
                                     load_cluster("post-2gpu"))
    single = np.zeros(problem.num_units, np.int64)

    class FailedRuns:
        def result_of(self, placement):
            return failed_result("InvalidArgumentError: no kernel for op 'x'")

    heuristics = {"single": PlaceResult("single", single, np.inf, False, 0, 0.0, None, {})}
    text = _shortfall_message(problem, FailedRuns(), heuristics)
    assert text.startswith("no placement ran: the single placement fits in memory"), text
    assert "no kernel for op 'x'" in text and "short by" not in text


def test_the_result_survives_a_full_disk(ran):
    _, proc = ran["disk fills up"]
    assert "step time" in proc.stdout  # the simulation's result is printed all the same


def test_nothing_left_behind(ran):
    assert tagged_processes() == []
    tmp = Path(ran["disk fills up"][0].argv[-1]).parent  # the folder every case works in
    leftovers = [p for p in tmp.rglob("*")
                 if p.name.endswith(".tmp") or p.name.startswith(".gplace-")]
    assert leftovers == []


COMPILING = "gplace: stopping once the compiler finishes (first run only)"


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
                         ids=["ctrl-c", "sigterm"])
def test_an_interrupted_pretrain_exits_with_one_line(tmp_path, sig, code):
    """Lightning turns Ctrl-C into its own notice and exit 1, a SIGTERM into exit 0; gplace
    says "interrupted" and how to resume, and exits 130 / 143."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "mlp.pb").write_bytes((ROOT / "datasets/corpus/mlp_3x1024_b256.pb").read_bytes())
    proc = subprocess.Popen(
        [sys.executable, "-m", "gplace", "pretrain", "--corpus", str(corpus), "--clusters",
         "post-2gpu", "--max-steps", "100000", "--samples", "4", "--no-progress", "--out",
         str(tmp_path / "policy.pt")], cwd=tmp_path, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
        env={**env(), "PYTHONWARNINGS": "ignore"})  # Lightning's deprecation notices
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(l) for l in proc.stderr] + [lines.put("")],
                     daemon=True).start()
    try:
        deadline = time.monotonic() + 180
        while True:  # until training starts
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            assert line, "pretrain ended before training started"
            if "training and" in line and "problems" in line:
                break
        time.sleep(2.0)
        while not lines.empty():
            lines.get()
        proc.send_signal(sig)
        # Ctrl-C is held while numba compiles (below), which on a cold cache and a busy machine
        # takes minutes; a hang still fails
        returned = proc.wait(timeout=240)
        rest = []
        while (line := lines.get(timeout=10)) != "":
            rest.append(line.rstrip("\n"))
    finally:
        proc.kill()
    assert returned == code, rest
    said = ("gplace pretrain: interrupted" + (" (SIGTERM)" if sig == signal.SIGTERM else "")
            + "; run the same command again to resume")
    # Ctrl-C inside numba's compiler (a cold cache) is held until it returns, with a notice;
    # Lightning notes a SIGTERM in a line of its own.
    rest = [line for line in rest if "Received SIGTERM" not in line]
    assert rest in ([said], [COMPILING, said]), rest
    assert not (tmp_path / "policy.pt").exists()
    assert tagged_processes() == []


# ---- whole runs of `gplace place` (tens of seconds each: marked slow) -------------------------
MODEL = ROOT / "datasets" / "corpus" / "mlp_3x1024_b256.pb"


@pytest.fixture(scope="module")
def policy(tmp_path_factory) -> Path:
    """A small untrained policy checkpoint (the shipped one is not under test here)."""
    import torch
    from gplace.gnn.policy import GNNPolicy
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("policy") / "policy.pt"
    GNNPolicy(hidden_channels=16, num_layers=2).save(path, meta={"steps": 0})
    return path


def runner_started() -> bool:
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if (b"gplace.real.runner" in cmdline.read_bytes()
                    and TAG.encode() in (cmdline.parent / "environ").read_bytes()):
                return True
        except OSError:
            continue
    return False


@pytest.mark.slow
def test_sigkill_of_place_measure_real_leaves_no_process_and_no_folder(tmp_path, policy):
    before = set(Path("/tmp").glob("gplace-real-*"))
    proc = subprocess.Popen([sys.executable, "-m", "gplace", "place", str(MODEL), "--cluster",
                             "local-procs", "--measure", "real", "--out", str(tmp_path / "out"),
                             "--checkpoint", str(policy)],
                            cwd=tmp_path, env=env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        while not runner_started():  # the servers are up and a placement is running
            assert proc.poll() is None and time.monotonic() < deadline, "no runner started"
            time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        killed = time.monotonic()
        while tagged_processes() and time.monotonic() < killed + 10:
            time.sleep(0.2)
    finally:
        proc.kill()
    assert tagged_processes() == [], "a process outlived gplace by 10 s"
    assert set(Path("/tmp").glob("gplace-real-*")) == before
    assert not (tmp_path / "out").exists()


def run_place(out: Path, cwd: Path, policy: Path,
              python: str | None = None) -> subprocess.CompletedProcess:
    return gplace(["place", str(MODEL), "--cluster", "post-2gpu", "--seed", "3", "--out",
                   str(out), "--checkpoint", str(policy)], cwd, python, timeout=600)


@pytest.mark.slow
def test_place_outputs_are_byte_reproducible(tmp_path, policy):
    """placed.pb (deterministic serialization) and placement.json (no wall time) are the same
    bytes from two processes (two hash seeds) with the same seed."""
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda o: run_place(tmp_path / o, tmp_path, policy), ["a", "b"]))
    for run in runs:
        assert run.returncode == 0, run.stderr
    for name in ("placed.pb", "placement.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert "wall_s" not in (tmp_path / "a" / "placement.json").read_text()


# The disk fills up after the checks and the placement: placement.json cannot be written.
FULL_DISK_EXPORT = """
import errno, sys
import gplace.report as report
def full(path, text):
    raise OSError(errno.ENOSPC, "No space left on device")
report.atomic_write_text = full
from gplace.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_place_result_survives_a_full_disk(tmp_path, policy):
    run = run_place(tmp_path / "out", tmp_path, policy, FULL_DISK_EXPORT)
    lines = run.stderr.strip().splitlines()  # zero-shot's progress, then the error
    errors = [line for line in lines if line.startswith("gplace")]
    assert run.returncode == 2 and errors == lines[-1:], run.stderr
    assert "could not write the results" in lines[-1] and "No space left" in lines[-1]
    assert "step time" in run.stdout and "wrote            nothing" in run.stdout
    assert not (tmp_path / "out").exists()  # nothing half-written: not even the folder
