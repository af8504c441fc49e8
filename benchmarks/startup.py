"""Start-up of the commands as users meet them, each in a fresh process, warm (one untimed run
first, so the OS file cache and numba's kernel cache are filled): wall time and peak resident
memory of `gplace --help`, `gplace inspect` and `gplace place` (zero-shot, the defaults, the
report written) on the bundled example, the first time a file is placed (no OpGraph cache
entry for it: its graph is imported with TensorFlow) and again (its entry written), and
`gplace place` on InceptionV3 b32 with `--finetune 300` both ways. Both ways the policy's
weights are in the cache (``policies/``, gplace.gnn.infer), as after ``scripts/setup.sh``'s
warm-up: "first time" is about the file, not about gplace.

    .venv/bin/python benchmarks/startup.py [--repeats 3] [--skip-large] [--tree DIR]

Prints the median and min wall time and the largest peak RSS per command, and the load average
before and after, since the figures scale with what else runs on the cores. ``--tree DIR``
runs the gplace package of another source tree with this environment, e.g. an earlier commit
(``git archive COMMIT gplace | tar -x -C DIR``), for a before/after comparison.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "gplace" / "examples" / "small_resnet.pb"
INCEPTION = ROOT / "datasets" / "corpus" / "inception_v3_b32.pb"


def run(args: list[str], cwd: str, cache: str, tree: str | None) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of ``python -m gplace ARGS`` in a fresh process, with
    the gplace of ``tree`` (None: the installed one)."""
    env = {**os.environ, "GPLACE_CACHE_DIR": cache}
    if tree:
        env["PYTHONPATH"] = tree
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "gplace", *args], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"gplace {' '.join(args)} exited {proc.returncode}")
    return wall, usage.ru_maxrss / 1024  # kB on Linux


def measure(name: str, argv: list[str], cwd: str, repeats: int, cached: bool,
            tree: str | None) -> None:
    """One untimed run, then ``repeats`` timed: with ``cached`` all share one cache folder
    (the file was placed before), else each gets one that holds only the policy's weights
    (the first time the file is placed)."""
    with tempfile.TemporaryDirectory() as shared:
        run(argv, cwd, shared, tree)
        runs = []
        for _ in range(repeats):
            with tempfile.TemporaryDirectory() as empty:
                if not cached and (Path(shared) / "policies").is_dir():
                    shutil.copytree(Path(shared) / "policies", Path(empty) / "policies")
                runs.append(run(argv, cwd, shared if cached else empty, tree))
    times = [t for t, _ in runs]
    print(f"{name}: median {statistics.median(times):.2f} s, min {min(times):.2f} s over "
          f"{repeats}; peak RSS {max(m for _, m in runs):,.0f} MB", flush=True)


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f} (5 min {five:.2f}) on {os.cpu_count()} cores"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-large", action="store_true", help="only the bundled example")
    parser.add_argument("--tree", default=None, help="run the gplace package of this tree")
    args = parser.parse_args()
    tree = str(Path(args.tree).resolve()) if args.tree else None
    print(f"gplace from {tree or ROOT}")
    print(f"load average at start: {load()}", flush=True)
    place = ["place", str(EXAMPLE), "--out", "o"]
    large = ["place", str(INCEPTION), "--finetune", "300", "--out", "o"]
    commands = [("gplace --help", ["--help"], True),
                ("gplace inspect", ["inspect", str(EXAMPLE)], True),
                ("gplace place (zero-shot), first time", place, False),
                ("gplace place (zero-shot), placed before", place, True)]
    if not args.skip_large:
        commands += [("gplace place inception_v3_b32 --finetune 300, first time", large, False),
                     ("gplace place inception_v3_b32 --finetune 300, placed before", large, True)]
    with tempfile.TemporaryDirectory() as d:
        for name, argv, cached in commands:
            measure(name, argv, d, args.repeats, cached, tree)
    print(f"load average at the end: {load()}")


if __name__ == "__main__":
    main()
