"""The main job's work, from checked options to an exit code: the steps of docs/HISTORY.md, "The main job".

:func:`run` takes one :class:`~ci.history.options.HistoryOptions` (its front,
ci.history.main_job, built and checked it) and never reads ``argv``.
"""

from __future__ import annotations

import re
import sys
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asv_bench import records
from ci.common import gitutil, interrupts, job_process
from ci.common.files import append_step_summary_or_fallback, write_json_atomic
from ci.history.asv_results import folder as history_results
from ci.history.asv_results import store
from ci.history.asv_results.ledger import Ledger
from ci.history.branch.results_branch import BRANCH, BranchError, ResultsBranch, import_from_branch, machine_files
from ci.history.measure import asv_driver, machine_info, track_steps, tracks
from ci.history.measure import summary as history_summary
from ci.history.measure.progress import Steps
from ci.history.messages import HarnessError, log, log_detail, log_to
from ci.history.options import HistoryOptions, SiteOptions
from ci.history.site import site_build
from ci.history.trends import machine_spread, regressions

REPO_ROOT = Path(__file__).resolve().parents[2]
QUARANTINE_DIR = REPO_ROOT / ".asv" / "quarantine"
LOG_FILE = REPO_ROOT / ".asv" / "main_job.log"  # everything: asv's and pip's output, the full tables


def unmatched_patterns(patterns: Sequence[str], names: Sequence[str]) -> list[str]:
    """The ``--bench`` regexes that select nothing (asv: re.search over ``name(params)``)."""
    unmatched = []
    for pattern in patterns:
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise HarnessError(f"--bench {pattern!r} is not a regular expression: {exc}") from None
        if not any(regex.search(name) for name in names):
            unmatched.append(pattern)
    return unmatched


def run(options: HistoryOptions) -> int:
    """The whole job; 0 recorded, 1 the newest commit failed; a harness error raises (its front: exit 2, 130/143)."""
    started = time.time()
    if options.push_results:  # the remote must exist and answer before any work (git ls-remote)
        try:
            ResultsBranch(REPO_ROOT, options.results_remote, log=log).check_remote()
        except BranchError as exc:
            raise HarnessError(f"--push-results: {exc}") from None
    job = job_process.start(REPO_ROOT, log)
    # Only once the checkout is this job's: a refused second job must not truncate the running one's log.
    log_to(LOG_FILE)
    log(f"full output (asv, pip, every benchmark's row) in {LOG_FILE}, written as it goes")
    interrupted = None
    jobs: list[_Job] = []  # the run's state, for the line an interrupt ends with (what was committed, if anything)
    try:
        return _steps(options, job, started, jobs)
    except KeyboardInterrupt as exc:  # SIGINT, SIGTERM (ci.common.interrupts.Interrupted)
        interrupted = exc
        raise
    except Exception:
        log_detail(traceback.format_exc())  # the front says it in one line; the log file keeps the whole
        raise
    finally:
        interrupts.ignore()
        ended = job_process.finish(job)
        if interrupted is not None:
            branch = jobs[0].branch_state if jobs else ""
            committed = f"the results branch: {branch}" if branch else "nothing was committed or pushed"
            log(
                f"interrupted ({interrupted}): asv and {len(ended)} leftover processes stopped; finished measurements "
                f"are kept in .asv/results and resumed by the next run; {committed}"
            )
        log_to(None)


@dataclass
class _Job:
    """What the steps of one run share: each step reads what the ones before it left here (and takes the options it
    needs as its own arguments)."""

    job: job_process.Job
    started: float
    env: dict[str, str]
    results_dir: Path
    html: Path
    steps: Steps
    problems: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    machine: str = ""
    runs: list[tracks.TrackRun] = field(default_factory=list)
    ledger: Ledger | None = None
    branch: ResultsBranch | None = None
    tip: str | None = None
    commits: list[str] = field(default_factory=list)
    quarantined: list[history_results.Quarantined] = field(default_factory=list)
    outcomes: list[track_steps.TrackOutcome] = field(default_factory=list)
    branch_state: str = ""
    site: dict[str, Any] | None = None

    @property
    def machines(self) -> list[str]:
        return [track.machine for track in self.runs]


def _steps(options: HistoryOptions, job: job_process.Job, started: float, jobs: list[_Job]) -> int:
    conf = asv_driver.asv_config()
    # The total is known once the tracks are: 1 and 2 here, each track's own, the commit, the publish.
    total = 3 + {"gpu": 2, "cpu": 1}.get(options.tracks, 3) + (1 if options.publish else 0)
    s = _Job(
        job,
        started,
        asv_driver.asv_environment(job, options.wheelhouse),
        REPO_ROOT / conf["results_dir"],
        REPO_ROOT / conf["html_dir"],
        Steps(total),
    )
    jobs.append(s)
    # The steps of docs/HISTORY.md, "The main job".
    _fingerprint(s, options)
    _results(s, options.results_remote, options.push_results, options.branch, options.commits)
    _measure(s, options)
    _commit(s, options.results_remote, options.push_results, options.drop)
    if options.publish:
        _publish(s)
    return _finish(s, options)


def _fingerprint(s: _Job, options: HistoryOptions) -> None:
    """Step 1: this machine (in a child process), the tracks it runs and their asv machines (a FingerprintError is
    a HarnessError: exit 2)."""
    s.steps.start("fingerprinting this machine (in a child process)")
    s.info = machine_info.fingerprint_in_child(sys.executable, s.env)
    names = s.info["benchmarks"]
    if unmatched := unmatched_patterns(options.bench, names):
        examples = ", ".join(names[i] for i in range(0, len(names), max(1, len(names) // 4)))
        raise HarnessError(
            f"--bench {', '.join(repr(p) for p in unmatched)} selects no benchmark of the suite "
            f"({len(names)} names, e.g. {examples}); nothing was run"
        )
    s.machine = options.machine or machine_info.machine_name(s.info)
    s.runs = tracks.plan(options.tracks, s.info["gpu"] != "none", s.machine, options.bench, names)
    if not s.runs:
        raise HarnessError(
            f"--tracks {options.tracks} with --bench {', '.join(options.bench)}: no benchmark of "
            "these tracks is selected; nothing was run"
        )
    for track in s.runs:
        job_process.lock_machine(s.job, track.machine)  # one job per machine name on this host, as per checkout
        machine_info.record_machine(track.machine, _machine_fields(s.info, track), asv_driver.ASV, s.env)
    s.steps.total = 3 + sum(track_steps.steps_of(t) for t in s.runs) + (1 if options.publish else 0)
    s.env[records.RESULTS_DIR_ENV] = str(s.results_dir)
    info = s.info
    log(
        f"machine {s.machine}: {info['gpu']} ({info['gpu_arch']}), {info['gpu_runtime']}, driver {info['gpu_driver']}; "
        f"tracks {options.tracks}: " + "; ".join(f"{t.kind} -> {t.machine}" for t in s.runs)
    )
    for kernel, status in info["kernels"].items():
        log_detail(f"  {kernel}: {status}")  # on the screen in the summary's "Kernels here"


def _results(s: _Job, remote: str, push: bool, branch: str, commits: int) -> None:
    """Step 2: the results folder validated, the results branch merged in, a killed run's measurements resumed."""
    s.steps.start(f"results: validating {s.results_dir}, merging the {BRANCH} branch")
    s.ledger = Ledger(s.results_dir)  # what each file was when last checked: unchanged files are not read again
    s.quarantined = history_results.validate_tree(s.results_dir, QUARANTINE_DIR, log, s.ledger)
    repo = gitutil.open_repo(REPO_ROOT)
    s.branch = ResultsBranch(REPO_ROOT, remote if remote in gitutil.remote_names(repo) else None, log=log)
    s.tip = s.branch.fetch_or_local(push)
    imported = import_from_branch(s.branch, s.tip, s.results_dir, s.machines, s.ledger)
    resumable = sum(len(history_results.reconcile(s.results_dir, m, s.ledger).resumable) for m in s.machines)
    here = sum(len(history_results.machine_files(s.results_dir, m)) for m in s.machines)
    log(
        f"{here} results files of {', '.join(s.machines)} here ({imported} brought in or updated from {BRANCH}, the "
        f"rest already up to date); {resumable} measurements of a killed run will be resumed"
    )
    # asv (run, publish) reads the history from a local branch; a fresh clone of another branch has only the remote's.
    if gitutil.ensure_local_branch(repo, branch, remote):
        log(f"created the local branch {branch} from {remote}/{branch} (asv reads the history from a local branch)")
    s.commits = gitutil.first_parent_commits(repo, branch, commits)


def _measure(s: _Job, options: HistoryOptions) -> None:
    """Steps 3 on: each track's own (plan, asv run, stamp, copy), then the results checked again."""
    s.outcomes = [
        track_steps.run_track(
            options, s.env, s.commits, s.info, track, s.job, s.results_dir, REPO_ROOT, s.started * 1000.0, s.steps
        )
        for track in s.runs
    ]
    disk = history_results.full_disk_problem(s.results_dir, BRANCH)
    s.quarantined += history_results.validate_tree(s.results_dir, QUARANTINE_DIR, log, s.ledger)
    if disk:
        s.problems.append(disk)  # exit 2: what looks like a failed build may be the disk; reconcile waits for next run
    for outcome in s.outcomes:
        if not disk:
            history_results.reconcile(s.results_dir, outcome.track.machine, s.ledger)
        s.problems += outcome.problems
        if 1 in outcome.codes:
            s.problems.append(
                f"asv run ({outcome.track.kind} tracks) exited 1 (asv itself failed; its output in "
                f"{LOG_FILE} says why): exit codes {list(outcome.codes)}"
            )


def _commit(s: _Job, remote: str, push: bool, drop: tuple[str, ...]) -> None:
    """This machine's results committed to the results branch (and pushed), then what others pushed brought in."""
    machines, branch = s.machines, s.branch
    assert branch is not None  # _results made it
    pushing = f" and pushing to {remote}" if push else ""
    s.steps.start(f"committing {', '.join(machines)}'s results to {BRANCH}{pushing}")
    message = (
        f"{', '.join(machines)}: {len(s.commits)} commits ({', '.join(c[:8] for c in s.commits)}), main job {s.job.id}"
    )
    try:
        # Only what differs from the branch's tip is offered (the ledger knows each file's blob); a push that loses a
        # race rebuilds on the new tip, where the merge per point keeps everyone's.
        on_branch = branch.tree(s.tip, "results/")
        files: dict[str, bytes] = {}
        for m in machines:
            files |= machine_files(s.results_dir, m, drop, s.ledger, on_branch)
        s.tip = branch.commit_and_push(files, message, push=push, drop=drop)
        s.branch_state = f"`{BRANCH}` at {s.tip[:8] if s.tip else 'none'}" + (" (pushed)" if push else " (local)")
    except BranchError as exc:
        s.problems.append(f"results branch: {exc}")
        s.branch_state = f"`{BRANCH}` not updated ({exc})"
        return
    try:
        import_from_branch(branch, s.tip, s.results_dir, machines, s.ledger)  # pushed meanwhile
    except HarnessError as exc:
        s.problems.append(f"after the commit to {BRANCH}: {exc}")  # the summary still says what was measured


def _publish(s: _Job) -> None:
    """asv's pages and the kernel pages over every machine's results (without ``--no-publish``)."""
    s.steps.start(
        f"publishing into {s.html} (every machine's results: asv's pages over the newest commits, the "
        "kernel pages over all of them, change points and the drift guard; a running asv preview keeps "
        "serving it)"
    )
    try:
        s.site = site_build.build(
            SiteOptions(out=s.html, results_dir=s.results_dir, from_branch=False, results_remote=None)
        )
    except (HarnessError, BranchError) as exc:
        s.problems.append(f"publishing: {exc}")


def _finish(s: _Job, options: HistoryOptions) -> int:
    """The report (``--json``, the Markdown summary, the step summary) and the exit code."""
    outcomes, started_ms = s.outcomes, s.started * 1000.0
    per_track = {
        o.track.kind: [
            history_summary.collect_commit(
                s.results_dir,
                o.track.machine,
                c,
                s.job.id,
                started_ms,
                options.bench,
                already=o.track.bench if c in o.already else None,
            )
            for c in reversed(s.commits)
        ]
        for o in outcomes
    }
    runs = history_summary.merge_tracks(per_track)
    timing = next((o for o in outcomes if o.track.timings), None)
    spread = history_summary.spread_rows(timing.codes.head_medians) if options.repeat_head and timing else None
    report = history_summary.Report(
        machine=s.machine,
        fingerprint={k: v for k, v in s.info.items() if k != "benchmarks"},
        job=s.job.id,
        commits=[r.commit for r in runs],
        status={r.commit: r.status for r in runs},
        track_status={kind: {r.commit: r.status for r in track_runs} for kind, track_runs in per_track.items()},
        nothing_new=all(r.status == history_summary.ALREADY for track_runs in per_track.values() for r in track_runs),
        identical_to={r.commit: r.identical_to for r in runs if r.identical_to},
        results_branch=s.branch_state,
        html=str(s.html / "index.html"),
        quarantined=[vars(q) for q in s.quarantined],
        harness_problems=history_summary.harness_problems(per_track, s.problems, LOG_FILE),
        failures=[f"{run.commit[:8]} {item}" for run in runs for item in run.failures],
        measurements={r.commit: r.gemm for r in runs},
        resources={r.commit: r.resources for r in runs},
        seconds=round(time.time() - s.started, 1),
        step_seconds=s.steps.finish(),
        tracks={o.track.kind: o.track.machine for o in outcomes},
        cost={o.track.kind: o.cost() for o in outcomes},
        samples={o.track.kind: o.samples for o in outcomes},
    )
    if timing is not None and s.site is not None:
        # Change points and the drift guard over this machine's history, as the site build computed them (issue 20);
        # without a publish (the GPU runner's --no-publish) they are the Pages job's (python -m ci.history.publish).
        empty = regressions.history_checks(store.History(), timing.track.machine, timed_on_gpu=s.info["gpu"] != "none")
        report.history = next((m for m in s.site["machines"] if m["machine"] == timing.track.machine), empty)
        # Two runners of one GPU model on the results branch: how far apart they measure the same commits.
        report.machine_spread = s.site["machine_spread"]
    checks = (
        "\n".join(
            regressions.history_markdown(report.history) + machine_spread.spread_markdown(report.machine_spread or [])
        )
        if report.history
        else (
            "Change points and the drift guard: not computed here (--no-publish); the site build computes them over "
            "every machine's history (`python -m ci.history.publish`, the Pages job)"
            if timing is not None and not options.publish
            else ""
        )
    )
    markdown = "\n\n".join(filter(None, [history_summary.summary_markdown(report, runs, spread), checks]))
    log_detail(markdown)
    print(
        "\n\n".join(filter(None, [history_summary.summary_markdown(report, runs, spread, short=str(LOG_FILE)), checks]))
    )
    append_step_summary_or_fallback(markdown, log)  # a refused summary: a named file, one line
    for line in history_summary.cost_lines(report.cost):
        log_detail(line)  # on the screen in the summary above
    if options.json is not None:
        write_json_atomic(
            options.json, report.to_json(), kept=f"this run's results in {s.results_dir} and {s.branch_state} (above)"
        )
        log(f"report written to {options.json}")
    if report.nothing_new:
        log(
            f"nothing new: {len(s.commits)} commits already measured on every track ({', '.join(report.tracks)}); "
            "nothing measured or copied"
        )
    log(
        f"done in {report.seconds:.0f} s. HTML: {s.html / 'index.html'} -- "
        f"serve it with: asv preview (from {REPO_ROOT}). "
        f"Full output: {LOG_FILE}"
    )
    code = _exit_code(runs, report.harness_problems, report.failures)
    drifted = (report.history or {}).get("drift_failed")
    if code == 0 and drifted:
        log(
            f"drift guard (exit 1): {len(drifted)} benchmark(s) below the best of their recent history: "
            f"{'; '.join(drifted)}"
        )
        return 1
    return code


def _machine_fields(info: dict[str, Any], track: tracks.TrackRun) -> dict[str, str]:
    fields = machine_info.machine_fields(info)
    if not track.timings:
        # Compile-only counts are the compiler's for a fixed target: no GPU, driver or runtime of any machine in them.
        fields |= {"gpu": "none (compile-only)", "gpu_driver": "none", "gpu_runtime": "none"}
    return fields


def _exit_code(runs, problems: list[str], failures: list[str]) -> int:
    """2 on any harness problem; else 1 when the newest commit failed (older failures are history); else 0."""
    newest = runs[-1]
    if problems:
        log(f"harness problems (exit 2): {'; '.join(problems)}")
        return 2
    if newest.failures:
        log(f"{len(newest.failures)} failures at {newest.commit[:8]}, the newest commit")
        return 1
    if failures:
        log(f"{len(failures)} failures in older commits (listed in the summary); none at {newest.commit[:8]}")
    return 0
