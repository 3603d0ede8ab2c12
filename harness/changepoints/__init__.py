"""Change points over a benchmark's history: where its level moved, for how long, by how much.

Input: one entry per measured commit, oldest first, each with all samples of that commit; :mod:`.scan` finds candidates,
:mod:`.segments` confirms and sizes them, :mod:`.incremental` recomputes a grown series only where new commits reach
(:data:`REACH`). The threshold sets a false-alarm rate per commit, not per series. docs/CHANGE_POINTS.md.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from harness.changepoints import incremental
from harness.changepoints.incremental import Memo, Work
from harness.changepoints.scan import REACH, SCALES, candidates, noise, without_outliers
from harness.changepoints.segments import (
    CONFIRM_WINDOW,
    IMPROVEMENT,
    REGRESSION,
    ChangePoint,
    confirm,
    describe,
    hold,
)
from harness.changepoints.strays import without_stray_bumps

__all__ = [
    "ChangePoint",
    "REGRESSION",
    "IMPROVEMENT",
    "detect",
    "detect_growing",
    "Memo",
    "Work",
    "levels_of",
    "find",
    "REACH",
    "SCALES",
    "CONFIRM_WINDOW",
    "DEFAULT_THRESHOLD",
    "DEFAULT_MIN_CHANGE",
]

DEFAULT_THRESHOLD = 4.7  # |z|; docs/CHANGE_POINTS.md: <= 1% of pure-noise series of 50 or 1000 commits flagged
DEFAULT_MIN_CHANGE = 0.005  # relative; smaller steps are the PR gate's (docs/CHANGE_POINTS.md)
DEFAULT_BOOTSTRAP = 400
DEFAULT_CONFIDENCE = 0.95
_SE_OF_MEDIAN = 1.2533  # sqrt(pi / 2): a median's standard error over the mean's, for normal samples


def levels_of(series: Sequence[Sequence[float] | float]) -> tuple[np.ndarray, np.ndarray]:
    """(log of each commit's median, that median's standard error in log units) from the samples."""
    levels, errors = np.empty(len(series)), np.zeros(len(series))
    for i, point in enumerate(series):
        samples = np.atleast_1d(np.asarray(point, dtype=float))
        samples = samples[np.isfinite(samples)]
        if samples.size == 0:
            raise ValueError(f"commit {i} has no finite sample: leave unmeasured commits out of the series")
        if np.any(samples <= 0):
            raise ValueError(
                f"commit {i} has a sample <= 0: change points are found in TFLOPS or seconds, which are positive"
            )
        logs = np.log(samples)
        levels[i] = float(np.median(logs))
        if samples.size > 1:
            spread = 1.4826 * float(np.median(np.abs(logs - levels[i])))
            errors[i] = _SE_OF_MEDIAN * spread / np.sqrt(samples.size)
    return levels, errors


def find(
    levels: np.ndarray,
    threshold: float = DEFAULT_THRESHOLD,
    min_change: float = DEFAULT_MIN_CHANGE,
    published: Sequence[int] = (),
) -> list:
    """The confirmed changes of a series of log levels, as (position, z) records (segments.Confirmed), by position.
    ``published``: the positions reported for this series before (its prefix), held where the data allow
    (segments.hold)."""
    if len(levels) < 4:
        return []
    sigma = noise(levels)
    cleaned = without_outliers(levels, sigma)
    found, inflation = candidates(cleaned, sigma, threshold)
    confirmed = confirm(cleaned, sigma, found, threshold, min_change, inflation)
    confirmed = without_stray_bumps(levels, cleaned, sigma, inflation, confirmed, threshold, min_change)
    if len(published):
        confirmed = hold(cleaned, sigma, inflation, confirmed, list(published), threshold, min_change)
    return confirmed


def detect(
    series: Sequence[Sequence[float] | float],
    *,
    higher_is_better: bool = True,
    threshold: float = DEFAULT_THRESHOLD,
    min_change: float = DEFAULT_MIN_CHANGE,
    seed: int = 0,
    with_intervals: bool = True,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    confidence: float = DEFAULT_CONFIDENCE,
) -> list[ChangePoint]:
    """The change points of ``series`` (one sample list per commit, oldest first), by index."""
    levels, errors = levels_of(series)
    points = describe(
        levels,
        errors,
        find(levels, threshold, min_change),
        higher_is_better=higher_is_better,
        threshold=threshold,
        with_intervals=with_intervals,
        bootstrap=bootstrap,
        confidence=confidence,
        seed=seed,
    )
    return [p for p in points if p is not None]  # with no ``only``, none is None


def detect_growing(
    levels: np.ndarray,
    errors: np.ndarray,
    memo: Memo | None,
    *,
    higher_is_better: bool = True,
    threshold: float = DEFAULT_THRESHOLD,
    min_change: float = DEFAULT_MIN_CHANGE,
    seed: int = 0,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    confidence: float = DEFAULT_CONFIDENCE,
) -> tuple[list[ChangePoint], Memo, Work]:
    """:func:`detect`'s answer for a series (as :func:`levels_of` gives it) that grew since ``memo`` was made,
    recomputing only its tail (harness.changepoints.incremental); pass the returned memo next time."""
    levels, errors = np.asarray(levels, dtype=float), np.asarray(errors, dtype=float)
    described = functools.partial(
        describe,
        higher_is_better=higher_is_better,
        threshold=threshold,
        seed=seed,
        bootstrap=bootstrap,
        confidence=confidence,
    )
    return incremental.update(
        levels,
        errors,
        memo,
        {**described.keywords, "min_change": min_change},  # what the memo is valid for
        lambda x, published: find(x, threshold, min_change, published),
        lambda x, e, found, only: described(x, e, found, only=only, with_intervals=True),
    )
