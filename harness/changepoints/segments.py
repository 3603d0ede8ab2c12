"""From candidates to change points: each confirmed against its neighbouring candidates, then sized with an interval.

* **Confirmation.** A candidate found at scale h is tested again between its neighbouring
  candidates (at most :data:`CONFIRM_WINDOW` commits either side): the windows now reach the
  neighbouring changes, so a regression fixed five commits later is compared as the clean
  five-commit segment it is, and a wide candidate's position is refined to the best split
  within h/2 of it. It stays a change point when its z is still >= the threshold and the
  relative size of the step is at least ``min_change`` (a step smaller than that is within
  what a runner's level wanders between days, and the PR gate, which interleaves both sides,
  is the tool for it). Candidates are confirmed independently (no candidate's fate moves
  another's neighbours): every answer stays local.
* **Size.** The median of the commit medians after the change over the median before, each
  side up to the neighbouring change point and at most CONFIRM_WINDOW commits: the level just
  before and just after, not an average over years.
* **Interval.** A two-level bootstrap: the commits of each side resampled, each resampled
  commit's median moved by its own sampling error (its samples' robust SD / sqrt(n) x 1.2533,
  the standard error of a median), the size recomputed; percentiles at ``confidence``. A commit
  measured with few or noisy samples widens the interval. Seeded per change point, so the same
  change gets the same interval whenever it is computed.

Only numpy and scipy.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats

from harness.changepoints.scan import MIN_SIDE, SCALES, Candidate, window_mean

CONFIRM_WINDOW = 100
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

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Confirmed:
    position: int
    z: float


def confirm(levels: np.ndarray, sigma: np.ndarray, found: list[Candidate], threshold: float, min_change: float,
            inflation: dict[int, np.ndarray]) -> list[Confirmed]:
    """The candidates that hold between their neighbours (see the module doc), at their refined positions.

    ``inflation``: scale -> per-position long-run inflation (scan.scale_scan's), for the segment widths tested.
    """
    n = len(levels)
    bounds = [0, *(c.position for c in found), n]
    out = []
    for i, candidate in enumerate(found):
        low = max(bounds[i], candidate.position - CONFIRM_WINDOW)
        high = min(bounds[i + 2], candidate.position + CONFIRM_WINDOW)
        half = max(1, math.ceil(candidate.scale / 2))
        splits = np.arange(max(low + MIN_SIDE, candidate.position - half), min(high - MIN_SIDE, candidate.position + half) + 1)
        if not len(splits):
            continue
        a, b = splits - low, high - splits
        difference = window_mean(levels, splits, b) - window_mean(levels, np.full(len(splits), low), a)
        z = difference / (sigma[splits] * np.sqrt(1.0 / a + 1.0 / b) * _at(inflation, splits, np.maximum(a, b)))
        best = int(np.argmax(np.abs(z)))
        split = int(splits[best])
        size = math.expm1(float(np.median(levels[split:high]) - np.median(levels[low:split])))
        if abs(z[best]) >= threshold and abs(size) >= min_change:
            out.append(Confirmed(int(splits[best]), float(z[best])))
    return out


def _at(inflation: dict[int, np.ndarray], positions: np.ndarray, widths: np.ndarray) -> np.ndarray:
    """Each position's inflation at the widest scale not wider than its narrower segment."""
    out = np.ones(len(positions))
    for k, (p, w) in enumerate(zip(positions, widths)):
        fitting = [s for s in SCALES if s <= w and s in inflation]
        if fitting:
            out[k] = inflation[max(fitting)][p]
    return out


def describe(levels: np.ndarray, errors: np.ndarray, changes: list[Confirmed], *, higher_is_better: bool,
             threshold: float, with_intervals: bool, bootstrap: int, confidence: float, seed: int,
             only: set[int] | None = None) -> list[ChangePoint | None]:
    """Size, interval and direction of each confirmed change (``only``: of these indices; None elsewhere), its
    sides bounded by the neighbouring changes and CONFIRM_WINDOW."""
    n = len(levels)
    bounds = [0, *(c.position for c in changes), n]
    level = float(2 * stats.norm.sf(threshold))
    out: list[ChangePoint | None] = []
    for i, change in enumerate(changes):
        if only is not None and i not in only:
            out.append(None)
            continue
        tau = change.position
        before = (max(bounds[i], tau - CONFIRM_WINDOW), tau)
        after = (tau, min(bounds[i + 2], tau + CONFIRM_WINDOW))
        size = math.expm1(float(np.median(levels[after[0]:after[1]]) - np.median(levels[before[0]:before[1]])))
        interval = (_interval(levels, errors, before, after, bootstrap, confidence, np.random.default_rng((seed, tau)))
                    if with_intervals else (float("nan"), float("nan")))
        worse = size < 0 if higher_is_better else size > 0
        out.append(ChangePoint(index=tau, direction=REGRESSION if worse else IMPROVEMENT, relative_change=size,
                               interval=interval, confidence=confidence, p_value=float(2 * stats.norm.sf(abs(change.z))),
                               level=level, before=before, after=after))
    return out


def _interval(levels: np.ndarray, errors: np.ndarray, before: tuple[int, int], after: tuple[int, int], replicates: int,
              confidence: float, rng: np.random.Generator) -> tuple[float, float]:
    def resampled(side: tuple[int, int]) -> np.ndarray:
        count = side[1] - side[0]
        picks = side[0] + rng.integers(0, count, (replicates, count))
        return np.median(levels[picks] + errors[picks] * rng.standard_normal((replicates, count)), axis=1)

    sizes = np.expm1(resampled(after) - resampled(before))
    tail = (1 - confidence) / 2
    return float(np.quantile(sizes, tail)), float(np.quantile(sizes, 1 - tail))
