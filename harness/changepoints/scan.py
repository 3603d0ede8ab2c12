"""Where a series' level may change: a multi-scale moving-sum scan, local noise, candidates merged bottom-up.

Every quantity at a commit depends only on data within :data:`REACH` of it (incremental relies on it).
docs/CHANGE_POINTS.md, steps 2-5. Only numpy.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

SCALES = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
MIN_SIDE = 3  # commits on each side of a change, at least
NOISE_BLOCK = 64  # commits per block of the noise estimate
NOISE_SPAN = 2  # blocks either side whose estimates are pooled
LONG_RUN_POSITIONS = 20  # a scale's spread needs this many x h positions around
SPREAD_BLOCKS = 8  # a scale's spread is estimated per block of ~SPREAD_BLOCKS x h positions, pooled over 3 blocks
_MAD_TO_SD = 1.4826
_MAD_SE = 1.17  # a normal MAD's relative standard error x sqrt(m)
OUTLIER_REACH = 2  # commits either side of the Hampel window
OUTLIER_SIGMAS = 3.0
STRAY_REACH = 8  # commits either side of the baseline a stray commit is measured from (deviations)
SIDE = 3  # commits on each side whose median a stray commit must be far from too (without_outliers)
RARE_FLIPS = 0.5  # the least share of nonzero differences assumed when they are flips (see _tie_floor)
NOISE_FLOOR = 1e-4  # log units (0.01%): no runner times a GEMM better; a noise-free series' steps are still certain
# A commit whose level is exactly its predecessor's carries a copy (asv copies the result of a commit whose benchmarked
# code is identical), not a new measurement: the stray rules count a run of them as one (issue 47, fourth pass), up to
# this many commits (a longer run counts once per COPIES_MAX commits, so that what the rules say about a commit still
# depends only on commits near it: incremental.REACH).
COPIES_MAX = 8


def spread_block(h: int) -> int:
    """Block length of scale h's spread estimate: a power of two, so that every block size divides the largest."""
    return 1 << math.ceil(math.log2(SPREAD_BLOCKS * h))


# The farthest a commit's data can move what the scan says elsewhere: the noise blocks pooled, the widest
# spread blocks, the widest window and its local-maximum reach, and the bottom-up merge's chain of scales.
ALIGN = max(spread_block(max(SCALES)), NOISE_BLOCK)
REACH = (2 * NOISE_SPAN + 2) * NOISE_BLOCK + 2 * spread_block(max(SCALES)) + 2 * max(SCALES) + sum(SCALES)


@dataclass(frozen=True)
class Candidate:
    position: int  # the first commit at the new level
    scale: int
    z: float


def nanmedian_rows(rows: np.ndarray, keepdims: bool = False) -> np.ndarray:
    """``np.nanmedian(rows, axis=1, keepdims=keepdims)`` of a 2-D array, the same numbers: each row's two middle
    non-NaN values (one, twice, for an odd count) summed and halved, NaN for a row without any. numpy takes that path
    through masked arrays (``np.ma.median``), whose per-call overhead was half of finding a 50,000-commit history's
    change points from nothing (tests/test_changepoints.py checks it bit for bit against numpy)."""
    if rows.shape[1] == 0:
        found = np.mean(rows, axis=1)  # numpy's NaN of an empty row (its mean), bit for bit
    else:
        ordered = np.sort(rows, axis=1)  # NaN last
        counts = np.count_nonzero(~np.isnan(rows), axis=1)
        high = counts // 2
        low = np.where(counts % 2 == 1, high, np.maximum(high - 1, 0))
        middle = np.take_along_axis(ordered, np.stack([low, high], axis=1), axis=1)
        found = middle.sum(axis=1) / 2.0  # a sum as numpy's (-0.0 twice sums to 0.0, as in np.ma.median)
        found[counts == 0] = np.nan
    return found[:, None] if keepdims else found


def _blockwise(values: np.ndarray, block: int, span: int, minimum: int, floor=None) -> np.ndarray:
    """Robust SD of ``values`` (NaN: no value) per block of ``block``, pooled as the median of the blocks within
    ``span`` either side; NaN where those blocks hold under ``minimum`` values together. One estimate per block.
    ``floor(rows, counts)``, if given (the noise of successive differences), is a per-block lower bound taken
    before pooling, and the MAD is corrected for a short history."""
    n_blocks = max(1, math.ceil(len(values) / block))
    padded = np.full(n_blocks * block, np.nan)
    padded[: len(values)] = values
    rows = padded.reshape(n_blocks, block)
    counts = np.count_nonzero(~np.isnan(rows), axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an empty block or window: no estimate there
        centre = nanmedian_rows(rows, keepdims=True)
        per_block = _MAD_TO_SD * nanmedian_rows(np.abs(rows - centre))
    together = sliding_window_view(np.pad(counts, span), 2 * span + 1).sum(axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if floor is not None:
            # A short history's MAD is raised by its standard error's excess over a full pool's (issue 38;
            # docs/CHANGE_POINTS.md, step 2); the floor is not (a noise-free series stays noise-free).
            full = (2 * span + 1) * block
            per_block = per_block * np.maximum(
                1.0, (1 + _MAD_SE / np.sqrt(np.maximum(together, 1))) / (1 + _MAD_SE / math.sqrt(full))
            )
            per_block = np.fmax(per_block, floor(rows, counts))
        per_block[counts < 2] = np.nan
        pooled = nanmedian_rows(sliding_window_view(np.pad(per_block, span, constant_values=np.nan), 2 * span + 1))
    pooled[together < minimum] = np.nan
    return pooled


def _tie_floor(rows: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per block of successive differences, an SD (x sqrt 2) that exact repeats cannot collapse: at least the nonzero
    differences' typical size x sqrt(their share, at least RARE_FLIPS x the share of flips), and at least the resolution
    (smallest nonzero difference / sqrt 6). On continuous data both are below the MAD. docs/CHANGE_POINTS.md, step 2."""
    magnitude = np.abs(rows)
    moved = magnitude > 0
    undone = np.zeros_like(moved)
    undone[:, :-1] = moved[:, :-1] & (rows[:, 1:] == -rows[:, :-1])
    flips = undone.copy()
    flips[:, 1:] |= undone[:, :-1]  # the difference that undoes one is a flip too
    nonzero = np.where(moved, magnitude, np.nan)
    moved_count = np.count_nonzero(moved, axis=1)
    share = moved_count / np.maximum(counts, 1)
    flip_share = np.count_nonzero(flips, axis=1) / np.maximum(moved_count, 1)
    typical = np.sqrt(np.maximum(share, RARE_FLIPS * flip_share)) * nanmedian_rows(nonzero)
    resolution = np.nanmin(nonzero, axis=1) / math.sqrt(6)
    return np.nan_to_num(np.fmax(typical, resolution), nan=0.0)


def noise(levels: np.ndarray) -> np.ndarray:
    """sigma at each commit boundary p (index p: between commits p-1 and p), from successive differences."""
    n = len(levels)
    diffs = np.diff(levels)  # diffs[i] sits at boundary i + 1
    per_block = _blockwise(diffs, NOISE_BLOCK, NOISE_SPAN, minimum=3, floor=_tie_floor) / math.sqrt(2)
    sigma = np.repeat(per_block, NOISE_BLOCK)[: max(n - 1, 0)]
    at_boundary = np.concatenate([[np.nan], sigma, [np.nan]])[: n + 1]
    # A block without an estimate (too few differences) takes its neighbours'; a series without any, zero noise.
    finite = at_boundary[np.isfinite(at_boundary)]
    fallback = float(np.median(finite)) if finite.size else 0.0
    at_boundary = np.where(np.isfinite(at_boundary), at_boundary, fallback)
    return np.maximum(at_boundary, NOISE_FLOOR)


def measured(levels: np.ndarray) -> np.ndarray:
    """Whether each commit is a new measurement: its level differs from its predecessor's, or it is the first, or it
    starts the next COPIES_MAX commits of a longer run of copies."""
    new = np.ones(len(levels), dtype=bool)
    new[1:] = levels[1:] != levels[:-1]
    if not new.all():
        starts = np.nonzero(new)[0]
        offset = np.arange(len(levels)) - starts[np.cumsum(new) - 1]
        new |= offset % COPIES_MAX == 0
    return new


def without_outliers(levels: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """Hampel's identifier over +-OUTLIER_REACH commits, held to one side of a step: a commit is stray when it is more
    than OUTLIER_SIGMAS x sigma from the median of its neighbourhood *and* from the median of the SIDE commits before it
    *and* of those after it; it then takes the median of the side it is nearer. One or two stray commits (a bad runner
    day) are no segment; three or more at a new level keep their level. A commit that agrees with the commits on one
    side of it is never moved: before issue 47 the commit just before a step took the new level's median (the window
    straddled the step) and pulled the step's split a commit or more early.

    Commits are counted as measurements (:func:`measured`): a run of copies is one commit here, and moves as one
    (issue 47, fourth pass). Before, a stray result copied to the two identical-code commits after it was three
    commits at a new level, a segment (t3 noise, 5% outlier commits, 5% exact repeats: 6.1% of 1000-commit no-change
    series flagged). A step followed by copies keeps them: the copies are at its new level, as the commits after are."""
    new = measured(levels)
    run = np.cumsum(new) - 1
    n = len(levels)
    bound = OUTLIER_SIGMAS * np.concatenate([[sigma[1]], sigma[1:n]])  # each commit's noise (boundary i: before i)
    copied = np.bincount(run)[run] > 1
    return np.where(copied, _hampel(levels[new], bound[new])[run], _hampel(levels, bound))


def _hampel(levels: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """:func:`without_outliers` on one level per measurement, ``bound`` each one's OUTLIER_SIGMAS x sigma."""
    n = len(levels)
    if n < 2 * OUTLIER_REACH + 1:
        return levels
    window = sliding_window_view(np.pad(levels, OUTLIER_REACH, mode="edge"), 2 * OUTLIER_REACH + 1)
    centre = np.median(window, axis=1)
    sides = sliding_window_view(np.pad(levels, SIDE + 1, constant_values=np.nan), SIDE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # no commit on a side (the series' ends): no agreement there
        before = nanmedian_rows(sides[1 : n + 1])  # levels[i - SIDE : i]
        after = nanmedian_rows(sides[SIDE + 2 : SIDE + 2 + n])  # levels[i + 1 : i + 1 + SIDE]

    def far(reference: np.ndarray) -> np.ndarray:
        return ~(np.abs(levels - reference) <= bound)  # NaN (no side): far

    stray = far(centre) & far(before) & far(after)
    nearer = np.where(np.isnan(after) | (np.abs(levels - before) <= np.abs(levels - after)), before, after)
    return np.where(stray, np.where(np.isnan(nearer), centre, nearer), levels)


def deviations(levels: np.ndarray) -> np.ndarray:
    """Each commit's level minus the median of the commits within STRAY_REACH of it: how far it strays from a baseline
    that a cluster of a few stray commits cannot move (a Hampel window of five can be)."""
    n = len(levels)
    reach = min(STRAY_REACH, (n - 1) // 2)
    if reach < 1:
        return np.zeros(n)
    window = sliding_window_view(np.pad(levels, reach, mode="edge"), 2 * reach + 1)
    return levels - np.median(window, axis=1)


def stray_share(deviation: np.ndarray, segment: tuple[int, int], height: float, new: np.ndarray | None = None) -> float:
    """The share of commits around ``segment`` (its first commit's NOISE_BLOCK block and NOISE_SPAN blocks either side:
    the reach of :func:`noise`), the segment's own left out, that stray at least ``height`` (log units; its sign: the
    direction) from their baseline (:func:`deviations`); of the new measurements only where ``new`` (:func:`measured`)
    says which commits are."""
    block = segment[0] // NOISE_BLOCK
    first, last = (
        max(0, (block - NOISE_SPAN) * NOISE_BLOCK),
        min(len(deviation), (block + NOISE_SPAN + 1) * NOISE_BLOCK),
    )
    if new is not None:
        deviation = np.where(new, deviation, np.nan)
    around = np.concatenate([deviation[first : segment[0]], deviation[segment[1] : last]])
    around = around[~np.isnan(around)]
    return float(np.mean(around * math.copysign(1.0, height) >= abs(height))) if len(around) else 0.0


def window_mean(levels: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Mean of ``levels[s:s+l]`` for each (s, l), each summed on its own: the same numbers give the same mean
    wherever the series starts (a running sum would not, and the incremental answer must equal the full one)."""
    out = np.empty(len(starts))
    for length in np.unique(lengths):
        picked = lengths == length
        at = starts[picked]
        if len(at) > 8:
            sums = sliding_window_view(levels, int(length)).sum(axis=1)[at]
        else:  # the few shortened windows at the series' ends
            sums = levels[at[:, None] + np.arange(int(length))].sum(axis=1)
        out[picked] = sums / length
    return out


def scale_scan(
    levels: np.ndarray,
    sigma: np.ndarray,
    h: int,
    narrower: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(positions p, mean difference after - before, z, inflation) at scale h; windows shrink at the ends to
    MIN_SIDE. ``inflation`` is indexed by boundary (0..n): the long-run factor z was divided by (>= 1); where too
    few positions measure it, the narrower scale's (``narrower``): a wander seen at 16 commits is there at 32."""
    n = len(levels)
    positions = np.arange(MIN_SIDE, n - MIN_SIDE + 1)
    a, b = np.minimum(h, positions), np.minimum(h, n - positions)
    difference = window_mean(levels, positions, b) - window_mean(levels, positions - a, a)
    width = np.sqrt(1.0 / a + 1.0 / b)
    white = sigma[positions] * width
    inflation = _long_run_inflation(difference, positions, a, b, white, h, n)
    inflation = np.where(np.isfinite(inflation), inflation, 1.0 if narrower is None else narrower)
    return positions, difference, difference / (white * inflation[positions]), inflation


def _long_run_inflation(
    difference: np.ndarray, positions: np.ndarray, a: np.ndarray, b: np.ndarray, white: np.ndarray, h: int, n: int
) -> np.ndarray:
    """How much more than white noise the scale-h difference varies around each position (>= 1; NaN where too few
    positions around measure it)."""
    block = spread_block(h)
    full = (a == h) & (b == h)
    standardised = np.full(n + 1, np.nan)
    standardised[positions[full]] = difference[full] / white[full]
    # At least 20h positions around: a step contaminates 2h of them, so a few steps cannot pass for a wander.
    per_block = _blockwise(standardised, block, span=1, minimum=LONG_RUN_POSITIONS * h)
    # The newest commits have no block after them: they take the estimate of the blocks just before (a wander is
    # slow), up to two blocks back.
    measured = per_block.copy()
    for i in range(1, len(per_block)):
        if np.isnan(measured[i]):
            earlier = measured[max(0, i - 2) : i]
            earlier = earlier[np.isfinite(earlier)]
            if earlier.size:
                per_block[i] = earlier[-1]
    at_boundary = np.repeat(per_block, block)[: n + 1]
    return np.maximum(at_boundary, 1.0)  # NaN (not measurable here) stays NaN


def candidates(
    levels: np.ndarray, sigma: np.ndarray, threshold: float
) -> tuple[list[Candidate], dict[int, np.ndarray]]:
    """Local maxima of |z| >= threshold at every scale, merged bottom-up (smallest scale first), by position;
    and each scale's long-run inflation by boundary (for the confirmation's wider windows)."""
    n = len(levels)
    kept: list[Candidate] = []
    inflations: dict[int, np.ndarray] = {}
    previous = 0
    for h in SCALES:
        if h > 2 and 2 * h > n:
            break
        positions, _, z, inflations[h] = scale_scan(levels, sigma, h, inflations.get(previous))
        previous = h
        if not len(z):
            continue
        strength = np.abs(z)
        reach = max(1, h // 2)
        padded = np.pad(strength, reach, constant_values=-np.inf)
        peak = sliding_window_view(padded, 2 * reach + 1).max(axis=1)
        found = np.nonzero((strength >= threshold) & (strength == peak))[0]
        narrower = [c.position for c in kept]
        for i in found:
            p = int(positions[i])
            # Kept when no narrower scale has a candidate within h, and no stronger one of this scale is within h
            # (kept or not): each decision looks at its own neighbourhood only, never along a chain of them.
            stronger = any(abs(int(positions[j]) - p) < h and strength[j] > strength[i] for j in found)
            if not stronger and all(abs(p - q) >= h for q in narrower):
                kept.append(Candidate(p, h, float(z[i])))
    return sorted(kept, key=lambda c: c.position), inflations
