import os
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
TESTDATA = SHARED / "testdata" / "tf-grappler"


@pytest.fixture
def testdata() -> Path:
    if not TESTDATA.is_dir():
        pytest.skip(f"{TESTDATA} is absent (it ships with the team's shared folder, not the repo)")
    return TESTDATA


@pytest.fixture
def two_cpu_cluster():
    """A cluster of this machine's CPU split into two logical TF devices (CPU:0, CPU:1)."""
    from gplace.cluster import cluster_from_dict
    cpu = {"kind": "cpu", "peak_flops": 1e11, "mem_bandwidth": 2e10, "memory_bytes": 8e9}
    return cluster_from_dict({"name": "two-cpus", "devices": [
        dict(cpu, name="cpu0", tf_device="/job:localhost/replica:0/task:0/device:CPU:0"),
        dict(cpu, name="cpu1", tf_device="/job:localhost/replica:0/task:0/device:CPU:1")],
        "default_link": {"bandwidth": 1e10, "latency_s": 1e-6}}, "test")
