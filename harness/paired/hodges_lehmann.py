"""The Hodges-Lehmann ratio head/base and its distribution-free signed-rank interval.

Point: the median of the ``n(n+1)/2`` Walsh averages ``(d_i + d_j) / 2, i <= j``
of the log ratios ``d_i = log r_i``. Interval: two ordered Walsh averages
(:func:`harness.paired.signed_rank.walsh_rank`); ``(0, inf)`` when the rounds are
too few for the confidence. It assumes only that ``d_i - log(true ratio)`` is
symmetric about zero, which paired fresh processes give by construction: the
difference of two draws from one (possibly skewed) noise distribution is symmetric.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from harness.paired.rounds import json_float
from harness.paired.signed_rank import EXACT_MAX_N, walsh_rank


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
    d = log_ratios(ratios)
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
