"""The calibration report's agreement figures: Kendall's tau-b, Spearman's rho, the median
relative error, real-vs-real tau (no TensorFlow run)."""

import itertools

import numpy as np
import pytest

from gplace.calibration_report import kendall_tau, median_rel_error, repeat_tau, spearman_rho


def brute_tau_b(x, y):
    c = d = tx = ty = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        sx, sy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
        c += sx * sy > 0
        d += sx * sy < 0
        tx += sx == 0 and sy != 0
        ty += sy == 0 and sx != 0
    n0 = len(x) * (len(x) - 1) / 2
    ties_x = sum(np.sign(x[i] - x[j]) == 0 for i, j in itertools.combinations(range(len(x)), 2))
    ties_y = sum(np.sign(y[i] - y[j]) == 0 for i, j in itertools.combinations(range(len(x)), 2))
    return (c - d) / np.sqrt((n0 - ties_x) * (n0 - ties_y))


def test_kendall_and_spearman_by_hand():
    x, y = [1, 2, 3, 4, 5], [2, 1, 4, 3, 5]
    assert kendall_tau(x, y) == pytest.approx(0.6)          # 8 concordant, 2 discordant of 10
    assert spearman_rho(x, y) == pytest.approx(1 - 6 * 4 / (5 * 24))  # sum d^2 = 4
    assert kendall_tau(x, x[::-1]) == pytest.approx(-1)
    assert kendall_tau([1, 1, 2], [1, 2, 3]) == pytest.approx(2 / np.sqrt(2 * 3))  # tau-b ties
    assert spearman_rho([2, 1, 2], [3, 1, 2]) == pytest.approx(np.sqrt(3) / 2)


def test_kendall_matches_brute_force_with_ties():
    rng = np.random.default_rng(0)
    for _ in range(20):
        x, y = rng.integers(0, 4, 9).astype(float), rng.integers(0, 4, 9).astype(float)
        if len(set(x)) > 1 and len(set(y)) > 1:
            assert kendall_tau(x, y) == pytest.approx(brute_tau_b(x, y))


def test_median_rel_error():
    assert median_rel_error([1.1, 2.0, 2.4], [1.0, 2.0, 3.0]) == pytest.approx(0.1)


def test_repeat_tau_compares_the_first_two_repeats():
    r = np.array([[1.0, 2.0, 3.0, 4.0, np.inf], [1.1, 2.1, 2.9, 4.2, 5.0], [4, 3, 2, 1, 0]])
    assert repeat_tau(r) == pytest.approx(1.0)  # the infeasible one is left out
    assert np.isnan(repeat_tau(r[:1]))
