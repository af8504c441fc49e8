"""gplace.bench: runs.npz round trip (sharded benchmark runs are merged through it)."""

import numpy as np

from gplace.bench import Run, load_runs, save_runs, summarize


def test_runs_round_trip_and_merge(tmp_path):
    a = [Run("g", "c", "random", s, 1.0 + s, True, 3, 0.5, np.array([np.inf, 2.0, 1.0 + s]))
         for s in range(2)]
    b = [Run("h", "c", "single", 0, 4.0, True, 0, 0.1, np.zeros(0))]
    save_runs(tmp_path / "a.npz", a, {("g", "c"): {"lower_bound_s": 0.5, "units": 3,
                                                    "estimated": True}})
    save_runs(tmp_path / "b.npz", b, {("h", "c"): {"lower_bound_s": 2.0, "units": 1,
                                                    "estimated": False}})
    runs, meta = load_runs([tmp_path / "a.npz", tmp_path / "b.npz"])
    assert [(r.graph, r.method, r.seed, r.samples) for r in runs] == \
        [("g", "random", 0, 3), ("g", "random", 1, 3), ("h", "single", 0, 0)]
    np.testing.assert_array_equal(runs[1].curve, [np.inf, 2.0, 2.0])
    assert runs[2].curve.size == 0 and meta[("h", "c")]["lower_bound_s"] == 2.0
    rows = summarize(runs, meta)
    assert rows[0]["mean_step_time_s"] == 1.5 and rows[0]["vs_lower_bound"] == 3.0
