"""From candidates to change points: each confirmed against its neighbouring candidates, then sized with an interval.

Candidates are confirmed independently, so every answer stays local; :func:`hold` keeps published change points while
the data allow. docs/CHANGE_POINTS.md, steps 6-8. Only numpy and scipy.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats

from harness.changepoints import scan
from harness.changepoints.scan import MIN_SIDE, SCALES, Candidate

CONFIRM_WINDOW = 100
# The shortest bump the rescue of one weak edge looks for (_bump): shorter ones are found by their own edges, and
# with heavy tails three or four outlier commits in a row looked like one (docs/CHANGE_POINTS.md, step 6).
BUMP_MIN = 5
HOLD_REACH = 4  # commits: a published change point and a new best split this close are one change
# The 95% likelihood-ratio confidence set of a change's location: the splits whose squared-error reduction is within
# this many noise variances of the best one. Hansen (2000), "Sample splitting and threshold estimation",
# Econometrica 68(3): the LR statistic of the location has the distribution (1 - exp(-x / 2))^2, 0.95 at 7.35.
LOCATION_MARGIN = -2 * math.log(1 - math.sqrt(0.95))
# |z| a published change point keeps at its own position: one test, not the search over positions and scales that
# the threshold pays for (docs/CHANGE_POINTS.md, step 7).
HOLD_Z = 3.0
# A segment between two confirmed change points holds a step when its best split's two-sided p, times its splits, is
# under this (issue 47: _inner_bar).
INNER_LEVEL = 0.01
EDGE_LEVEL = 0.001  # ... and a segment with a change point at one end only (the other: the history's end, or cut)
SEGMENT_MAX = 128  # commits: the longest segment between change points tested again for a step inside
REGRESSION = "regression"
IMPROVEMENT = "improvement"


@dataclass(frozen=True)
class ChangePoint:
    """A change before commit ``index`` (the first commit at the new level; ``index - 1`` the last at the old)."""

    index: int
    direction: str  # REGRESSION or IMPROVEMENT
    relative_change: float  # after / before - 1, of the median of commit medians
    interval: tuple[float, float]  # of relative_change, at ``confidence``
    confidence: float
    p_value: float  # two-sided, of the confirmation z (one comparison; the series-level rate is simulated)
    level: float  # the per-comparison level the threshold means: p_value <= level
    before: tuple[int, int]  # commit indices [start, end) of the segment the size is taken over, before
    after: tuple[int, int]  # and after
    # The first commits at the new level that the data allow, [first, last]: the location's 95% likelihood-ratio
    # confidence set over before + after (LOCATION_MARGIN; issue 47). The culprit is in (first - 1, last].
    location: tuple[int, int] | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Confirmed:
    position: int
    z: float


def confirm(
    levels: np.ndarray,
    sigma: np.ndarray,
    found: list[Candidate],
    threshold: float,
    min_change: float,
    inflation: dict[int, np.ndarray],
) -> list[Confirmed]:
    """The candidates that hold between their neighbours, at their best splits, and the steps the segments between
    them hide (:func:`_within`). ``inflation``: scale -> per-position long-run inflation (scan.scale_scan's).

    A candidate that held against a neighbouring candidate which did not is tested once more between the neighbours
    that held (issue 47): a failed candidate is no change, and the few commits between it and the one that held are
    no segment to compare with. Before, three or four stray commits in a row, each an edge candidate, made one edge
    hold over them while the other failed -- a lone change point that no stray rule saw, as it was no bump (t3 noise
    and 5% outlier commits: 4 of the 5 of 200 flagged 1000-commit series). As :func:`_bump` does for one failed edge,
    a bump's edges stand together or not at all. One pass only: each answer stays local (incremental.REACH)."""
    n = len(levels)
    bounds = [0, *(c.position for c in found), n]
    first = [
        _confirm_one(levels, sigma, inflation, c, bounds[i], bounds[i + 2], threshold, min_change)
        for i, c in enumerate(found)
    ]
    held = [i for i, kept in enumerate(first) if kept]
    out: dict[int, Confirmed] = {}
    for k, i in enumerate(held):
        before = found[held[k - 1]].position if k else 0
        after = found[held[k + 1]].position if k + 1 < len(held) else n
        kept = first[i]
        if (before, after) != (bounds[i], bounds[i + 2]):  # a neighbour it was tested against failed
            kept = _confirm_one(levels, sigma, inflation, found[i], before, after, threshold, min_change)
        for edge in kept:
            out.setdefault(edge.position, edge)
    confirmed = sorted(out.values(), key=lambda c: c.position)
    edges = [0, *(c.position for c in confirmed), n]
    for low, high in zip(edges, edges[1:]):
        confirmed += _within(levels, sigma, inflation, low, high, threshold, min_change)
    return sorted(confirmed, key=lambda c: c.position)


def _confirm_one(
    levels: np.ndarray,
    sigma: np.ndarray,
    inflation: dict[int, np.ndarray],
    candidate: Candidate,
    before: int,
    after: int,
    threshold: float,
    min_change: float,
) -> list[Confirmed]:
    """``candidate`` tested on the segment between ``before`` and ``after`` (neighbouring candidates or the ends), at
    most CONFIRM_WINDOW a side: its best split when that holds, else the two edges of a bump (:func:`_bump`), else
    nothing."""
    n = len(levels)
    low = max(before, candidate.position - CONFIRM_WINDOW)
    high = min(after, candidate.position + CONFIRM_WINDOW)
    half = max(1, math.ceil(candidate.scale / 2))
    # Near the newest commit the search runs to it: a step just after the candidate's window, with under MIN_SIDE
    # commits after it yet, must make the candidate wait, not be reported a few commits early. Only splits that would
    # wait are added (no wider search, whose best split would be a larger maximum).
    last = candidate.position + half
    if high == n and last + MIN_SIDE >= n:
        last = n - 1
    tested = _split(levels, sigma, inflation, low, high, candidate.position - half, last)
    if tested is not None and _holds(levels, tested, low, high, threshold, min_change):
        return [tested]
    return _bump(levels, sigma, inflation, low, high, candidate.position, half, threshold, min_change)


def _split(
    levels: np.ndarray, sigma: np.ndarray, inflation: dict[int, np.ndarray], low: int, high: int, first: int, last: int
) -> Confirmed | None:
    """The least-squares split of ``levels[low:high]`` among ``first..last``, and its z; None when it leaves under
    MIN_SIDE commits on a side (a step not located yet waits). docs/CHANGE_POINTS.md, step 6."""
    splits = np.arange(max(low + 1, first), min(high - 1, last) + 1)
    if not len(splits):
        return None
    a, b = splits - low, high - splits
    # A running sum over the segment alone: the same commits give the same sums wherever the series starts.
    running = np.concatenate([[0.0], np.cumsum(levels[low:high])])
    difference = (running[-1] - running[a]) / b - running[a] / a
    best = int(np.argmax(np.abs(difference) * np.sqrt(a * b / (a + b))))
    split, before, after = int(splits[best]), int(a[best]), int(b[best])
    if min(before, after) < MIN_SIDE:
        return None
    scale = float(
        sigma[split]
        * math.sqrt(1 / before + 1 / after)
        * _at(inflation, np.array([split]), np.array([max(before, after)]))[0]
    )
    return Confirmed(split, float(difference[best]) / scale)


def _bump(
    levels: np.ndarray,
    sigma: np.ndarray,
    inflation: dict[int, np.ndarray],
    low: int,
    high: int,
    at: int,
    half: int,
    threshold: float,
    min_change: float,
) -> list[Confirmed]:
    """A failed candidate tested as one edge of a bump whose other edge the scan missed (the best split between the
    candidate and its neighbour, on each side); both edges stand or neither does."""
    for other_side_after in (True, False):
        if other_side_after:
            other = _split(levels, sigma, inflation, at, high, at + 1, high - 1)
            if other is None:
                continue
            edge = _split(levels, sigma, inflation, low, other.position, at - half, at + half)
            if edge is None:
                continue
            other = _split(levels, sigma, inflation, edge.position, high, other.position, other.position)
            pair = [(edge, low, other.position if other else high), (other, edge.position, high)]
        else:
            other = _split(levels, sigma, inflation, low, at, low + 1, at - 1)
            if other is None:
                continue
            edge = _split(levels, sigma, inflation, other.position, high, at - half, at + half)
            if edge is None:
                continue
            other = _split(levels, sigma, inflation, low, edge.position, other.position, other.position)
            pair = [(other, low, edge.position), (edge, other.position if other else low, high)]
        first, second = pair[0][0], pair[1][0]
        if first is None or second is None or second.position - first.position < BUMP_MIN:
            continue
        # The other edge was searched for over the segment: its bar is raised for that search (Bonferroni).
        searched = float(stats.norm.isf(stats.norm.sf(threshold) / max(1, high - low)))
        if all(
            c is not None and _holds(levels, c, a, b, searched if c is other else threshold, min_change)
            for c, a, b in pair
        ):
            return [first, second]
    return []


def hold(
    levels: np.ndarray,
    sigma: np.ndarray,
    inflation: dict[int, np.ndarray],
    confirmed: list[Confirmed],
    published: list[int],
    threshold: float,
    min_change: float,
) -> list[Confirmed]:
    """``confirmed`` with the change points published before held where the data still allow them (issue 38): a
    published position while it is in the location's confidence set (LOCATION_MARGIN) and the step there holds
    (|z| >= HOLD_Z, min_change); a published change with none confirmed near it while it holds at its own position.
    docs/CHANGE_POINTS.md, step 7."""
    n = len(levels)
    raw = [c.position for c in confirmed]
    published_set = set(published)
    out = {c.position: c for c in confirmed}
    for p in sorted(published_set):
        if p in out or p < MIN_SIDE or p > n - MIN_SIDE:
            continue
        near = [c for c in raw if abs(c - p) <= HOLD_REACH and c not in published_set and c in out]
        if near:
            c = min(near, key=lambda q: (abs(q - p), q))
            i = raw.index(c)
            low = max(raw[i - 1] if i else 0, c - CONFIRM_WINDOW)
            high = min(raw[i + 1] if i + 1 < len(raw) else n, c + CONFIRM_WINDOW)
            at = _split(levels, sigma, inflation, low, high, p, p) if low < p < high else None
            if (
                at is not None
                and (_gain(levels, low, high, c) - _gain(levels, low, high, p)) / sigma[c] ** 2 <= LOCATION_MARGIN
                and _holds(levels, at, low, high, HOLD_Z, min_change)
            ):
                del out[c]
                out[p] = at
            continue
        current = sorted(out)
        low = max(max((q for q in current if q < p), default=0), p - CONFIRM_WINDOW)
        high = min(min((q for q in current if q > p), default=n), p + CONFIRM_WINDOW)
        at = _split(levels, sigma, inflation, low, high, p, p)
        if at is not None and _holds(levels, at, low, high, HOLD_Z, min_change):
            out[p] = at
    return sorted(out.values(), key=lambda c: c.position)


def _gain(levels: np.ndarray, low: int, high: int, split: int) -> float:
    """How much a step at ``split`` reduces the squared error of ``levels[low:high]`` about one mean."""
    a, b = split - low, high - split
    difference = float(np.mean(levels[split:high]) - np.mean(levels[low:split]))
    return difference**2 * a * b / (a + b)


def _holds(levels: np.ndarray, tested: Confirmed, low: int, high: int, threshold: float, min_change: float) -> bool:
    size = math.expm1(float(np.median(levels[tested.position : high]) - np.median(levels[low : tested.position])))
    return abs(tested.z) >= threshold and abs(size) >= min_change


def _within(
    levels: np.ndarray,
    sigma: np.ndarray,
    inflation: dict[int, np.ndarray],
    low: int,
    high: int,
    threshold: float,
    min_change: float,
) -> list[Confirmed]:
    """Steps inside a segment between confirmed change points (or an end), by binary segmentation, where a weaker
    step beside a stronger one is alone: the whole segment when it is at most SEGMENT_MAX commits, else the SEGMENT_MAX
    commits next to each change point that bounds it (issue 47: a staircase's other steps in a 1000-commit history were
    never searched, their segment to the history's start being longer), so the answer stays local. A segment with a
    change point at both ends is searched at :func:`_inner_bar` (a staircase's middle step)."""
    n = len(levels)
    if high - low <= SEGMENT_MAX:
        windows = [(low, high)]
    else:
        windows = ([(low, low + SEGMENT_MAX)] if low > 0 else []) + ([(high - SEGMENT_MAX, high)] if high < n else [])
    found: dict[int, Confirmed] = {}
    for a, b in windows:
        ends = (0 < a == low, b == high < n)  # which ends are change points (not the history's ends, nor cut)
        for c in _bisect(levels, sigma, inflation, a, b, threshold, min_change, ends):
            found.setdefault(c.position, c)
    return sorted(found.values(), key=lambda c: c.position)


def _bisect(
    levels: np.ndarray,
    sigma: np.ndarray,
    inflation: dict[int, np.ndarray],
    low: int,
    high: int,
    threshold: float,
    min_change: float,
    ends: tuple[bool, bool],
) -> list[Confirmed]:
    """Binary segmentation of ``levels[low:high]``; ``ends``: whether a change point bounds it before and after."""
    if high - low < 2 * MIN_SIDE:
        return []
    level = INNER_LEVEL if all(ends) else EDGE_LEVEL if any(ends) else 0.0
    bar = min(_inner_bar(high - low, level), threshold) if level else threshold
    tested = _split(levels, sigma, inflation, low, high, low + 1, high - 1)
    if tested is None or not _holds(levels, tested, low, high, bar, min_change):
        return []
    return [
        *_bisect(levels, sigma, inflation, low, tested.position, threshold, min_change, (ends[0], True)),
        tested,
        *_bisect(levels, sigma, inflation, tested.position, high, threshold, min_change, (True, ends[1])),
    ]


def _inner_bar(length: int, level: float) -> float:
    """|z| a split of a segment between two confirmed change points must reach: INNER_LEVEL over the segment's splits
    (Bonferroni). The scan's threshold pays for a search over every position and scale of the series; between two
    change points already found the search is over this segment's splits alone, so a staircase's middle step, which
    the scan sees only beside its stronger neighbours, is found when it stands out in its own segment."""
    return float(stats.norm.isf(level / 2 / max(1, length - 2 * MIN_SIDE + 1)))


def _at(inflation: dict[int, np.ndarray], positions: np.ndarray, widths: np.ndarray) -> np.ndarray:
    """Each position's inflation at the widest scale not wider than its narrower segment."""
    out = np.ones(len(positions))
    for k, (p, w) in enumerate(zip(positions, widths)):
        fitting = [s for s in SCALES if s <= w and s in inflation]
        if fitting:
            out[k] = inflation[max(fitting)][p]
    return out


def describe(
    levels: np.ndarray,
    errors: np.ndarray,
    changes: list[Confirmed],
    *,
    higher_is_better: bool,
    threshold: float,
    with_intervals: bool,
    bootstrap: int,
    confidence: float,
    seed: int,
    only: set[int] | None = None,
) -> list[ChangePoint | None]:
    """Size, interval and direction of each confirmed change (``only``: of these indices; None elsewhere), its
    sides bounded by the neighbouring changes and CONFIRM_WINDOW."""
    n = len(levels)
    bounds = [0, *(c.position for c in changes), n]
    level = float(2 * stats.norm.sf(threshold))
    sigma = scan.noise(levels) if changes else np.zeros(0)
    out: list[ChangePoint | None] = []
    for i, change in enumerate(changes):
        if only is not None and i not in only:
            out.append(None)
            continue
        tau = change.position
        before = (max(bounds[i], tau - CONFIRM_WINDOW), tau)
        after = (tau, min(bounds[i + 2], tau + CONFIRM_WINDOW))
        size = math.expm1(float(np.median(levels[after[0] : after[1]]) - np.median(levels[before[0] : before[1]])))
        interval = (
            _interval(levels, errors, before, after, bootstrap, confidence, np.random.default_rng((seed, tau)))
            if with_intervals
            else (float("nan"), float("nan"))
        )
        worse = size < 0 if higher_is_better else size > 0
        out.append(
            ChangePoint(
                index=tau,
                direction=REGRESSION if worse else IMPROVEMENT,
                relative_change=size,
                interval=interval,
                confidence=confidence,
                p_value=float(2 * stats.norm.sf(abs(change.z))),
                level=level,
                before=before,
                after=after,
                location=_location(levels, sigma, before[0], after[1], tau),
            )
        )
    return out


def _location(levels: np.ndarray, sigma: np.ndarray, low: int, high: int, at: int) -> tuple[int, int]:
    """[first, last] of the splits of ``levels[low:high]`` whose squared-error reduction is within LOCATION_MARGIN
    noise variances of the best one's (Hansen 2000; as :func:`hold` keeps a published position), ``at`` included."""
    splits = np.arange(low + 1, high)
    if not len(splits):
        return at, at
    a, b = splits - low, high - splits
    running = np.concatenate([[0.0], np.cumsum(levels[low:high])])
    gain = ((running[-1] - running[a]) / b - running[a] / a) ** 2 * a * b / (a + b)
    inside = splits[(gain.max() - gain) / sigma[at] ** 2 <= LOCATION_MARGIN]
    return int(min(inside.min(), at)), int(max(inside.max(), at))


def _interval(
    levels: np.ndarray,
    errors: np.ndarray,
    before: tuple[int, int],
    after: tuple[int, int],
    replicates: int,
    confidence: float,
    rng: np.random.Generator,
) -> tuple[float, float]:
    def resampled(side: tuple[int, int]) -> np.ndarray:
        count = side[1] - side[0]
        picks = side[0] + rng.integers(0, count, (replicates, count))
        return np.median(levels[picks] + errors[picks] * rng.standard_normal((replicates, count)), axis=1)

    sizes = np.expm1(resampled(after) - resampled(before))
    tail = (1 - confidence) / 2
    return float(np.quantile(sizes, tail)), float(np.quantile(sizes, 1 - tail))
