"""A look's interval: the mean log ratio head/base with its Student-t interval.

The one place the gate computes a look's interval (:func:`look_interval`: the rounds' spread, :func:`model_interval`:
the noise model moderated by them) and its quantile (:func:`t_quantile`, also the futility's and the calibration's):
``exp(mean ± t_{1-a/2, n-1} · s / sqrt(n))``; why: docs/SPEED_GATE.md, "The interval".
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


def t_quantile(confidence: float, df: float) -> float:
    """The t quantile of a two-sided ``confidence`` interval with ``df`` degrees of freedom (not necessarily whole)."""
    return float(stats.t.ppf(0.5 + confidence / 2, df))


def _estimate(d: np.ndarray, confidence: float, method: str, half: float | None) -> Estimate:
    """The estimate of the log ratios ``d`` with half-width ``half`` on the log scale (None: unbounded)."""
    mean = float(np.mean(d)) if d.size else math.nan
    if half is None:
        return Estimate(math.exp(mean), 0.0, math.inf, int(d.size), method, confidence, 1.0)
    return Estimate(
        math.exp(mean), math.exp(mean - half), math.exp(mean + half), int(d.size), method, confidence, confidence
    )


def look_interval(ratios: Iterable[float], confidence: float = 0.95) -> Estimate:
    """The geometric-mean ratio head/base with the t interval; unbounded below 2 rounds (no spread yet)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1) (got {confidence})")
    d = log_ratios(ratios)
    n = int(d.size)
    half = t_quantile(confidence, n - 1) * (float(np.std(d, ddof=1)) / math.sqrt(n)) if n >= 2 else None
    return _estimate(d, confidence, METHOD, half)


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
    variance, df = mean_variance(d, gens, look) if d.size else (math.inf, 0.0)
    half = t_quantile(confidence, df) * math.sqrt(variance) if math.isfinite(variance) and df > 0 else None
    return _estimate(d, confidence, FALLBACK_METHOD if look.fallback else MODEL_METHOD, half)
