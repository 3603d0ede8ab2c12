"""The Wilcoxon signed-rank null distribution, and the rank of the Walsh averages that bound the interval.

The interval on the Hodges-Lehmann estimate is ``[W_(k), W_(M+1-k)]`` over the
``M = n(n+1)/2`` sorted Walsh averages, with ``k`` the largest integer such that
``P0(T+ <= k-1) <= alpha/2`` for the signed-rank statistic ``T+``. ``P0`` is the
exact null distribution (dynamic programming, tested against enumeration of all
sign patterns and against ``scipy.stats.wilcoxon(method="exact")``) up to
:data:`EXACT_MAX_N` rounds.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import stats

# Up to this many rounds the signed-rank null distribution is computed exactly;
# above it, the normal approximation with continuity correction (a gate never
# plans that many rounds: each one is two fresh processes).
EXACT_MAX_N = 300

# A cumulative probability computed by the DP may sit a rounding error above an
# exactly representable alpha/2 (e.g. 2^-6); compare with this relative slack.
_CDF_SLACK = 1e-9


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
def signed_rank_cdf(n: int) -> np.ndarray:
    """``cdf[w] = P0(T+ <= w)`` for ``n`` untied ranks, exact (read-only, cached)."""
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
        cdf = signed_rank_cdf(n)
        # cdf[w] <= half for w = 0 .. k-1; searchsorted counts them.
        k = int(np.searchsorted(cdf, half * (1.0 + _CDF_SLACK), side="right"))
        return (k, 1.0 - 2.0 * float(cdf[k - 1])) if k else (0, 1.0)
    mean = n * (n + 1) / 4.0
    sd = math.sqrt(n * (n + 1) * (2 * n + 1) / 24.0)
    k = int(math.floor(mean - 0.5 + float(stats.norm.ppf(half)) * sd)) + 1
    if k < 1:
        return 0, 1.0
    return k, 1.0 - 2.0 * float(stats.norm.cdf((k - 1 + 0.5 - mean) / sd))


def min_rounds_for(confidence: float) -> int:
    """Fewest rounds whose exact interval is bounded at ``confidence``: ``2 * 2^-n <= 1 - confidence``."""
    alpha = 1.0 - confidence
    n = 1
    while walsh_rank(n, alpha)[0] == 0:
        n += 1
    return n
