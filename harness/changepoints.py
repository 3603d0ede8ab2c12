"""Change points over a benchmark's history: E-divisive means with a permutation test (Matteson & James 2014).

The input is one entry per measured commit, oldest first, each holding all samples
of that commit (e.g. TFLOPS of every timed launch). What the method does with them:

* **Location**: each commit's median. Every commit weighs the same in the energy
  statistic, however many samples it has: samples within one run share that run's
  build, clocks and placement, so they are not independent evidence about the level,
  and a commit with 200 samples must not outvote ten commits with 20.
* **Split**: the energy statistic Q(tau) = tau (n - tau) / n * (2 E|X - Y| - E|X - X'| - E|Y - Y'|)
  over the commit medians (exponent 1), maximized over tau with at least ``min_size``
  commits on each side.
* **Significance**, two tests (``test=``):

  - ``"t"`` (default, as Apache Otava does): Student's t-test (pooled variance) of the
    commit medians on either side of the best split, its p-value multiplied by the number
    of splits the maximum was taken over (Bonferroni: a t-test of a split chosen because it
    looks best is otherwise far too eager). Pooled, not Welch: the energy statistic picks
    splits whose small side happens to be tight, and Welch's test, trusting that side's own
    variance from 2-3 commits, then flagged 2-6% of step-free series at alpha 0.01
    (measured); the pooled one stays under alpha. Assumes roughly normal commit medians.
  - ``"permutation"`` (Matteson & James): the share of ``permutations`` random orders of
    the segment's commits (seeded) whose best Q reaches the observed one,
    ``(1 + hits) / (1 + permutations)``. Exact without any normality, but a segment
    of n commits split k / n - k cannot reach a p-value below 2 / C(n, k): at alpha 0.01
    a 4 + 4 segment (2 / 70) can never be cut, which is why short histories use ``"t"``.

  Either way whole commits are the unit, not samples, so the commit-to-commit noise (the
  noise that matters between runs) is in the null.
* **Hierarchy**: find the best split in each segment, test the strongest; while it is
  significant, cut there and look again. With k segments under test the level is
  ``alpha / k`` (Bonferroni over the segments whose best split competed), so a
  step-free series is flagged with probability about ``alpha`` whatever its length.
* **Size**: the relative change of the median of commit medians after vs before,
  each side bounded by its neighbouring change points; its interval is a two-level
  bootstrap (commits resampled within each side, then each commit's samples
  resampled before taking its median): that is where all samples enter, so a commit
  measured with few, noisy samples widens the interval.
* **Direction**: with ``higher_is_better`` (TFLOPS) a drop is a regression, a gain an
  improvement; with lower-is-better (seconds) the reverse.

docs/CHANGE_POINTS.md has the measured false-positive and detection rates.
Only numpy: harness/ imports nothing from kernels/ or ci/.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np
from scipy import stats

DEFAULT_ALPHA = 0.01
DEFAULT_PERMUTATIONS = 999  # the smallest p-value is 1/1000: enough for alpha / k down to k = 5 with few misses
DEFAULT_MIN_SIZE = 2  # the within-segment term needs two commits; a step at the newest commit is the drift guard's
DEFAULT_BOOTSTRAP = 400
DEFAULT_CONFIDENCE = 0.95
T_TEST = "t"
PERMUTATION = "permutation"
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
    p_value: float
    level: float  # the alpha / k this change was tested at
    before: tuple[int, int]  # commit indices [start, end) of the segment before
    after: tuple[int, int]  # and after

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------------
# the energy statistic
# ---------------------------------------------------------------------------


def _best_splits(distances: np.ndarray, min_size: int) -> tuple[np.ndarray, np.ndarray]:
    """For a stack of (n x n) distance matrices: the best Q and its tau, per matrix (vectorized over the stack)."""
    n = distances.shape[-1]
    taus = np.arange(min_size, n - min_size + 1)
    corner = distances.cumsum(axis=-1).cumsum(axis=-2)  # corner[..., i, j] = sum D[:i+1, :j+1]
    total = corner[..., -1, -1][..., None]
    left_within = corner[..., taus - 1, taus - 1]  # sum over pairs inside [0, tau), both orders
    left_rows = corner[..., taus - 1, -1]  # sum D[:tau, :]
    cross = left_rows - left_within
    right_within = total - left_within - 2 * cross
    a, b = taus.astype(float), (n - taus).astype(float)
    q = (a * b / n) * (2 * cross / (a * b) - left_within / (a * (a - 1)) - right_within / (b * (b - 1)))
    best = q.argmax(axis=-1)
    return np.take_along_axis(q, best[..., None], axis=-1)[..., 0], taus[best]


def best_split(levels: Sequence[float], min_size: int = DEFAULT_MIN_SIZE) -> tuple[float, int] | None:
    """(Q, tau) of the best split of ``levels``, or None when it is too short to split."""
    x = np.asarray(levels, dtype=float)
    if len(x) < 2 * min_size:
        return None
    q, tau = _best_splits(np.abs(x[:, None] - x[None, :]), min_size)
    return float(q), int(tau)


def split_p_value(levels: Sequence[float], observed: float, permutations: int, rng: np.random.Generator,
                  min_size: int = DEFAULT_MIN_SIZE) -> float:
    """The permutation p-value of a best split reaching ``observed`` in ``levels``."""
    x = np.asarray(levels, dtype=float)
    orders = np.argsort(rng.random((permutations, len(x))), axis=1)
    shuffled = x[orders]
    q, _ = _best_splits(np.abs(shuffled[:, :, None] - shuffled[:, None, :]), min_size)
    # A tolerance: ties (a permutation that is the series itself) must count as reaching it.
    hits = int(np.count_nonzero(q >= observed * (1 - 1e-12)))
    return (1 + hits) / (1 + permutations)


def split_t_p_value(levels: Sequence[float], tau: int, min_size: int = DEFAULT_MIN_SIZE) -> float:
    """Student's (pooled) t-test p-value of a split at ``tau``, times the number of splits it was chosen among (capped at 1)."""
    x = np.asarray(levels, dtype=float)
    left, right = x[:tau], x[tau:]
    if np.ptp(left) == 0 and np.ptp(right) == 0:
        return 0.0 if left[0] != right[0] else 1.0  # no noise at all: a difference is certain, none is none
    p = float(stats.ttest_ind(left, right, equal_var=True).pvalue)
    return min(1.0, p * (len(x) - 2 * min_size + 1))


# ---------------------------------------------------------------------------
# the size of a change
# ---------------------------------------------------------------------------


def _commit_medians(samples: Sequence[np.ndarray]) -> np.ndarray:
    return np.array([float(np.median(s)) for s in samples])


def relative_change(before: Sequence[np.ndarray], after: Sequence[np.ndarray]) -> float:
    return float(np.median(_commit_medians(after)) / np.median(_commit_medians(before)) - 1)


def change_interval(before: Sequence[np.ndarray], after: Sequence[np.ndarray], rng: np.random.Generator,
                    replicates: int = DEFAULT_BOOTSTRAP, confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float]:
    """Percentile interval of :func:`relative_change` by a two-level bootstrap (commits, then their samples)."""

    def resampled_level(side: Sequence[np.ndarray]) -> float:
        picks = rng.integers(0, len(side), len(side))
        medians = [np.median(side[i][rng.integers(0, len(side[i]), len(side[i]))]) for i in picks]
        return float(np.median(medians))

    ratios = np.array([resampled_level(after) / resampled_level(before) - 1 for _ in range(replicates)])
    tail = (1 - confidence) / 2
    return float(np.quantile(ratios, tail)), float(np.quantile(ratios, 1 - tail))


# ---------------------------------------------------------------------------
# the hierarchy
# ---------------------------------------------------------------------------


def _as_samples(series: Sequence[Sequence[float] | float]) -> list[np.ndarray]:
    out = []
    for point in series:
        arr = np.atleast_1d(np.asarray(point, dtype=float))
        arr = arr[np.isfinite(arr)]
        if arr.size == 0:
            raise ValueError("a commit without a finite sample: leave unmeasured commits out of the series")
        out.append(arr)
    return out


def detect(series: Sequence[Sequence[float] | float], *, higher_is_better: bool = True, alpha: float = DEFAULT_ALPHA,
           test: str = T_TEST, permutations: int = DEFAULT_PERMUTATIONS, min_size: int = DEFAULT_MIN_SIZE, seed: int = 0,
           with_intervals: bool = True, bootstrap: int = DEFAULT_BOOTSTRAP,
           confidence: float = DEFAULT_CONFIDENCE) -> list[ChangePoint]:
    """The significant change points of ``series`` (one sample list per commit, oldest first), by index."""
    if test not in (T_TEST, PERMUTATION):
        raise ValueError(f"test {test!r}: expected {T_TEST!r} or {PERMUTATION!r}")
    samples = _as_samples(series)
    levels = _commit_medians(samples)
    rng = np.random.default_rng(seed)
    cuts: list[int] = []
    found: dict[int, tuple[float, float]] = {}  # tau -> (p, level)
    while True:
        bounds = [0, *sorted(cuts), len(levels)]
        candidates = []
        for start, end in zip(bounds, bounds[1:]):
            best = best_split(levels[start:end], min_size)
            if best is not None:
                candidates.append((best[0], start, end, start + best[1]))
        if not candidates:
            break
        level = alpha / len(candidates)
        q, start, end, tau = max(candidates)
        segment = levels[start:end]
        if test == T_TEST:
            p = split_t_p_value(segment, tau - start, min_size)
        else:
            p = split_p_value(segment, q, permutations, rng, min_size)
        if p > level:
            break
        cuts.append(tau)
        found[tau] = (p, level)
    return _describe(samples, sorted(cuts), found, higher_is_better, rng, with_intervals, bootstrap, confidence)


def _describe(samples: list[np.ndarray], cuts: list[int], found: dict[int, tuple[float, float]], higher_is_better: bool,
              rng: np.random.Generator, with_intervals: bool, bootstrap: int, confidence: float) -> list[ChangePoint]:
    bounds = [0, *cuts, len(samples)]
    out = []
    for i, tau in enumerate(cuts):
        before, after = samples[bounds[i]:tau], samples[tau:bounds[i + 2]]
        change = relative_change(before, after)
        interval = change_interval(before, after, rng, bootstrap, confidence) if with_intervals else (float("nan"),) * 2
        worse = change < 0 if higher_is_better else change > 0
        p, level = found[tau]
        out.append(ChangePoint(index=tau, direction=REGRESSION if worse else IMPROVEMENT, relative_change=change,
                               interval=interval, confidence=confidence, p_value=p, level=level,
                               before=(bounds[i], tau), after=(tau, bounds[i + 2])))
    return out
