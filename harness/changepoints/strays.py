"""Short segments that stray commits explain, and the changes beside them (issue 47): a bump of a few measurements
between two confirmed changes of opposite sign is dropped when a run of commits straying that far comes by chance
often enough, and a change confirmed on segments the strays shaped is tested again without them.
docs/CHANGE_POINTS.md, step 6. Only numpy and scipy.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from harness.changepoints import scan
from harness.changepoints.segments import CONFIRM_WINDOW, SEGMENT_MAX, Confirmed, _holds, _split

# A bump of a few commits is a segment only when so many commits that far from their baseline together by chance is
# rare (issue 47): with a share q of commits straying at least STRAY_HEIGHT x the bump's height its way, k or more of
# L commits in a row stray so by chance at the binomial tail P(Bin(L, q) >= k) per commit, k the bump's own count (5%
# of outlier commits: runs of three in 3% of 1000-commit series). Before, k was taken as L - 1 (L q^(L - 1)): a bump of
# six with four strays and two commits at the old level, common in t3 noise, passed for a segment.
STRAY_RATE = 1e-5  # per commit: 1% of 1000-commit series
STRAY_HEIGHT = 0.6
# Measurements (scan.measured: a run of copies once): a longer bump is a segment whatever the share (0.06^7 x 8 ~ 2e-8).
# Counted in commits before the fifth pass: a bump of nine commits, two of them copies, was never tested.
STRAY_BUMP_MAX = 8
# How far a dropped stray bump's edge may have shaped another change: the segment that change was confirmed on, or
# searched again on (segments._within). A change this close to one is tested again without it (_beside_strays).
BESIDE_REACH = max(CONFIRM_WINDOW, SEGMENT_MAX)


def without_stray_bumps(
    levels: np.ndarray,
    cleaned: np.ndarray,
    sigma: np.ndarray,
    inflation: dict[int, np.ndarray],
    confirmed: list[Confirmed],
    threshold: float,
    min_change: float,
) -> list[Confirmed]:
    """``confirmed`` without the short segments that stray commits explain (:func:`stray_bumps`), and without a change
    point beside one that no longer holds once those strays are taken for what they are (:func:`_beside_strays`)."""
    bumps = stray_bumps(levels, confirmed)
    if not bumps:
        return confirmed
    dropped = {edge for bump in bumps for edge in bump} - {0, len(levels)}
    return _beside_strays(cleaned, sigma, inflation, confirmed, bumps, dropped, threshold, min_change)


def stray_bumps(levels: np.ndarray, confirmed: list[Confirmed]) -> list[tuple[int, int]]:
    """The short segments [low, high) between ``confirmed`` changes that stray commits explain: a bump (two changes of
    opposite sign at most STRAY_BUMP_MAX measurements apart), or the first or newest commits of the series after or
    before a change as near its end, where commits stray STRAY_HEIGHT x the segment's height often enough
    (scan.stray_share) that a run like it comes by chance more often than STRAY_RATE per commit (issue 47)."""
    n = len(levels)
    deviation = scan.deviations(levels)
    new = scan.measured(levels)  # a copied result is one measurement, however many commits carry it (fourth pass)
    edges = [0, *(c.position for c in confirmed), n]
    short = [
        (low, high)
        for i, (low, high) in enumerate(zip(edges, edges[1:]))
        if _measurements(new, low, high) <= STRAY_BUMP_MAX
        and (low, high) != (0, n)
        and (low == 0 or high == n or (confirmed[i - 1].z > 0) != (confirmed[i].z > 0))
    ]
    bumps: list[tuple[int, int]] = []
    for low, high in short:
        if bumps and bumps[-1][1] == low:  # its first edge went with the bump before it
            continue
        level = float(np.median(_around(levels, low, high)))
        height = float(np.median(levels[low:high])) - level
        share = scan.stray_share(deviation, (low, high), STRAY_HEIGHT * height, new)
        own = levels[low:high][np.r_[True, new[low + 1 : high]]]  # its measurements (its first: a change's commit)
        if _stray_chance(own - level, STRAY_HEIGHT * height, share) > STRAY_RATE:
            bumps.append((low, high))
    return bumps


def _measurements(new: np.ndarray, low: int, high: int) -> int:
    """How many measurements ``[low, high)`` holds (``new``: scan.measured), its first commit counted as one: a
    change's first commit at the new level is measured there, whatever its predecessor's value."""
    return 1 + int(np.count_nonzero(new[low + 1 : high]))


def _around(levels: np.ndarray, low: int, high: int) -> np.ndarray:
    """The level around ``levels[low:high]``: as many commits either side as it has."""
    length = high - low
    return np.concatenate([levels[max(0, low - length) : low], levels[high : high + length]])


def _beside_strays(
    cleaned: np.ndarray,
    sigma: np.ndarray,
    inflation: dict[int, np.ndarray],
    confirmed: list[Confirmed],
    bumps: list[tuple[int, int]],
    dropped: set[int],
    threshold: float,
    min_change: float,
) -> list[Confirmed]:
    """``confirmed`` less ``dropped`` (the edges of stray ``bumps``); a change next to a dropped one (within
    BESIDE_REACH) is kept only while it holds, at its position and the scan's threshold, between the changes kept
    beside it, on levels whose stray bumps sit at the level around them (issue 47, fifth pass).

    Why: a change is confirmed on segments that the stray commits were part of. A stray bump's edge bounded its
    neighbour's segment, so that the neighbour was compared with a few commits or searched for at a segment's lower
    bar (segments._within); or the strays lay in the neighbour's own side and lifted it. Dropping the bump left the
    neighbour as a lone, lasting step: 8 of the 24 flagged of 1000 no-change 1000-commit series (t3 noise, 5% outlier
    commits, 5% exact repeats). As segments.confirm does for a failed candidate, strays are no segment."""
    n = len(cleaned)
    straightened = cleaned.copy()
    for low, high in bumps:
        straightened[low:high] = np.median(_around(cleaned, low, high))
    kept = [c for c in confirmed if c.position not in dropped]
    out = []
    for i, change in enumerate(kept):
        if not any(0 < abs(change.position - p) <= BESIDE_REACH for p in dropped):
            out.append(change)
            continue
        low = max(kept[i - 1].position if i else 0, change.position - CONFIRM_WINDOW)
        high = min(kept[i + 1].position if i + 1 < len(kept) else n, change.position + CONFIRM_WINDOW)
        tested = _split(straightened, sigma, inflation, low, high, change.position, change.position)
        if tested is not None and _holds(straightened, tested, low, high, threshold, min_change):
            out.append(tested)
    return out


def _stray_chance(offsets: np.ndarray, height: float, share: float) -> float:
    """The chance per commit that as many of ``len(offsets)`` commits in a row as here stray at least ``height`` (log
    units; its sign: the direction) when each does with probability ``share``: the binomial tail at the number of
    ``offsets`` (each commit's level minus the level around the run) that do, at most all but one (the split may take
    one ordinary commit into the run, as L q^(L - 1) allowed before; a run of one measurement, copied, as itself)."""
    straying = int(np.count_nonzero(offsets * math.copysign(1.0, height) >= abs(height)))
    return float(stats.binom.sf(min(straying, max(1, len(offsets) - 1)) - 1, len(offsets), share))
