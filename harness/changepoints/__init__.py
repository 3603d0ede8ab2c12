"""Change points over a benchmark's history: where its level moved, for how long, by how much.

The input is one entry per measured commit, oldest first, each holding all samples of that
commit (e.g. TFLOPS of every timed launch). The method, in three steps (docs/CHANGE_POINTS.md
has its measured rates):

1. **Levels.** Each commit's median, as a log (a step is relative, and a 3% drop is the same
   step at 100 or 1000 TFLOPS). Every commit weighs the same however many samples it has:
   samples of one run share its build, clocks and placement, so they are not independent
   evidence about the level. A commit's samples give its median's sampling error, which
   enters the interval of a change's size.
2. **Candidates, locally** (:mod:`.scan`): a moving-window comparison at scales of 2 to 64
   commits, each against the local commit-to-commit noise and, for wide windows, the noise at
   that scale (a slow wander of the runner is not a step); scales merged bottom-up.
3. **Confirmation against the neighbours** (:mod:`.segments`): each candidate tested again on
   the segments between its neighbouring candidates at its least-squares split, kept when it
   still stands out and moved the level by at least ``min_change`` (a candidate that fails is
   tested as one edge of a short bump); the segments between confirmed changes tested again
   for a weaker step; then each sized with a bootstrap interval.

Why not the whole series at once (E-divisive, this module's method before): a regression fixed
ten commits later sits inside one side of every cut of the whole series, which dilutes it, and
the correction for choosing the best cut grows with the series. A local comparison sees it as
the two clean steps it is, at any history length, and each commit's verdict depends only on the
commits near it (:data:`REACH`): the cost of a new commit follows the new work
(:mod:`.incremental`, whose answer is the full computation's).

What holds as the history grows (issue 38): a change point is reported only once its best split,
searched up to the newest commit, leaves MIN_SIDE (3) commits after it, so a step is not reported
a commit early and moved a run later. Its position is still an estimate from the commits around
it: given what was published before (``find(..., published=)``; :func:`detect_growing` takes it
from the memo), a published change point keeps its position while the data leave it inside the
location's confidence set, and keeps existing while it holds at a lower bar than a search needs
(:func:`.segments.hold`). The data can still move or dissolve it: not a guarantee, a measured rate
(docs/CHANGE_POINTS.md: the share of change points still at the same commit 20 runs after they were
first reported). Beyond REACH commits nothing moves it.

The threshold is set for a false-alarm rate per commit, not per series: on pure noise at most
1% of series of 1000 commits get any change point (simulated, docs/CHANGE_POINTS.md), fewer for
shorter ones; a series ten times longer has about ten times the chance of one false change, as
it has ten times the commits to be wrong about.

Only numpy and scipy: harness/ imports nothing from kernels/ or ci/.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from harness.changepoints import incremental
from harness.changepoints.incremental import Memo, Work
from harness.changepoints.scan import REACH, SCALES, candidates, noise, without_outliers
from harness.changepoints.segments import CONFIRM_WINDOW, IMPROVEMENT, REGRESSION, ChangePoint, confirm, describe, hold

__all__ = ["ChangePoint", "REGRESSION", "IMPROVEMENT", "detect", "detect_growing", "Memo", "Work", "levels_of", "find",
           "REACH", "SCALES",
           "CONFIRM_WINDOW", "DEFAULT_THRESHOLD", "DEFAULT_MIN_CHANGE"]

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
            raise ValueError(f"commit {i} has a sample <= 0: change points are found in TFLOPS or seconds, which are positive")
        logs = np.log(samples)
        levels[i] = float(np.median(logs))
        if samples.size > 1:
            spread = 1.4826 * float(np.median(np.abs(logs - levels[i])))
            errors[i] = _SE_OF_MEDIAN * spread / np.sqrt(samples.size)
    return levels, errors


def find(levels: np.ndarray, threshold: float = DEFAULT_THRESHOLD, min_change: float = DEFAULT_MIN_CHANGE,
         published: Sequence[int] = ()) -> list:
    """The confirmed changes of a series of log levels, as (position, z) records (segments.Confirmed), by position.
    ``published``: the positions reported for this series before (its prefix), held where the data allow
    (segments.hold)."""
    if len(levels) < 4:
        return []
    sigma = noise(levels)
    cleaned = without_outliers(levels, sigma)
    found, inflation = candidates(cleaned, sigma, threshold)
    confirmed = confirm(cleaned, sigma, found, threshold, min_change, inflation)
    if len(published):
        confirmed = hold(cleaned, sigma, inflation, confirmed, list(published), threshold, min_change)
    return confirmed


def detect(series: Sequence[Sequence[float] | float], *, higher_is_better: bool = True,
           threshold: float = DEFAULT_THRESHOLD, min_change: float = DEFAULT_MIN_CHANGE, seed: int = 0,
           with_intervals: bool = True, bootstrap: int = DEFAULT_BOOTSTRAP,
           confidence: float = DEFAULT_CONFIDENCE) -> list[ChangePoint]:
    """The change points of ``series`` (one sample list per commit, oldest first), by index."""
    levels, errors = levels_of(series)
    points = describe(levels, errors, find(levels, threshold, min_change), higher_is_better=higher_is_better,
                      threshold=threshold, with_intervals=with_intervals, bootstrap=bootstrap, confidence=confidence,
                      seed=seed)
    return [p for p in points if p is not None]  # with no ``only``, none is None


def detect_growing(levels: np.ndarray, errors: np.ndarray, memo: Memo | None, *, higher_is_better: bool = True,
                   threshold: float = DEFAULT_THRESHOLD, min_change: float = DEFAULT_MIN_CHANGE, seed: int = 0,
                   bootstrap: int = DEFAULT_BOOTSTRAP, confidence: float = DEFAULT_CONFIDENCE,
                   ) -> tuple[list[ChangePoint], Memo, Work]:
    """:func:`detect`'s answer for a series (as :func:`levels_of` gives it) that grew since ``memo`` was made,
    recomputing only its tail (harness.changepoints.incremental); pass the returned memo next time."""
    levels, errors = np.asarray(levels, dtype=float), np.asarray(errors, dtype=float)
    settings = {"higher_is_better": higher_is_better, "threshold": threshold, "min_change": min_change, "seed": seed,
                "bootstrap": bootstrap, "confidence": confidence}
    return incremental.update(levels, errors, memo, settings, lambda x, published: find(x, threshold, min_change, published),
                              lambda x, e, found, only: describe(
                                  x, e, found, only=only, higher_is_better=higher_is_better, threshold=threshold,
                                  with_intervals=True, bootstrap=bootstrap, confidence=confidence, seed=seed))
