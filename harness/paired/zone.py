"""The zone rule (version 6, issue 37; its variance version 7, issue 46): one question per benchmark, an indifference
zone, a last look that decides.

On the log scale with threshold ``t``: regression when ``m + q(alpha_k, df) s < log(1 - t/2)``, not a regression when
``m - q(beta_k, df) s > log(1 - t)``, else the next look; the last look decides at the zone's midpoint unless its error
is above ``plan.forced_limit``. Version 7's ``s`` comes from the run's own worker generations, the noise model a bounded
prior (:func:`learned_variances`). docs/SPEED_GATE.md, "Version 7: a variance that learns" and "Version 6: the zone".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

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
# Version 7's sources (learned_variances): what a look's variance rests on, in the record's and the report's words.
SOURCE_GENERATIONS = "this run's worker generations"
SOURCE_POOLED = "the noise model pooled with this run's worker generations"
SOURCE_PRIOR = "the noise model (one worker generation so far)"
SOURCE_CONFLICT = "this run's worker generations (they disagree with the noise model"
SOURCE_GUARD = "this run's worker generations (the run is noisier than the model)"


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


def generation_variance(d: np.ndarray, generations: Sequence[int], floor: float = 0.0) -> LookVariance:
    """The variance of the mean of ``d`` from its worker generations' means alone, with generations - 1 df.

    Cluster-robust (CR1): ``G / (G - 1) * sum(n_g^2 (m_g - m)^2) / n^2``, unbiased for ``sigma_w^2 / n + tau^2 c``
    whatever ``tau / sigma_w`` is, with equal generations; a generation of one round counts like any other. Never
    below the within-generation part ``s_w^2 / n``, nor below ``floor`` (the timings' own sampling variance of the
    mean, :func:`sampling_floor`: ``sigma_w^2`` is at least that); needs two generations (else infinite, df 0).
    """
    sizes = generation_sizes(generations)
    g, n = len(sizes), int(d.size)
    if g < 2:
        return LookVariance(math.inf, 0.0, SOURCE_GENERATIONS)
    means = np.asarray([float(part.mean()) for part in np.split(d, np.cumsum(sizes)[:-1])])
    weights = np.asarray(sizes, dtype=float)
    spread = float(np.sum(weights**2 * (means - float(np.mean(d))) ** 2))
    variance = g / (g - 1) * spread / (n * n)
    # Never below the rounds' own within-generation part (tau^2 >= 0): generation means that repeat exactly (a
    # quantized timer, a replay that draws one recorded generation twice) would otherwise claim a variance of 0.
    ss, d_w = within_ss(d, generations)
    if d_w >= 1:
        variance = max(variance, ss / d_w / n)
    # ... nor below what the timings themselves could resolve: with one round a generation there is no within part,
    # and two generations a quantized timer made equal would claim a variance near 0 on 1 df (an H100's rounds: a
    # "regression" at look 1 with an interval of +-0.02% around a mean 0.07% from its truth).
    variance = max(variance, floor)
    if not variance > 0:  # every round the same: no spread to decide on
        return LookVariance(math.inf, 0.0, SOURCE_GENERATIONS)
    return LookVariance(variance, float(g - 1), SOURCE_GENERATIONS)


def model_prediction(n: int, generations: Sequence[int], look: LookNoise, cap: float | None) -> LookVariance:
    """The model's variance of the mean of ``n`` rounds in these generations, ``sigma_w^2 / n + tau^2 c``, and what it
    is worth in df (at most ``cap``).

    The calibration estimated ``sigma_w^2`` (within df) and ``tau^2`` (``between_df``: its df as an estimate, pooled
    across benchmarks by harness.paired.noise_pool), at its cadence ``k0``; written through the variance of a
    generation's mean there, ``B = sigma_w^2 / k0 + tau^2``, ``V = sigma_w^2 (1/n - c/k0) + c B``. It is worth the
    df of its least-known part (Satterthwaite would weigh the parts by their fitted sizes and trust a ``tau`` fitted
    near 0 from three generations for the within part's df): never a known 0. An entry without a between estimate
    (``between_df`` 0) cannot predict a generation's offset: df 0 (only the run's generations decide).
    """
    if look.noise.between_df <= 0:
        return LookVariance(math.inf, 0.0, SOURCE_MODEL)
    sw2, k0 = look.noise.within_sd**2, float(look.cadence)
    c = clustering(generations)
    within_part = sw2 * (1.0 / n - c / k0)
    between_part = c * (sw2 / k0 + look.noise.between_sd**2)
    variance = within_part + between_part
    # Worth no more df than its least-known part: Satterthwaite weighs the parts by their fitted sizes, and a
    # generation-mean variance fitted small from few generations would be trusted for the within part's df.
    df = min(look.prior_df, look.between_df, cap if cap is not None else math.inf)
    return LookVariance(variance, df, SOURCE_MODEL)


def sampling_floor(sampling: Sequence[float | None] | None) -> float:
    """The variance of the mean of these rounds' log ratios from their timings' samples alone, ``sum(v_i) / n^2``
    (independent timings); 0 when any round's is unknown (records before the timings' samples were kept)."""
    if not sampling or any(v is None or not math.isfinite(v) for v in sampling):
        return 0.0
    return float(sum(v for v in sampling if v is not None)) / len(sampling) ** 2


def learned_variances(
    d: np.ndarray,
    generations: Sequence[int],
    look: LookNoise | None,
    plan: SequentialPlan,
    floor: float = 0.0,
) -> list[LookVariance]:
    """Version 7: the variances a look may decide on, each valid on its own -- the generations' own, and, with a
    model that the run has not contradicted, the model's prediction pooled with it (a prior of bounded df).

    The look decides when either one's bounds decide (:func:`zone_look`), so the same rounds never need more looks
    with a model than without one; the model only adds a candidate. It is left out when the run's guard fired, or
    when the generations' variance and the model's differ beyond ``plan.conflict_level`` (two-sided F test; with one
    generation, only a within-generation spread above the model's can show a conflict).
    """
    own = generation_variance(d, generations, floor)
    if look is None:
        return [own]
    if look.fallback:
        return [LookVariance(own.variance, own.df, SOURCE_GUARD)]
    prior = model_prediction(int(d.size), generations, look, plan.prior_df_cap)
    if not prior.usable:
        return [own]
    half = plan.conflict_level / 2.0
    if own.usable:
        ratio = own.variance / prior.variance
        if not float(stats.f.ppf(half, own.df, prior.df)) <= ratio <= float(stats.f.isf(half, own.df, prior.df)):
            return [LookVariance(own.variance, own.df, f"{SOURCE_CONFLICT}: variance {ratio:.3g}x the model's)")]
        pooled = (prior.df * prior.variance + own.df * own.variance) / (prior.df + own.df)
        return [LookVariance(pooled, prior.df + own.df, SOURCE_POOLED), own]
    ss, d_w = within_ss(d, generations)
    if d_w >= 1:
        ratio = ss / d_w / look.noise.within_sd**2
        if ratio > float(stats.f.isf(half, d_w, look.prior_df)):
            return [LookVariance(math.inf, 0.0, f"{SOURCE_CONFLICT}: within spread {ratio:.3g}x the model's)")]
    return [LookVariance(prior.variance, prior.df, SOURCE_PRIOR)]


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
    # Version 7: the interval shown is the one that decided: two-sided at the confidence of the deciding bound (the
    # false-alarm side's for a regression, the miss side's otherwise), as (its t quantile, that confidence).
    shown: tuple[float, float] | None = None

    def estimate(self, confidence: float, n: int) -> Estimate:
        """The interval the report shows: version 7's deciding interval (:attr:`shown`), else the two-sided interval
        at ``confidence`` (version 6: the decision used one-sided bounds)."""
        if self.shown is not None:
            q, confidence = self.shown
            method = f"{ZONE_METHOD}; variance: {self.source}; the interval that decided"
        else:
            model = self.source.startswith(SOURCE_MODEL)
            shown = "the noise model" + self.source[len(SOURCE_MODEL) :] if model else self.source
            method = f"{ZONE_METHOD}; variance: {shown}"
            q = float(stats.t.isf((1 - confidence) / 2, self.df)) if self.df > 0 else math.inf
        if not (math.isfinite(self.se) and self.df > 0):
            return Estimate(math.exp(self.mean), 0.0, math.inf, n, method, confidence, 1.0)
        low, high = math.exp(self.mean - q * self.se), math.exp(self.mean + q * self.se)
        return Estimate(math.exp(self.mean), low, high, n, method, confidence, confidence)


def _leave_out_first_rounds(
    d: np.ndarray,
    generations: Sequence[int],
    look: LookNoise | None,
    plan: SequentialPlan,
    sampling: Sequence[float | None] | None,
) -> tuple[np.ndarray, list[int], Sequence[float | None] | None, str]:
    """With ``plan.first_round_level``: each generation's first round left out (of ``d``, its labels and its rounds'
    sampling variances) when they differ from the rest."""
    gens = list(generations)
    if plan.first_round_level is None or len(d) < 2:
        return d, gens, sampling, ""
    # Version 6 tests against the model's within variance (its null), else the rounds' own; version 7 always against
    # the rounds' own, so a model never changes which rounds the generations' own variance is computed from.
    if look is not None and not plan.learn:
        within, df = look.noise.within_sd**2, look.prior_df
    else:
        within, df = _own_within(*within_ss(d, gens))
    shift = first_round_shift(d, gens, within, df, plan.first_round_level)
    if shift is None:
        return d, gens, sampling, ""
    keep = [not f for f in first_rounds(gens)]
    note = f"; each worker generation's first round left out (it differs by {math.expm1(shift):+.2%})"
    kept = None if sampling is None else [v for v, k in zip(sampling, keep) if k]
    return d[np.asarray(keep)], [g for g, k in zip(gens, keep) if k], kept, note


def zone_look(
    d: np.ndarray,
    generations: Sequence[int],
    look: LookNoise | None,
    edges: ZoneEdges,
    plan: SequentialPlan,
    look_no: int,
    last: bool,
    sampling: Sequence[float | None] | None = None,
) -> ZoneLook:
    """The zone's answer at look ``look_no`` (0-based) over the log ratios ``d`` (``sampling``: each round's
    variance from its timings' samples, the generations' variance's floor; None: unknown).

    With ``plan.first_round_level``, a look first asks whether each worker generation's first round differs
    from the rest (:func:`first_round_shift`); when it does, those rounds are left out of this look, and the
    answer's source says so. Version 7 (``plan.learn``) asks each of :func:`learned_variances` in turn: the first
    whose bounds decide answers (a regression before a non-regression); the last look's forced call takes the
    one whose call errs least.
    """
    d, generations, sampling, note = _leave_out_first_rounds(d, generations, look, plan, sampling)
    if d.size == 0:
        return ZoneLook(None, 0.0, math.inf, 0.0, SOURCE_ROUNDS + note, too_noisy=last)
    mean = float(np.mean(d))
    share = plan.shares()[look_no]
    candidates = (
        learned_variances(d, generations, look, plan, sampling_floor(sampling))
        if plan.learn
        else [zone_variance(d, generations, look, plan)]
    )
    usable = [v for v in candidates if v.usable]
    if not usable:
        return ZoneLook(None, mean, math.inf, 0.0, candidates[0].source + note, too_noisy=last)

    def answer(v: LookVariance, said: str | None, **extra: Any) -> ZoneLook:
        # A regression is decided on the false-alarm bound; anything else is shown at the miss side's confidence.
        side = plan.alpha if said == "regression" else plan.miss_side_alpha
        shown = (one_sided(side * share, v.df), 1.0 - 2.0 * side * share) if plan.learn else None
        se = math.sqrt(v.variance)
        return ZoneLook(said, mean, se, v.df, v.source + note, shown=shown, **extra)

    for v in usable:
        if mean + one_sided(plan.alpha * share, v.df) * math.sqrt(v.variance) < edges.acceptable:
            return answer(v, "regression")
    for v in usable:
        if mean - one_sided(plan.miss_side_alpha * share, v.df) * math.sqrt(v.variance) > edges.regression:
            return answer(v, "not a regression")
    calls = [forced_call(mean, math.sqrt(v.variance), v.df, edges, plan) for v in usable]
    best = min(range(len(usable)), key=lambda i: calls[i][1])
    if not last:
        return answer(usable[best], None)
    call, error = calls[best]
    if error > plan.forced_limit:
        return answer(usable[best], None, forced_error=error, too_noisy=True)
    return answer(usable[best], call, forced_error=error)


def forced_call(mean: float, se: float, df: float, edges: ZoneEdges, plan: SequentialPlan) -> tuple[str, float]:
    """The last look's call when neither bound decided, and its error at the zone's edge it could be wrong at.

    Version 6: the zone's midpoint, its error the same at both edges. Version 7 keeps the false-alarm side within a
    second per-benchmark ``alpha`` (a regression only below ``log(1 - t/2) - q(alpha) se``), so a forced call at
    most doubles the false-alarm share; the miss side's error is what ``plan.forced_limit`` bounds.
    """
    if not plan.learn:
        return ("regression" if mean < edges.midpoint else "not a regression"), float(
            stats.t.sf(0.5 * edges.gap / se, df)
        )
    cut = edges.acceptable - one_sided(plan.alpha, df) * se
    if mean < cut:
        return "regression", plan.alpha
    return "not a regression", float(stats.t.sf((cut - edges.regression) / se, df))


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
        if plan.learn:  # the pooled variance when the generations agree with the model: its variance, more df
            prior = model_prediction(n, gens, look, plan.prior_df_cap)
            var, df = prior.variance, prior.df + len(generation_sizes(gens)) - 1
            if not prior.usable:
                continue
        else:
            sw2 = look.noise.within_sd**2
            d0 = look.prior_df if plan.prior_df_cap is None else min(look.prior_df, plan.prior_df_cap)
            d_w = n - len(generation_sizes(gens))
            var, df = _combine(sw2, d0 + d_w, n, gens, look.noise.between_sd**2, look.between_df, plan.between_floor)
        share = plan.shares()[k]
        need = (one_sided(plan.alpha * share, df) + one_sided(plan.miss_side_alpha * share, df)) * math.sqrt(var)
        if need <= edges.gap:
            return n
    return None
