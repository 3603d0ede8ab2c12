"""The main job: benchmark the recent history of main with asv, keep it on the results branch, publish the HTML.

    python -m ci.history                                  # last 3 commits of main, publish
    python -m ci.history --commits 1 --push-results       # the history workflow (.github/workflows/history.yml)
    python -m ci.history --commits 5 --repeat-head 1 --bench triton_dot_scaled

Steps (progress on stderr, asv's own "[ 42%]" lines included):

1. Before any work: ``--json`` must be writable, every ``--bench`` regex must select a
   benchmark, the results remote must answer; one main job per checkout (a killed
   one's leftover processes and temporary files are removed: ci.common.job_process).
2. Fingerprint this machine in a child process (GPU, driver, stack, which kernels
   run here): the asv machine ``<host>-<gpu>``.
3. Results: every file under ``.asv/results`` is validated; an unreadable one is
   moved to ``.asv/quarantine/`` with a message (ci.history.results). The results
   branch (``asv-results``) is fetched and merged in. Measurements a killed run
   finished but asv never saved are marked for reuse.
4. ``asv run`` over the last ``--commits`` first-parent commits of ``--branch``;
   ``--repeat-head N`` runs the newest again N times (its spread). Every GEMM
   measurement writes its record -- TFLOPS, idle check, clocks, throttling,
   steadiness -- beside asv's results (asv_bench.records).
5. This machine's results and records are committed to the results branch
   (GitPython, never touching the work tree); with ``--push-results`` pushed, and on
   a rejection (another runner pushed first) rebuilt on the new tip and pushed
   again (ci.history.results_branch).
6. ``asv publish`` from the results (the branch's, all machines); the plug-in
   ci.history.asv_html makes the page work offline, on GitHub Pages, and as a file.

Output: a Markdown summary of this run's measurements (time, TFLOPS, flags,
resources, failures) on stdout and into $GITHUB_STEP_SUMMARY; ``--json PATH``.
Exit: 0 recorded; 1 the newest commit failed to build or a benchmark of it
failed (older commits' failures are listed: they are history); 2 the harness
failed (bad input, asv could not run, a commit not measured, the push failed);
130 interrupted (Ctrl-C, SIGTERM), after stopping asv and every benchmark process.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Sequence

from asv_bench import records
from ci.history import machine_info
from ci.common import gitutil
from ci.history import results as history_results
from ci.history import summary as history_summary
from ci.common import job_process
from ci.history.results_branch import BRANCH, BranchError, ResultsBranch, merge_file
from harness.report import append_step_summary, check_writable, write_bytes_atomic, write_json_atomic

REPO_ROOT = Path(__file__).resolve().parents[2]
QUARANTINE_DIR = REPO_ROOT / ".asv" / "quarantine"


def log(message: str) -> None:
    print(f"main_job: {message}", file=sys.stderr, flush=True)


class HarnessError(RuntimeError):
    """The job could not do its work (not a benchmark result); exit 2."""


# ---------------------------------------------------------------------------
# input checks, before any work
# ---------------------------------------------------------------------------


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


def preflight(args: argparse.Namespace) -> None:
    """Everything that can be checked without running anything: fail before the work, not after it."""
    if args.json is not None:
        try:
            check_writable(args.json, "--json")
        except OSError as exc:
            raise HarnessError(str(exc)) from None
    for pattern in args.bench:
        unmatched_patterns([pattern], [])  # raises on a malformed regex
    if args.push_results:
        try:
            ResultsBranch(REPO_ROOT, args.results_remote, log=log).check_remote()
        except BranchError as exc:
            raise HarnessError(f"--push-results: {exc}") from None


# ---------------------------------------------------------------------------
# running asv
# ---------------------------------------------------------------------------


def run_streaming(cmd: list[str], env: dict[str, str]) -> int:
    """Run ``cmd``, echoing its output live to stderr; on an interrupt, stop it before re-raising."""
    log("$ " + " ".join(cmd))
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            sys.stderr.write(line)
            sys.stderr.flush()
        return proc.wait()
    except BaseException:
        _stop(proc)
        raise


def _stop(proc: subprocess.Popen) -> None:
    """asv cleans up its benchmark processes on SIGINT; give it a few seconds, then kill it."""
    for sig, wait_s in ((signal.SIGINT, 10.0), (signal.SIGKILL, 5.0)):
        if proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            continue


def recent_commits(branch: str, count: int) -> list[str]:
    """The last ``count`` first-parent commits of ``branch``, newest first."""
    proc = subprocess.run(
        ["git", "rev-list", "--first-parent", f"--max-count={count}", branch], cwd=REPO_ROOT, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise HarnessError(f"git rev-list {branch}: {proc.stderr.strip()}")
    commits = proc.stdout.split()
    if not commits:
        raise HarnessError(f"branch {branch} has no commits")
    return commits


def ensure_local_branch(branch: str, remote: str) -> None:
    """asv (run, publish) reads ``branch`` as a local branch; a fresh clone of another checked-out branch has
    it only as ``<remote>/<branch>``: create the local branch from it, saying so."""
    repo = gitutil.open_repo(REPO_ROOT)
    if gitutil.resolves(repo, f"refs/heads/{branch}") or not gitutil.resolves(repo, f"refs/remotes/{remote}/{branch}"):
        return
    repo.git.branch("--track", branch, f"{remote}/{branch}")
    log(f"created the local branch {branch} from {remote}/{branch} (asv reads the history from a local branch)")


def known_commits() -> set[str]:
    proc = subprocess.run(["git", "rev-list", "--all"], cwd=REPO_ROOT, capture_output=True, text=True)
    return set(proc.stdout.split())


def asv_environment(args: argparse.Namespace, job: job_process.Job) -> dict[str, str]:
    env = dict(os.environ)
    # asv_bench/link_stack.py links this interpreter's site-packages into asv's environments.
    env["MXFP4_STACK_PYTHON"] = sys.executable
    # Triton's CPU interpreter would turn GPU benchmarks into hour-long CPU runs.
    env.pop("TRITON_INTERPRET", None)
    # Every process asv starts inherits the tag (ci.common.job_process reaps them after a kill) and writes its
    # temporary files (forkserver socket, result files) where the next job can remove them.
    env[records.JOB_ENV] = job.tag
    env["TMPDIR"] = str(job.tmp_dir)
    if args.wheelhouse:
        # Offline machines: asv's environment gets its few requirements (asv_runner, build, ...) from here.
        env["PIP_FIND_LINKS"] = str(Path(args.wheelhouse).resolve())
        env["PIP_NO_INDEX"] = "1"
    return env


def asv_config() -> dict[str, Any]:
    import asv.util

    return asv.util.load_json(str(REPO_ROOT / "asv.conf.json"), js_comments=True)


# ---------------------------------------------------------------------------
# the results branch <-> .asv/results
# ---------------------------------------------------------------------------


def import_from_branch(branch: ResultsBranch, tip: str | None, results_dir: Path, machine: str) -> int:
    """Bring the branch's results into ``results_dir``: other machines' as they are (they own them), this
    machine's merged under the local copy; files of commits this clone lacks, or unreadable ones, are left out."""
    known = known_commits()
    imported = skipped = 0
    for path, data in branch.files(tip, "results/").items():
        relative = Path(path).relative_to("results")
        target = results_dir / relative
        if relative == Path("benchmarks.json") and target.exists():
            continue
        problem = _branch_file_problem(relative, data, results_dir, known)
        if problem:
            log(f"{BRANCH}: not using {path}: {problem}")
            skipped += 1
            continue
        own = relative.parts[0] == machine
        if own and target.exists():
            data = merge_file(path, theirs=data, ours=target.read_bytes())
        if not target.exists() or target.read_bytes() != data:
            write_bytes_atomic(target, data)  # a kill here must not leave a half results file
            imported += 1
    if skipped:
        log(f"{BRANCH}: {skipped} files left out (above); the rest of the history is used")
    return imported


def _branch_file_problem(relative: Path, data: bytes, results_dir: Path, known: set[str]) -> str | None:
    scratch = Path(tempfile.mkdtemp(prefix="branch-file-"))
    try:
        probe = scratch / relative
        probe.parent.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(data)
        history_results.check_file(probe, scratch)
    except history_results.InvalidFile as exc:
        return f"unreadable ({exc})"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if relative.suffix == ".json" and len(relative.parts) == 2 and relative.name != "machine.json":
        commit = json.loads(data)["commit_hash"]
        if commit not in known:
            return f"commit {commit[:8]} is not in this clone (git fetch it to publish it)"
    return None


def machine_files(results_dir: Path, machine: str) -> dict[str, bytes]:
    """What this machine contributes to the branch: its folder, and the suite's benchmarks.json."""
    files = {}
    for path in sorted((results_dir / machine).glob("*")):
        if path.is_file() and path.suffix in (".json", records.SUFFIX):
            files[f"results/{machine}/{path.name}"] = path.read_bytes()
    if (results_dir / "benchmarks.json").is_file():
        files["results/benchmarks.json"] = (results_dir / "benchmarks.json").read_bytes()
    return files


# ---------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m ci.history", description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=3, help="how many recent first-parent commits of the branch (default 3)")
    parser.add_argument("--branch", default="main", help="branch whose history is benchmarked (default main)")
    parser.add_argument("--bench", action="append", default=[], help="asv -b regex (repeatable); each must select a benchmark")
    parser.add_argument("--repeat-head", type=int, default=0, metavar="N", help="run the newest commit N more times: spread")
    parser.add_argument("--machine", help="asv machine name (default <host>-<gpu model>)")
    parser.add_argument(
        "--launch-method",
        choices=("auto", "spawn", "forkserver"),
        default="auto",
        help="asv's benchmark processes: spawn (a fresh interpreter each) or forkserver (fork from one that has "
        "imported the suite). auto: spawn with a GPU, forkserver without (saves ~5 s of imports per benchmark)",
    )
    parser.add_argument("--wheelhouse", help="directory of wheels for asv's environments (offline machines)")
    parser.add_argument("--show-stderr", action="store_true", help="print every benchmark's output (timing summaries)")
    parser.add_argument(
        "--push-results", action="store_true", help=f"push the {BRANCH} branch to --results-remote (retrying on a race)"
    )
    parser.add_argument("--results-remote", default="origin", help="git remote of the results branch (default origin)")
    parser.add_argument("--no-publish", action="store_true", help="skip asv publish")
    parser.add_argument("--json", type=Path, help="write the report as JSON here (checked writable before the run)")
    args = parser.parse_args(argv)
    if args.commits < 1:
        parser.error(f"--commits must be >= 1, got {args.commits}")
    if args.repeat_head < 0:
        parser.error(f"--repeat-head must be >= 0, got {args.repeat_head}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.time()
    try:
        preflight(args)
        job = job_process.start(REPO_ROOT, log)
    except (HarnessError, job_process.JobConflict) as exc:
        log(f"error: {exc}")
        return 2
    job_process.raise_on_termination()
    interrupted = None
    try:
        return _main(args, job, started)
    except HarnessError as exc:
        log(f"error: {exc}")
        return 2
    except job_process.Interrupted as exc:
        interrupted = exc
        return 130
    except Exception:
        # A bug or an environment the job did not foresee is still the harness's failure, never a result.
        log(f"error: the main job itself failed (exit 2):\n{traceback.format_exc()}")
        return 2
    finally:
        # A second Ctrl-C must not break the clean-up into a traceback.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        ended = job_process.finish(job)
        if interrupted is not None:
            log(
                f"interrupted ({interrupted}): asv and {len(ended)} leftover processes stopped; finished measurements "
                f"are kept in .asv/results and resumed by the next run; nothing was committed or pushed"
            )


def _main(args: argparse.Namespace, job: job_process.Job, started: float) -> int:
    asv = [sys.executable, "-m", "asv"]
    env = asv_environment(args, job)
    conf = asv_config()
    results_dir = REPO_ROOT / conf["results_dir"]
    problems: list[str] = []

    log("[1/6] fingerprinting this machine (in a child process)")
    try:
        info = machine_info.fingerprint_in_child(sys.executable, env)
        check_bench_selection(args.bench, info["benchmarks"])
        machine = args.machine or machine_info.machine_name(info)
        machine_info.record_machine(machine, machine_info.machine_fields(info), asv, env)
    except machine_info.FingerprintError as exc:
        raise HarnessError(str(exc)) from None
    env.update({records.MACHINE_ENV: machine, records.RESULTS_DIR_ENV: str(results_dir)})
    log(f"machine {machine}: {info['gpu']} ({info['gpu_arch']}), {info['gpu_runtime']}, driver {info['gpu_driver']}")
    for kernel, status in info["kernels"].items():
        log(f"  {kernel}: {status}")

    log(f"[2/6] results: validating {results_dir}, merging the {BRANCH} branch")
    quarantined = history_results.validate_tree(results_dir, QUARANTINE_DIR, log)
    branch = ResultsBranch(REPO_ROOT, args.results_remote if _has_remote(args.results_remote) else None, log=log)
    tip = _fetch(branch, args.push_results, problems)
    imported = import_from_branch(branch, tip, results_dir, machine)
    reconciled = history_results.reconcile(results_dir, machine)
    log(f"{imported} files from {BRANCH}; {len(reconciled.resumable)} measurements of a killed run will be resumed")

    ensure_local_branch(args.branch, args.results_remote)
    commits = recent_commits(args.branch, args.commits)
    codes = _run_asv(args, asv, env, commits, info, machine, job)
    quarantined += history_results.validate_tree(results_dir, QUARANTINE_DIR, log)
    history_results.reconcile(results_dir, machine)
    if 1 in codes:
        problems.append(f"asv run exited 1 (asv itself failed; its output above says why): exit codes {codes}")

    log(f"[5/6] committing {machine}'s results to {BRANCH}" + (f" and pushing to {args.results_remote}" if args.push_results else ""))
    message = f"{machine}: {len(commits)} commits ({', '.join(c[:8] for c in commits)}), main job {job.id}"
    try:
        tip = branch.commit_and_push(machine_files(results_dir, machine), message, push=args.push_results)
        import_from_branch(branch, tip, results_dir, machine)  # what other runners pushed meanwhile
        branch_state = f"`{BRANCH}` at {tip[:8] if tip else 'none'}" + (" (pushed)" if args.push_results else " (local)")
    except BranchError as exc:
        problems.append(f"results branch: {exc}")
        branch_state = f"`{BRANCH}` not updated ({exc})"

    html = REPO_ROOT / conf["html_dir"]
    if not args.no_publish:
        log("[6/6] asv publish (all machines' results; ci/history/asv_html.py makes the page work offline)")
        if run_streaming([*asv, "publish"], env) != 0:
            problems.append("asv publish failed (its output above says why)")

    started_ms = started * 1000.0
    runs = [
        history_summary.collect_commit(results_dir, machine, c, job.id, started_ms, args.bench) for c in reversed(commits)
    ]
    spread = history_summary.spread_rows(codes.head_medians) if args.repeat_head else None
    return _report(args, job, started, info, machine, runs, spread, problems, quarantined, branch_state, html)


def _has_remote(name: str) -> bool:
    proc = subprocess.run(["git", "remote"], cwd=REPO_ROOT, capture_output=True, text=True)
    return name in proc.stdout.split()


def _fetch(branch: ResultsBranch, push: bool, problems: list[str]) -> str | None:
    try:
        return branch.fetch()
    except BranchError as exc:
        if push:
            raise HarnessError(str(exc)) from None
        log(f"warning: {exc}; using the local {BRANCH} branch")
        return branch.local_tip()


class _Codes(list):
    """asv's exit codes, and the newest commit's GEMM medians after each of its runs (for the spread)."""

    head_medians: list[dict[str, float]]


def _run_asv(args, asv, env, commits, info, machine, job) -> _Codes:
    launch = args.launch_method
    if launch == "auto":
        launch = "spawn" if info["gpu"] != "none" else "forkserver"
    # --record-samples: keep every timing sample, so `asv compare` can apply its Mann-Whitney test.
    common = [f"--machine={machine}", f"--launch-method={launch}", "--record-samples", *[f"--bench={b}" for b in args.bench]]
    if args.show_stderr:
        common.append("--show-stderr")
    hashfile = job.tmp_dir / "commits.txt"
    hashfile.write_text("\n".join(commits) + "\n")
    log(f"[3/6] asv run over {len(commits)} commits of {args.branch} ({launch}); asv prints its own progress")
    codes = _Codes([run_streaming([*asv, "run", f"HASHFILE:{hashfile}", *common], env)])
    results_dir = Path(env[records.RESULTS_DIR_ENV])
    codes.head_medians = [_head_medians(results_dir, machine, commits[0])]
    for i in range(args.repeat_head):
        log(f"[4/6] repeat {i + 1}/{args.repeat_head} of {commits[0][:8]} (same commit, for the spread)")
        codes.append(run_streaming([*asv, "run", f"{commits[0]}^!", *common], env))
        codes.head_medians.append(_head_medians(results_dir, machine, commits[0]))
    return codes


def _head_medians(results_dir: Path, machine: str, commit: str) -> dict[str, float]:
    _, recs, _ = history_results.load_commit(results_dir, machine, commit)
    return {history_summary.gemm_row(k) or k: r["median_s"] for k, r in recs.items() if r["status"] == "measured"}


def _report(args, job, started, info, machine, runs, spread, problems, quarantined, branch_state, html) -> int:
    newest = runs[-1]
    problems = list(problems)
    for run in runs:
        if run.status == history_summary.NOT_MEASURED:
            problems.append(f"{run.commit[:8]}: not measured (asv stopped before it; its output above says why)")
        problems += [f"{run.commit[:8]} {item}" for item in run.harness_failures]
    failures = [f"{run.commit[:8]} {item}" for run in runs for item in run.failures]
    report = {
        "machine": machine,
        "fingerprint": {k: v for k, v in info.items() if k != "benchmarks"},
        "job": job.id,
        "commits": [r.commit for r in runs],
        "status": {r.commit: r.status for r in runs},
        "results_branch": branch_state,
        "html": str(html / "index.html"),
        "quarantined": [vars(q) for q in quarantined],
        "harness_problems": problems,
        "failures": failures,
        "measurements": {r.commit: r.gemm for r in runs},
        "resources": {r.commit: r.resources for r in runs},
        "seconds": round(time.time() - started, 1),
    }
    markdown = history_summary.summary_markdown(report, runs, spread)
    print(markdown)
    append_step_summary(markdown)
    if args.json:
        write_json_atomic(args.json, report)
    log(f"done in {report['seconds']:.0f} s. HTML: {html / 'index.html'} -- serve it with: asv preview (from {REPO_ROOT})")
    if problems:
        log(f"harness problems (exit 2): {'; '.join(problems)}")
        return 2
    if newest.failures:
        log(f"{len(newest.failures)} failures at {newest.commit[:8]}, the newest commit")
        return 1
    if failures:
        log(f"{len(failures)} failures in older commits (listed in the summary); none at {newest.commit[:8]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
