"""harness.changepoints on series whose change points are known."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from harness import changepoints as cp


def _brute_q(x: np.ndarray, tau: int) -> float:
    """Matteson & James's Q-hat written from the paper's sums, for checking the vectorized one."""
    left, right = x[:tau], x[tau:]
    a, b = len(left), len(right)
    cross = sum(abs(i - j) for i in left for j in right) * 2 / (a * b)
    within_left = sum(abs(i - k) for i, k in itertools.combinations(left, 2)) * 2 / (a * (a - 1))
    within_right = sum(abs(i - k) for i, k in itertools.combinations(right, 2)) * 2 / (b * (b - 1))
    return a * b / len(x) * (cross - within_left - within_right)


def _series(levels, per_commit=10, noise=0.01, within=0.01, seed=1):
    rng = np.random.default_rng(seed)
    return [level * (1 + rng.normal(0, noise)) * (1 + rng.normal(0, within, per_commit)) for level in levels]


def test_energy_statistic_matches_the_papers_sums():
    x = np.random.default_rng(3).normal(size=11)
    q, tau = cp.best_split(x)
    expected = {t: _brute_q(x, t) for t in range(2, 10)}
    assert tau == max(expected, key=expected.get)
    assert q == pytest.approx(expected[tau])


def test_a_clear_drop_is_a_regression_at_its_commit():
    series = _series([100.0] * 8 + [90.0] * 8)
    [change] = cp.detect(series)
    assert change.index == 8 and change.direction == cp.REGRESSION
    assert change.relative_change == pytest.approx(-0.10, abs=0.01)
    low, high = change.interval
    assert low < change.relative_change < high and high < 0
    assert change.p_value <= change.level


def test_a_gain_is_an_improvement_and_lower_is_better_reverses():
    series = _series([100.0] * 7 + [106.0] * 7)
    [gain] = cp.detect(series)
    assert gain.direction == cp.IMPROVEMENT and gain.index == 7
    [as_time] = cp.detect(series, higher_is_better=False)
    assert as_time.direction == cp.REGRESSION


@pytest.mark.parametrize("test, run", [(cp.T_TEST, 4), (cp.PERMUTATION, 8)])
def test_two_steps_are_both_found(test, run):
    series = _series([100.0] * run + [97.0] * run + [91.0] * run, noise=0.003, within=0.005)
    changes = cp.detect(series, test=test)
    assert [c.index for c in changes] == [run, 2 * run]
    assert all(c.direction == cp.REGRESSION for c in changes)
    assert changes[0].after == (run, 2 * run) and changes[1].before == (run, 2 * run)


@pytest.mark.parametrize("test", [cp.T_TEST, cp.PERMUTATION])
def test_a_flat_noisy_series_has_no_change(test):
    assert cp.detect(_series([100.0] * 30, noise=0.02, seed=5), test=test) == []


@pytest.mark.parametrize("test", [cp.T_TEST, cp.PERMUTATION])
def test_one_outlier_commit_is_not_a_change(test):
    levels = [100.0] * 20
    levels[9] = 80.0
    assert cp.detect(_series(levels, noise=0.005, seed=2), test=test) == []


def test_a_permutation_test_cannot_cut_a_four_plus_four_segment():
    # The exact test's floor: 2 / C(8, 4) = 0.029 > 0.01, however large the step (the module doc says so).
    series = _series([100.0] * 4 + [50.0] * 4, noise=0.001)
    assert cp.detect(series, test=cp.PERMUTATION) == []
    assert [c.index for c in cp.detect(series, test=cp.T_TEST)] == [4]


def test_the_result_is_seeded():
    series = _series([100.0] * 8 + [98.5] * 8, seed=9)
    assert cp.detect(series, seed=4) == cp.detect(series, seed=4)


def test_many_noisy_samples_widen_the_interval_not_the_location():
    quiet = _series([100.0] * 8 + [95.0] * 8, within=0.001, seed=7)
    noisy = _series([100.0] * 8 + [95.0] * 8, within=0.05, seed=7)
    [a], [b] = cp.detect(quiet), cp.detect(noisy)
    assert (b.interval[1] - b.interval[0]) > (a.interval[1] - a.interval[0])


def test_short_series_and_empty_commits():
    assert cp.detect([[1.0], [2.0], [1.0]]) == []
    with pytest.raises(ValueError):
        cp.detect([[1.0], [float("nan")], [1.0], [1.0]])
    with pytest.raises(ValueError):
        cp.detect([[1.0]] * 5, test="z")


def _rates_script():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "docs" / "data" / "changepoint_rates.py"
    spec = importlib.util.spec_from_file_location("changepoint_rates", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_measured_rates_false_positives_near_alpha_and_large_steps_found():
    """The published table's generator, on fewer trials: the claims docs/CHANGE_POINTS.md makes must hold."""
    rates = _rates_script()
    flat = rates.rate(300, cp.T_TEST, 24, seed=11)
    assert flat["flagged"] <= 0.03  # alpha 0.01; 0.03 is beyond the binomial's 99.9% for 300 trials
    with_outliers = rates.rate(200, cp.T_TEST, 24, seed=12, outliers=True)
    assert with_outliers["flagged"] <= 0.05
    big = rates.rate(100, cp.T_TEST, 24, seed=13, step_sigma=5.0)
    assert big["detected"] >= 0.95 and big["exact"] >= 0.85
    small = rates.rate(100, cp.T_TEST, 24, seed=14, step_sigma=0.5)
    assert small["detected"] <= 0.2  # a half-sigma step is below what 24 commits resolve: the table says so


def test_the_rates_table_renders_every_row():
    rates = _rates_script()
    document = {"rows": [{"test": "t", "scenario": "flat", "commits": 12, "flagged": 0.01, "detected": 0, "exact": 0},
                         {"test": "t", "scenario": "step 1 sigma", "commits": 12, "flagged": 0.5, "detected": 0.4, "exact": 0.3}]}
    table = rates.markdown_table(document)
    assert "| flat | flagged | 1.0% |" in table and "40.0% (30.0%)" in table
