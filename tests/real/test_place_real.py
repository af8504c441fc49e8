"""`gplace place --measure real`: the final head-to-head batch treats overlapping intervals as
ties, and the summary prints each step time with its interval (a fake measurer, no TF)."""

from pathlib import Path

import numpy as np

from gplace.cli.place_cmd import render
from gplace.measure import Measurement
from gplace.place import _head_to_head
from gplace.placers.base import History, PlaceResult

from tests.test_summary import summary


def result(name, placement, t):
    return PlaceResult(name, np.array(placement, np.int64), t, True, 0, 0.0,
                       History(np.zeros(0), np.zeros(0, bool)), {})


class FakeMeasurer:
    """Step time and interval half-width by placement."""

    def __init__(self, table):
        self.table, self.batches = table, []

    def measure(self, placements):
        self.batches.append(len(placements))
        t = np.array([self.table[tuple(p)][0] for p in placements])
        w = np.array([self.table[tuple(p)][1] for p in placements])
        return Measurement(t, np.ones(len(t), bool), np.zeros((len(t), 2)), t - w, t + w)


def test_a_placement_ahead_by_noise_is_tied_and_the_heuristic_is_kept():
    heuristics = {"single": result("single", [0, 0], 1.0), "heft": result("heft", [0, 1], 1.0)}
    tuned = result("gnn", [1, 0], 0.5)
    m = FakeMeasurer({(0, 0): (10.0, 0.1), (0, 1): (8.2, 0.3), (1, 0): (8.0, 0.3)})
    best, heur, intervals, ties = _head_to_head(m, tuned, heuristics)
    assert m.batches == [3]                         # one interleaved batch
    assert best.placement.tolist() == [0, 1] and best.step_time_s == 8.2
    assert ties == ("gnn",)
    assert heur["single"].step_time_s == 10.0       # every time from the same batch
    assert np.allclose(intervals["chosen"], (8.2, 7.9, 8.5)) and intervals["gnn"][0] == 8.0


def test_placements_timed_in_one_visit_are_ranked_by_their_times_not_all_tied():
    """A Ctrl-C or the time cap can end the batch after one visit each: intervals (low, inf)
    would overlap every other, and the first heuristic would win whatever its time."""
    heuristics = {"single": result("single", [0, 0], 1.0), "heft": result("heft", [0, 1], 1.0)}
    tuned = result("gnn", [1, 0], 0.5)
    inf = float("inf")
    m = FakeMeasurer({(0, 0): (10.0, inf), (0, 1): (9.0, inf), (1, 0): (5.0, inf)})
    best, _, _, ties = _head_to_head(m, tuned, heuristics)
    assert best.placement.tolist() == [1, 0] and ties == ()


def test_a_clear_winner_is_returned():
    heuristics = {"single": result("single", [0, 0], 1.0), "heft": result("heft", [0, 1], 1.0)}
    tuned = result("gnn", [1, 0], 0.5)
    m = FakeMeasurer({(0, 0): (10.0, 0.1), (0, 1): (9.0, 0.1), (1, 0): (8.0, 0.1)})
    best, _, intervals, ties = _head_to_head(m, tuned, heuristics)
    assert best.placement.tolist() == [1, 0] and ties == ()


def test_zero_shot_is_measured_again_beside_the_rest_and_a_same_placement_is_no_tie():
    heuristics = {"single": result("single", [0, 0], 1.0), "heft": result("heft", [0, 1], 1.0)}
    tuned = result("gnn", [0, 0], 0.5)._replace(info={  # fine-tuning ended at single's
        "zero_shot_placement": np.array([1, 0]), "zero_shot_step_time_s": 7.0})
    m = FakeMeasurer({(0, 0): (8.0, 0.1), (0, 1): (9.0, 0.1), (1, 0): (8.05, 0.1)})
    best, _, intervals, ties = _head_to_head(m, tuned, heuristics)
    assert m.batches == [3]                         # the three distinct placements, once each
    assert best.placement.tolist() == [0, 0] and ties == ("zero-shot",)  # not gnn: the same
    assert intervals["zero-shot"][0] == 8.05 and best.info["zero_shot_step_time_s"] == 8.05
    assert tuned.info["zero_shot_step_time_s"] == 7.0  # the search's record is kept


def test_summary_text_and_json_carry_the_intervals():
    intervals = {"chosen": (0.020, 0.019, 0.0215), "single": (0.05, 0.049, 0.051),
                 "heft": (0.025, 0.024, 0.026), "gnn": (0.0199, 0.0185, 0.0210)}
    text = render(summary(), [Path("/x/placed.pb")], False, intervals, ("gnn",))
    assert "20.000 ms [90% interval 19.000-21.500]" in text
    assert "tied with gnn (intervals overlap: not ranked)" in text
    assert "single device    50.000 ms [90% interval 49.000-51.000]" in text
    assert "heft 25.000 ms [90% interval 24.000-26.000]" in text
    assert "fine-tuned best  19.900 ms [90% interval 18.500-21.000]" in text
    import json
    out = json.loads(render(summary(), None, True, intervals, ("gnn",)))
    assert out["intervals_s"]["chosen"] == [0.020, 0.019, 0.0215] and out["ties"] == ["gnn"]


def test_the_control_drift_line_counts_only_the_batches_it_scaled():
    import io
    from gplace.place import _say_drift
    out = io.StringIO()
    _say_drift(result("gnn", [0, 0], 1.0)._replace(info={"control_drift": [1.0, 1 / 1.1]}), out)
    assert "control in 2 batches; in 1 batch it moved beyond its interval (+10.0%) and" \
        in out.getvalue()
    out = io.StringIO()
    _say_drift(result("gnn", [0, 0], 1.0)._replace(info={"control_drift": [1.0]}), out)
    assert "nothing was scaled" in out.getvalue()
