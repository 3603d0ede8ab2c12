"""One track of the main job, from the commits to asv's results: plan, measure, stamp, copy, count the cost.

The timing track (``gpu``) first decides on the CPU which commits need the GPU at all
(ci.history.identical), runs asv over those only, stamps each measurement's record
with its fingerprint, then copies the measured commit's results to every
identical-code commit (ci.history.copies). The compile track (``cpu``) runs asv over
every commit: its counts are the compiler's, computed on a CPU.

What each track cost is counted here: asv's per-benchmark wall time of what it
measured ("GPU seconds" of the timing track), what the copies saved, the wall time
of the asv runs and of the fingerprints.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ci.common import gitutil, job_process
from ci.history import asv_driver, copies, identical, tracks
from ci.history.messages import log
from ci.history.options import HistoryOptions
from ci.history.tracks import TrackRun


@dataclass
class TrackOutcome:
    track: TrackRun
    codes: asv_driver.AsvCodes
    plan: identical.Plan | None = None  # the timing track's
    problems: list[str] = field(default_factory=list)
    benchmark_seconds: float = 0.0  # asv's durations of what this run measured
    saved_seconds: float = 0.0  # the measured commits' durations of what the copies reused
    copied: dict[str, str] = field(default_factory=dict)  # commit -> measured commit, copied

    def cost(self) -> dict[str, Any]:
        """The JSON of what this track spent and saved (the report's ``cost``)."""
        data: dict[str, Any] = {
            "machine": self.track.machine,
            "benchmark_seconds": round(self.benchmark_seconds, 1),
            "asv_wall_seconds": round(getattr(self.codes, "seconds", 0.0), 1),
            "measured_commits": len(self.plan.measure) if self.plan else None,
        }
        if self.plan is not None:
            data |= {"saved_seconds": round(self.saved_seconds, 1), "identical": self.copied,
                     "fingerprint_seconds": round(self.plan.seconds, 1), "decisions": identical.describe(self.plan)}
        return data


def run_track(
    options: HistoryOptions, env: dict[str, str], commits: Sequence[str], info: dict[str, Any], track: TrackRun,
    job: job_process.Job, results_dir: Path, repo_root: Path, started_ms: float,
) -> TrackOutcome:
    has_gpu = info["gpu"] != "none"
    if not track.timings:
        codes = asv_driver.run_asv(options, env, commits, has_gpu, track, job)
        return TrackOutcome(track, codes)

    known = identical.recorded(results_dir, track.machine)
    log(f"[3/6] fingerprinting {len(commits)} commits for {info['gpu_arch']} on the CPU (identical code is not measured; "
        f"{len(known)} fingerprinted commits of {track.machine} known)")
    names = set(info["benchmarks"])
    plan = identical.plan(
        commits, known,
        lambda commit: identical.commit_fingerprints(repo_root, commit, info["gpu_arch"], has_gpu, log),
        lambda key: key in names and re.search(track.bench, key) is not None,
        remeasure=commits[:1] if options.remeasure or options.repeat_head else (),
    )
    for line in identical.describe(plan):
        log(f"  {line}")
    codes = asv_driver.run_asv(options, env, plan.measure, has_gpu, track, job, options.repeat_head)
    outcome = TrackOutcome(track, codes, plan)
    timing_rows = tracks.timing_track(has_gpu)
    for commit in plan.measure:
        identical.stamp(results_dir, track.machine, commit, plan.fingerprints.get(commit, {}), job.id)
        outcome.benchmark_seconds += copies.benchmark_seconds(results_dir, track.machine, commit, timing_rows, started_ms)
    repo = gitutil.open_repo(repo_root)
    for commit, source in plan.identical.items():
        date_ms = repo.commit(commit).authored_date * 1000
        copied = copies.copy_results(results_dir, track.machine, source, commit, date_ms, timing_rows, job.id)
        if copied.rows == 0:
            outcome.problems.append(f"{commit[:8]}: identical code to {source[:12]}, but {source[:12]} has no results "
                                    f"of these benchmarks on {track.machine} to copy (run with --remeasure)")
            continue
        outcome.copied[commit] = source
        outcome.saved_seconds += copied.seconds_saved
        log(f"{commit[:8]}: {copies.note(source)} ({copied.rows} asv benchmarks, {copied.records} parameter sets copied; "
            f"{copied.seconds_saved:.0f} GPU seconds saved)")
    return outcome
