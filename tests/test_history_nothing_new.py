"""The main job with nothing new (issue 39): exit 0 on every track, said as such, nothing measured, copied or written.

On a project with a synthetic history of 1,000 commits dated in the past as a real one is (tests/synthetic_history.py:
the GPU machine's timings and compile-only's counts of every commit, measured minutes after each commit, up to an
hour ago), the history workflow's commands run with nothing new:

* ``--tracks cpu`` (the CPU job): every commit already has its compile-only counts. Until issue 39 this exited 2,
  "not measured (cpu tracks; asv stopped before it)": a commit counted as measured only when its results started
  after the run began, and the synthetic histories, dated in the future, hid it.
* ``--tracks gpu`` (the GPU runner) and ``all`` (a developer's, here without publishing), once the newest
  commits have this machine's timings (one run of the job before, measuring two CPU timings of the oldest of
  the three, whose code the other two share -- GemmOnCpu stands in for the GPU).

The history is made once per session (module fixtures): each run with nothing new must change nothing -- the tests
check it -- so they share it.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import synthetic_history as synthetic
from history_job import TWO_CPU_TIMINGS
from test_asv_suite import asv_env, copy_asv_envs, git, make_project

from ci.history.measure import summary as history_summary

SPEC = synthetic.Spec(commits=1000, seed=39)
MACHINE = SPEC.gpu_machine  # the GPU runner's machine name on the branch; here its CPU stand-in's timings


def _job(repo: Path, home: Path, name: str, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    report = repo.parent / f"{name}.json"
    done = subprocess.run(
        [sys.executable, "-m", "ci.history", f"--machine={MACHINE}", f"--json={report}", *args],
        cwd=repo,
        env=asv_env(home),
        capture_output=True,
        text=True,
        timeout=900,
    )
    return done, json.loads(report.read_text()) if report.exists() else {}


def _blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # git's id of the file


def _state(repo: Path) -> tuple[str, dict[str, str]]:
    """The results branch's tip and every results file here (git blob ids): what a run with nothing new leaves alone
    (the records' lock files, made by whoever reads them, are not results)."""
    results = repo / ".asv" / "results"
    files = {
        "results/" + p.relative_to(results).as_posix(): _blob(p.read_bytes())
        for p in sorted(results.rglob("*"))
        if p.is_file() and not p.name.startswith(".") and p.suffix != ".lock"
    }
    return git(repo, "rev-parse", synthetic.BRANCH), files


def _branch_files(repo: Path) -> dict[str, str]:
    listing = git(repo, "ls-tree", "-r", synthetic.BRANCH, "results/").splitlines()
    return {line.split("\t")[1]: line.split()[2] for line in listing}


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> tuple[Path, Path]:
    """A project (this working tree) with 1,000 synthetic commits on main and their results on asv-results."""
    where = tmp_path_factory.mktemp("nothing-new")
    repo = make_project(where)
    synthetic.make_history(repo, SPEC)
    return repo, where / "home"


@pytest.fixture(scope="module")
def timed_history(history, asv_env_template) -> tuple[Path, Path]:
    """``history`` after one run of the timing track over the newest three commits: their code is identical (only
    a docs file changes), so the oldest is measured and copied under the two after it."""
    repo, home = history
    copy_asv_envs(asv_env_template, repo)
    done, report = _job(repo, home, "setup", "--tracks=gpu", f"--bench={TWO_CPU_TIMINGS}", "--no-publish")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    oldest, *newer = report["commits"]  # oldest first
    assert report["status"][oldest] == "measured" and {report["status"][c] for c in newer} == {"identical code"}
    return history


def test_synthetic_histories_are_dated_in_the_past_with_realistic_gaps(history):
    repo, _ = history
    now = time.time()
    dates = [int(d) for d in git(repo, "log", "--first-parent", "--format=%at", f"-{SPEC.commits}", "main").split()][
        ::-1
    ]
    assert dates[-1] <= now - 0.5 * synthetic.NEWEST_AGE_S and dates == sorted(dates)
    gaps = sorted(b - a for a, b in zip(dates, dates[1:]))
    median, longest = gaps[len(gaps) // 2], gaps[-1]
    assert 15 * 60 < median < 2 * 3600 and longest > 8 * 3600, (median, longest)  # minutes apart, and nights
    # Each commit's results: dated as the commit (asv's "date"), measured after it and before now.
    newest = git(repo, "rev-parse", "main")
    listing = git(repo, "ls-tree", "-r", "--name-only", synthetic.BRANCH, "results/").split()
    documents = [
        json.loads(git(repo, "show", f"{synthetic.BRANCH}:{p}"))
        for p in listing
        if p.split("/")[-1].startswith(newest[:8]) and p.endswith(".json")
    ]
    assert len(documents) == 2  # the GPU machine's and compile-only's
    for document in documents:
        started = {row[document["result_columns"].index("started_at")] for row in document["results"].values()}
        assert document["date"] == dates[-1] * 1000 and all(document["date"] < s <= now * 1000 for s in started)


def test_the_compile_track_with_nothing_new_exits_0_and_says_so(history):
    repo, home = history
    tip = git(repo, "rev-parse", synthetic.BRANCH)
    done, report = _job(repo, home, "cpu", "--tracks=cpu", "--no-publish")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert set(report["status"].values()) == {history_summary.ALREADY} and report["nothing_new"]
    assert not report["harness_problems"] and not report["failures"]
    assert "already has its compile-only counts" in done.stderr and "Nothing new" in done.stdout
    assert "not measured" not in done.stdout + done.stderr
    # The first run here brought the branch's files in and wrote nothing else: the folder holds the branch, as it is.
    assert _state(repo) == (tip, _branch_files(repo))


@pytest.mark.slow
def test_the_timing_track_with_nothing_new_exits_0_and_changes_nothing(timed_history):
    repo, home = timed_history
    before = _state(repo)
    done, report = _job(repo, home, "gpu", "--tracks=gpu", "--no-publish")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    oldest, *newer = report["commits"]
    assert report["nothing_new"] and set(report["status"].values()) == {history_summary.ALREADY}
    assert report["identical_to"] == {c: oldest for c in newer}  # copies of the oldest, made by the first run
    assert report["cost"]["gpu"]["measured_commits"] == 0 and not report["cost"]["gpu"]["identical"]
    assert f"{oldest[:8]} (already measured: nothing new)" in done.stdout
    assert (
        f"{newer[-1][:8]} (already measured (the results of {oldest[:12]}, identical code): nothing new)" in done.stdout
    )
    assert _state(repo) == before == (before[0], _branch_files(repo))  # no copy again, no commit on the branch


@pytest.mark.slow
def test_every_track_with_nothing_new_exits_0(timed_history):
    repo, home = timed_history
    before = _state(repo)
    done, report = _job(
        repo, home, "all", "--tracks=all", "--no-publish"
    )  # publishing: tests/test_published_history.py
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert report["nothing_new"] and set(report["track_status"]) == {"gpu", "cpu"}
    assert {s for statuses in report["track_status"].values() for s in statuses.values()} == {history_summary.ALREADY}
    assert _state(repo) == before == (before[0], _branch_files(repo))


def test_a_commit_left_out_as_already_measured_without_results_is_still_an_error(tmp_path):
    """What the run left out must hold a result of the track: a commit with none is "not measured" (exit 2)."""
    results = tmp_path / "results"
    (results / "m").mkdir(parents=True)
    run = history_summary.collect_commit(results, "m", "a" * 40, "job", 0.0, already=r"^bench_resources\.")
    assert run.status == history_summary.NOT_MEASURED and "holds no result" in run.harness_failures[0]


def test_a_commit_is_already_measured_only_when_every_track_says_so():
    def runs(gpu: str, cpu: str) -> str:
        parts = {"gpu": [history_summary.CommitRun("c" * 40, gpu)], "cpu": [history_summary.CommitRun("c" * 40, cpu)]}
        return history_summary.merge_tracks(parts)[0].status

    assert runs(history_summary.ALREADY, history_summary.ALREADY) == history_summary.ALREADY
    assert runs(history_summary.ALREADY, history_summary.MEASURED) == history_summary.MEASURED
    assert runs(history_summary.MEASURED, history_summary.ALREADY) == history_summary.MEASURED
    assert runs(history_summary.ALREADY, history_summary.NOT_MEASURED) == history_summary.NOT_MEASURED
    assert runs(history_summary.ALREADY, history_summary.BUILD_FAILED) == history_summary.BUILD_FAILED
