"""Version 6's decision (issue 37): one question per benchmark, an indifference zone, a last look that decides.

On the log scale with threshold ``t``: regression when ``m + q(alpha_k, df) s < log(1 - t/2)``, not a regression when
``m - q(beta_k, df) s > log(1 - t)``, else the next look; the last look decides at the zone's midpoint unless its error
is above ``plan.forced_limit``. The variance and the first rounds left out: docs/SPEED_GATE.md, "Version 6: the zone".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from harness.paired.interval import Estimate
from harness.paired.noise import LookNoise, clustering, generation_sizes, satterthwaite, within_ss
from harness.paired.plan import SequentialPlan

ZONE_METHOD = "mean of log ratios; one-sided t bounds against the zone [1 - t, 1 - t/2] (version 6)"

SOURCE_MODEL = "model"
SOURCE_FALLBACK = "rounds (the run is noisier than the model)"
SOURCE_FALLBACK_NO_DF = "model (the run is noisier than the model, but its rounds have no within-generation df)"
SOURCE_BENCH = "rounds (this benchmark is noisier than the model)"
SOURCE_NO_ENTRY = "rounds (no model entry)"
SOURCE_ROUNDS = "rounds"


@dataclass(frozen=True)
class ZoneEdges:
    """The zone of one threshold on the log scale."""

    threshold: float

    @property
    def regression(self) -> float:
        return math.log1p(-self.threshold)

    @property
    def acceptable(self) -> float:
        return math.log1p(-self.threshold / 2.0)

    @property
    def improvement(self) -> float:
        return math.log1p(self.threshold / 2.0)

    @property
    def midpoint(self) -> float:
        return 0.5 * (self.regression + self.acceptable)

    @property
    def gap(self) -> float:
        return self.acceptable - self.regression


@dataclass(frozen=True)
class LookVariance:
    """The variance of a look's mean log ratio, its df, and where it came from (Decision.variance)."""

    variance: float
    df: float
    source: str

    @property
    def usable(self) -> bool:
        return math.isfinite(self.variance) and self.variance > 0 and self.df > 0


def _own_within(ss: float, d_w: int) -> tuple[float, float]:
    return (ss / d_w, float(d_w)) if d_w >= 1 else (math.inf, 0.0)


def _combine(
    within: float, within_df: float, n: int, generations: Sequence[int], tau2: float | None, tau_df: float, floor: float
) -> tuple[float, float]:
    """``within / n`` plus the between share.

    A model's positive between-worker SD (with its df) is used as fitted; none, or one fitted as 0 (the fit truncates at
    0), is replaced by the floor, ``floor * sqrt(within)``, which scales with the within estimate and so shares its df.
    """
    c = clustering(generations)
    if tau2 is None or tau2 <= 0 or tau_df <= 0:
        return within * (1.0 / n + floor * floor * c), within_df
    return satterthwaite(within / n, within_df, tau2 * c, tau_df)


def zone_variance(
    d: np.ndarray, generations: Sequence[int], look: LookNoise | None, plan: SequentialPlan
) -> LookVariance:
    """The variance of the mean of ``d`` (log ratios, one worker generation label each) for a zone look."""
    n = int(d.size)
    if n == 0:
        return LookVariance(math.inf, 0.0, SOURCE_ROUNDS)
    ss, d_w = within_ss(d, generations)
    own = _own_within(ss, d_w)
    if look is None:
        (within, df), source = own, SOURCE_NO_ENTRY if plan.variance == "model" else SOURCE_ROUNDS
        tau2, tau_df = None, 0.0
    else:
        sw2 = look.noise.within_sd**2
        tau2, tau_df = look.noise.between_sd**2, look.between_df
        own_check = plan.bench_check_level is not None and d_w >= 2 and not look.fallback
        if own_check and ss / d_w > sw2 * float(stats.f.isf(plan.bench_check_level, d_w, look.prior_df)):
            (within, df), source = own, SOURCE_BENCH
        elif look.fallback and d_w >= 1:
            (within, df), source = own, SOURCE_FALLBACK
        else:
            # (After the guard fired, rounds with no within-generation df -- one round per generation, e.g. once the
            # first rounds are left out -- have only the model to go by: its prior, capped, as before the guard.)
            d0 = look.prior_df if plan.prior_df_cap is None else min(look.prior_df, plan.prior_df_cap)
            within, df = (d0 * sw2 + ss) / (d0 + d_w), d0 + d_w
            source = SOURCE_FALLBACK_NO_DF if look.fallback else SOURCE_MODEL
    if not math.isfinite(within):
        return LookVariance(math.inf, 0.0, source)
    return LookVariance(*_combine(within, df, n, generations, tau2, tau_df, plan.between_floor), source)


def first_rounds(generations: Sequence[int]) -> list[bool]:
    """Which rounds open a worker generation (labels change there; rounds of one generation are adjacent)."""
    return [i == 0 or generations[i] != generations[i - 1] for i in range(len(generations))]


def first_round_shift(
    d: np.ndarray, generations: Sequence[int], within: float, df: float, level: float
) -> float | None:
    """The mean difference of each generation's first round from the rest of its generation, when it is significant
    (a measurement artifact: docs/SPEED_GATE.md, "Version 6"); None when not, or when no generation has two rounds.

    Per generation of ``m >= 2`` rounds, ``c = d_first - mean(d_rest)`` has variance ``within (1 + 1/(m-1))``
    under the model; their weighted mean against its standard error, two-sided at ``level`` (t with ``df``).
    """
    contrasts, weights = [], []
    start = 0
    for size in generation_sizes(generations):
        if size >= 2:
            contrasts.append(float(d[start] - np.mean(d[start + 1 : start + size])))
            weights.append(1.0 / (1.0 + 1.0 / (size - 1)))
        start += size
    if not contrasts or not (math.isfinite(within) and within > 0 and df > 0):
        return None
    w = np.asarray(weights)
    mean = float(np.sum(w * np.asarray(contrasts)) / np.sum(w))
    z = mean / math.sqrt(within / float(np.sum(w)))
    return mean if abs(z) > float(stats.t.isf(level / 2.0, df)) else None


def one_sided(alpha: float, df: float) -> float:
    """The one-sided t quantile ``q`` with ``P(T > q) = alpha``."""
    return float(stats.t.isf(alpha, df))


@dataclass(frozen=True)
class ZoneLook:
    """One look's answer: "regression", "not a regression" or None (look again), and what it rests on."""

    answer: str | None
    mean: float
    se: float
    df: float
    source: str
    forced_error: float | None = None  # the last look's forced call: its error at the zone's edges
    too_noisy: bool = False  # the last look could not decide within plan.forced_limit

    def estimate(self, confidence: float, n: int) -> Estimate:
        """The two-sided interval at ``confidence`` (the report's; the decision used one-sided bounds)."""
        model = self.source.startswith(SOURCE_MODEL)
        method = (
            f"{ZONE_METHOD}; variance: {'the noise model' + self.source[len(SOURCE_MODEL) :] if model else self.source}"
        )
        if not (math.isfinite(self.se) and self.df > 0):
            return Estimate(math.exp(self.mean), 0.0, math.inf, n, method, confidence, 1.0)
        half = float(stats.t.isf((1 - confidence) / 2, self.df)) * self.se
        low, high = math.exp(self.mean - half), math.exp(self.mean + half)
        return Estimate(math.exp(self.mean), low, high, n, method, confidence, confidence)


def zone_look(
    d: np.ndarray,
    generations: Sequence[int],
    look: LookNoise | None,
    edges: ZoneEdges,
    plan: SequentialPlan,
    look_no: int,
    last: bool,
) -> ZoneLook:
    """The zone's answer at look ``look_no`` (0-based) over the log ratios ``d``.

    With ``plan.first_round_level``, a look first asks whether each worker generation's first round differs
    from the rest (:func:`first_round_shift`); when it does, those rounds are left out of this look, and the
    answer's source says so.
    """
    note = ""
    if plan.first_round_level is not None and len(d) >= 2:
        # Tested against the model's within variance (its null), else the rounds' own.
        within, df = (look.noise.within_sd**2, look.prior_df) if look else _own_within(*within_ss(d, generations))
        shift = first_round_shift(d, generations, within, df, plan.first_round_level)
        if shift is not None:
            keep = [not f for f in first_rounds(generations)]
            d = d[np.asarray(keep)]
            generations = [g for g, k in zip(generations, keep) if k]
            note = f"; each worker generation's first round left out (it differs by {math.expm1(shift):+.2%})"
            if d.size == 0:
                return ZoneLook(None, 0.0, math.inf, 0.0, SOURCE_ROUNDS + note, too_noisy=last)
    v = zone_variance(d, generations, look, plan)
    source = v.source + note
    mean = float(np.mean(d))
    if not v.usable:
        return ZoneLook(None, mean, math.inf, 0.0, source, too_noisy=last)
    se = math.sqrt(v.variance)
    share = plan.shares()[look_no]
    if mean + one_sided(plan.alpha * share, v.df) * se < edges.acceptable:
        return ZoneLook("regression", mean, se, v.df, source)
    if mean - one_sided(plan.miss_side_alpha * share, v.df) * se > edges.regression:
        return ZoneLook("not a regression", mean, se, v.df, source)
    if not last:
        return ZoneLook(None, mean, se, v.df, source)
    error = float(stats.t.sf(0.5 * edges.gap / se, v.df))
    if error > plan.forced_limit:
        return ZoneLook(None, mean, se, v.df, source, forced_error=error, too_noisy=True)
    return ZoneLook("regression" if mean < edges.midpoint else "not a regression", mean, se, v.df, source, error)


def improved(zl: ZoneLook, edges: ZoneEdges, plan: SequentialPlan, look_no: int) -> bool:
    """A "not a regression" that is also faster by t/2 or more with the look's false-alarm confidence (the report's)."""
    if not (math.isfinite(zl.se) and zl.df > 0):
        return False
    return zl.mean - one_sided(plan.alpha * plan.shares()[look_no], zl.df) * zl.se > edges.improvement


def planned_rounds(look: LookNoise | None, threshold: float, plan: SequentialPlan, restart_every: int) -> int | None:
    """The first look at which the model's planned variance decides any effect (both tests cannot fail); None: none.

    Under the model a benchmark is decided by this look whatever its effect (the zone's middle is the
    slowest); effects away from the zone are decided earlier. Without a model entry: None (unknown).
    """
    if look is None:
        return None
    edges = ZoneEdges(threshold)
    for k, n in enumerate(plan.look_points):
        gens = [i // restart_every for i in range(n)]
        sw2 = look.noise.within_sd**2
        d0 = look.prior_df if plan.prior_df_cap is None else min(look.prior_df, plan.prior_df_cap)
        d_w = n - len(generation_sizes(gens))
        var, df = _combine(sw2, d0 + d_w, n, gens, look.noise.between_sd**2, look.between_df, plan.between_floor)
        share = plan.shares()[k]
        need = (one_sided(plan.alpha * share, df) + one_sided(plan.miss_side_alpha * share, df)) * math.sqrt(var)
        if need <= edges.gap:
            return n
    return None
