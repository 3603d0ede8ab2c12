"""A/A calibration: a benchmark's noise from one commit against itself, and the thresholds it supports.

The planning formulas, with and without a runner's noise model, their derivation and how they were checked
(tests/test_paired_stats.py, tests/test_noise_model.py): docs/SPEED_GATE.md, "Calibration".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize, special, stats

from harness.paired.interval import Estimate, log_ratios, look_interval, t_quantile
from harness.paired.noise import LookNoise, clustering, satterthwaite
from harness.paired.rounds import Round
from harness.paired.sequential import WARM_PLAN, SequentialPlan


def threshold_for(ratio_sd: float, plan: SequentialPlan, alpha: float = 0.01) -> float:
    """Smallest threshold at which an A/A comparison says "no change" w.p. ``>= 1 - alpha`` at ``max_rounds``:
    ``exp((q(1 - a_miss/2) + q(1 - alpha/2)) se) - 1`` (docs/SPEED_GATE.md, "Calibration")."""
    n = plan.max_rounds
    q = t_quantile(plan.per_look_miss_confidence, n - 1) + float(stats.t.ppf(1 - alpha / 2, n - 1))
    return math.expm1(q * (ratio_sd / math.sqrt(n)))


def resolvable_effect(ratio_sd: float, threshold: float, plan: SequentialPlan, power: float = 0.99) -> float:
    """Smallest slowdown (a fraction of TFLOPS) flagged as regression w.p. ``>= power`` by ``max_rounds``:
    ``1 - (1 - t) exp(-(q(1 - a/2) + q(power)) se)``; between ``t`` and it, regression sometimes."""
    n = plan.max_rounds
    q = t_quantile(plan.per_look_confidence, n - 1) + float(stats.t.ppf(power, n - 1))
    return -math.expm1(math.log1p(-threshold) - q * (ratio_sd / math.sqrt(n)))


@dataclass(frozen=True)
class Calibration:
    """Noise of one benchmark from A/A rounds (one commit against itself), and what the gate resolves."""

    n_rounds: int
    n_excluded: int
    ratio_sd: float  # sample SD of the per-round log ratios
    ratio_sd_upper: float  # its one-sided 95% upper bound, which the planning figures use
    ratio_sd_robust: float  # 1.4826 MAD; far below ratio_sd means outlier rounds
    noise_cv: float  # CV of the single-process TFLOPS (what one process is worth without pairing)
    aa_estimate: Estimate
    threshold: float  # threshold_for(ratio_sd_upper): the suggested threshold
    min_resolvable_effect: float  # resolvable_effect at that threshold, with power 1 - alpha
    plan: SequentialPlan
    alpha: float

    def to_json(self) -> dict[str, Any]:
        return {
            "n_rounds": self.n_rounds,
            "n_excluded": self.n_excluded,
            "ratio_sd": self.ratio_sd,
            "ratio_sd_upper": self.ratio_sd_upper,
            "ratio_sd_robust": self.ratio_sd_robust,
            "noise_cv": self.noise_cv,
            "aa_estimate": self.aa_estimate.to_json(),
            "suggested_threshold": self.threshold,
            "min_resolvable_effect": self.min_resolvable_effect,
            "plan": self.plan.to_json(),
            "alpha": self.alpha,
        }

    def summary(self) -> str:
        return (
            f"A/A: {self.n_rounds} rounds ({self.n_excluded} excluded), process CV {self.noise_cv:.3%}, "
            f"round ratio SD {self.ratio_sd:.3%} (95% upper {self.ratio_sd_upper:.3%}); "
            f"threshold >= {self.threshold:.3%} for 'no change' w.p. {1 - self.alpha:.0%}; "
            f"resolves a {self.min_resolvable_effect:.3%} slowdown w.p. {1 - self.alpha:.0%} "
            f"in {self.plan.max_rounds} rounds"
        )


def calibrate(aa_rounds: Sequence[Round], plan: SequentialPlan = WARM_PLAN, alpha: float = 0.01) -> Calibration:
    """Calibrate a benchmark from A/A rounds; ``alpha`` is the miss rate the suggestions allow."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1) (got {alpha})")
    usable = [r for r in aa_rounds if r.excluded is None]
    n = len(usable)
    if n < 3:
        raise ValueError(f"calibration needs >= 3 usable A/A rounds (got {n} of {len(aa_rounds)})")
    d = log_ratios(r.ratio for r in usable)
    sd = float(np.std(d, ddof=1))
    sd_upper = sd * math.sqrt((n - 1) / float(stats.chi2.ppf(0.05, n - 1)))
    robust = 1.4826 * float(np.median(np.abs(d - np.median(d))))
    tflops = np.asarray([x for r in usable for x in (r.base, r.head)], dtype=float)
    cv = float(np.std(tflops, ddof=1) / np.mean(tflops))
    threshold = threshold_for(sd_upper, plan, alpha)
    return Calibration(
        n_rounds=n,
        n_excluded=len(aa_rounds) - n,
        ratio_sd=sd,
        ratio_sd_upper=sd_upper,
        ratio_sd_robust=robust,
        noise_cv=cv,
        aa_estimate=look_interval(np.exp(d), plan.per_look_confidence),
        threshold=threshold,
        # A threshold of 100% or more (noise far beyond any band) leaves no slowdown it can resolve.
        min_resolvable_effect=resolvable_effect(sd_upper, threshold, plan, 1 - alpha) if threshold < 1 else math.nan,
        plan=plan,
        alpha=alpha,
    )


# Planning with a runner's noise model (issue 29).


def _planned_parts(look: LookNoise, n: int, restart_every: int) -> tuple[float, float, int, float]:
    """(the model's within share sigma_w^2 / n, its between share tau^2 C, the run's own within df, the look's df)
    for an unchanged run of n rounds, a restart every ``restart_every``."""
    generations = [i // restart_every for i in range(n)]
    own_df = n - len(set(generations))
    within, between = look.noise.within_sd**2 / n, look.noise.between_sd**2 * clustering(generations)
    return within, between, own_df, satterthwaite(within, look.prior_df + own_df, between, look.between_df)[1]


RUN_GRID = 512  # quantiles of a run's variance factor the planning averages over (midpoints in probability)


def _over_runs(probability: Callable[[np.ndarray], np.ndarray], d0: float) -> float:
    """``E[probability(lam)]`` over a run's variance factor ``lam^2 ~ d0 / chi2_d0`` (the model's spread), by the
    midpoint rule at RUN_GRID quantiles of ``lam``."""
    if d0 >= 1e5:
        return float(probability(np.ones(1))[0])
    u = stats.chi2.ppf((np.arange(RUN_GRID) + 0.5) / RUN_GRID, d0)
    return float(np.mean(probability(np.sqrt(d0 / u))))


def _half_width(q: float, within: float, between: float, d0: float, own_df: int, lam: np.ndarray) -> np.ndarray:
    """The look's half-width in a run whose variance is lam^2 times the model's: its moderated within share follows."""
    return q * np.sqrt(within * (d0 + own_df * lam * lam) / (d0 + own_df) + between)


def model_threshold(
    look: LookNoise, plan: SequentialPlan, by_rounds: int, restart_every: int, alpha: float = 0.01
) -> float:
    """Smallest threshold at which an unchanged head says "no change" w.p. ``>= 1 - alpha`` at look ``by_rounds``,
    averaged over how a run strays from the model (docs/SPEED_GATE.md, "With the noise model")."""
    at = [k for k, m in enumerate(plan.look_points) if m <= by_rounds]  # the last look by then
    if not at:
        raise ValueError(f"the plan's first look is at {plan.look_points[0]} rounds, after {by_rounds}")
    k = at[-1]
    n = plan.look_points[k]
    within, between, own, df = _planned_parts(look, n, restart_every)
    q, d0, sd = t_quantile(plan.miss_confidence_at(k), df), look.prior_df, math.sqrt(within + between)

    def no_change(t_log: float) -> float:
        def p(lam: np.ndarray) -> np.ndarray:
            room = t_log - _half_width(q, within, between, d0, own, lam)
            return np.maximum(0.0, 2.0 * special.ndtr(room / (lam * sd)) - 1.0)

        return _over_runs(p, d0)

    hi = (q + 1.0) * sd
    while no_change(hi) < 1 - alpha:
        hi *= 2.0
        if hi > 10.0:
            return math.inf
    return math.expm1(float(optimize.brentq(lambda x: no_change(x) - (1 - alpha), 0.0, hi, xtol=1e-9)))


def model_resolvable_effect(
    look: LookNoise, threshold: float, plan: SequentialPlan, restart_every: int, power: float = 0.95
) -> float:
    """Smallest slowdown (a fraction of TFLOPS) flagged as regression w.p. ``>= power`` by the last look, under
    the noise model, averaged over the runs' spread as :func:`model_threshold`."""
    n = plan.max_rounds
    within, between, own, df = _planned_parts(look, n, restart_every)
    q, d0, sd = t_quantile(plan.per_look_confidence, df), look.prior_df, math.sqrt(within + between)
    edge = -math.log1p(-threshold)

    def flagged(d: float) -> float:
        def p(lam: np.ndarray) -> np.ndarray:
            return special.ndtr((d - edge - _half_width(q, within, between, d0, own, lam)) / (lam * sd))

        return _over_runs(p, d0)

    hi = edge + (q + 3.0) * sd
    while flagged(hi) < power:
        hi *= 2.0
        if hi > 10.0:
            return math.nan
    return -math.expm1(-float(optimize.brentq(lambda d: flagged(d) - power, edge, hi, xtol=1e-9)))
