"""CostProfile: lookup by op name, coverage, and a save/load round trip that refuses other
files and other format versions with one line."""

import gzip
import json

import numpy as np
import pytest

from gplace.errors import ConfigError
from gplace.profile import CostProfile


def profile() -> CostProfile:
    return CostProfile(graph="g", device_kind="cpu", machine="test box",
                       op_names=np.array(["a", "b", "c"]), op_time_s=np.array([1.0, 2.0, 0.5]),
                       op_output_bytes=np.array([8, 16, 0]), op_temp_bytes=np.array([0, 4, 0]),
                       step_time_s=4.0, meta={"steps": 10})


def test_times_for_aligns_with_the_names_asked_for():
    times, found = profile().times_for(np.array(["c", "x", "a"]))
    assert times.tolist() == [0.5, 0.0, 1.0]
    assert found.tolist() == [True, False, True]


def test_coverage_is_profiled_time_over_the_step():
    assert profile().coverage == pytest.approx(3.5 / 4.0)
    empty = CostProfile("g", "cpu", "m", np.array([], str), np.zeros(0), np.zeros(0, np.int64),
                        np.zeros(0, np.int64), 0.0)
    assert empty.coverage == 0.0


def test_save_load_round_trip(tmp_path):
    p = profile()
    p.save(tmp_path / "p.json.gz")
    q = CostProfile.load(tmp_path / "p.json.gz")
    assert (q.graph, q.device_kind, q.machine, q.step_time_s, q.meta) == \
        ("g", "cpu", "test box", 4.0, {"steps": 10})
    for key in ("op_names", "op_time_s", "op_output_bytes", "op_temp_bytes"):
        np.testing.assert_array_equal(getattr(q, key), getattr(p, key))
    assert q.op_output_bytes.dtype == np.int64


def _write(path, record):
    path.write_bytes(gzip.compress(json.dumps(record).encode()))


def test_load_refuses_other_files_with_one_line(tmp_path):
    (tmp_path / "plain.txt").write_text("hello")
    with pytest.raises(ConfigError, match="not a gplace profile"):
        CostProfile.load(tmp_path / "plain.txt")
    _write(tmp_path / "v9.json.gz", {"format_version": 9})
    with pytest.raises(ConfigError, match="profile format is not version 1"):
        CostProfile.load(tmp_path / "v9.json.gz")
    _write(tmp_path / "partial.json.gz", {"format_version": 1, "graph": "g"})
    with pytest.raises(ConfigError, match="missing the field 'device_kind'"):
        CostProfile.load(tmp_path / "partial.json.gz")


def test_run_counts_round_trip_and_default_to_one(tmp_path):
    p = profile()
    assert p.op_runs is None and p.runs_for(np.array(["b", "x"])).tolist() == [1, 1]
    p.save(tmp_path / "old.json.gz")  # no counts recorded: the file has no field for them
    assert "op_runs" not in json.loads(gzip.decompress((tmp_path / "old.json.gz").read_bytes()))
    looped = CostProfile(**{**p.__dict__, "op_runs": np.array([20, 1, 0])})
    looped.save(tmp_path / "p.json.gz")
    q = CostProfile.load(tmp_path / "p.json.gz")
    np.testing.assert_array_equal(q.op_runs, [20, 1, 0])
    # an op that did not run (an untaken branch) and one outside the profile count once
    assert q.runs_for(np.array(["c", "a", "x", "b"])).tolist() == [1, 20, 1, 1]


@pytest.mark.parametrize("field, value, message", [
    ("op_time_s", [-1.0, 2.0, 0.5], "finite seconds"),
    ("op_time_s", [float("nan"), 2.0, 0.5], "finite seconds"),
    ("op_time_s", [1.0, 2.0], "has 2 entries for 3 ops"),
    ("op_time_s", ["x", 2.0, 0.5], "wrong type"),
    ("op_output_bytes", [8, -16, 0], "byte counts"),
    ("step_time_s", None, "wrong type"),
])
def test_a_profile_with_impossible_values_is_one_config_error(tmp_path, field, value, message):
    """Negative or NaN times crashed the simulator's compiled code (a segfault, no message)."""
    path = tmp_path / "p.profile.json.gz"
    profile().save(path)
    record = json.loads(gzip.decompress(path.read_bytes()))
    record[field] = value
    path.write_bytes(gzip.compress(json.dumps(record).encode()))
    with pytest.raises(ConfigError, match=message):
        CostProfile.load(path)


def test_a_profile_that_inflates_past_the_limit_is_refused(tmp_path, monkeypatch):
    from gplace import io
    monkeypatch.setattr(io, "MAX_RECORD_BYTES", 1000)
    path = tmp_path / "p.profile.json.gz"
    path.write_bytes(gzip.compress(b" " * 5000 + b"{}"))
    with pytest.raises(ConfigError, match="larger than"):
        CostProfile.load(path)
