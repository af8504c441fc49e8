"""The kernel loading that `gplace place` runs while its graph imports elsewhere."""

import subprocess
import sys

CHECK = """
import sys
from gplace.gnn import schedule
from gplace.placers import etf_kernel, heft_kernel
from gplace.sim import fast
if sys.argv[1] == "load":
    from gplace.warmup import load_kernels
    load_kernels()
kernels = (fast._batch, fast._one, schedule._rollout, etf_kernel.schedule, heft_kernel.heft)
print(sum(bool(k.signatures) for k in kernels))
"""


def loaded(arg: str) -> int:
    out = subprocess.run([sys.executable, "-c", CHECK, arg], capture_output=True, text=True,
                         check=True)
    return int(out.stdout.split()[-1])


def test_load_kernels_loads_what_a_zero_shot_placement_runs():
    assert loaded("none") == 0  # a fresh process has loaded none of them
    assert loaded("load") == 5
