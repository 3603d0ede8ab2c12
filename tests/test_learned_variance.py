"""Version 7's variance (harness/paired/zone.py, issue 46): learned from the run's worker generations, the noise model
a bounded prior, never a fixed between/within ratio; the interval shown is the one that decided.

Each test fails on the defect it is named after (version 6's fixed floor, a model that slows a verdict, a model
trusted against its run, a one-round generation that never decides, an interval that is not the deciding one).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ci.speed.decide.verdict import plan_of
from harness.paired import Round, Verdict, sequential_decision
from harness.paired.noise import BenchmarkNoise, LookNoise, Spread
from harness.paired.plan import ZONE_PLAN, ZONE_PLAN_V6, ZONE_WARM_PLAN, ZONE_WARM_PLAN_V6
from harness.paired.sequential import RoundsNoise
from harness.paired.zone import (
    SOURCE_CONFLICT,
    SOURCE_GENERATIONS,
    SOURCE_POOLED,
    ZoneEdges,
    generation_variance,
    learned_variances,
    model_prediction,
    planned_rounds,
)

SPREAD = Spread(40.0, 17.0, True)
T = 0.007
SW = 0.0005
PER_BENCHMARK = 0.01 / 20
MODEL, NONE = ZONE_PLAN.with_alpha(PER_BENCHMARK), ZONE_WARM_PLAN.with_alpha(PER_BENCHMARK)


def record(effect: float, tau: float, rng: np.random.Generator, n: int = 40, restart: int = 2, sw: float = SW):
    gens = np.arange(n) // restart
    x = math.log1p(effect) + rng.normal(0.0, tau, int(gens[-1]) + 1)[gens] + rng.normal(0.0, sw, n)
    return [Round(100.0, 100.0 * math.exp(v)) for v in x], tuple(int(g) for g in gens)


def decide(rounds, gens, plan, model=None, cadence=2):
    return sequential_decision(rounds, T, plan, RoundsNoise(model, SPREAD, gens, None, cadence))


def test_the_generations_variance_is_the_cluster_robust_one():
    d = np.array([0.001, 0.003, -0.002, 0.0, 0.004])
    gens = [0, 0, 1, 1, 2]  # a last generation of one round counts like any other
    means, sizes = np.array([0.002, -0.001, 0.004]), np.array([2, 2, 1])
    expected = 3 / 2 * float(np.sum(sizes**2 * (means - d.mean()) ** 2)) / 25
    v = generation_variance(d, gens)
    assert v.variance == pytest.approx(expected) and v.df == 2 and v.source == SOURCE_GENERATIONS
    assert not generation_variance(d[:2], gens[:2]).usable  # one generation: no variance of its own


def test_generation_means_that_repeat_exactly_never_claim_no_variance():
    # A replay that drew one recorded generation twice (and a quantized timer) repeats generation means exactly:
    # the variance is the within-generation part at least, and nothing at all when every round is the same.
    d = np.array([-0.0174, -0.0037, -0.0174, -0.0037])
    v = generation_variance(d, [0, 0, 1, 1])
    assert v.variance == pytest.approx(float(np.var(d[:2], ddof=1)) / 4) and v.df == 1
    assert not generation_variance(np.full(4, -0.01), [0, 0, 1, 1]).usable
    # A slowdown of t/2 made of repeated generations is not a regression.
    rounds = [Round(100.0, 100.0 * math.exp(x - T / 2)) for x in (0.001, -0.001) * 6]
    gens = tuple(i // 2 for i in range(12))
    assert decide(rounds, gens, NONE).verdict is not Verdict.REGRESSION


@pytest.mark.parametrize("ratio", [0.0, 1.0, 3.0])
def test_the_generations_variance_is_unbiased_whatever_the_ratio(ratio):
    rng = np.random.default_rng(int(ratio * 10) + 1)
    tau, n, restart = ratio * SW, 12, 2
    truth = SW**2 / n + tau**2 * restart / n
    estimates = []
    for _ in range(4000):
        rounds, gens = record(0.0, tau, rng, n=n, restart=restart)
        estimates.append(generation_variance(np.log([r.ratio for r in rounds]), gens).variance)
    # Unbiased where generations differ; at tau = 0 the within-generation floor errs high (~1.3x), never low.
    if ratio:
        assert np.mean(estimates) == pytest.approx(truth, rel=0.06)
    else:
        assert truth <= np.mean(estimates) <= 1.45 * truth


def test_no_fixed_ratio_between_generations_three_times_the_rounds():
    # Version 6 assumed tau = within / 2 without a model: at tau = 3x within it called a slowdown of t/2 a regression
    # and called a slowdown of t "no change" far beyond its error shares (docs/SPEED_GATE.md, "Version 7").
    # Version 7 learns tau from the generations. A miss is a "not a regression" at -t ("inconclusive" is apart).
    said_fine = (Verdict.NO_CHANGE, Verdict.NOT_REGRESSION, Verdict.IMPROVEMENT)

    def rates(plan):
        rng = np.random.default_rng(7)
        false = sum(decide(*record(-T / 2, 3 * SW, rng), plan).verdict is Verdict.REGRESSION for _ in range(300))
        missed = sum(decide(*record(-T, 3 * SW, rng), plan).verdict in said_fine for _ in range(300))
        return false, missed

    old_false, old_missed = rates(ZONE_WARM_PLAN_V6.with_alpha(PER_BENCHMARK))
    new_false, new_missed = rates(NONE)
    assert old_false + old_missed >= 6, (old_false, old_missed)  # the defect, as recorded
    # Misses: the rule's nominal bound is 1% per benchmark; 6 of 300 or fewer has > 99% probability at 1%.
    assert new_false == 0 and new_missed <= 6, (new_false, new_missed)


def test_one_round_generations_decide_without_a_model():
    rng = np.random.default_rng(3)
    rounds, gens = record(0.0, 0.0002, rng, restart=1)
    d = decide(rounds, gens, NONE, cadence=1)
    assert d.complete and d.verdict in (Verdict.NO_CHANGE, Verdict.NOT_REGRESSION, Verdict.IMPROVEMENT), d.reason
    assert d.rounds_used <= 8
    # Version 6 needed within-generation df, which one-round generations never have.
    v6 = decide(rounds, gens, ZONE_WARM_PLAN_V6.with_alpha(PER_BENCHMARK), cadence=1)
    assert v6.verdict is Verdict.INCONCLUSIVE


@pytest.mark.parametrize(
    "fitted",
    [
        BenchmarkNoise(SW, 30, SW, 12),  # right
        BenchmarkNoise(SW, 30, 1e-8, 2),  # tau fitted as ~0 from three generations
        BenchmarkNoise(SW, 30, 3 * SW, 12),  # tau 3x too large
        BenchmarkNoise(4 * SW, 30, 4 * SW, 12),  # everything 4x too large
        BenchmarkNoise(SW / 4, 30, SW / 4, 12),  # everything 4x too small
    ],
)
def test_a_model_never_needs_more_rounds_than_no_model(fitted):
    rng = np.random.default_rng(11)
    slower = []
    for i in range(150):
        effect = (0.0, -T / 2, -T, -0.75 * T, 0.004)[i % 5]
        rounds, gens = record(effect, SW * (i % 4), rng)
        with_model, without = decide(rounds, gens, MODEL, fitted), decide(rounds, gens, NONE)
        if without.complete and without.verdict is not Verdict.INCONCLUSIVE:
            if not (with_model.complete and with_model.rounds_used <= without.rounds_used):
                slower.append((i, with_model.rounds_used, without.rounds_used))
    assert not slower


def test_a_model_the_generations_contradict_is_dropped_and_said_so():
    # The run's generations differ by 6x the model's between-worker SD: the F test drops the prior.
    look = LookNoise(BenchmarkNoise(SW, 30, SW / 2, 12), SPREAD, cadence=2)
    rng = np.random.default_rng(5)
    rounds, gens = record(0.0, 6 * SW, rng, n=16)
    d = np.log([r.ratio for r in rounds])
    sources = [v.source for v in learned_variances(d, list(gens), look, MODEL)]
    assert sources[0].startswith(SOURCE_CONFLICT) and len(sources) == 1
    # In agreement: pooled first, the generations' own beside it.
    rounds, gens = record(0.0, SW / 2, np.random.default_rng(6), n=16)
    d = np.log([r.ratio for r in rounds])
    assert [v.source for v in learned_variances(d, list(gens), look, MODEL)] == [SOURCE_POOLED, SOURCE_GENERATIONS]


def test_a_between_sd_fitted_as_zero_is_worth_its_generations_not_a_known_zero():
    rich = model_prediction(2, [0, 0], LookNoise(BenchmarkNoise(SW, 30, 0.0, 40), SPREAD, cadence=2), None)
    poor = model_prediction(2, [0, 0], LookNoise(BenchmarkNoise(SW, 30, 0.0, 2), SPREAD, cadence=2), None)
    assert rich.variance == pytest.approx(poor.variance) and poor.df <= 2 < rich.df
    # A generation of its own still carries the generation-mean variance sigma_w^2 / k0, never 0.
    assert poor.variance == pytest.approx(SW**2 / 2)
    none = model_prediction(2, [0, 0], LookNoise(BenchmarkNoise(SW, 30, 0.0, 0), SPREAD, cadence=2), None)
    assert not none.usable  # no between estimate at all: the model cannot predict one generation's mean


def test_the_interval_shown_is_the_one_that_decided():
    rng = np.random.default_rng(9)
    edges = ZoneEdges(T)
    for effect in (0.0, -T, -T / 2, 0.01):
        rounds, gens = record(effect, SW, rng)
        d = decide(rounds, gens, MODEL, BenchmarkNoise(SW, 30, SW, 12))
        est = d.estimate
        assert d.complete and est.bounded and "the interval that decided" in est.method
        if d.verdict is Verdict.REGRESSION and d.forced_error is None:
            assert math.log(est.high) < edges.acceptable  # its upper bound decided
        elif d.forced_error is None:
            assert math.log(est.low) > edges.regression  # its lower bound decided
        if d.verdict is Verdict.NO_CHANGE:
            assert 1 - T / 2 <= est.low and est.high <= 1 + T / 2
        if d.verdict is Verdict.NOT_REGRESSION:
            assert not (1 - T / 2 <= est.low and est.high <= 1 + T / 2)


def test_a_confident_slowdown_inside_the_zone_is_not_called_no_change():
    # Issue 46: -0.4..-0.5% against 0.7% was labelled "no change" by version 6.
    noise = BenchmarkNoise(SW, 30, SW / 2, 12)
    for seed in range(5):
        rounds, gens = record(-0.0045, 0.0, np.random.default_rng(seed))
        d = decide(rounds, gens, MODEL, noise)
        assert d.verdict is Verdict.NOT_REGRESSION and d.estimate.low < 1 - T / 2, d.reason
        v6 = sequential_decision(rounds, T, ZONE_PLAN_V6.with_alpha(PER_BENCHMARK), RoundsNoise(noise, SPREAD, gens))
        assert v6.verdict is Verdict.NO_CHANGE  # the defect, as it was


def test_a_forced_call_keeps_the_false_alarm_side_within_one_more_alpha():
    # Noise too large for 40 rounds at the zone's acceptable edge: any forced "regression" must have its mean below
    # the acceptable edge by one more alpha's quantile, so forced false alarms stay near alpha.
    rng = np.random.default_rng(21)
    false = sum(decide(*record(-T / 2, 0.002, rng), NONE).verdict is Verdict.REGRESSION for _ in range(400))
    assert false <= 2


def test_planned_rounds_grow_with_the_restart_cadence():
    for noise in (BenchmarkNoise(SW, 30, SW, 12), BenchmarkNoise(0.001, 30, 0.0025, 14), BenchmarkNoise(SW, 9, 0.0, 5)):
        look = LookNoise(noise, SPREAD, cadence=4)
        needed = [planned_rounds(look, T, MODEL, r) for r in (1, 2, 4)]
        finite = [n if n is not None else math.inf for n in needed]
        assert finite == sorted(finite), needed


def test_version_7_plans_round_trip_and_version_6_records_keep_their_variance():
    for plan in (MODEL, NONE):
        again = plan_of(plan.to_json())
        assert again.learn and again.look_points == plan.look_points and again.variance == plan.variance
        assert again.shares() == pytest.approx(plan.shares()) and again.prior_df_cap == plan.prior_df_cap
    old = ZONE_PLAN_V6.to_json()
    assert "learn" not in old and not plan_of(old).learn
    assert plan_of(old).to_json() == old


def test_one_round_generations_a_quantized_timer_made_equal_are_floored_by_the_timings_own_variance():
    """An H100's recorded rounds: two worker generations of one round gave log ratios equal to 1e-7 (CUDA events tick in
    ~0.5 us), and at t/2 the generations' variance, near 0 on 1 df, called a regression at look 1 with an interval of
    +-0.02%. Each round's variance from its timings' samples is the floor: the same rounds are then no regression at
    look 1 -- undecided without a model; with one, the tie no longer "contradicts" its prior, and the pooled variance
    says "not a regression" (-0.42%: inside the zone, where either answer is allowed)."""
    from harness.paired.zone import sampling_floor

    tied = math.log1p(-T / 2) - 0.00067  # both generations: t/2 plus a 0.07% draw, to 1e-7
    sampling = 2 * (0.00017**2)  # both sides' medians known to ~0.017% (30 samples, IQR 0.1%)
    bare = [Round(100.0, 100.0 * math.exp(tied)), Round(100.0, 100.0 * math.exp(tied + 1e-7))]
    floored = [Round(r.base, r.head, sampling_var=sampling) for r in bare]
    model = BenchmarkNoise(within_sd=0.0004, within_df=3, between_sd=0.0002, between_df=2.0, rounds=8, runs=1)
    for plan, entry in ((NONE, None), (MODEL, model)):
        assert decide(bare, (0, 1), plan, entry).verdict is Verdict.REGRESSION  # the defect, kept visible
        d = decide(floored, (0, 1), plan, entry)
        assert d.verdict is not Verdict.REGRESSION and (d.complete is (entry is not None))
    assert sampling_floor([sampling, sampling]) == pytest.approx(sampling / 2)
    assert sampling_floor([sampling, None]) == 0.0  # one round unknown: no floor
    v = generation_variance(np.array([tied, tied + 1e-7]), [0, 1], sampling_floor([sampling, sampling]))
    assert v.variance == pytest.approx(sampling / 2) and v.df == 1


def test_a_timings_variance_is_its_medians():
    """timing_variance: (pi/2) s^2 / n of normal samples (on the log scale), and the tick where half the samples repeat
    (MAD 0)."""
    from harness.paired.rounds import timing_variance

    rng = np.random.default_rng(11)
    sd, n = 0.001, 51
    var = [timing_variance(list(0.01 * np.exp(rng.normal(0.0, sd, n)))) for _ in range(400)]
    medians = [float(np.median(rng.normal(0.0, sd, n))) for _ in range(4000)]
    assert np.mean(var) == pytest.approx(np.var(medians), rel=0.2)
    tick = 5e-7
    repeated = [0.0096] * 30 + [0.0096 + tick] * 10 + [0.0096 - tick] * 10
    assert timing_variance(repeated) == pytest.approx((tick / 0.0096) ** 2 / 12, rel=0.01)
    assert timing_variance([0.01, 0.01]) is None and timing_variance([0.01, -1.0, 0.02]) is None


def test_a_gate_records_rounds_carry_their_timings_variance_into_the_decision():
    """ci.speed.decide.exclusion reads each side's recorded samples (samples_s) into the round's sampling variance; a
    record without samples (older records) gives none, and its decisions are as before (no floor)."""
    from ci.speed.decide.exclusion import ExclusionRule, pair_sampling_var, paired_rounds
    from harness.paired.rounds import timing_variance

    rng = np.random.default_rng(3)
    samples = [list(0.0096 * np.exp(rng.normal(0.0, 0.001, 40))) for _ in range(2)]
    base, head = ({"tflops": 114.8, "samples_s": s} for s in samples)
    assert pair_sampling_var(base, head) == pytest.approx(timing_variance(samples[0]) + timing_variance(samples[1]))
    assert pair_sampling_var({"tflops": 114.8}, head) is None
    record = {"index": 0, "order": ["base", "head"], "processes": []}
    for side, rec in (("base", base), ("head", {**head, "worker_generation": 0})):
        record["processes"].append({"side": side, "records": {"b": rec}})
    (paired,) = paired_rounds([record], "b", "base", "head", ExclusionRule())
    assert paired.round.sampling_var == pytest.approx(pair_sampling_var(base, head))
    assert Round.from_json(paired.round.to_json()) == paired.round  # the record keeps it
