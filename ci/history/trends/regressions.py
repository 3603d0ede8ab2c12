"""The history as series, its change points, and the drift guard: what the PR gate cannot see one change at a time.

* :func:`series_of` -- one machine's TFLOPS history per GEMM benchmark (copied commits left out, machines never mixed);
* :func:`change_points` -- harness.changepoints over each series, mapped to commit ranges (with a memo: only the tail);
* :func:`drift` -- fails a benchmark whose newest TFLOPS is more than ``k`` x its noise (at least ``floor``)
  below the best of its last ``window`` commits.
Defaults ``k = 3``, ``floor = 2%``, ``window = 10``; why: docs/CHANGE_POINTS.md and docs/HISTORY.md,
"trends/regressions.py".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ci.history.asv_results import store
from ci.history.asv_results.store import GEMM_KEY, History
from harness import changepoints

DRIFT_K = 3.0
DRIFT_FLOOR = 0.02
DRIFT_WINDOW = 10
_MAD_TO_SD = 1.4826


@dataclass
class Series:
    """One (machine, benchmark): measured commits oldest first, each with its level (log median TFLOPS) and error."""

    machine: str
    benchmark: str
    commits: list[str]
    levels: np.ndarray
    errors: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def __post_init__(self) -> None:
        self.levels = np.asarray(self.levels, dtype=float)
        self.errors = (
            np.zeros(len(self.levels)) if len(self.errors) != len(self.levels) else np.asarray(self.errors, dtype=float)
        )

    def medians(self) -> np.ndarray:
        return np.exp(self.levels)


def series_of(history: History, machine: str) -> dict[str, Series]:
    """benchmark key -> its series on ``machine`` in the history's commit order (copies of identical code left out)."""
    grouped: dict[str, list[store.Point]] = {}
    for point in history.points:
        if point.machine == machine and point.copied_from is None and GEMM_KEY.match(point.benchmark):
            grouped.setdefault(point.benchmark, []).append(point)
    out = {}
    for key, points in sorted(grouped.items()):
        points.sort(key=lambda p: (p.order, p.commit))
        out[key] = Series(
            machine,
            key,
            [p.commit for p in points],
            np.array([p.level for p in points]),
            np.array([p.error for p in points]),
        )
    return out


# ---------------------------------------------------------------------------
# change points, as commits
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CommitChange:
    machine: str
    benchmark: str
    last_before: str  # the last commit measured at the old level
    first_after: str  # the first at the new: the culprit is in (last_before, first_after]
    change: changepoints.ChangePoint

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "change": self.change.to_json()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CommitChange:
        c = data["change"]
        change = changepoints.ChangePoint(
            **{
                **c,
                "interval": tuple(c["interval"]),
                "before": tuple(c["before"]),
                "after": tuple(c["after"]),
                "location": tuple(c["location"]) if c.get("location") else None,
            }
        )
        return cls(data["machine"], data["benchmark"], data["last_before"], data["first_after"], change)

    def line(self) -> str:
        c = self.change
        low, high = c.interval
        return (
            f"{self.benchmark} on {self.machine}: {c.direction} {c.relative_change:+.2%} "
            f"[{low:+.2%}, {high:+.2%}] at {c.confidence:.0%}, p = {c.p_value:.2g} (level {c.level:.2g}), "
            f"in {self.last_before[:12]}..{self.first_after[:12]}"
        )


def _suspected(orders: dict[str, int], line: Series, change: changepoints.ChangePoint) -> list[int] | None:
    """The commit-order range (x, y] the change's location confidence set allows the culprit in (issue 47: the issue
    filer groups change points whose sets overlap)."""
    if change.location is None:
        return None
    first, last = change.location
    return [orders[line.commits[first - 1]], orders[line.commits[last]]]


def change_points(series: Series, memo: dict[str, Any] | None = None) -> tuple[list[CommitChange], dict[str, Any]]:
    """harness.changepoints over a series (TFLOPS: higher is better), each change named by its commits; and the
    memo to pass next time (only the tail a new commit can change is recomputed then)."""
    found, new_memo, _ = changepoints.detect_growing(
        series.levels, series.errors, changepoints.Memo.from_json(memo) if memo else None, higher_is_better=True
    )
    changes = [
        CommitChange(series.machine, series.benchmark, series.commits[c.index - 1], series.commits[c.index], c)
        for c in found
    ]
    return changes, new_memo.to_json()


# ---------------------------------------------------------------------------
# the drift guard
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Drift:
    machine: str
    benchmark: str
    newest: str
    best: str  # the commit with the best median in the window: "since when"
    drop: float  # 1 - newest / best (positive: slower)
    threshold: float
    noise: float  # the commit-to-commit SD of log TFLOPS the threshold came from
    window: int  # commits looked at
    failed: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        verdict = "FAILS" if self.failed else "ok"
        return (
            f"{self.benchmark} on {self.machine}: {verdict}, {self.newest[:12]} is {self.drop:.2%} below the best "
            f"of the last {self.window} measured commits ({self.best[:12]}), threshold {self.threshold:.2%} "
            f"(max({DRIFT_FLOOR:.0%}, k x {self.noise:.2%} noise))"
        )


def commit_noise(medians: Sequence[float] | np.ndarray) -> float:
    """Commit-to-commit SD of log TFLOPS, from successive differences (robust to one step in the window)."""
    logs = np.log(np.asarray(medians, dtype=float))
    if len(logs) < 3:
        return 0.0
    diffs = np.diff(logs)
    return float(_MAD_TO_SD * np.median(np.abs(diffs - np.median(diffs))) / math.sqrt(2))


def drift(
    series: Series, *, window: int = DRIFT_WINDOW, k: float = DRIFT_K, floor: float = DRIFT_FLOOR
) -> Drift | None:
    """The newest commit against the best of the last ``window`` (itself included); None with under 2 commits."""
    if len(series.commits) < 2:
        return None
    medians = series.medians()[-window:]
    commits = series.commits[-window:]
    best = int(np.argmax(medians))
    noise = commit_noise(medians)
    threshold = max(floor, 1 - math.exp(-k * noise))
    drop = float(1 - medians[-1] / medians[best])
    return Drift(
        series.machine,
        series.benchmark,
        commits[-1],
        commits[best],
        drop,
        threshold,
        noise,
        len(commits),
        failed=drop > threshold,
    )


def failing_streak(series: Series, d: Drift) -> int:
    """How many of the newest commits in a row are each more than the threshold below the level before them: the
    median of the window's commits older than it (at least 3).

    Not the best, nor the second best (before issue 47): one stray high commit would put every commit after it "below
    the best" for a whole window, and with heavy tails two do (at 1% commit noise, 3-10 drift issues per 100 commits of
    72 series were made so); a median of the commits before is the regression's own before-level. The issue filer
    reads the streak; the drift guard's own verdict is unchanged."""
    medians = series.medians()[-d.window :]
    streak = 0
    for k in range(1, len(medians) - 2):
        before = float(np.median(medians[:-k]))
        if 1 - medians[-k] / before <= d.threshold:
            break
        streak += 1
    return streak


# ---------------------------------------------------------------------------
# what the main job reports
# ---------------------------------------------------------------------------

HISTORY_COMMITS = 50  # change points whose new level starts within the newest this many measured commits are "recent"
# The drift guard's noise comes from successive commits: with fewer than this many it would be a guess, and the
# 2% floor alone would fail on one noisy pair.
DRIFT_MIN_COMMITS = 5
CPU_NOT_CHECKED = (
    "CPU timings are not checked: on the shared CPU machines one commit measured 19-45% apart "
    "(README), far above any step worth reporting; the GPU runner's history is checked"
)


def history_checks(
    history: History, machine: str, *, timed_on_gpu: bool, kept: store.Store | None = None
) -> dict[str, Any]:
    """Change points and the drift guard over one machine's GEMM history (never mixed with another machine's).

    Only a GPU machine's timings are checked: a CPU machine's are reported as not checked, with why. Every change
    point of the whole history is listed; ``recent`` marks those whose first commit at the new level is among the
    newest HISTORY_COMMITS measured commits (what a job on main reports as new). ``kept``: the store whose
    memos let each series recompute only its tail.
    """
    series = series_of(history, machine).values() if timed_on_gpu else ()
    return machine_checks(machine, series, history.commits, timed_on_gpu=timed_on_gpu, kept=kept)


def machine_checks(
    machine: str,
    series: Iterable[Series],
    orders: dict[str, int],
    *,
    timed_on_gpu: bool,
    kept: store.Store | None = None,
) -> dict[str, Any]:
    """:func:`history_checks` of ``series`` (one machine's, by benchmark key), taken one at a time: what is kept of a
    series is its change points and drift (``orders``: commit -> its position in the history's commit order)."""
    changes, recent, suspected, drifts, measured, benchmarks = [], [], [], [], set(), 0
    for line in series:
        benchmarks += 1
        measured.update(line.commits)
        name = f"change-points|{machine}|{line.benchmark}"
        found, memo = change_points(line, kept.memo(name) if kept else None)
        if kept is not None:
            kept.keep_memo(name, memo)
        newest = set(line.commits[-HISTORY_COMMITS:])
        changes += found
        recent += [c.first_after in newest for c in found]
        suspected += [_suspected(orders, line, c.change) for c in found]
        if len(line.commits) >= DRIFT_MIN_COMMITS and (d := drift(line)) is not None:
            drifts.append((d, failing_streak(line, d)))
    if kept is not None:
        kept.commit()
    return {
        "machine": machine,
        "commits": len(measured),
        "benchmarks": benchmarks,
        "not_checked": None if timed_on_gpu else CPU_NOT_CHECKED,
        # orders (here and in drift): the commits' positions in the history's commit order, so that the issue filer
        # can tell how far apart two changes are across benchmarks and runs (ci.notify.regression_issues.matching)
        "change_points": [
            {
                **c.to_json(),
                "recent": r,
                "orders": [orders[c.last_before], orders[c.first_after]],
                "suspected": w,
            }
            for c, r, w in zip(changes, recent, suspected)
        ],
        "change_point_lines": [c.line() for c in changes],
        # streak: how many of the newest commits in a row fail, each against the median of the commits before it (stray
        # high commits make no streak: failing_streak)
        "drift": [
            {**d.to_json(), "orders": [orders[d.best], orders[d.newest]], "streak": streak} for d, streak in drifts
        ],
        "drift_failed": [d.line() for d, _ in drifts if d.failed],
    }


def all_checks(history: History, kept: store.Store | None = None) -> list[dict[str, Any]]:
    """:func:`history_checks` of every machine with GEMM timings (compile-only has none), by machine name."""
    timed: dict[str, bool] = {}
    for point in history.points:
        timed[point.machine] = timed.get(point.machine, False) or not point.is_cpu
    return [history_checks(history, machine, timed_on_gpu=gpu, kept=kept) for machine, gpu in sorted(timed.items())]


def store_checks(kept: store.Store, commits: dict[str, int]) -> list[dict[str, Any]]:
    """:func:`all_checks` of the history ``kept`` holds at ``commits`` (commit -> order), read one series at a time
    from the store's index: memory bounded by one series, not the history."""
    out = []
    for machine, gpu in sorted(kept.timed_machines(commits).items()):
        keys = [key for m, key in kept.line_keys() if m == machine and GEMM_KEY.match(key)] if gpu else []
        out.append(
            machine_checks(machine, _store_series(kept, machine, keys, commits), commits, timed_on_gpu=gpu, kept=kept)
        )
    return out


def _store_series(kept: store.Store, machine: str, keys: list[str], commits: dict[str, int]) -> Iterator[Series]:
    for key in keys:
        measured, levels, errors = kept.levels(machine, key, commits)
        if measured:
            yield Series(machine, key, measured, np.array(levels), np.array(errors))


def history_markdown(checks: dict[str, Any]) -> list[str]:
    lines = [
        f"### History of {checks['machine']}: change points and drift ({checks['benchmarks']} benchmarks, "
        f"{checks['commits']} commits)",
        "",
    ]
    if checks.get("not_checked"):
        return lines + [f"- {checks['not_checked']}"]
    recent = [line for line, c in zip(checks["change_point_lines"], checks["change_points"]) if c.get("recent", True)]
    older = len(checks["change_point_lines"]) - len(recent)
    lines += [f"- change point: {line}" for line in recent] or [
        f"- no change point in the newest {HISTORY_COMMITS} measured commits (docs/CHANGE_POINTS.md)"
    ]
    if older:
        lines.append(f"- {older} older change points: on the kernel pages and in the JSON (`change_points`)")
    lines += [f"- **drift**: {line}" for line in checks["drift_failed"]] or [
        f"- drift guard: every benchmark with >= {DRIFT_MIN_COMMITS} measured commits is within its threshold of the "
        f"best of its last {DRIFT_WINDOW}"
    ]
    return lines
