"""Issue 46, deliver 2: the between-worker variance pooled over the benchmarks (harness.paired.noise_pool through
harness.paired.noise_fit.fit): it recovers a planted between/within structure from short calibrations, heavy tails
too; its effective df grows with the number of benchmarks; few generations are marked weak; old model files load."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from harness.paired.noise import BenchmarkNoise
from harness.paired.noise_fit import MIN_GENERATIONS, RunRounds, fit
from harness.paired.noise_pool import BetweenParts, pool, shrink

PROJECT = Path(__file__).resolve().parents[1]


def _calibration(seed, benches, rounds, ratio, *, restart=2, runs=1, tails=None, spread=0.0):
    """A/A rounds of ``benches`` benchmarks (within SDs from 0.04% to 1.5%, as the H200's), each with tau^2 =
    ``ratio`` x sigma_w^2 (times a log-normal of SD ``spread``); ``tails``: Student-t rounds of that df."""
    rng = np.random.default_rng(seed)
    data = {}
    for j in range(benches):
        sw = math.exp(rng.uniform(math.log(4e-4), math.log(1.5e-2)))
        tau = sw * math.sqrt(ratio * math.exp(rng.normal(0.0, spread)))
        bench_runs = []
        for r in range(runs):
            gens = tuple(i // restart for i in range(rounds))
            offsets = rng.normal(0.0, tau, size=gens[-1] + 1)
            if tails is None:
                e = rng.normal(0.0, sw, size=rounds)
            else:
                e = rng.standard_t(tails, size=rounds) * sw / math.sqrt(tails / (tails - 2))
            bench_runs.append(RunRounds(f"r{r}", tuple(float(offsets[g] + e[i]) for i, g in enumerate(gens)), gens))
        data[f"b{j:02d}"] = bench_runs
    return fit(data)


@pytest.mark.parametrize("ratio", [0.25, 1.0, 4.0])
def test_the_pool_recovers_a_planted_between_within_ratio(ratio):
    # 20 benchmarks, one calibration of 16 rounds with a restart every 2 (the default's 8 generations), 8 seeds.
    found = [_calibration(seed, 20, 16, ratio).pool.ratio for seed in range(8)]
    assert np.median(found) == pytest.approx(ratio, rel=0.35)
    # Each benchmark's between SD is the pool's ratio times its own within variance, not one constant ratio.
    fitted = _calibration(1, 20, 16, ratio)
    ratios = [e.between_sd**2 / e.within_sd**2 for e in fitted.benchmarks.values()]
    assert min(ratios) < max(ratios)


def test_the_pool_recovers_it_under_heavy_tails_and_a_spread_of_ratios():
    found = [_calibration(seed, 20, 16, 1.0, tails=4, spread=0.5).pool.ratio for seed in range(8)]
    assert 0.5 < np.median(found) < 2.0


def test_no_between_variance_planted_gives_a_small_ratio_not_a_constant():
    found = [_calibration(seed, 20, 16, 0.0).pool.ratio for seed in range(6)]
    assert np.median(found) < 0.15


def test_a_runner_with_no_between_worker_variance_gets_a_model_that_decides():
    """The H100's second calibration (2026-12-07, 8 rounds, 4 generations, 26 benchmarks): the pool put the ratio at
    its floor and every benchmark's posterior at 0, and a zero came out as "unknown" (between df 0): a model with no
    prediction of a generation's mean, every benchmark "cannot be decided". A zero keeps its generations' df."""
    from harness.paired.noise import LookNoise, Spread
    from harness.paired.plan import ZONE_PLAN
    from harness.paired.zone import model_prediction, planned_rounds

    recorded = json.loads((PROJECT / "docs/data/gpu_day_one_h100b/calibrate/model.json").read_text())["runs"][0]
    fitted = fit(
        {
            b: [RunRounds("h100", tuple(r["log_ratios"]), tuple(r["generations"]))]
            for b, r in recorded["benchmarks"].items()
        }
    )
    entries = list(fitted.benchmarks.values())
    assert fitted.pool is not None and fitted.pool.ratio < 1e-3 and len(entries) == 26
    zeros = [e for e in entries if e.between_sd == 0.0]
    assert zeros, "the planted no-between case must reach the pool's zero"
    # Its df: the benchmark's own generation means' (4 generations, 3 df), not the pool's 78 -- with those, one
    # benchmark's own tau of 3 sigma_w hid behind the others' zero (docs/data/learned_variance_rates_zero.json).
    assert all(e.between_df == 3.0 < fitted.pool.df for e in zeros)
    spread = Spread()
    for e in entries:
        look = LookNoise(e, spread, cadence=2)
        assert model_prediction(2, [0, 1], look, 12.0).usable
        # A benchmark 20x quieter than its threshold's half-zone is decided in a few rounds, not "cannot".
        quiet = LookNoise(BenchmarkNoise(0.0002, e.within_df, e.between_sd, e.between_df), spread, cadence=2)
        assert planned_rounds(quiet, 0.007, ZONE_PLAN, 1) is not None
    # Without a pool (no benchmark with two generations) nothing is known of tau: still no prediction.
    lone = shrink(BetweenParts(1.0, 3.0, 0.0, 0.0, 1.0), None)
    assert lone.between_df == 0.0 and lone.between_var == 0.0


def test_the_effective_between_df_grows_with_the_number_of_benchmarks():
    def median_df(benches):
        return np.median(
            [
                np.median([e.between_df for e in _calibration(seed, benches, 16, 1.0).benchmarks.values()])
                for seed in range(6)
            ]
        )

    few, many = median_df(3), median_df(24)
    assert many > few and many > 4  # the own generation means' 7 df have ~1.4 df of tau^2 at this ratio
    fitted = _calibration(0, 24, 16, 1.0)
    assert all(e.between_df > 0 and e.between_sd > 0 for e in fitted.benchmarks.values())


def test_a_short_calibration_gives_usable_df_where_one_benchmark_alone_has_almost_none():
    # Issue 46's short calibration: 6 rounds, 3 generations. One benchmark's own moment estimate of tau^2 has
    # 2 / (2 (1 + 2 rho)^2 / (2 (2 rho)^2) + 2 / (3 (2 rho)^2)) ~ 0.4 df at rho = 1 (its generation means' 2 df).
    parts = BetweenParts(1.0, 3.0, 3.0, 2.0, 2.0)  # F = 3: E[F] at rho = 1
    own_df = 2.0 / (2 * 3.0**2 / (2 * 4.0) + 2 / (3 * 4.0))
    fitted = _calibration(0, 20, 6, 1.0)
    pooled = np.median([e.between_df for e in fitted.benchmarks.values()])
    assert pooled > 2 * own_df
    assert shrink(parts, pool({"b": parts})).between_df > 0


def test_few_generations_are_weak_and_the_file_says_so():
    rng = np.random.default_rng(5)
    runs = {
        "two_gens": [RunRounds("r", tuple(rng.normal(0, 1e-3, 4)), (0, 0, 1, 1))],
        "four_gens": [RunRounds("r", tuple(rng.normal(0, 1e-3, 8)), (0, 0, 1, 1, 2, 2, 3, 3))],
    }
    fitted = fit(runs)
    weak, fine = fitted.benchmarks["two_gens"], fitted.benchmarks["four_gens"]
    assert weak.weak and weak.generations == 2 < MIN_GENERATIONS and not fine.weak and fine.generations == 4
    assert weak.to_json()["weak"] is True and "weak" not in fine.to_json()
    assert any("weak" in note and "two_gens" in note for note in fitted.notes)
    assert BenchmarkNoise.from_json(weak.to_json()) == weak


def test_an_entry_from_before_issue_46_loads_and_writes_back_the_same():
    committed = json.loads((PROJECT / "ci/speed_noise_h200.json").read_text())["benchmarks"]
    for entry in committed.values():
        noise = BenchmarkNoise.from_json(entry)
        assert not noise.weak and noise.generations == 0
        assert noise.to_json() == {**entry, "between_df": float(entry["between_df"])}
    with pytest.raises(ValueError, match="weak"):
        BenchmarkNoise.from_json({"within_sd": 0.001, "within_df": 3, "weak": "yes"})


def test_a_generation_means_df_keeps_the_within_df_where_tau_is_small():
    from harness.paired.noise_pool import generation_mean_df

    assert generation_mean_df(0.001, 9, 0.0, 0.0, 2) == 9.0
    small = generation_mean_df(0.001, 9, 0.0002, 2.0, 2)  # tau^2 a twelfth of sigma_w^2 / 2
    assert 8 < small < 11  # Satterthwaite: a small independent part adds a little
    large = generation_mean_df(0.001, 9, 0.003, 2.0, 2)  # tau dominates: its df
    assert 2 < large < 2.5
