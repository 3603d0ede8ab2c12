"""The main job's work, from checked options to an exit code (the steps are listed in ci.history.main_job).

:func:`run` takes one :class:`~ci.history.options.HistoryOptions` (its front,
ci.history.main_job, built and checked it) and never reads ``argv``.
"""

from __future__ import annotations

import re
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Sequence

from asv_bench import records
from ci.common import gitutil, interrupts, job_process
from ci.history import asv_driver, branch_sync, machine_info, machine_spread, regressions, site_build, store, track_steps, tracks
from ci.history import results as history_results
from ci.history import summary as history_summary
from ci.history.ledger import Ledger
from ci.history.messages import HarnessError, log, log_detail, log_to
from ci.history.options import HistoryOptions, SiteOptions
from ci.history.progress import Steps
from ci.history.results_branch import BRANCH, BranchError, ResultsBranch
from harness.report import append_step_summary, write_json_atomic

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


def check_bench_selection(patterns: Sequence[str], names: Sequence[str]) -> None:
    unmatched = unmatched_patterns(patterns, names)
    if unmatched:
        examples = ", ".join(names[i] for i in range(0, len(names), max(1, len(names) // 4)))
        raise HarnessError(
            f"--bench {', '.join(repr(p) for p in unmatched)} selects no benchmark of the suite "
            f"({len(names)} names, e.g. {examples}); nothing was run"
        )


def check_results_remote(options: HistoryOptions) -> None:
    """With ``--push-results``, the remote must exist and answer before any work (git ls-remote)."""
    if not options.push_results:
        return
    try:
        ResultsBranch(REPO_ROOT, options.results_remote, log=log).check_remote()
    except BranchError as exc:
        raise HarnessError(f"--push-results: {exc}") from None


def run(options: HistoryOptions) -> int:
    """The whole job; 0 recorded, 1 the newest commit failed; a harness error raises (its front: exit 2, 130/143)."""
    started = time.time()
    check_results_remote(options)
    job = job_process.start(REPO_ROOT, log)
    # Only once the checkout is this job's: a refused second job must not truncate the running one's log.
    log_to(LOG_FILE)
    log(f"full output (asv, pip, every benchmark's row) in {LOG_FILE}, written as it goes")
    interrupted = None
    try:
        return _steps(options, job, started)
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
            log(
                f"interrupted ({interrupted}): asv and {len(ended)} leftover processes stopped; finished measurements "
                f"are kept in .asv/results and resumed by the next run; nothing was committed or pushed"
            )
        log_to(None)


def _steps(options: HistoryOptions, job: job_process.Job, started: float) -> int:
    env = asv_driver.asv_environment(options, job)
    conf = asv_driver.asv_config()
    results_dir = REPO_ROOT / conf["results_dir"]
    problems: list[str] = []

    # The total is known once the tracks are: 1 and 2 here, each track's own, the commit, the publish.
    steps = Steps(3 + {"gpu": 2, "cpu": 1}.get(options.tracks, 3) + (1 if options.publish else 0))  # until the tracks are known
    steps.start("fingerprinting this machine (in a child process)")
    try:
        info = machine_info.fingerprint_in_child(sys.executable, env)
        check_bench_selection(options.bench, info["benchmarks"])
        machine = options.machine or machine_info.machine_name(info)
        runs = tracks.plan(options.tracks, info["gpu"] != "none", machine, options.bench, info["benchmarks"])
        if not runs:
            raise HarnessError(f"--tracks {options.tracks} with --bench {', '.join(options.bench)}: no benchmark of "
                               "these tracks is selected; nothing was run")
        for track in runs:
            job_process.lock_machine(job, track.machine)  # one job per machine name on this host, as per checkout
            machine_info.record_machine(track.machine, _machine_fields(info, track), asv_driver.ASV, env)
    except machine_info.FingerprintError as exc:
        raise HarnessError(str(exc)) from None
    machines = [track.machine for track in runs]
    steps.total = 3 + sum(track_steps.steps_of(t) for t in runs) + (1 if options.publish else 0)
    env[records.RESULTS_DIR_ENV] = str(results_dir)
    log(f"machine {machine}: {info['gpu']} ({info['gpu_arch']}), {info['gpu_runtime']}, driver {info['gpu_driver']}; "
        f"tracks {options.tracks}: " + "; ".join(f"{t.kind} -> {t.machine}" for t in runs))
    for kernel, status in info["kernels"].items():
        log_detail(f"  {kernel}: {status}")  # on the screen in the summary's "Kernels here"

    steps.start(f"results: validating {results_dir}, merging the {BRANCH} branch")
    ledger = Ledger(results_dir)  # what each file was when last checked: unchanged files are not read again
    quarantined = history_results.validate_tree(results_dir, QUARANTINE_DIR, log, ledger)
    repo = gitutil.open_repo(REPO_ROOT)
    has_remote = options.results_remote in gitutil.remote_names(repo)
    branch = ResultsBranch(REPO_ROOT, options.results_remote if has_remote else None, log=log)
    tip = branch_sync.fetch_tip(branch, options.push_results, problems)
    imported = branch_sync.import_from_branch(branch, tip, results_dir, machines, ledger)
    resumable = sum(len(history_results.reconcile(results_dir, m, ledger).resumable) for m in machines)
    here = sum(1 for m in machines for p in (results_dir / m).glob("*") if p.is_file()) if results_dir.is_dir() else 0
    log(f"{here} results files of {', '.join(machines)} here ({imported} brought in or updated from {BRANCH}, the rest "
        f"already up to date); {resumable} measurements of a killed run will be resumed")

    # asv (run, publish) reads the history from a local branch; a fresh clone of another branch has only the remote's.
    if gitutil.ensure_local_branch(repo, options.branch, options.results_remote):
        log(f"created the local branch {options.branch} from {options.results_remote}/{options.branch} "
            "(asv reads the history from a local branch)")
    commits = gitutil.first_parent_commits(repo, options.branch, options.commits)
    started_ms = started * 1000.0
    outcomes = [
        track_steps.run_track(options, env, commits, info, track, job, results_dir, REPO_ROOT, started_ms, steps)
        for track in runs
    ]
    disk = history_results.full_disk_problem(results_dir, BRANCH)
    quarantined += history_results.validate_tree(results_dir, QUARANTINE_DIR, log, ledger)
    if disk:
        problems.append(disk)  # exit 2: what looks like a failed build may be the disk; reconcile waits for the next run
    for outcome in outcomes:
        if not disk:
            history_results.reconcile(results_dir, outcome.track.machine, ledger)
        problems += outcome.problems
        if 1 in outcome.codes:
            problems.append(f"asv run ({outcome.track.kind} tracks) exited 1 (asv itself failed; its output in {LOG_FILE} "
                            f"says why): exit codes {list(outcome.codes)}")

    pushing = f" and pushing to {options.results_remote}" if options.push_results else ""
    steps.start(f"committing {', '.join(machines)}'s results to {BRANCH}{pushing}")
    message = f"{', '.join(machines)}: {len(commits)} commits ({', '.join(c[:8] for c in commits)}), main job {job.id}"
    try:
        # Only what differs from the branch's tip is offered (the ledger knows each file's blob); a push that loses a
        # race rebuilds on the new tip, where the merge per point keeps everyone's.
        on_branch = branch.tree(tip, "results/")
        files = {path: data for m in machines
                 for path, data in branch_sync.machine_files(results_dir, m, options.drop, ledger, on_branch).items()}
        tip = branch.commit_and_push(files, message, push=options.push_results, drop=options.drop)
        branch_state = f"`{BRANCH}` at {tip[:8] if tip else 'none'}" + (" (pushed)" if options.push_results else " (local)")
    except BranchError as exc:
        problems.append(f"results branch: {exc}")
        branch_state = f"`{BRANCH}` not updated ({exc})"
    else:
        try:
            branch_sync.import_from_branch(branch, tip, results_dir, machines, ledger)  # what other runners pushed meanwhile
        except HarnessError as exc:
            problems.append(f"after the commit to {BRANCH}: {exc}")  # the summary still says what was measured

    html = REPO_ROOT / conf["html_dir"]
    site = None
    if options.publish:
        steps.start(f"publishing into {html} (every machine's results: asv's pages over the newest commits, the kernel "
                    "pages over all of them, change points and the drift guard; a running asv preview keeps serving it)")
        try:
            site = site_build.build(SiteOptions(out=html, results_dir=results_dir, from_branch=False, results_remote=None,
                                                branch=options.branch))
        except (HarnessError, BranchError) as exc:
            problems.append(f"publishing: {exc}")

    per_track = {
        o.track.kind: [history_summary.collect_commit(results_dir, o.track.machine, c, job.id, started_ms, options.bench,
                                                      already=o.track.bench if c in o.already else None)
                       for c in reversed(commits)]
        for o in outcomes
    }
    commit_runs = history_summary.merge_tracks(per_track)
    timing = next((o for o in outcomes if o.track.timings), None)
    spread = history_summary.spread_rows(timing.codes.head_medians) if options.repeat_head and timing else None
    report = _report(job, started, info, machine, commit_runs, per_track, problems, quarantined, branch_state, html)
    report["step_seconds"] = steps.finish()  # where a run's time goes (docs/PERF_NOTES.md, the history at scale)
    report["tracks"] = {o.track.kind: o.track.machine for o in outcomes}
    report["cost"] = {o.track.kind: o.cost() for o in outcomes}
    # point -> [samples before this run, samples now]: a re-run adds to the first run's samples, never replaces them
    report["samples"] = {o.track.kind: {c: {k: list(v) for k, v in points.items()} for c, points in o.samples.items()}
                         for o in outcomes}
    if timing is not None and site is not None:
        # Change points and the drift guard over this machine's history, as the site build computed them (issue 20);
        # without a publish (the GPU runner's --no-publish) they are the Pages job's (python -m ci.history.publish).
        empty = regressions.history_checks(store.History(), timing.track.machine, timed_on_gpu=info["gpu"] != "none")
        report["history"] = next((m for m in site["machines"] if m["machine"] == timing.track.machine), empty)
        # Two runners of one GPU model on the results branch: how far apart they measure the same commits.
        report["machine_spread"] = site["machine_spread"]
    checks = "\n".join(regressions.history_markdown(report["history"]) + machine_spread.spread_markdown(
        report.get("machine_spread") or [])) if report.get("history") else (
        "Change points and the drift guard: not computed here (--no-publish); the site build computes them over every "
        "machine's history (`python -m ci.history.publish`, the Pages job)" if timing is not None and not options.publish else "")
    markdown = "\n\n".join(filter(None, [history_summary.summary_markdown(report, commit_runs, spread), checks]))
    log_detail(markdown)
    print("\n\n".join(filter(None, [history_summary.summary_markdown(report, commit_runs, spread, short=str(LOG_FILE)), checks])))
    append_step_summary(markdown)
    if options.json is not None:
        write_json_atomic(options.json, report)
    for line in history_summary.cost_lines(report["cost"]):
        log_detail(line)  # on the screen in the summary above
    if options.json is not None:
        log(f"report written to {options.json}")
    if report["nothing_new"]:
        log(f"nothing new: {len(commits)} commits already measured on every track ({', '.join(report['tracks'])}); "
            "nothing measured or copied")
    log(f"done in {report['seconds']:.0f} s. HTML: {html / 'index.html'} -- serve it with: asv preview (from {REPO_ROOT}). "
        f"Full output: {LOG_FILE}")
    code = _exit_code(commit_runs, report["harness_problems"])
    drifted = (report.get("history") or {}).get("drift_failed")
    if code == 0 and drifted:
        log(f"drift guard (exit 1): {len(drifted)} benchmark(s) below the best of their recent history: {'; '.join(drifted)}")
        return 1
    return code


def _machine_fields(info: dict[str, Any], track: tracks.TrackRun) -> dict[str, str]:
    fields = machine_info.machine_fields(info)
    if not track.timings:
        # Compile-only counts are the compiler's for a fixed target: no GPU, driver or runtime of any machine in them.
        fields |= {"gpu": "none (compile-only)", "gpu_driver": "none", "gpu_runtime": "none"}
    return fields


def _report(job, started, info, machine, runs, per_track, problems, quarantined, branch_state, html) -> dict[str, Any]:
    """The run as JSON (``--json``; the Markdown summary is drawn from it): every harness problem included."""
    problems = list(problems)
    for kind, track_runs in per_track.items():
        for run in track_runs:
            if run.status == history_summary.NOT_MEASURED:
                problems.append(f"{run.commit[:8]}: not measured ({kind} tracks; asv stopped before it; its output "
                                f"in {LOG_FILE} says why)")
            problems += [f"{run.commit[:8]} {item}" for item in run.harness_failures]
    nothing_new = all(r.status == history_summary.ALREADY for track_runs in per_track.values() for r in track_runs)
    return {
        "machine": machine,
        "fingerprint": {k: v for k, v in info.items() if k != "benchmarks"},
        "job": job.id,
        "commits": [r.commit for r in runs],
        "status": {r.commit: r.status for r in runs},
        "track_status": {kind: {r.commit: r.status for r in track_runs} for kind, track_runs in per_track.items()},
        "nothing_new": nothing_new,  # every commit already measured on every track: nothing measured or copied
        "identical_to": {r.commit: r.identical_to for r in runs if r.identical_to},
        "results_branch": branch_state,
        "html": str(html / "index.html"),
        "quarantined": [vars(q) for q in quarantined],
        "harness_problems": problems,
        "failures": [f"{run.commit[:8]} {item}" for run in runs for item in run.failures],
        "measurements": {r.commit: r.gemm for r in runs},
        "resources": {r.commit: r.resources for r in runs},
        "seconds": round(time.time() - started, 1),
    }


def _exit_code(runs, problems: list[str]) -> int:
    """2 on any harness problem; else 1 when the newest commit failed (older failures are history); else 0."""
    newest = runs[-1]
    failures = [f"{run.commit[:8]} {item}" for run in runs for item in run.failures]
    if problems:
        log(f"harness problems (exit 2): {'; '.join(problems)}")
        return 2
    if newest.failures:
        log(f"{len(newest.failures)} failures at {newest.commit[:8]}, the newest commit")
        return 1
    if failures:
        log(f"{len(failures)} failures in older commits (listed in the summary); none at {newest.commit[:8]}")
    return 0
