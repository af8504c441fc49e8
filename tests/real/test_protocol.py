"""The measurement protocol's statistics (no TensorFlow): the interval's coverage, the
stopping rule, ties, the visiting order, and the load figures."""


import numpy as np
import pytest

from gplace.errors import ConfigError
from gplace.measure import Measurement, overlap, tied
from gplace.real.load import LoadFigures, LoadProbe
from gplace.real.protocol import (ProtocolConfig, estimate, interval, tight, trimmed_mean,
                                  visit_order)


def test_trimmed_mean_by_hand():
    assert trimmed_mean(np.array([1.0, 2, 3, 4, 100]), 0.2) == pytest.approx(3.0)  # cuts 1 each
    assert trimmed_mean(np.array([1.0, 2, 3, 4]), 0.2) == pytest.approx(2.5)   # 0.8 -> cuts 0
    assert estimate([]) != estimate([])  # nan


@pytest.mark.parametrize("dist", ["exponential", "lognormal"])
def test_interval_covers_the_true_trimmed_mean(dist):
    """Independent steps from skewed distributions: the 90% interval holds the population's
    trimmed mean in about 90% of samples (a percentile bootstrap runs a little short)."""
    rng = np.random.default_rng(0)
    cfg = ProtocolConfig()
    draw = {"exponential": lambda n: 1 + rng.exponential(0.3, n),
            "lognormal": lambda n: rng.lognormal(0.0, 0.5, n)}[dist]
    truth = float(trimmed_mean(draw(1_000_000), cfg.trim))
    hits = sum(lo <= truth <= hi for lo, hi in (interval(draw(30), cfg) for _ in range(400)))
    assert 0.8 <= hits / 400 <= 0.97


def test_visits_that_move_together_widen_the_interval():
    """Same steps, but ordered so that each visit shares one level (load of that moment):
    resampling visits sees the level changes, so the interval is wider than for steps shuffled
    across visits."""
    rng = np.random.default_rng(1)
    levels = np.repeat(rng.normal(10, 1, 10), 3) + rng.normal(0, 0.05, 30)  # 10 visits of 3
    shuffled = rng.permutation(levels)
    lo_v, hi_v = interval(levels)
    lo_s, hi_s = interval(shuffled)
    assert hi_v - lo_v > 1.2 * (hi_s - lo_s)
    assert interval(levels) == (lo_v, hi_v)  # deterministic


def test_estimate_discounts_bursts():
    quiet = [10.0] * 12
    bursty = quiet[:9] + [30.0, 40.0, 50.0]  # three steps hit by other work
    assert estimate(bursty) < 0.5 * (np.mean(bursty) + 10)
    assert estimate(quiet) == pytest.approx(10.0)


def test_tight_needs_min_steps_and_a_narrow_interval():
    cfg = ProtocolConfig(min_steps=15, rel_width=0.03)
    steady = list(np.linspace(10.0, 10.4, 15))
    assert not tight(steady[:12], cfg)         # too few steps
    assert tight(steady, cfg)                  # within +-2% of 10.2
    noisy = list(np.linspace(10.0, 16.0, 15))
    assert not tight(noisy, cfg)


def test_too_few_visits_give_an_open_interval():
    lo, hi = interval([1.0, 2.0, 3.0], ProtocolConfig())  # one visit of 3
    assert lo == 1.0 and hi == np.inf
    assert all(np.isnan(interval([], ProtocolConfig())))


def test_bad_protocol_settings_are_refused():
    with pytest.raises(ConfigError, match="trim"):
        ProtocolConfig(trim=0.5)
    with pytest.raises(ConfigError, match="max >= min"):
        ProtocolConfig(min_steps=10, max_steps=5)


def test_overlapping_intervals_are_ties():
    assert overlap((1.0, 2.0), (1.9, 3.0)) and not overlap((1.0, 2.0), (2.1, 3.0))
    assert not overlap(None, (1.0, 2.0))  # an exact time ties nothing
    real = Measurement(np.array([1.0, 1.05, 1.5]), np.ones(3, bool), np.zeros((3, 1)),
                       np.array([0.95, 1.0, 1.4]), np.array([1.06, 1.1, 1.6]))
    assert tied(real, 0, 1) and not tied(real, 0, 2)
    sim = Measurement(np.array([1.0, 1.0, 1.5]), np.ones(3, bool), np.zeros((3, 1)))
    assert tied(sim, 0, 1) and not tied(sim, 1, 2)


def test_rounds_alternate_direction():
    assert visit_order([0, 1, 2], 0) == [0, 1, 2]
    assert visit_order([0, 1, 2], 1) == [2, 1, 0]


def test_load_figures():
    probe = LoadProbe()
    sum(i * i for i in range(300_000))  # some CPU of our own
    f = probe.stop()
    assert f.cores >= 1 and 0 <= f.others <= 1 and 0 <= f.steal <= 1 and f.wall_s > 0
    busy = LoadFigures(2, 3.1, 0.4, 0.0, 10.0)
    assert busy.loaded and "other processes 40% of 2 cores" in busy.warning()
    assert not LoadFigures(2, 0.5, 0.02, 0.0, 10.0).loaded


def test_fast_steps_may_take_more_than_max_steps_to_fill_the_minimum_time():
    from gplace.real.protocol import step_limit
    cfg = ProtocolConfig(max_steps=45, min_timed_s=1.0)
    assert step_limit([], cfg) == 45
    assert step_limit([0.1] * 15, cfg) == 45           # 45 steps take 4.5 s
    assert step_limit([0.001] * 15, cfg) == 1000       # 45 would take 0.045 s
    assert step_limit([0.001] * 15, ProtocolConfig(max_steps=45, min_timed_s=0.0)) == 45
