"""PlaceSummary: the --json keys and their order, the speed-ups, immutability."""

import dataclasses
import json
import math

import pytest

from gplace.summary import BestHeuristic, PlaceSummary

# The keys `gplace place --json` printed before the summary was typed (plus "out", added by
# the CLI); scripts read them.
JSON_KEYS = ["graph", "ops", "units", "cluster", "cluster_choice", "devices", "step_time_s",
             "single_device_s", "best_heuristic", "lower_bound_s", "zero_shot_step_time_s",
             "samples", "wall_s", "measure", "costs", "step_times", "groups", "chosen"]


def summary(**changes) -> PlaceSummary:
    s = PlaceSummary(
        graph="g", ops=10, units=4, cluster="c", cluster_choice="cluster c (given)",
        devices=("cpu", "gpu0"), step_time_s=0.02, single_device_s=0.05,
        best_heuristic=BestHeuristic("heft", 0.025), lower_bound_s=0.01,
        zero_shot_step_time_s=0.03, samples=7, wall_s=1.5, measure="sim", costs="measured",
        step_times="simulated, an estimate", groups=4, chosen="heft")
    return dataclasses.replace(s, **changes)


def test_as_dict_keeps_the_json_keys_in_order_and_plain_types():
    d = summary().as_dict()
    assert list(d) == JSON_KEYS
    assert d["devices"] == ["cpu", "gpu0"]
    assert d["best_heuristic"] == {"name": "heft", "step_time_s": 0.025}
    assert json.loads(json.dumps(d)) == d
    assert summary().to_json() == d


def test_speedups():
    s = summary()
    assert s.speedup_vs_single == pytest.approx(2.5)
    assert s.speedup_vs_best_heuristic == pytest.approx(1.25)
    none_fits = summary(best_heuristic=BestHeuristic(None, None))
    assert math.isnan(none_fits.speedup_vs_best_heuristic)
    assert none_fits.as_dict()["best_heuristic"] == {"name": None, "step_time_s": None}


def test_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        summary().step_time_s = 0.0
