"""Start-up of the commands as users meet them: wall time of `gplace --help`, `gplace inspect`
and `gplace place` (zero-shot, the defaults) on the bundled example, each in a fresh process.

    .venv/bin/python benchmarks/startup.py [--repeats 3]

Prints the median and min wall time per command and the load average at the start, since the
figures scale with what else runs on the cores.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "gplace" / "examples" / "small_resnet.pb"


def wall(args: list[str], cwd: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "gplace", *args], cwd=cwd, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    commands = {"gplace --help": ["--help"], "gplace inspect": ["inspect", str(EXAMPLE)],
                "gplace place (zero-shot)": ["place", str(EXAMPLE), "--out", "o"]}
    with tempfile.TemporaryDirectory() as d:
        for name, argv in commands.items():
            times = [wall(argv, d) for _ in range(args.repeats)]
            print(f"{name}: median {statistics.median(times):.2f} s, min {min(times):.2f} s "
                  f"over {args.repeats}")


if __name__ == "__main__":
    main()
