"""ci.history.main_job under bad input and faults, on temporary copies of this repository.

Fast: input that selects nothing or cannot be written is refused (exit 2) before anything runs;
one job per checkout; a killed job's leftover processes and temporary files are removed by the next.
Slow: a real run killed with SIGKILL (its whole process group) mid-way, then run again: no process
left, and every measurement but the one in flight is kept (resumed, not measured again).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_asv_suite import asv_env, make_project

from asv_bench import records
from ci.common import job_process
from ci.history import main_job
from ci.history import run as history_run
from ci.history.options import HistoryOptions

FOUR_CPU_TIMINGS = r"GemmOnCpu\.track_time\('torch_dequant:(bf16|fp32)'"


def run_job(repo: Path, home: Path, *args: str, timeout: float = 900, **popen) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ci.history", *args],
        cwd=repo,
        env=asv_env(home),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return make_project(tmp_path_factory.mktemp("main_job"))


def test_bench_that_selects_nothing_exits_2_before_asv_runs(project, tmp_path):
    done = run_job(project, tmp_path / "home", "--commits=1", "--bench=no_such_benchmark_anywhere")
    assert done.returncode == 2, done.stderr[-2000:]
    assert (
        "--bench 'no_such_benchmark_anywhere' selects no benchmark" in done.stderr and "nothing was run" in done.stderr
    )
    assert "asv run" not in done.stderr and "Traceback" not in done.stderr
    assert not (project / ".asv" / "env").exists()
    assert done.stdout == ""  # no tables at all, least of all an earlier run's


def test_unwritable_json_exits_2_before_the_run(project, tmp_path):
    started = time.monotonic()
    done = run_job(project, tmp_path / "home", "--commits=1", "--json=/proc/no/such/report.json")
    assert done.returncode == 2
    assert "--json /proc/no/such/report.json: cannot write there" in done.stderr
    assert "fingerprinting" not in done.stderr and time.monotonic() - started < 30
    assert not (project / ".asv" / "main_job.json").exists()


def test_push_results_to_a_missing_remote_exits_2_before_the_run(project, tmp_path):
    done = run_job(project, tmp_path / "home", "--commits=1", "--push-results", "--results-remote=nowhere")
    assert done.returncode == 2 and "--push-results: no git remote 'nowhere'" in done.stderr
    assert "fingerprinting" not in done.stderr


def _tagged_sleeper(tag: str) -> subprocess.Popen:
    """A process of a job, in a process group of its own (as asv starts its forkserver), with a child."""
    return subprocess.Popen(
        ["sh", "-c", "sleep 300 & sleep 300"], env={**os.environ, records.JOB_ENV: tag}, start_new_session=True
    )


def test_a_killed_jobs_processes_and_temporary_files_are_removed_by_the_next(tmp_path):
    checkout = tmp_path / "checkout"
    (checkout / ".asv").mkdir(parents=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale_tmp = tmp_path / "mxfp4-main-job-old"
    (stale_tmp / "asv-forkserver-x").mkdir(parents=True)
    (checkout / ".asv" / "main_job.json").write_text(
        json.dumps({"job": "old", "pid": dead.pid, "start_time": "1", "tmp_dir": str(stale_tmp)})
    )
    stray = _tagged_sleeper(f"{checkout}::old")
    other_checkout = _tagged_sleeper(f"{tmp_path / 'elsewhere'}::old")  # not this checkout's: left alone
    deadline = time.monotonic() + 30  # under CPU load the shell may take a while to start its two sleeps
    while True:
        group = [
            int(p)
            for p in subprocess.run(["pgrep", "-g", str(stray.pid)], capture_output=True, text=True).stdout.split()
        ]
        if len(group) == 3 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert len(group) == 3  # sh and its two sleeps
    messages = []
    try:
        job = job_process.start(checkout, messages.append)
        assert stray.wait(10) is not None
        assert not any(Path(f"/proc/{pid}").exists() and _state(pid) != "Z" for pid in group)
        assert not stale_tmp.exists() and job.tmp_dir.is_dir()
        assert any(f"{stray.pid} (sh -c sleep 300" in m for m in messages), messages
        assert other_checkout.poll() is None
        job_process.finish(job)
        assert not job.tmp_dir.exists() and not (checkout / ".asv" / "main_job.json").exists()
    finally:
        for proc in (stray, other_checkout):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return "gone"


def test_a_second_job_in_the_same_checkout_is_refused(tmp_path):
    checkout = tmp_path / "checkout"
    first = job_process.start(checkout, lambda m: None)
    try:
        with pytest.raises(job_process.JobConflict, match=f"pid {os.getpid()}"):
            job_process.start(checkout, lambda m: None)
    finally:
        job_process.finish(first)


def test_bench_patterns_are_checked_like_asv_does():
    names = ["bench_gemm.GemmOnCpu.track_time('torch_dequant:bf16', 'cpu_m00128_n00128_k02048')", "bench_x.track_y"]
    assert history_run.unmatched_patterns([r"torch_dequant:bf16", "track_y", "nope"], names) == ["nope"]
    with pytest.raises(history_run.HarnessError, match="not a regular expression"):
        history_run.unmatched_patterns(["("], names)


# ---------------------------------------------------------------------------
# the front: every option checked before any work, one frozen value out
# ---------------------------------------------------------------------------


def test_the_front_turns_the_command_line_into_one_frozen_options_value(tmp_path):
    (tmp_path / "out").mkdir()  # an output's folder must exist (issue 49): refused, never created
    options = main_job.COMMAND.checked(
        [
            "--commits=2",
            "--bench=track_time",
            "--bench=GemmOnCpu",
            "--machine=ci-test",
            "--push-results",
            "--results-remote=upstream",
            f"--json={tmp_path / 'out' / 'report.json'}",
            "--no-publish",
        ]
    )
    assert options == HistoryOptions(
        commits=2,
        bench=("track_time", "GemmOnCpu"),
        machine="ci-test",
        push_results=True,
        results_remote="upstream",
        json=tmp_path / "out" / "report.json",
        publish=False,
    )
    with pytest.raises(AttributeError):
        options.commits = 5  # frozen: nothing below the front changes an option
    assert main_job.COMMAND.checked([]) == HistoryOptions()


@pytest.mark.parametrize(
    "argv, problem",
    [
        (["--results-remote=x"], "--results-remote 'x' is only used with --push-results"),
        (["--commits=0"], "--commits must be >= 1 (got 0)"),
        (["--repeat-head=-1"], "--repeat-head must be >= 0 (got -1)"),
        (["--json=/proc/no/such/report.json"], "--json /proc/no/such/report.json: cannot write there"),
        (["--bench=("], "--bench '(' is not a regular expression"),
        (["--machine=../elsewhere"], "--machine '../elsewhere': expected 1-100 letters"),
        (["--wheelhouse=/no/such/wheels"], "--wheelhouse /no/such/wheels: not a directory"),
    ],
)
def test_a_bad_option_exits_2_naming_it_before_any_work(argv, problem, capsys, monkeypatch):
    monkeypatch.setattr(history_run, "run", lambda options: pytest.fail(f"the work started with {options}"))
    assert main_job.main(argv) == 2
    assert problem in capsys.readouterr().err


def test_results_remote_without_push_results_exits_2_from_the_command_line():
    done = subprocess.run(
        [sys.executable, "-m", "ci.history", "--results-remote", "x"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2 and "--results-remote 'x' is only used with --push-results" in done.stderr
    assert "Traceback" not in done.stderr and "fingerprinting" not in done.stderr


def test_nothing_below_the_front_parses_the_command_line():
    # publish.py is the front of python -m ci.history.publish (tests/test_command_fronts.py lists every front).
    below = [
        p for p in Path(main_job.__file__).parent.rglob("*.py") if p.stem not in ("main_job", "__main__", "publish")
    ]
    assert len(below) >= 8, below
    for path in below:
        text = path.read_text()
        assert "argparse" not in text and "sys.argv" not in text, f"{path.name} reads the command line"


# ---------------------------------------------------------------------------
# end to end: SIGKILL mid-run, then again
# ---------------------------------------------------------------------------


def _measured(sidecars: list[Path]) -> dict[str, dict]:
    found = {}
    for sidecar in sidecars:
        try:
            found.update({k: r for k, r in records.load(sidecar).items() if r["status"] == "measured"})
        except records.CorruptSidecar:
            pass
    return found


@pytest.mark.slow
def test_sigkill_mid_run_then_a_rerun_leaves_no_process_and_loses_only_the_benchmark_in_flight(
    tmp_path, asv_env_template
):
    repo = make_project(tmp_path, asv_env_from=asv_env_template)
    home = tmp_path / "home"
    results = repo / ".asv" / "results"
    args = [sys.executable, "-m", "ci.history", "--commits=1", f"--bench={FOUR_CPU_TIMINGS}", "--no-publish"]
    first = subprocess.Popen(
        args, cwd=repo, env=asv_env(home), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and len(_measured(list(results.glob("*/*.records")))) < 2:
        assert first.poll() is None, first.stderr.read()[-3000:]
        time.sleep(0.2)
    os.killpg(first.pid, signal.SIGKILL)  # the job's whole process group, as a cancelled runner would
    first.wait()
    first.stderr.close()
    # What the killed run finished, read after the kill: one more may finish between the poll and the kill.
    before_kill = _measured(list(results.glob("*/*.records")))
    assert len(before_kill) >= 2, "no measurement finished within the time allowed"
    first_job = json.loads((repo / ".asv" / "main_job.json").read_text())
    # asv's forkserver (its own process group) outlives the kill, but under CPU load it may notice and end
    # itself at any moment, even while the re-run starts: a leftover that stays is needed to check that the
    # re-run ends it and says so. The stand-in carries the killed job's tag, as the forkserver does.
    stand_in = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"],
        start_new_session=True,
        env={**os.environ, records.JOB_ENV: f"{repo}::{first_job['job']}"},
    )
    try:
        left = job_process.tagged_processes(repo)
        assert stand_in.pid in left, left
        second = run_job(repo, home, "--commits=1", f"--bench={FOUR_CPU_TIMINGS}", "--no-publish", "--json=report.json")
        assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-5000:]
        assert "ended a process left by a killed main job" in second.stderr, second.stderr[-3000:]
        assert stand_in.wait(timeout=30) is not None
    finally:
        if stand_in.poll() is None:
            stand_in.kill()
            stand_in.wait()
    assert not any(Path(f"/proc/{pid}").exists() and _state(pid) != "Z" for pid in left)
    assert job_process.tagged_processes(repo) == []
    assert not Path(first_job["tmp_dir"]).exists()

    after = _measured(list(results.glob("*/*.records")))
    assert len(after) == 4, sorted(after)
    # What the first run finished was not measured again: its record is the first job's, resumed.
    for key, record in before_kill.items():
        assert after[key]["job"] == first_job["job"] and after[key]["resumed_by"] != first_job["job"], key
        assert after[key]["median_s"] == record["median_s"]
    report = json.loads((repo / "report.json").read_text())
    (commit,) = report["commits"]
    assert report["status"][commit] == "measured"
    # Every measurement the killed job finished (asv's forkserver, which outlives the kill, may finish the one
    # in flight) was resumed, none measured again; the ones seen before the kill are among them.
    finished_by_first = {k for k, r in after.items() if r["job"] == first_job["job"]}
    assert set(before_kill) <= finished_by_first
    assert sum(1 for r in report["measurements"][commit].values() if r.get("resumed_by")) == len(finished_by_first)
