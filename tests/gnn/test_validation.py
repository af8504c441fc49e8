"""Pretraining's validation figures (gplace.gnn.validation): each problem counted once, the
rule fixed whatever zero-shot's defaults, the policy's own rollouts."""

import numpy as np
import pytest


def test_validation_counts_each_problem_once():
    from gplace.gnn.validation import VAL_METRICS, validation_figures
    # rank 0 validated problems 0 and 2, rank 1 problems 1 and 0 (the sampler's padding)
    rows = np.array([[0, 0.5, 0.8], [2, 2.0, 1.25], [1, 1.0, 1.0], [0, 0.5, 0.8]])
    got = validation_figures(rows, "zero-shot")
    assert got[VAL_METRICS["greedy"]] == pytest.approx(1.0)
    assert got[VAL_METRICS["zero-shot"]] == pytest.approx(1.0)
    assert got["val/share_at_or_below"] == pytest.approx(2 / 3)
    assert validation_figures(rows, "greedy")["val/share_at_or_below"] == pytest.approx(2 / 3)


def test_validation_keeps_its_rule_whatever_zero_shots_defaults():
    """The card's validation figure stays comparable across releases: the policy's own
    rollouts, chosen by the estimate without link waits, not polished, whatever
    FinetuneConfig's defaults become (they differ today, so this can fail)."""
    from gplace.gnn.config import FinetuneConfig
    from gplace.gnn.validation import VALIDATION_RULE
    rule, default = VALIDATION_RULE, FinetuneConfig()
    assert (rule.zero_shot_prior, rule.zero_shot_polish, rule.estimate_contention) == (
        False, 0, False)
    assert default.zero_shot_prior and default.zero_shot_polish and default.estimate_contention


def test_validation_measures_the_policys_own_rollouts():
    """Pretraining validates zero-shot without the untrained network's rollouts, which are the
    same for every checkpoint, and without the polish; `gplace place` adds them
    (FinetuneConfig's default)."""
    from gplace.cluster import load_cluster
    from gplace.gnn.config import FinetuneConfig
    from gplace.gnn.infer import policy_weights, zero_shot
    from gplace.gnn.learn import ProblemState
    from gplace.gnn.placer import load_policy
    from gplace.gnn.validation import zero_shot_time
    from gplace.placers import SimMeasurer
    from gplace.problem import PlacementProblem
    from gplace.sim.random_graphs import RandomDagConfig, random_dag
    p = PlacementProblem.build(random_dag(RandomDagConfig(ops=150), 0), load_cluster("post-4gpu"))
    state, weights = ProblemState(p, SimMeasurer(p)), policy_weights(load_policy()[0])

    def step_time(config):
        placement = zero_shot(weights, state.numpy_features, state.sched, 0, config)
        return float(state.measurer.measure(placement[None]).step_time_s[0])

    own = step_time(FinetuneConfig(zero_shot_prior=False, zero_shot_polish=0))
    with_prior = step_time(FinetuneConfig())
    assert zero_shot_time(weights, state) == own != with_prior
