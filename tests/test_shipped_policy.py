"""The README's first command with the shipped checkpoint: the bundled example, the defaults.

A golden test: the figures below are what `gplace place gplace/examples/small_resnet.pb` gave
with `gplace/checkpoints/policy.pt` at the locked versions, compared to 0.01 ms (the simulated
step time is a sum of many op times; its last digits may move with the BLAS build, its
placement not). A changed checkpoint, policy, scheduler or simulator fails it: update the
figures only together with the results pages.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parent.parent / "gplace" / "examples" / "small_resnet.pb"

STEP_MS = 17.19           # the shipped policy, zero-shot, post-4gpu (simulated)
BEST_HEURISTIC = ("heft", 17.62)
SINGLE_DEVICE_MS = 20.22


@pytest.fixture(scope="module")
def placed(tmp_path_factory):
    out = tmp_path_factory.mktemp("golden")
    run = subprocess.run([sys.executable, "-m", "gplace", "place", str(EXAMPLE), "--out", str(out),
                          "--json"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout), out


def test_the_shipped_policy_places_the_example_as_the_readme_says(placed):
    summary, out = placed
    assert summary["cluster"] == "post-4gpu" and summary["samples"] == 0
    assert summary["ops"] == 699 and summary["units"] == 499
    assert summary["chosen"] == "gnn (zero-shot)"
    assert round(summary["step_time_s"] * 1e3, 2) == STEP_MS
    assert (summary["best_heuristic"]["name"],
            round(summary["best_heuristic"]["step_time_s"] * 1e3, 2)) == BEST_HEURISTIC
    assert round(summary["single_device_s"] * 1e3, 2) == SINGLE_DEVICE_MS
    assert summary["lower_bound_s"] <= summary["step_time_s"]
    for name in ("placed.pb", "placement.json", "trace.json", "report.html"):
        assert (out / name).stat().st_size > 0, name


def test_its_placement_json_names_every_op_once(placed):
    _, out = placed
    placement = json.loads((out / "placement.json").read_text())
    ops = placement.get("placement", placement)
    assert len(ops) == 699
    assert set(ops.values()) <= {f"/job:localhost/replica:0/task:0/device:{d}"
                                 for d in ("CPU:0", "GPU:0", "GPU:1", "GPU:2", "GPU:3")}
