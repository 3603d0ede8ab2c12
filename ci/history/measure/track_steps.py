"""One track of the main job, from the commits to asv's results: plan, measure, stamp, copy, count the cost.

Why: docs/HISTORY.md, "measure/track_steps.py".
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ci.common import gitutil, job_process
from ci.history.asv_results import result_points, store
from ci.history.measure import asv_driver, copies, identical, tracks
from ci.history.measure.progress import Steps
from ci.history.measure.tracks import TrackRun
from ci.history.messages import log
from ci.history.options import HistoryOptions


@dataclass
class TrackOutcome:
    track: TrackRun
    codes: asv_driver.AsvCodes = field(default_factory=asv_driver.AsvCodes)  # _measure's
    plan: identical.Plan | None = None  # the timing track's
    problems: list[str] = field(default_factory=list)
    benchmark_seconds: float = 0.0  # asv's durations of what this run measured
    saved_seconds: float = 0.0  # the measured commits' durations of what the copies reused
    copied: dict[str, str] = field(default_factory=dict)  # commit -> measured commit, copied
    # commits left out of asv's run because their results of this track are already here (nothing new): each must
    # hold a result of the track, or it is "not measured" (ci.history.measure.summary.collect_commit)
    already: list[str] = field(default_factory=list)
    samples: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)  # commit -> point -> (before, after)

    def cost(self) -> dict[str, Any]:
        """The JSON of what this track spent and saved (the report's ``cost``)."""
        data: dict[str, Any] = {
            "machine": self.track.machine,
            "benchmark_seconds": round(self.benchmark_seconds, 1),
            "asv_wall_seconds": round(getattr(self.codes, "seconds", 0.0), 1),
            "measured_commits": len(self.plan.measure) if self.plan else None,
        }
        if self.plan is not None:
            data |= {
                "saved_seconds": round(self.saved_seconds, 1),
                "identical": self.copied,
                "fingerprint_seconds": round(self.plan.seconds, 1),
                "decisions": identical.describe(self.plan),
            }
        return data


def _without_counts(results_dir: Path, machine: str, commits: Sequence[str], bench: str) -> list[str]:
    """The commits with no compile-only count of the track's benchmarks (``bench``, asv's -b regex) recorded on
    ``machine`` yet (the counts are the compiler's: a commit compiled once has them for good)."""
    with contextlib.closing(store.Store(store.default_path(results_dir))) as kept:
        counts = kept.resource_keys(results_dir, machine)
    counted = {commit for commit, keys in counts.items() if any(re.search(bench, key) for key in keys)}
    return [c for c in commits if c not in counted]


def steps_of(track: TrackRun) -> int:
    """How many numbered steps :func:`run_track` prints for ``track``."""
    return 2 if track.timings else 1


def sample_counts(results_dir: Path, machine: str, commits: Sequence[str]) -> dict[str, dict[str, int]]:
    """commit -> point -> how many samples asv's results file holds for it now."""
    out = {}
    for commit in commits:
        document = store.read_commit(results_dir, machine, commit)[2]
        out[commit] = result_points.sample_counts(document) if document else {}
    return out


def _measure(options: HistoryOptions, env, commits, track, job, results_dir, outcome: TrackOutcome) -> TrackOutcome:
    """asv over ``commits``; a commit measured before keeps its samples, and the line says how many it holds now."""
    before = sample_counts(results_dir, track.machine, commits)
    repeat = options.repeat_head if track.timings else 0
    outcome.codes = asv_driver.run_asv(env, commits, track, job, options.launch_method, options.show_stderr, repeat)
    after = sample_counts(results_dir, track.machine, commits)
    for commit in commits:
        points = {key: (before[commit].get(key, 0), n) for key, n in after[commit].items()}
        outcome.samples[commit] = points
        for line in rerun_lines(commit, points):
            log(line)
    return outcome


def rerun_lines(commit: str, points: dict[str, tuple[int, int]]) -> list[str]:
    """One line per commit that already had samples: the points kept them, and hold this many now."""
    added = {key: counts for key, counts in points.items() if counts[0] > 0}
    if not added:
        return []
    kept = sum(b for b, _ in added.values())
    now = sorted({a for _, a in added.values()})
    holds = f"{now[0]}" if len(now) == 1 else f"{now[0]}-{now[-1]}"
    return [
        f"{commit[:8]}: measured again, samples added to the previous ones (none replaced): {len(added)} points "
        f"kept {kept} samples and now hold {holds} samples each"
    ]


def run_track(
    options: HistoryOptions,
    env: dict[str, str],
    commits: Sequence[str],
    info: dict[str, Any],
    track: TrackRun,
    job: job_process.Job,
    results_dir: Path,
    repo_root: Path,
    started_ms: float,
    steps: Steps,
) -> TrackOutcome:
    has_gpu = info["gpu"] != "none"
    if not track.timings:
        todo = list(commits) if options.remeasure else _without_counts(results_dir, track.machine, commits, track.bench)
        already = [c for c in commits if c not in todo]
        for commit in already:
            log(
                f"{commit[:8]}: already has its compile-only counts on {track.machine}: not compiled again "
                "(--remeasure compiles it again)"
            )
        steps.start(
            f"asv run: {track.kind} tracks (machine {track.machine}), {len(todo)} of {len(commits)} commits"
            + (": nothing new" if not todo else "")
        )
        return _measure(options, env, todo, track, job, results_dir, TrackOutcome(track, already=already))

    with contextlib.closing(store.Store(store.default_path(results_dir), log)) as kept:
        known = identical.recorded(results_dir, track.machine, kept)
    steps.start(
        f"fingerprinting {len(commits)} commits for {info['gpu_arch']} on the CPU (identical code is not "
        f"measured; {len(known)} fingerprinted commits of {track.machine} known)"
    )
    names = set(info["benchmarks"])
    plan = identical.plan(
        commits,
        known,
        lambda commit: identical.commit_fingerprints(repo_root, commit, info["gpu_arch"], has_gpu, log),
        lambda key: key in names and re.search(track.bench, key) is not None,
        remeasure=commits[:1] if options.remeasure or options.repeat_head else (),
    )
    for line in identical.describe(plan):
        log(f"  {line}")
    nothing_new = not plan.measure and not plan.identical
    steps.start(
        f"asv run: {track.kind} tracks (machine {track.machine}), {len(plan.measure)} of {len(commits)} "
        "commits to measure" + (": nothing new" if nothing_new else "")
    )
    outcome = TrackOutcome(track, plan=plan, already=list(plan.already))
    _measure(options, env, plan.measure, track, job, results_dir, outcome)
    timing_rows = tracks.timing_track(has_gpu)
    for commit in plan.measure:
        identical.stamp(results_dir, track.machine, commit, plan.fingerprints.get(commit, {}), job.id)
        outcome.benchmark_seconds += copies.benchmark_seconds(
            results_dir, track.machine, commit, timing_rows, started_ms
        )
    repo = gitutil.open_repo(repo_root)
    for commit, source in plan.identical.items():
        date_ms = repo.commit(commit).authored_date * 1000
        copied = copies.copy_results(results_dir, track.machine, source, commit, date_ms, timing_rows, job.id)
        if copied.rows == 0:
            outcome.problems.append(
                f"{commit[:8]}: identical code to {source[:12]}, but {source[:12]} has no results "
                f"of these benchmarks on {track.machine} to copy (run with --remeasure)"
            )
            continue
        outcome.copied[commit] = source
        outcome.saved_seconds += copied.seconds_saved
        log(
            f"{commit[:8]}: {copies.note(source)} ({copied.rows} asv benchmarks, {copied.records} parameter sets "
            f"copied; {copied.seconds_saved:.0f} GPU seconds saved)"
        )
    return outcome
