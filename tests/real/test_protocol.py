"""The measurement protocol's statistics (no TensorFlow): the quantile interval's coverage, the
stopping rule, ties, the visiting order, and the load figures."""

from math import comb

import numpy as np
import pytest

from gplace.errors import ConfigError
from gplace.measure import Measurement, tied
from gplace.real.load import LoadFigures, LoadProbe
from gplace.real.protocol import (ProtocolConfig, estimate, interval, order_interval, overlap,
                                  tight, visit_order)


def test_order_interval_by_hand():
    # n = 9, q = 0.25: P(B = 1..5) = 0.9149 >= 0.9, P(B = 1..4) = 0.8759 is not enough
    assert order_interval(9, 0.25, 0.9) == (0, 5)
    assert order_interval(6, 0.25, 0.9) is None  # P(B = 0) = 0.178: even [min, max] falls short
    # the median of 9: (1, 7) and (0, 6) both span 6 ranks; (1, 7) holds more mass (0.961)
    assert order_interval(9, 0.5, 0.9) == (1, 7)
    lo, hi = order_interval(30, 0.25, 0.9)
    mass = sum(comb(30, k) * 0.25 ** k * 0.75 ** (30 - k) for k in range(lo + 1, hi + 1))
    assert mass >= 0.9


@pytest.mark.parametrize("dist", ["exponential", "lognormal"])
def test_interval_covers_the_true_quantile(dist):
    """Distribution-free: over many skewed samples the interval holds the quantile >= 90%."""
    rng = np.random.default_rng(0)
    cfg = ProtocolConfig()
    draw = {"exponential": lambda n: 1 + rng.exponential(0.3, n),
            "lognormal": lambda n: rng.lognormal(0.0, 0.5, n)}[dist]
    truth = np.quantile(draw(1_000_000), cfg.quantile)
    hits = 0
    for _ in range(2000):
        lo, hi = interval(draw(15), cfg)
        hits += lo <= truth <= hi
    assert hits / 2000 >= 0.88  # 0.9 nominal; exact coverage is >= 0.9, sampling error aside


def test_estimate_is_a_low_quantile_that_ignores_bursts():
    quiet = [10.0] * 12
    bursty = quiet[:9] + [30.0, 40.0, 50.0]  # three steps hit by other work
    cfg = ProtocolConfig()
    assert estimate(bursty, cfg) == pytest.approx(10.0)
    assert np.median(bursty) == pytest.approx(10.0) and np.mean(bursty) > 15


def test_tight_needs_min_steps_and_a_narrow_interval():
    cfg = ProtocolConfig(min_steps=9, rel_width=0.03)
    steady = list(np.linspace(10.0, 10.4, 12))
    assert not tight(steady[:6], cfg)          # too few steps
    assert tight(steady, cfg)                  # +-2% around 10
    noisy = list(np.linspace(10.0, 16.0, 12))
    assert not tight(noisy, cfg)


def test_too_few_steps_give_an_open_interval():
    lo, hi = interval([1.0, 2.0], ProtocolConfig())
    assert lo == 1.0 and hi == np.inf
    assert all(np.isnan(interval([], ProtocolConfig())))


def test_bad_protocol_settings_are_refused():
    with pytest.raises(ConfigError, match="quantile"):
        ProtocolConfig(quantile=1.5)
    with pytest.raises(ConfigError, match="max >= min"):
        ProtocolConfig(min_steps=10, max_steps=5)


def test_overlapping_intervals_are_ties():
    assert overlap((1.0, 2.0), (1.9, 3.0)) and not overlap((1.0, 2.0), (2.1, 3.0))
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
