"""The history as series, its change points, and the drift guard: what the PR gate cannot see one change at a time.

* :func:`machine_series` -- one machine's TFLOPS history per GEMM benchmark, oldest
  first: each measured commit with all its samples (asv's timed samples in seconds,
  turned into TFLOPS with the record's FLOP count; the record's median TFLOPS when
  asv kept no samples). Commits whose results were copied from an identical-code
  commit (ci.history.copies) are left out: they are the same measurement twice and
  would make one run weigh double. Machines are never mixed: a series belongs to one
  (machine, benchmark).
* :func:`change_points` -- harness.changepoints over each series, mapped to commits:
  a change at index i is suspected in (commits[i-1], commits[i]] -- the commits
  between the last measured at the old level and the first at the new.
* :func:`drift` -- the drift guard. Fails a benchmark whose newest TFLOPS is more
  than a threshold below the best of its last ``window`` measured commits. The
  threshold is ``k`` times the benchmark's commit-to-commit noise (the SD of the log
  of commit medians over the window, robustly: 1.4826 x MAD of successive differences
  / sqrt 2, so a step inside the window does not inflate it), and at least ``floor``.
  Every step may have passed the gate while the sum did not: this looks at the sum.

Defaults and why (docs/CHANGE_POINTS.md): ``k = 3`` (a one-sided 3-sigma margin on the
difference of a single commit against a window's best, whose own upward bias is about
one sigma for a window of 10), ``floor = 2%`` (under 2% the gate's own resolution on
the runners, PERF_NOTES, is the better judge), ``window = 10``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ci.history import results as history_results
from ci.history.summary import GEMM_KEY
from harness import changepoints


DRIFT_K = 3.0
DRIFT_FLOOR = 0.02
DRIFT_WINDOW = 10
_MAD_TO_SD = 1.4826


@dataclass
class Series:
    """One (machine, benchmark): measured commits oldest first, each with its TFLOPS samples."""

    machine: str
    benchmark: str
    commits: list[str]
    samples: list[np.ndarray]

    def medians(self) -> np.ndarray:
        return np.array([float(np.median(s)) for s in self.samples])


def _tflops_samples(entry: dict[str, Any] | None, record: dict[str, Any]) -> np.ndarray | None:
    flops = record.get("flops")
    raw = (entry or {}).get("samples") or record.get("samples_s")
    if isinstance(flops, (int, float)) and raw:
        times = np.array([t for t in raw if isinstance(t, (int, float)) and t > 0], dtype=float)
        if times.size:
            return flops / times / 1e12
    tflops = record.get("tflops")
    if isinstance(tflops, (int, float)) and math.isfinite(tflops) and tflops > 0:
        return np.array([float(tflops)])
    return None


def machine_series(results_dir: Path, machine: str, commits_oldest_first: Sequence[str]) -> dict[str, Series]:
    """benchmark key -> its series on ``machine`` over ``commits_oldest_first`` (commits without a value left out)."""
    out: dict[str, Series] = {}
    for commit in commits_oldest_first:
        values, recs, _ = history_results.load_commit(results_dir, machine, commit)
        for key, record in sorted(recs.items()):
            if record.get("status") != "measured" or record.get("identical_to") or not GEMM_KEY.match(key):
                continue
            samples = _tflops_samples(values.get(key), record)
            if samples is None:
                continue
            series = out.setdefault(key, Series(machine, key, [], []))
            series.commits.append(commit)
            series.samples.append(samples)
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

    def line(self) -> str:
        c = self.change
        low, high = c.interval
        return (f"{self.benchmark} on {self.machine}: {c.direction} {c.relative_change:+.2%} "
                f"[{low:+.2%}, {high:+.2%}] at {c.confidence:.0%}, p = {c.p_value:.2g} (level {c.level:.2g}), "
                f"in {self.last_before[:12]}..{self.first_after[:12]}")


def change_points(series: Series, **options: Any) -> list[CommitChange]:
    """harness.changepoints.detect over a series (TFLOPS: higher is better), each change named by its commits."""
    found = changepoints.detect(series.samples, higher_is_better=True, **options)
    return [CommitChange(series.machine, series.benchmark, series.commits[c.index - 1], series.commits[c.index], c)
            for c in found]


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
        return (f"{self.benchmark} on {self.machine}: {verdict}, {self.newest[:12]} is {self.drop:.2%} below the best of "
                f"the last {self.window} measured commits ({self.best[:12]}), threshold {self.threshold:.2%} "
                f"(max({DRIFT_FLOOR:.0%}, k x {self.noise:.2%} noise))")


def commit_noise(medians: Sequence[float]) -> float:
    """Commit-to-commit SD of log TFLOPS, from successive differences (robust to one step in the window)."""
    logs = np.log(np.asarray(medians, dtype=float))
    if len(logs) < 3:
        return 0.0
    diffs = np.diff(logs)
    return float(_MAD_TO_SD * np.median(np.abs(diffs - np.median(diffs))) / math.sqrt(2))


def drift(series: Series, *, window: int = DRIFT_WINDOW, k: float = DRIFT_K, floor: float = DRIFT_FLOOR) -> Drift | None:
    """The newest commit against the best of the last ``window`` (itself included); None with under 2 commits."""
    if len(series.commits) < 2:
        return None
    medians = series.medians()[-window:]
    commits = series.commits[-window:]
    best = int(np.argmax(medians))
    noise = commit_noise(medians)
    threshold = max(floor, 1 - math.exp(-k * noise))
    drop = float(1 - medians[-1] / medians[best])
    return Drift(series.machine, series.benchmark, commits[-1], commits[best], drop, threshold, noise, len(commits),
                 failed=drop > threshold)


def drift_report(results_dir: Path, machine: str, commits_oldest_first: Sequence[str], **options: Any) -> list[Drift]:
    """The drift guard over every GEMM benchmark measured on ``machine``; the caller fails when any ``failed``."""
    out = []
    for series in machine_series(results_dir, machine, commits_oldest_first).values():
        found = drift(series, **options)
        if found is not None:
            out.append(found)
    return out


# ---------------------------------------------------------------------------
# what the main job reports
# ---------------------------------------------------------------------------

HISTORY_COMMITS = 50  # the newest first-parent commits of main the change points and the drift guard look at
# The drift guard's noise comes from successive commits: with fewer than this many it would be a guess, and the
# 2% floor alone would fail on one noisy pair.
DRIFT_MIN_COMMITS = 5
CPU_NOT_CHECKED = ("CPU timings are not checked: on the shared CPU machines one commit measured 19-45% apart "
                   "(README), far above any step worth reporting; the GPU runner's history is checked")


def history_checks(results_dir: Path, machine: str, commits_oldest_first: Sequence[str], *, timed_on_gpu: bool) -> dict[str, Any]:
    """Change points and the drift guard over one machine's GEMM history (never mixed with another machine's).

    Only a GPU machine's timings are checked: a CPU machine's are reported as not checked, with why.
    """
    series = machine_series(results_dir, machine, commits_oldest_first) if timed_on_gpu else {}
    changes = [c for s in series.values() for c in change_points(s)]
    drifts = [d for s in series.values() if len(s.commits) >= DRIFT_MIN_COMMITS and (d := drift(s)) is not None]
    return {"machine": machine, "commits": len(commits_oldest_first), "benchmarks": len(series),
            "not_checked": None if timed_on_gpu else CPU_NOT_CHECKED,
            "change_points": [c.to_json() for c in changes], "change_point_lines": [c.line() for c in changes],
            "drift": [d.to_json() for d in drifts], "drift_failed": [d.line() for d in drifts if d.failed]}


def history_markdown(checks: dict[str, Any]) -> list[str]:
    lines = [f"### History of {checks['machine']}: change points and drift ({checks['benchmarks']} benchmarks, "
             f"{checks['commits']} commits)", ""]
    if checks.get("not_checked"):
        return lines + [f"- {checks['not_checked']}"]
    lines += [f"- change point: {line}" for line in checks["change_point_lines"]] or [
        "- no change point at level 0.01 (docs/CHANGE_POINTS.md)"]
    lines += [f"- **drift**: {line}" for line in checks["drift_failed"]] or [
        f"- drift guard: every benchmark with >= {DRIFT_MIN_COMMITS} measured commits is within its threshold of the best "
        f"of its last {DRIFT_WINDOW}"]
    return lines
