"""Paired-ratio statistics of the PR speed gate (``python -m ci.speed``).

The gate measures base (A) and head (B) in interleaved rounds of fresh
processes (A B, B A, A B, ...). Each process yields, per benchmark, one TFLOPS
figure. A *round* is one A process and one B process adjacent in time; its
ratio is ``r_i = tflops_B_i / tflops_A_i``. **Higher TFLOPS is better**:
``r < 1`` is a slowdown. Rounds the caller marks as excluded (throttled, below a
clock floor) never enter an estimate; they are counted and reported.

Method (docs/SPEED_GATE.md has the derivations and the simulated error rates):

* Point estimate: Hodges-Lehmann on the log ratios ``d_i = log r_i``, the median
  of the ``n(n+1)/2`` Walsh averages ``(d_i + d_j) / 2, i <= j``.
* Interval: the distribution-free interval between two ordered Walsh averages,
  ``[W_(k), W_(M+1-k)]``, with ``k`` the largest integer such that
  ``P0(T+ <= k-1) <= alpha/2`` for the Wilcoxon signed-rank statistic ``T+``.
  ``P0`` is the exact null distribution (dynamic programming) up to
  :data:`EXACT_MAX_N` rounds. When no ``k >= 1`` exists (too few rounds for the
  confidence) the interval is ``(0, inf)`` and the verdict is inconclusive.
  It assumes only that ``d_i - log(true ratio)`` is symmetric about zero, which
  paired fresh processes give by construction: the difference of two draws from
  one (possibly skewed) noise distribution is symmetric.
* Verdict against the band ``[1 - t, 1 + t]``: interval entirely below
  ``1 - t`` -> regression, entirely above ``1 + t`` -> improvement, entirely
  inside -> no change, otherwise inconclusive.
* Sequential: the gate looks at planned round counts and stops at the first
  look whose interval clears the band. Each of the ``K`` looks uses
  ``alpha / K`` (Bonferroni), so with probability ``>= 1 - alpha`` *every*
  interval the gate computes covers the true ratio, whichever look it stops at.

Pure Python and numpy; imports nothing from ``kernels/`` or ``ci/``.
"""

from __future__ import annotations

import argparse
import enum
import functools
import math
import statistics
import sys
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from harness.report import markdown_table

# Up to this many rounds the signed-rank null distribution is computed exactly;
# above it, the normal approximation with continuity correction (a gate never
# plans that many rounds: each one is two fresh processes).
EXACT_MAX_N = 300

# HL's asymptotic variance for normal data is pi*sigma^2/(3n) (efficiency 3/pi
# relative to the mean); the gate's planning formulas use it.
_HL_VAR_FACTOR = math.pi / 3.0
_NORMAL = statistics.NormalDist()
# A cumulative probability computed by the DP may sit a rounding error above an
# exactly representable alpha/2 (e.g. 2^-6); compare with this relative slack.
_CDF_SLACK = 1e-9


class Verdict(str, enum.Enum):
    """The gate's answer for one benchmark. Higher TFLOPS is better."""

    REGRESSION = "regression"  # head slower than base by more than the threshold, with confidence
    IMPROVEMENT = "improvement"  # head faster than base by more than the threshold, with confidence
    NO_CHANGE = "no change"  # any change is inside the threshold band, with confidence
    INCONCLUSIVE = "inconclusive"  # the interval straddles a band edge (or does not exist yet)

    def __str__(self) -> str:
        return self.value


def _json_float(x: float) -> float | None:
    """JSON has no inf/nan: an unbounded end or a missing point is null."""
    return float(x) if math.isfinite(x) else None


# --------------------------------------------------------------------------- rounds


@dataclass(frozen=True)
class Round:
    """One A process and one B process adjacent in time, for one benchmark.

    ``base`` and ``head`` are TFLOPS (each the median of its process's timed
    launches). ``excluded`` is the caller's reason for keeping the round out of
    the estimate (``"throttled: HW_SLOWDOWN"``, ``"sm clock 1410 < floor 1800 MHz"``);
    an excluded round may carry non-finite figures (its process failed).
    """

    base: float
    head: float
    excluded: str | None = None

    def __post_init__(self) -> None:
        if self.excluded is not None:
            if not str(self.excluded).strip():
                raise ValueError("Round.excluded needs a reason, not an empty string")
            return
        for name in ("base", "head"):
            value = getattr(self, name)
            try:
                ok = math.isfinite(float(value)) and float(value) > 0
            except (TypeError, ValueError):
                ok = False
            if not ok:
                raise ValueError(f"Round.{name} must be a finite TFLOPS figure > 0 (got {value!r}); mark the round excluded instead")

    @property
    def ratio(self) -> float:
        """head / base TFLOPS; < 1 is a slowdown. NaN when an excluded round has no figures."""
        try:
            return float(self.head) / float(self.base)
        except (ZeroDivisionError, TypeError):
            return math.nan

    def to_json(self) -> dict[str, Any]:
        return {"base": _json_float(self.base), "head": _json_float(self.head), "ratio": _json_float(self.ratio), "excluded": self.excluded}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Round":
        base = data.get("base")
        head = data.get("head")
        return cls(math.nan if base is None else float(base), math.nan if head is None else float(head), data.get("excluded"))


# ------------------------------------------------------------ signed-rank distribution


@functools.lru_cache(maxsize=None)
def signed_rank_pmf(n: int) -> np.ndarray:
    """Exact null distribution of the Wilcoxon signed-rank statistic T+ for ``n`` untied ranks.

    ``pmf[w] = P(T+ = w)``, ``w = 0 .. n(n+1)/2``: each rank 1..n enters T+ with
    probability 1/2 independently, so ``p_k(w) = (p_{k-1}(w) + p_{k-1}(w - k)) / 2``.
    The values are dyadic rationals; float64 holds them exactly up to n = 53 and
    to ~1e-16 relative beyond. Read-only (cached).
    """
    if n < 0:
        raise ValueError(f"n must be >= 0 (got {n})")
    pmf = np.zeros(n * (n + 1) // 2 + 1)
    pmf[0] = 1.0
    for k in range(1, n + 1):
        top = k * (k + 1) // 2
        shifted = pmf[: top + 1 - k].copy()
        pmf[k : top + 1] += shifted
        pmf[: top + 1] *= 0.5
    pmf.setflags(write=False)
    return pmf


@functools.lru_cache(maxsize=None)
def _signed_rank_cdf(n: int) -> np.ndarray:
    cdf = np.cumsum(signed_rank_pmf(n))
    cdf.setflags(write=False)
    return cdf


@functools.lru_cache(maxsize=4096)
def walsh_rank(n: int, alpha: float) -> tuple[int, float]:
    """``(k, coverage)`` for the two-sided ``1 - alpha`` interval ``[W_(k), W_(M+1-k)]``.

    ``k`` is the largest integer with ``P0(T+ <= k - 1) <= alpha / 2``; 0 when even
    ``k = 1`` (the extreme Walsh averages) cannot reach the confidence. ``coverage``
    is the interval's exact coverage for continuous data, ``1 - 2 P0(T+ <= k - 1)``
    (``>= 1 - alpha``); 1.0 for the unbounded interval.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1) (got {alpha})")
    if n <= 0:
        return 0, 1.0
    half = alpha / 2.0
    if n <= EXACT_MAX_N:
        cdf = _signed_rank_cdf(n)
        # cdf[w] <= half for w = 0 .. k-1; searchsorted counts them.
        k = int(np.searchsorted(cdf, half * (1.0 + _CDF_SLACK), side="right"))
        return (k, 1.0 - 2.0 * float(cdf[k - 1])) if k else (0, 1.0)
    mean = n * (n + 1) / 4.0
    sd = math.sqrt(n * (n + 1) * (2 * n + 1) / 24.0)
    k = int(math.floor(mean - 0.5 + _NORMAL.inv_cdf(half) * sd)) + 1
    if k < 1:
        return 0, 1.0
    return k, 1.0 - 2.0 * _NORMAL.cdf((k - 1 + 0.5 - mean) / sd)


def min_rounds_for(confidence: float) -> int:
    """Fewest rounds whose exact interval is bounded at ``confidence``: ``2 * 2^-n <= 1 - confidence``."""
    alpha = 1.0 - confidence
    n = 1
    while walsh_rank(n, alpha)[0] == 0:
        n += 1
    return n


# ----------------------------------------------------------------------- estimate


@dataclass(frozen=True)
class Estimate:
    """Hodges-Lehmann ratio head/base with its distribution-free interval (ratio scale).

    ``low = 0, high = inf`` (``bounded`` False) when ``n`` rounds cannot reach
    ``confidence``; never a made-up interval. ``coverage`` is the exact coverage
    the discrete interval achieves (>= confidence).
    """

    point: float
    low: float
    high: float
    n: int
    method: str
    confidence: float
    coverage: float

    @property
    def bounded(self) -> bool:
        return self.low > 0.0 and math.isfinite(self.high)

    def to_json(self) -> dict[str, Any]:
        return {
            "point": _json_float(self.point),
            "low": _json_float(self.low) if self.bounded else None,
            "high": _json_float(self.high) if self.bounded else None,
            "bounded": self.bounded,
            "n": self.n,
            "method": self.method,
            "confidence": self.confidence,
            "coverage": self.coverage,
        }


def _log_ratios(ratios: Iterable[float]) -> np.ndarray:
    values = np.asarray([float(r) for r in ratios], dtype=float)
    if values.size and not (np.all(np.isfinite(values)) and np.all(values > 0)):
        bad = [float(v) for v in values if not (math.isfinite(v) and v > 0)][:3]
        raise ValueError(f"ratios must be finite and > 0 (got {bad}); exclude such rounds instead")
    return np.log(values)


@functools.lru_cache(maxsize=512)
def _upper_triangle(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(n)


def walsh_averages(d: np.ndarray) -> np.ndarray:
    """Sorted ``(d_i + d_j) / 2`` over ``i <= j``."""
    i, j = _upper_triangle(len(d))
    return np.sort((d[i] + d[j]) * 0.5)


def estimate(ratios: Iterable[float], confidence: float = 0.95) -> Estimate:
    """Hodges-Lehmann estimate of the ratio head/base with the exact signed-rank interval.

    ``ratios`` are the per-round ratios of the usable (not excluded) rounds.
    Ties and exact zeros of the log ratio are fine: the Walsh averages are used as
    they are (the coverage statement is exact for continuous data; tied figures
    only make neighbouring Walsh averages equal).
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1) (got {confidence})")
    d = _log_ratios(ratios)
    n = int(d.size)
    exact = n <= EXACT_MAX_N
    method = "hodges-lehmann on log ratios; " + ("exact signed-rank interval" if exact else "signed-rank interval, normal approximation")
    if n == 0:
        return Estimate(math.nan, 0.0, math.inf, 0, method, confidence, 1.0)
    w = walsh_averages(d)
    point = math.exp(float(np.median(w)))
    k, coverage = walsh_rank(n, 1.0 - confidence)
    if k == 0:
        return Estimate(point, 0.0, math.inf, n, method, confidence, coverage)
    return Estimate(point, math.exp(float(w[k - 1])), math.exp(float(w[len(w) - k])), n, method, confidence, coverage)


def decide(est: Estimate, threshold: float) -> Verdict:
    """Verdict of one interval against the band ``[1 - threshold, 1 + threshold]``.

    Higher TFLOPS is better: an interval entirely below ``1 - threshold`` is a
    regression, entirely above ``1 + threshold`` an improvement, entirely inside
    the band no change; anything else (including an unbounded interval) is
    inconclusive.
    """
    _check_threshold(threshold)
    if not est.bounded:
        return Verdict.INCONCLUSIVE
    lo_band, hi_band = 1.0 - threshold, 1.0 + threshold
    if est.high < lo_band:
        return Verdict.REGRESSION
    if est.low > hi_band:
        return Verdict.IMPROVEMENT
    if est.low >= lo_band and est.high <= hi_band:
        return Verdict.NO_CHANGE
    return Verdict.INCONCLUSIVE


def _check_threshold(threshold: float) -> None:
    if not 0 < threshold < 1:
        raise ValueError(f"threshold is a fraction in (0, 1), e.g. 0.01 for 1% (got {threshold})")


# --------------------------------------------------------------------- sequential


@dataclass(frozen=True)
class SequentialPlan:
    """When the gate looks and how much error each look may spend.

    ``looks`` is either the number of looks, spread evenly from ``min_rounds`` to
    ``max_rounds`` (both included), or the explicit tuple of usable-round counts.
    Round counts are of *usable* rounds: excluded rounds do not advance a look
    (the orchestrator caps the rounds it attempts). ``alpha`` is the family-wise
    error: each look's interval has confidence ``1 - alpha / K`` for ``K`` looks
    (Bonferroni), so all intervals cover the true ratio together with probability
    ``>= 1 - alpha``. Bonferroni is conservative here (the looks share rounds) but
    needs no distributional assumption beyond the signed-rank test's own.
    """

    min_rounds: int = 10
    max_rounds: int = 30
    looks: int | tuple[int, ...] = 3
    alpha: float = 0.01

    def __post_init__(self) -> None:
        if not 1 <= self.min_rounds <= self.max_rounds:
            raise ValueError(f"need 1 <= min_rounds <= max_rounds (got {self.min_rounds}, {self.max_rounds})")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1) (got {self.alpha})")
        points = self.look_points
        if isinstance(self.looks, tuple):
            if list(points) != sorted(set(points)) or points[0] < self.min_rounds or points[-1] != self.max_rounds:
                raise ValueError(f"looks {self.looks} must increase strictly from >= min_rounds to max_rounds ({self.min_rounds}..{self.max_rounds})")
        elif self.looks < 1:
            raise ValueError(f"looks must be >= 1 (got {self.looks})")
        need = min_rounds_for(self.per_look_confidence)
        if points[0] < need:
            raise ValueError(
                f"the first look at {points[0]} rounds can never decide: an exact interval at confidence "
                f"{self.per_look_confidence:.5f} (alpha {self.alpha} / {len(points)} looks) needs >= {need} rounds; "
                f"raise min_rounds, alpha, or use fewer looks"
            )

    @property
    def look_points(self) -> tuple[int, ...]:
        """Usable-round counts at which the gate computes an interval."""
        if isinstance(self.looks, tuple):
            return tuple(int(x) for x in self.looks)
        if self.looks == 1 or self.min_rounds == self.max_rounds:
            return (self.max_rounds,)
        raw = np.linspace(self.min_rounds, self.max_rounds, self.looks)
        return tuple(sorted({int(round(x)) for x in raw}))

    @property
    def per_look_alpha(self) -> float:
        return self.alpha / len(self.look_points)

    @property
    def per_look_confidence(self) -> float:
        return 1.0 - self.per_look_alpha

    def to_json(self) -> dict[str, Any]:
        return {
            "min_rounds": self.min_rounds,
            "max_rounds": self.max_rounds,
            "look_points": list(self.look_points),
            "alpha": self.alpha,
            "per_look_confidence": self.per_look_confidence,
            "error_control": "bonferroni over looks",
        }


DEFAULT_PLAN = SequentialPlan()


@dataclass(frozen=True)
class Decision:
    """The gate's decision for one benchmark.

    ``complete`` is True when the gate may stop for this benchmark: a look cleared
    the band (``stopped_early`` when before the last look) or the last look was
    taken (inconclusive if it did not clear). While not complete, ``next_look`` is
    the usable-round count to reach before asking again, and ``estimate`` covers
    the usable rounds so far (for progress reports; not a look).
    ``rounds_used`` usable rounds and ``rounds_excluded`` excluded rounds make up
    the ``rounds_seen`` leading rounds the decision consumed.
    """

    verdict: Verdict
    estimate: Estimate
    rounds_used: int
    rounds_excluded: int
    stopped_early: bool
    reason: str
    threshold: float
    complete: bool
    next_look: int | None
    excluded_reasons: tuple[tuple[str, int], ...] = ()

    @property
    def rounds_seen(self) -> int:
        return self.rounds_used + self.rounds_excluded

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.value,
            "estimate": self.estimate.to_json(),
            "threshold": self.threshold,
            "band": [1.0 - self.threshold, 1.0 + self.threshold],
            "higher_is_better": True,
            "rounds_used": self.rounds_used,
            "rounds_excluded": self.rounds_excluded,
            "excluded_reasons": dict(self.excluded_reasons),
            "stopped_early": self.stopped_early,
            "complete": self.complete,
            "next_look": self.next_look,
            "reason": self.reason,
        }


def next_look(rounds_so_far: int, plan: SequentialPlan) -> int | None:
    """The first planned look after ``rounds_so_far`` usable rounds, or None past the last.

    Pure schedule; :func:`sequential_decision` says whether a look already decided
    (its ``complete`` / ``next_look`` fields are what an orchestrator loops on).
    """
    for point in plan.look_points:
        if point > rounds_so_far:
            return point
    return None


def _fmt_interval(est: Estimate) -> str:
    if not est.bounded:
        return f"HL {est.point:.4f}, interval unbounded at {est.n} rounds"
    return f"HL {est.point:.4f}, {est.confidence:.2%} interval [{est.low:.4f}, {est.high:.4f}]"


def sequential_decision(rounds: Sequence[Round], threshold: float, plan: SequentialPlan = DEFAULT_PLAN) -> Decision:
    """Replay the gate's planned looks over ``rounds`` (in time order) and decide.

    At each look point ``m`` the interval of the first ``m`` usable rounds is
    computed at ``plan.per_look_confidence``; the first look that gives
    regression / improvement / no change stops the gate. Usable rounds beyond
    the stopping look (or beyond ``max_rounds``) are ignored, so handing this the
    whole record or a growing prefix gives the same decision.
    """
    _check_threshold(threshold)
    ratios: list[float] = []
    positions: list[int] = []  # index in `rounds` of each usable round
    for pos, rnd in enumerate(rounds):
        if rnd.excluded is None:
            ratios.append(rnd.ratio)
            positions.append(pos)

    def excluded_before(end: int) -> tuple[int, tuple[tuple[str, int], ...]]:
        reasons: dict[str, int] = {}
        for rnd in rounds[:end]:
            if rnd.excluded is not None:
                reasons[rnd.excluded] = reasons.get(rnd.excluded, 0) + 1
        return sum(reasons.values()), tuple(sorted(reasons.items()))

    usable = len(ratios)
    points = plan.look_points
    est: Estimate | None = None
    for look_no, m in enumerate(points, start=1):
        if m > usable:
            break
        est = estimate(ratios[:m], plan.per_look_confidence)
        verdict = decide(est, threshold)
        last = look_no == len(points)
        if verdict is not Verdict.INCONCLUSIVE or last:
            n_excl, reasons = excluded_before(positions[m - 1] + 1)
            band = f"band [{1 - threshold:.4f}, {1 + threshold:.4f}]"
            if verdict is Verdict.INCONCLUSIVE:
                why = f"{_fmt_interval(est)} straddles an edge of the {band} after all {m} planned rounds"
            else:
                where = "below" if verdict is Verdict.REGRESSION else "above" if verdict is Verdict.IMPROVEMENT else "inside"
                why = f"{_fmt_interval(est)} lies {where} the {band} at look {look_no}/{len(points)} ({m} rounds)"
            return Decision(verdict, est, m, n_excl, not last, why, threshold, True, None, reasons)
    # Not enough usable rounds for the next look: report progress, keep going.
    pending = next_look(usable, plan)
    assert pending is not None
    progress = estimate(ratios[: plan.max_rounds], plan.per_look_confidence)
    n_excl, reasons = excluded_before(len(rounds))
    why = f"{usable} usable rounds; next look at {pending}"
    return Decision(Verdict.INCONCLUSIVE, progress, usable, n_excl, False, why, threshold, False, pending, reasons)


# -------------------------------------------------------------------- calibration


def _z(p: float) -> float:
    return _NORMAL.inv_cdf(p)


def _t_quantile(p: float, df: int) -> float:
    """Student-t quantile by the Cornish-Fisher expansion in 1/df (Abramowitz & Stegun 26.7.5).

    Within 3e-3 of the exact value for df >= 8 at p <= 0.9995 (1e-5 at df 29); the planning
    formulas use it because the rank interval's width, like a t interval's,
    is itself estimated from the rounds.
    """
    z = _z(p)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def hl_standard_error(ratio_sd: float, n: int) -> float:
    """Asymptotic SD of the HL estimate of ``n`` log ratios with SD ``ratio_sd`` (normal noise)."""
    return ratio_sd * math.sqrt(_HL_VAR_FACTOR / n)


def threshold_for(ratio_sd: float, plan: SequentialPlan, alpha: float = 0.01) -> float:
    """Smallest threshold at which an A/A comparison says "no change" w.p. ``>= 1 - alpha`` at ``max_rounds``.

    With ``se = ratio_sd * sqrt(pi / (3 n))`` at ``n = max_rounds``, the HL log
    ratio of an A/A comparison is ~ N(0, se^2) and the interval is about
    ``HL +- z(1 - a/2) se`` (``a`` the plan's per-look alpha). Both ends lie in the
    band when ``|HL| <= z(1 - alpha/2) se``, i.e. for
    ``t = exp((z(1 - a/2) + z(1 - alpha/2)) se) - 1``
    (``log(1 - t) <= -log(1 + t)``, so the lower edge is then met too).
    """
    n = plan.max_rounds
    se = hl_standard_error(ratio_sd, n)
    return math.expm1((_t_quantile(1 - plan.per_look_alpha / 2, n - 1) + _t_quantile(1 - alpha / 2, n - 1)) * se)


def resolvable_effect(ratio_sd: float, threshold: float, plan: SequentialPlan, power: float = 0.99) -> float:
    """Smallest slowdown (a fraction of TFLOPS) flagged as regression w.p. ``>= power`` by ``max_rounds``.

    Regression needs ``HL + z(1 - a/2) se < log(1 - t)``; with the true log
    ratio ``-D`` and ``HL ~ N(-D, se^2)`` that holds w.p. ``power`` when
    ``D = -log(1 - t) + (z(1 - a/2) + z(power)) se``: the slowdown is
    ``1 - (1 - t) exp(-(z(1 - a/2) + z(power)) se)``. Effects between the
    threshold and this are caught sometimes and otherwise come out inconclusive.
    """
    n = plan.max_rounds
    se = hl_standard_error(ratio_sd, n)
    return -math.expm1(math.log1p(-threshold) - (_t_quantile(1 - plan.per_look_alpha / 2, n - 1) + _t_quantile(power, n - 1)) * se)


def _chi2_quantile(p: float, k: int) -> float:
    """Wilson-Hilferty approximation of the chi-square quantile (k degrees of freedom)."""
    c = 2.0 / (9.0 * k)
    return k * (1.0 - c + _z(p) * math.sqrt(c)) ** 3


@dataclass(frozen=True)
class Calibration:
    """Noise of one benchmark from A/A rounds (one commit against itself), and what the gate resolves.

    ``ratio_sd``: sample SD of the per-round log ratios (~ the relative SD of a
    round's ratio). ``ratio_sd_upper``: its one-sided 95% upper confidence bound
    (normal theory, chi-square by Wilson-Hilferty); the planning figures use it,
    because a few A/A rounds estimate an SD loosely. ``ratio_sd_robust``:
    1.4826 x MAD of the log ratios; far below ``ratio_sd`` means outlier rounds.
    ``noise_cv``: CV of the single-process TFLOPS of all usable A/A processes
    (what one process is worth without pairing; drift lands here).
    ``threshold``: :func:`suggest_threshold`. ``min_resolvable_effect``: the
    smallest slowdown flagged as regression with probability ``1 - alpha`` at
    that threshold within ``plan.max_rounds``.
    """

    n_rounds: int
    n_excluded: int
    ratio_sd: float
    ratio_sd_upper: float
    ratio_sd_robust: float
    noise_cv: float
    aa_estimate: Estimate
    threshold: float
    min_resolvable_effect: float
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
            f"resolves a {self.min_resolvable_effect:.3%} slowdown w.p. {1 - self.alpha:.0%} in {self.plan.max_rounds} rounds"
        )


def calibrate(aa_rounds: Sequence[Round], plan: SequentialPlan = DEFAULT_PLAN, alpha: float = 0.01) -> Calibration:
    """Calibrate a benchmark from A/A rounds; ``alpha`` is the miss rate the suggestions allow.

    See :func:`threshold_for` and :func:`resolvable_effect` for the formulas;
    tests/test_paired_stats.py checks both against :func:`simulate`.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1) (got {alpha})")
    usable = [r for r in aa_rounds if r.excluded is None]
    n = len(usable)
    if n < 3:
        raise ValueError(f"calibration needs >= 3 usable A/A rounds (got {n} of {len(aa_rounds)})")
    d = _log_ratios(r.ratio for r in usable)
    sd = float(np.std(d, ddof=1))
    sd_upper = sd * math.sqrt((n - 1) / _chi2_quantile(0.05, n - 1))
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
        aa_estimate=estimate(np.exp(d), plan.per_look_confidence),
        threshold=threshold,
        # A threshold of 100% or more (noise far beyond any band) leaves no slowdown it can resolve.
        min_resolvable_effect=resolvable_effect(sd_upper, threshold, plan, 1 - alpha) if threshold < 1 else math.nan,
        plan=plan,
        alpha=alpha,
    )


def suggest_threshold(calibration: Calibration) -> float:
    """The smallest threshold at which an A/A comparison says "no change" w.p. ``1 - calibration.alpha``.

    Computed from the calibration's upper SD bound and plan (:func:`threshold_for`).
    """
    return threshold_for(calibration.ratio_sd_upper, calibration.plan, calibration.alpha)


# ------------------------------------------------------------- error rates from runs


@dataclass(frozen=True)
class Rates:
    """Verdict counts over many decisions, and what it took to reach them."""

    counts: tuple[tuple[str, int], ...]
    decisions: int
    mean_rounds: float
    stopped_early: int
    params: tuple[tuple[str, Any], ...] = ()
    incomplete: int = 0  # replay only: decisions the record ran out of rounds for

    def rate(self, verdict: Verdict | str) -> float:
        return dict(self.counts).get(Verdict(verdict).value, 0) / self.decisions if self.decisions else math.nan

    def to_json(self) -> dict[str, Any]:
        return {
            "decisions": self.decisions,
            "counts": dict(self.counts),
            "rates": {v.value: self.rate(v) for v in Verdict},
            "mean_rounds": self.mean_rounds,
            "stopped_early": self.stopped_early,
            "incomplete": self.incomplete,
            "params": dict(self.params),
        }


def _rates(decisions: Sequence[Decision], params: dict[str, Any], incomplete: int = 0) -> Rates:
    counts = {v.value: 0 for v in Verdict}
    for dec in decisions:
        counts[dec.verdict.value] += 1
    mean_rounds = float(np.mean([d.rounds_used for d in decisions])) if decisions else math.nan
    return Rates(tuple(counts.items()), len(decisions), mean_rounds, sum(d.stopped_early for d in decisions), tuple(params.items()), incomplete)


def synthetic_rounds(
    n: int,
    ratio_sd: float,
    true_effect: float,
    rng: np.random.Generator,
    *,
    drift: float = 0.0,
    outlier_rate: float = 0.0,
    outlier_size: float = 0.05,
    exclude_rate: float = 0.0,
    level: float = 100.0,
) -> list[Round]:
    """``n`` rounds of interleaved fresh processes (A B, B A, ...) with log-normal noise.

    Process ``j`` (in time order) measures ``level * (1 + true_effect if head) *
    exp(drift * j + e_j)`` with ``e_j ~ N(0, ratio_sd^2 / 2)``, so a round's log
    ratio has SD ``ratio_sd``. With ``outlier_rate`` a process is slowed by
    ``outlier_size`` (interference). With ``exclude_rate`` a round is marked
    excluded and its head is slowed by 20%, so an estimate that failed to drop
    excluded rounds would be visibly biased.
    """
    sigma = ratio_sd / math.sqrt(2.0)
    j = np.arange(2 * n, dtype=float).reshape(n, 2)
    logs = math.log(level) + drift * j + rng.normal(0.0, sigma, size=(n, 2))
    if outlier_rate:
        logs += np.where(rng.random((n, 2)) < outlier_rate, math.log1p(-outlier_size), 0.0)
    # Column 0 ran first: A in even rounds, B in odd ones (A B, B A, ...).
    a_first = (np.arange(n) % 2) == 0
    base = np.where(a_first, logs[:, 0], logs[:, 1])
    head = np.where(a_first, logs[:, 1], logs[:, 0]) + math.log1p(true_effect)
    excluded = rng.random(n) < exclude_rate if exclude_rate else np.zeros(n, dtype=bool)
    head = np.where(excluded, head + math.log(0.8), head)
    return [Round(float(b), float(h), "synthetic: throttled" if x else None) for b, h, x in zip(np.exp(base), np.exp(head), excluded)]


def simulate(
    ratio_sd: float,
    true_effect: float,
    threshold: float,
    plan: SequentialPlan = DEFAULT_PLAN,
    trials: int = 2000,
    seed: int = 0,
    **noise: float,
) -> Rates:
    """Rates of each verdict over ``trials`` synthetic gate runs (:func:`synthetic_rounds`).

    ``true_effect`` is head's TFLOPS change as a fraction (-0.005: 0.5% slower).
    ``noise`` passes ``drift``, ``outlier_rate``, ``outlier_size``, ``exclude_rate``.
    Every trial goes through :func:`sequential_decision`, the gate's own code.
    """
    rng = np.random.default_rng(seed)
    # Enough rounds that exclusions cannot starve a trial of its max_rounds usable ones.
    excl = float(noise.get("exclude_rate", 0.0))
    n = plan.max_rounds if not excl else int(math.ceil(1.5 * plan.max_rounds / (1.0 - excl))) + 10
    decisions = [sequential_decision(synthetic_rounds(n, ratio_sd, true_effect, rng, **noise), threshold, plan) for _ in range(trials)]
    incomplete = sum(not d.complete for d in decisions)
    if incomplete:
        raise RuntimeError(f"{incomplete} simulated decisions ran out of rounds; raise the round supply")
    params = {"ratio_sd": ratio_sd, "true_effect": true_effect, "threshold": threshold, "plan": plan.look_points, "alpha": plan.alpha, "seed": seed, **noise}
    return _rates(decisions, params)


def replay(
    recorded_rounds: Sequence[Round],
    threshold: float,
    plan: SequentialPlan = DEFAULT_PLAN,
    decisions: int = 10,
    disjoint: bool = True,
    seed: int = 0,
) -> tuple[Rates, list[Decision]]:
    """Take ``decisions`` gate decisions from recorded rounds, through the gate's own statistics.

    ``disjoint=True``: the rounds are consumed in time order, each decision taking
    the rounds its sequential plan needs (as repeated live gate runs would), so no
    round serves two decisions. When the record runs out first, the shortfall is
    reported in ``Rates.incomplete`` (and those decisions are not counted).
    ``disjoint=False``: each decision sees the whole record in its own seeded
    random order -- decisions share rounds, so they are not independent and the
    time order (drift) is lost; a fallback when the record is short, to be labelled so.
    """
    _check_threshold(threshold)
    if decisions < 1:
        raise ValueError(f"decisions must be >= 1 (got {decisions})")
    done: list[Decision] = []
    incomplete = 0
    if disjoint:
        start = 0
        for _ in range(decisions):
            dec = sequential_decision(recorded_rounds[start:], threshold, plan)
            if not dec.complete:
                incomplete = decisions - len(done)
                break
            done.append(dec)
            start += dec.rounds_seen
    else:
        rng = np.random.default_rng(seed)
        for _ in range(decisions):
            order = rng.permutation(len(recorded_rounds))
            dec = sequential_decision([recorded_rounds[i] for i in order], threshold, plan)
            if dec.complete:
                done.append(dec)
            else:
                incomplete += 1
    params = {"threshold": threshold, "plan": plan.look_points, "alpha": plan.alpha, "disjoint": disjoint, "recorded_rounds": len(recorded_rounds)}
    if not disjoint:
        params["seed"] = seed
    return _rates(done, params, incomplete), done


# ------------------------------------------------------------------ the rate table

# The scenarios of docs/SPEED_GATE.md: (label, ratio_sd, true_effect, threshold or None for the
# suggested one, extra noise). 0.1% is the H200 Triton kernel's round-ratio SD rounded up
# (8 fresh processes: CV 0.043%, so a ratio of two has ~0.06%); 3% is torch_dequant's.
SCENARIOS: tuple[tuple[str, float, float, float | None, dict[str, float]], ...] = (
    ("A/A, SD 0.1%", 0.001, 0.0, None, {}),
    ("-0.5%, SD 0.1%", 0.001, -0.005, None, {}),
    ("-1%, SD 0.1%", 0.001, -0.01, None, {}),
    ("+1%, SD 0.1%", 0.001, +0.01, None, {}),
    ("A/A, SD 0.1%, drift + 5% outliers + 10% excluded", 0.001, 0.0, None, {"drift": 2e-4, "outlier_rate": 0.05, "exclude_rate": 0.1}),
    ("-0.5%, SD 0.1%, drift + 5% outliers + 10% excluded", 0.001, -0.005, None, {"drift": 2e-4, "outlier_rate": 0.05, "exclude_rate": 0.1}),
    ("effect on the band edge, SD 0.1%", 0.001, None, None, {}),  # true effect = -threshold
    ("A/A, SD 3%, t=1%", 0.03, 0.0, 0.01, {}),
    ("-0.5%, SD 3%, t=1%", 0.03, -0.005, 0.01, {}),
    ("-5%, SD 3%, t=1%", 0.03, -0.05, 0.01, {}),
    ("A/A, SD 3%", 0.03, 0.0, None, {}),
    ("-10%, SD 3%", 0.03, -0.10, None, {}),
)


def rate_table(trials: int = 2000, seed: int = 0, plan: SequentialPlan = DEFAULT_PLAN, calibration_rounds: int = 16) -> str:
    """Markdown table of simulated verdict rates for :data:`SCENARIOS`.

    Thresholds marked "suggested" come from :func:`calibrate` on ``calibration_rounds``
    synthetic A/A rounds of the scenario's noise (seeded), as the gate's ``--calibrate`` would.
    """
    rows = []
    thresholds: dict[float, Calibration] = {}
    for i, (label, sd, effect, threshold, noise) in enumerate(SCENARIOS):
        if threshold is None:
            if sd not in thresholds:
                aa = synthetic_rounds(calibration_rounds, sd, 0.0, np.random.default_rng(seed + 10_000))
                thresholds[sd] = calibrate(aa, plan)
            threshold = suggest_threshold(thresholds[sd])
            source = "suggested"
        else:
            source = "fixed"
        if effect is None:
            effect = -threshold
        r = simulate(sd, effect, threshold, plan, trials=trials, seed=seed + i, **noise)
        rows.append(
            {"scenario": label, "true effect": f"{effect:+.3%}", "threshold": f"{threshold:.3%} ({source})"}
            | {v.value: f"{r.rate(v):.2%}" for v in Verdict}
            | {"mean rounds": f"{r.mean_rounds:.1f}", "stopped early": f"{r.stopped_early / r.decisions:.0%}"}
        )
    head = (
        f"Plan: looks at {list(plan.look_points)} usable rounds, alpha {plan.alpha} (per look {plan.per_look_alpha:.5f}); "
        f"{trials} seeded trials per row (seed {seed}).\n\n"
    )
    cal = "\n".join(f"- SD {sd:.1%}: {c.summary()}" for sd, c in thresholds.items())
    return head + markdown_table(rows) + "\n\nCalibrations used for the suggested thresholds:\n" + cal + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.paired", description="Print the speed gate's simulated verdict rates (docs/SPEED_GATE.md).")
    parser.add_argument("--trials", type=int, default=2000, help="simulated gate decisions per scenario (default 2000)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    sys.stdout.write(rate_table(trials=args.trials, seed=args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
