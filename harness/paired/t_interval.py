"""The mean log ratio head/base with its Student-t interval: the warm engine's early looks.

The signed-rank interval is distribution-free but needs rounds: at a per-look
confidence of 99.9% it has no interval below 10 rounds, whatever the noise. Rounds
from warm workers are cheap and their log ratios are close to normal (a ratio of two
medians of hundreds of launches), so the gate's warm plan uses the t interval, which
is exact for normal rounds at any n >= 2: ``exp(mean ± t_{1-a/2, n-1} · s / sqrt(n))``.
The quantile is scipy.stats.t's (exact at small n, where the old hand-written
approximation was not valid). The A/A runs in docs/SPEED_GATE.md check the
normality assumption where it matters: the false-alarm rate.
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np
from scipy import stats

from harness.paired.hodges_lehmann import Estimate, log_ratios

METHOD = "mean of log ratios; Student-t interval"


def t_estimate(ratios: Iterable[float], confidence: float = 0.95) -> Estimate:
    """Geometric-mean ratio head/base with the t interval; unbounded below 2 rounds (no spread yet)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1) (got {confidence})")
    d = log_ratios(ratios)
    n = int(d.size)
    if n == 0:
        return Estimate(math.nan, 0.0, math.inf, 0, METHOD, confidence, 1.0)
    mean = float(np.mean(d))
    if n < 2:
        return Estimate(math.exp(mean), 0.0, math.inf, n, METHOD, confidence, 1.0)
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * float(np.std(d, ddof=1)) / math.sqrt(n)
    return Estimate(math.exp(mean), math.exp(mean - half), math.exp(mean + half), n, METHOD, confidence, confidence)
