"""The list schedulers' memory estimate: in full, and calibrated to the simulated peak."""

import numpy as np
import pytest

from gplace.cluster import load_cluster
from gplace.problem import PlacementProblem


def test_the_calibrated_memory_estimate_charges_the_share_of_outputs_live_at_the_peak():
    """The example ResNet's outputs add up to ~10x its peak on one device (643 against 65 MB):
    charged in full they crowd 40 MB GPUs; calibrated, the estimate's total is that peak."""
    from dataclasses import replace
    from pathlib import Path
    import gplace
    from gplace.placers.heuristics_view import build_view, calibrated, estimate_binds
    from gplace.sim import FastSimulator
    example = Path(__file__).resolve().parents[2] / "gplace" / "examples" / "small_resnet.pb"
    graph = gplace.load_graph(example)
    roomy = PlacementProblem.build(graph, load_cluster("post-4gpu"))
    assert not estimate_binds(roomy)
    base = load_cluster("post-4gpu")
    tight = PlacementProblem.build(graph, replace(base, devices=tuple(
        d if d.name == "cpu" else replace(d, memory_bytes=40_000_000) for d in base.devices)))
    assert estimate_binds(tight)
    fit = calibrated(tight)
    assert 0 < fit.activation_share < 0.2
    peak = FastSimulator(tight).run(np.full(tight.num_units, 1)).peak_bytes[1]  # gpu0
    assert build_view(fit).unit_need.sum() == pytest.approx(peak, rel=1e-6)
    assert fit.costs is tight.costs and fit.unit_of_op is tight.unit_of_op  # only the estimate
