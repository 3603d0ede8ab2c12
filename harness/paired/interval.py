"""A look's interval: the mean log ratio head/base with its Student-t interval.

This is the one place the gate computes an interval from rounds (:func:`look_interval` from the rounds' own spread;
:func:`model_interval` from a runner's noise model, harness.paired.noise, moderated by the rounds), and the one place
its width is defined (:func:`standard_error`, :func:`quantile`, :func:`t_quantile`): the sequential plan's looks, its
futility prediction and the calibration's planning formulas all use these, so a plan and its calibration cannot disagree
on the width. The interval is the t interval, ``exp(mean ± t_{1-a/2, n-1} · s / sqrt(n))``; why: docs/SPEED_GATE.md,
"The interval".
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from harness.paired.noise import LookNoise, mean_variance
from harness.paired.rounds import json_float

METHOD = "mean of log ratios; Student-t interval"
MODEL_METHOD = "mean of log ratios; moderated t interval (noise model)"
FALLBACK_METHOD = (
    "mean of log ratios; t interval on this run's within-worker variance (the run is noisier than the model)"
)


@dataclass(frozen=True)
class Estimate:
    """The ratio head/base (geometric mean) with its interval (ratio scale).

    ``low = 0, high = inf`` (``bounded`` False) below 2 rounds: no spread yet, never a
    made-up interval. ``coverage`` is the interval's nominal coverage (its ``confidence``).
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
            "point": json_float(self.point),
            "low": json_float(self.low) if self.bounded else None,
            "high": json_float(self.high) if self.bounded else None,
            "bounded": self.bounded,
            "n": self.n,
            "method": self.method,
            "confidence": self.confidence,
            "coverage": self.coverage,
        }


def log_ratios(ratios: Iterable[float]) -> np.ndarray:
    """``log r_i``, refusing a ratio that is not finite and positive (such a round must be excluded)."""
    values = np.asarray([float(r) for r in ratios], dtype=float)
    if values.size and not (np.all(np.isfinite(values)) and np.all(values > 0)):
        bad = [float(v) for v in values if not (math.isfinite(v) and v > 0)][:3]
        raise ValueError(f"ratios must be finite and > 0 (got {bad}); exclude such rounds instead")
    return np.log(values)


def standard_error(ratio_sd: float, n: int) -> float:
    """The standard error of the mean log ratio of ``n`` rounds whose log ratios have SD ``ratio_sd``."""
    return ratio_sd / math.sqrt(n)


def quantile(confidence: float, n: int) -> float:
    """The t quantile of a two-sided ``confidence`` interval over ``n`` rounds (``n - 1`` degrees of freedom)."""
    return float(stats.t.ppf(0.5 + confidence / 2, n - 1))


def t_quantile(confidence: float, df: float) -> float:
    """The t quantile of a two-sided ``confidence`` interval with ``df`` degrees of freedom (not necessarily whole)."""
    return float(stats.t.ppf(0.5 + confidence / 2, df))


def half_width(ratio_sd: float, n: int, confidence: float) -> float:
    """The interval's half-width on the log scale for ``n`` rounds of log-ratio SD ``ratio_sd``."""
    return quantile(confidence, n) * standard_error(ratio_sd, n)


def look_interval(ratios: Iterable[float], confidence: float = 0.95) -> Estimate:
    """The geometric-mean ratio head/base with the t interval; unbounded below 2 rounds (no spread yet)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1) (got {confidence})")
    d = log_ratios(ratios)
    n = int(d.size)
    if n == 0:
        return Estimate(math.nan, 0.0, math.inf, 0, METHOD, confidence, 1.0)
    mean = float(np.mean(d))
    if n < 2:
        return Estimate(math.exp(mean), 0.0, math.inf, n, METHOD, confidence, 1.0)
    half = half_width(float(np.std(d, ddof=1)), n, confidence)
    return Estimate(math.exp(mean), math.exp(mean - half), math.exp(mean + half), n, METHOD, confidence, confidence)


def model_interval(ratios: Iterable[float], generations: Iterable[int], confidence: float, look: LookNoise) -> Estimate:
    """The geometric-mean ratio with a t interval whose variance comes from the noise model (harness.paired.noise).

    ``exp(mean ± t_{df} sqrt(V))`` with ``V, df = noise.mean_variance(...)``: the model's within-worker
    variance moderated by this run's rounds (or, with ``look.fallback``, this run's own within variance)
    plus the model's between-worker share. One round is enough for the moderated interval (the model
    carries the spread); a fallback interval needs a generation with two rounds.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1) (got {confidence})")
    d = log_ratios(ratios)
    gens = [int(g) for g in generations]
    if len(gens) != d.size:
        raise ValueError(f"{d.size} rounds but {len(gens)} worker generations")
    method = FALLBACK_METHOD if look.fallback else MODEL_METHOD
    if d.size == 0:
        return Estimate(math.nan, 0.0, math.inf, 0, method, confidence, 1.0)
    mean = float(np.mean(d))
    variance, df = mean_variance(d, gens, look)
    if not (math.isfinite(variance) and df > 0):
        return Estimate(math.exp(mean), 0.0, math.inf, int(d.size), method, confidence, 1.0)
    half = t_quantile(confidence, df) * math.sqrt(variance)
    return Estimate(
        math.exp(mean), math.exp(mean - half), math.exp(mean + half), int(d.size), method, confidence, confidence
    )
