"""Hostile input through the CLI, as a user meets it (issue 14): bad files, bad YAML, bad
options, bad checkpoints, unwritable outputs, untrusted ops and Ctrl-C.

Every case runs ``python -m gplace ...`` in a subprocess and must end with exit status 2 (130
for an interrupt), exactly one line on stderr that says what is wrong, no traceback, nothing
half-written and no process left. The cases run a few at a time (most fail in under a second,
before TensorFlow or torch is imported); each test then checks its own case.
"""

from __future__ import annotations

import os
import queue
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

# The ops issue 14 found missing from the old denylist: one graph holds them all.
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
          "mem_bandwidth: 1e10, memory_bytes: %s}\n")
LINK = "default_link: {bandwidth: 1e10, latency_s: 1e-6}\n"


class Case(NamedTuple):
    argv: list[str]
    needles: tuple[str, ...]      # all in the one stderr line
    absent: tuple[str, ...] = ()  # paths that must not exist afterwards (nothing half-written)
    python: str | None = None     # run this script (argv as sys.argv[1:]) instead of the CLI


def env() -> dict:
    return {**os.environ, "GPLACE_TEST_TAG": TAG, "PYTHONPATH": str(ROOT)}


def gplace(argv, cwd, python=None, timeout=120) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-c", python, *argv] if python else [sys.executable, "-m", "gplace",
                                                                  *argv]
    return subprocess.run(cmd, cwd=cwd, env=env(), capture_output=True, text=True,
                          timeout=timeout)


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


def write_cluster(path: Path, second: str = "1", kind: str = "cpu", flops: str = "1e11",
                  memory: str = "8e9") -> str:
    path.write_text("name: bad\ndevices:\n" + DEVICE % ("a", 0, "cpu", "1e11", "8e9")
                    + DEVICE % ("b", second, kind, flops, memory) + LINK)
    return str(path)


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


def build_cases(tmp: Path) -> dict[str, Case]:
    from gplace.sim.random_graphs import RandomDagConfig, random_dag
    npz = tmp / "tiny.npz"
    random_dag(RandomDagConfig(ops=20), 1).save(npz)
    tiny = tmp / "tiny.pbtxt"
    tiny.write_text(CONST)
    hostile = tmp / "hostile.pbtxt"
    hostile.write_text(CONST + "".join(f'node {{ name: "n{i}" op: "{op}" input: "x" }}\n'
                                       for i, op in enumerate(UNTRUSTED_OPS)))
    (tmp / "empty.pb").write_bytes(b"")
    (tmp / "junk.pb").write_bytes(os.urandom(2048))
    (tmp / "junk.npz").write_bytes(os.urandom(2048))
    (tmp / "model.onnx").write_bytes(b"onnx")
    os.mkfifo(tmp / "fifo.pb")
    (tmp / "a-file").write_text("not a folder")
    (tmp / "a-dir").mkdir()
    (tmp / "corpus").mkdir()
    (tmp / "empty.pt").write_bytes(b"")
    (tmp / "junk.pt").write_bytes(os.urandom(512))
    (tmp / "syntax.yaml").write_text("name: x\ndevices: [\n")
    ro = read_only_dir(tmp)
    ckpt = checkpoints(tmp)
    sim = ["simulate", str(npz), "--cluster", "post-2gpu", "--random", "2"]

    def yaml_case(needle, **change):
        return Case(["simulate", str(npz), "--cluster",
                     write_cluster(tmp / f"{needle[:12].strip()}.yaml", **change), "--random", "2"],
                    (needle,))

    def resume(name, *needles):
        return Case(["pretrain", "--corpus", str(tmp / "corpus"), "--out", str(ckpt[name]),
                     "--resume", "--no-progress"], needles, (str(tmp / "pwned"),))

    return {
        # bad files
        "missing model": Case(["place", "missing.pb"], ("missing.pb: no such file",)),
        "unreadable model": Case(["place", str(unreadable_file(tmp))], ("cannot read it",)),
        "empty model": Case(["inspect", str(tmp / "empty.pb")], ("the file is empty",)),
        "corrupt model": Case(["inspect", str(tmp / "junk.pb")], ("truncated or corrupt",)),
        "unknown file type": Case(["inspect", str(tmp / "model.onnx")],
                                  ("unsupported file type '.onnx'",)),
        "fifo as model": Case(["place", str(tmp / "fifo.pb")], ("not a regular file",)),
        "corrupt npz": Case(["simulate", str(tmp / "junk.npz"), "--cluster", "post-2gpu",
                             "--random", "2"], ("not a gplace graph file",)),
        # bad YAML
        "duplicate tf_device": yaml_case("are the same TF device", second="0"),
        "unknown device kind": yaml_case("unknown device kind 'k8o'", kind="k8o"),
        "infinite peak_flops": yaml_case("'peak_flops' = inf is not a finite number",
                                         flops=".inf"),
        "infinite memory_bytes": yaml_case("'memory_bytes' = inf is not a finite integer",
                                           memory=".inf"),
        "YAML syntax": Case(["simulate", str(npz), "--cluster", str(tmp / "syntax.yaml"),
                             "--random", "2"], ("cannot read cluster YAML",)),
        "unknown cluster": Case(["place", str(tiny), "--cluster", "post-3gpu"],
                                ("unknown cluster 'post-3gpu'", "post-2gpu")),
        # bad options
        "seed -1": Case(["place", str(tiny), "--seed", "-1"], ("-1 is out of range", "2**32")),
        "seed 2**63": Case(sim + ["--seed", str(2**63)], ("out of range",)),
        "seed 2**32": Case(["pretrain", "--seed", str(2**32)], ("out of range",)),
        "seed not a number": Case(sim + ["--seed", "abc"], ("'abc' is not an integer",)),
        "random 0": Case(sim[:-1] + ["0"], ("--random 0: must be >= 1",)),
        "unknown option": Case(["place", str(tiny), "--finetnue", "3"],
                               ("unrecognized arguments: --finetnue",)),
        # unwritable outputs, checked before the work
        "out is a file": Case(["place", str(tiny), "--out", str(tmp / "a-file")],
                              ("exists and is not a folder",)),
        "out under a file": Case(["place", str(tiny), "--out", str(tmp / "a-file" / "out")],
                                 ("is a file, not a folder",)),
        "out read-only": Case(["place", str(tiny), "--out", str(ro / "gplace-out")],
                              ("cannot write in",), (str(ro / "gplace-out"),)),
        "out under read-only": Case(["place", str(tiny), "--out", str(ro / "a" / "b")],
                                    ("cannot write in",), (str(ro / "a"),)),
        "bench out is a file": Case(["bench", "--graphs", str(npz), "--out",
                                     str(tmp / "a-file")], ("exists and is not a folder",)),
        "trace is a folder": Case(sim + ["--trace", str(tmp / "a-dir")], ("is a folder",)),
        "trace read-only": Case(sim + ["--trace", str(ro / "t.json")], ("cannot write in",),
                                (str(ro / "t.json"),)),
        "save is a folder": Case(["inspect", str(npz), "--save", str(tmp / "a-dir")],
                                 ("is a folder",)),
        "disk fills up": Case(sim + ["--trace", str(tmp / "full.json")],
                              ("could not write the trace", "No space left on device",
                               "printed above"), (str(tmp / "full.json"),), python=FULL_DISK),
        # bad checkpoints
        "resume without checkpoint": Case(["pretrain", "--corpus", str(tmp / "corpus"), "--out",
                                           str(tmp / "fresh" / "policy.pt"), "--resume"],
                                          ("--resume: no checkpoint at",),
                                          (str(tmp / "fresh"),)),
        "resume empty": resume("empty", "the checkpoint to resume is empty"),
        "resume junk": resume("junk", "not a PyTorch checkpoint to resume"),
        "resume cut": resume("cut", "not a PyTorch checkpoint to resume (truncated"),
        "resume pickle": resume("evil", "holds Python objects besides tensors"),
        "resume foreign": resume("foreign", "not a checkpoint of gplace pretrain"),
        "resume other model": resume("lightning", "a Lightning checkpoint of another model"),
        "policy empty": Case(["place", str(tiny), "--checkpoint", str(tmp / "empty.pt")],
                             ("the policy checkpoint is empty",)),
        "policy junk": Case(["place", str(tiny), "--checkpoint", str(tmp / "junk.pt")],
                            ("not a PyTorch policy checkpoint",)),
        "corpus missing": Case(["pretrain", "--corpus", str(tmp / "nope")], ("no such folder",)),
        "imitation without experts": Case(["pretrain", "--corpus", str(tmp / "corpus"), "--samples",
                                           "0", "--out", str(tmp / "i.pt")],
                                          ("--samples 0", "--expert-budget"), (str(tmp / "i.pt"),)),
        "experts from junk": Case(["pretrain", "--corpus", str(tmp / "corpus"), "--expert-budget",
                                   "5", "--expert-from", str(tmp / "junk.pt"), "--out",
                                   str(tmp / "j.pt")],
                                  ("not a PyTorch policy checkpoint",), (str(tmp / "j.pt"),)),
        "init from junk": Case(["pretrain", "--corpus", str(tmp / "corpus"), "--init",
                                str(tmp / "junk.pt"), "--out", str(tmp / "k.pt")],
                               ("not a PyTorch policy checkpoint",), (str(tmp / "k.pt"),)),
        "ema decay 1": Case(["pretrain", "--corpus", str(tmp / "corpus"), "--ema-decay", "1"],
                            ("--ema-decay must be in [0, 1)",)),
        "dagger follow 2": Case(["pretrain", "--corpus", str(tmp / "corpus"), "--dagger",
                                 "1", "--dagger-follow", "2"],
                                ("--dagger-follow must be in [0, 1]",)),
        "dagger temperature -1": Case(["pretrain", "--corpus", str(tmp / "corpus"), "--dagger",
                                       "1", "--dagger-temperature", "-1"],
                                      ("--dagger-temperature must be >= 0",)),
        "temperature 0": Case(["pretrain", "--corpus", str(tmp / "corpus"), "--temperature",
                               "0"], ("--temperature must be > 0",)),
        # untrusted graphs, refused before any TF process starts
        "untrusted place": Case(["place", str(hostile), "--measure", "real", "--cluster",
                                 "local-procs", "--out", str(tmp / "hostile-out")],
                                ("'n0' of type ExperimentalDatasetToTFRecord", "--allow-unsafe",
                                 *UNTRUSTED_OPS), (str(tmp / "hostile-out"),)),
        "untrusted calibrate": Case(["calibrate", "--graphs", str(hostile), "--cluster",
                                     "local-procs", "--out", str(tmp / "hostile-cal")],
                                    ("'n0' of type ExperimentalDatasetToTFRecord",
                                     "--allow-unsafe"), (str(tmp / "hostile-cal" / "profiles"),)),
    }


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """Every case, run four at a time: name -> (case, CompletedProcess)."""
    tmp = tmp_path_factory.mktemp("robustness")
    cases = build_cases(tmp)
    with ThreadPoolExecutor(4) as pool:
        futures = {name: pool.submit(gplace, c.argv, tmp, c.python) for name, c in cases.items()}
        results = {name: (cases[name], f.result()) for name, f in futures.items()}
    yield results
    if os.geteuid() != 0:
        (tmp / "read-only").chmod(0o755)


CASES = [
    "missing model", "unreadable model", "empty model", "corrupt model", "unknown file type",
    "fifo as model", "corrupt npz", "duplicate tf_device", "unknown device kind",
    "infinite peak_flops", "infinite memory_bytes", "YAML syntax", "unknown cluster", "seed -1",
    "seed 2**63", "seed 2**32", "seed not a number", "random 0", "unknown option",
    "out is a file", "out under a file", "out read-only", "out under read-only",
    "bench out is a file", "trace is a folder", "trace read-only", "save is a folder",
    "disk fills up", "resume without checkpoint", "resume empty", "resume junk", "resume cut",
    "resume pickle", "resume foreign", "resume other model", "policy empty", "policy junk",
    "corpus missing", "imitation without experts", "experts from junk", "ema decay 1",
    "dagger follow 2", "dagger temperature -1", "temperature 0", "init from junk",
    "untrusted place", "untrusted calibrate",
]


@pytest.mark.parametrize("name", CASES)
def test_one_clear_line_and_exit_2(ran, name):
    case, proc = ran[name]
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    # argparse reports an unknown option from the top-level parser: "gplace: error: ..."
    assert lines[0].startswith((f"gplace {case.argv[0]}: error: ", "gplace: error: ")), lines[0]
    for needle in case.needles:
        assert needle in lines[0], lines[0]
    for path in case.absent:
        assert not os.path.lexists(path), f"{path} was written"


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


def test_ctrl_c_of_pretrain_exits_130_with_one_line(tmp_path):
    """Lightning turns Ctrl-C into its own notice and exit 1; gplace says "interrupted", 130."""
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
        proc.send_signal(signal.SIGINT)
        # held while numba compiles (below): on a cold cache and a busy 2-core machine a
        # fresh clone's CI once took over 60 s here; a hang still fails
        code = proc.wait(timeout=240)
        rest = []
        while (line := lines.get(timeout=10)) != "":
            rest.append(line.rstrip("\n"))
    finally:
        proc.kill()
    assert code == 130, rest
    # Ctrl-C inside numba's compiler (a cold cache) is held until it returns, with a notice.
    assert rest in (["gplace pretrain: interrupted"], [COMPILING, "gplace pretrain: interrupted"]), rest
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
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1, run.stderr
    assert "could not write the results" in lines[0] and "No space left" in lines[0]
    assert "step time" in run.stdout and "wrote            nothing" in run.stdout
    assert not (tmp_path / "out").exists()  # nothing half-written: not even the folder
