"""``gplace bench`` smoke test with a tiny budget (CleanRL-style), in a subprocess."""

import json
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "gplace" / "examples" / "small_resnet.pb"


def test_bench_writes_tables_and_curves(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "gplace", "bench", "--graphs", str(EXAMPLE), "--cluster",
         "post-2gpu", "--methods", "random,hill,single", "--budget", "30", "--seeds", "2",
         "--out", str(tmp_path), "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["results"]
    by = {r["method"]: r for r in rows}
    assert set(by) == {"random", "hill", "single"}
    assert by["random"]["samples"] == by["hill"]["samples"] == 30 and by["single"]["samples"] == 0
    assert by["hill"]["mean_step_time_s"] <= by["single"]["mean_step_time_s"]  # starts there
    for r in rows:
        assert r["vs_lower_bound"] >= 1.0 and r["std_step_time_s"] >= 0
    assert (tmp_path / "results.md").read_text().count("| small_resnet |") == 3
    assert (tmp_path / "curve_small_resnet_post-2gpu.png").stat().st_size > 10_000


def test_bench_unknown_method_is_one_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "gplace", "bench", "--graphs", str(EXAMPLE), "--methods",
         "nope", "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip() .startswith("gplace bench: error: unknown placer 'nope'; choose")
    assert "Traceback" not in proc.stderr


def test_bench_on_a_cluster_file_where_nothing_fits(tmp_path):
    """A cluster given as a YAML path names its curve by the file's stem (not a subfolder), and
    curves where no seed has a feasible placement draw without numpy's warnings."""
    text = (EXAMPLE.parents[1] / "clusters" / "post-2gpu.yaml").read_text()
    (tmp_path / "yaml").mkdir()
    small = tmp_path / "yaml" / "small.yaml"
    small.write_text(text.replace("memory_bytes: 12000000000", "memory_bytes: 1000000")
                     .replace("memory_bytes: 128000000000", "memory_bytes: 1000000"))
    proc = subprocess.run(
        [sys.executable, "-m", "gplace", "bench", "--graphs", str(EXAMPLE), "--cluster",
         str(small), "--methods", "random,single", "--budget", "5", "--seeds", "2",
         "--out", str(tmp_path / "out"), "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Warning" not in proc.stderr, proc.stderr
    rows = json.loads(proc.stdout)["results"]  # standard JSON: no Infinity or NaN
    assert all(r["mean_step_time_s"] is None for r in rows)
    assert (tmp_path / "out" / "curve_small_resnet_small.png").is_file()
