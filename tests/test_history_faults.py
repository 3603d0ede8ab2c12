"""The history under faults, races and bad input: no recorded point is ever lost, and the job says what it kept.

Every case starts from points already recorded on the results branch (and in ``.asv/results``), injects one
fault, then asserts the outcome (exit code or error, and its message) and that every previously recorded point
is still there: on the branch and locally.

* concurrent jobs: 8 main jobs started at once in one checkout, and 8 in different checkouts under one machine
  name: exactly one gets in, every other exits 2 naming the holder;
* concurrent pushes: two processes each adding different points of one benchmark of one machine to one bare
  remote: every point ends on the branch;
* a rewrite that would lose points (asv rewrote a commit's row empty after a build failed on a full disk; a new
  benchmark version with fewer points): the points are kept, or the commit is refused unless ``--drop`` names them;
* truncated, duplicated and malformed results files: quarantined with a message, nothing dropped from the branch;
* disk full (a 1 MiB tmpfs where this runs as root, else a write that fails with ENOSPC): a harness error
  saying what was kept, the branch unchanged, the old files whole.
"""

from __future__ import annotations

import errno
import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_asv_suite import git
from test_results_branch import bare_remote_with_clones

from ci.history import main_job
from ci.history.asv_results import folder as history_results
from ci.history.branch import results_branch
from ci.history.branch.results_branch import BRANCH, BranchError, ResultsBranch, ShrinkError
from ci.history.messages import HarnessError

MACHINE = "ci-test"
ENV = "virtualenv-py3.11"
KEY = "bench_gemm.GemmOnCpu.track_time"
SHAPES = [f"'s{i}'" for i in range(8)]
REPO_ROOT = Path(__file__).resolve().parents[1]


def results_bytes(commit: str, values: list[float | None], version: str = "1/kc", shapes: list[str] = SHAPES) -> bytes:
    """A results file as asv's own Results.save writes it: one value per shape of KEY (None: not measured)."""
    import tempfile

    from asv.results import Results
    from asv.runner import BenchmarkResult

    results = Results({"machine": MACHINE}, {}, commit, 0, "3.11", ENV, {})
    samples = [None if v is None else [v, v] for v in values]
    result = BenchmarkResult(
        result=[v is not None or None for v in values],
        samples=samples,
        number=[1] * len(values),
        errcode=0,
        stderr="",
        profile=None,
    )
    results.add_result({"name": KEY, "params": [shapes], "version": version}, result, record_samples=True)
    with tempfile.TemporaryDirectory() as tmp:
        results.save(tmp)
        return (Path(tmp) / MACHINE / f"{commit[:8]}-{ENV}.json").read_bytes()


def points(data: bytes) -> dict[str, float]:
    """shape -> value of every measured point of KEY in a results file."""
    row = dict(zip(json.loads(data)["result_columns"], json.loads(data)["results"][KEY]))
    return {shape: v for shape, v in zip(row["params"][0], row["result"] or []) if v is not None}


@pytest.fixture
def remote_and_clone(tmp_path):
    remote, (clone,) = bare_remote_with_clones(tmp_path, ("clone",))
    return remote, clone


def _path(commit: str) -> str:
    return f"results/{MACHINE}/{commit[:8]}-{ENV}.json"


def _recorded(remote_and_clone, values):
    """The branch (pushed) and .asv/results both holding ``values`` for the clone's HEAD."""
    remote, clone = remote_and_clone
    commit = git(clone, "rev-parse", "HEAD")
    branch = ResultsBranch(clone, "origin", log=lambda m: None)
    branch.commit_and_push({_path(commit): results_bytes(commit, values)}, "recorded", push=True)
    results_dir = clone / ".asv" / "results"
    results_branch.import_from_branch(branch, branch.fetch(), results_dir, MACHINE)
    return commit, branch, results_dir


def _on_branch(repo: Path, commit: str) -> dict[str, float]:
    return points(git(repo, "show", f"{BRANCH}:{_path(commit)}").encode())


# ---------------------------------------------------------------------------
# concurrent jobs
# ---------------------------------------------------------------------------

_JOB = """
import sys, time
from pathlib import Path
from ci.common import job_process
gate, checkout, machine, ready = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
release = gate.with_name("release")
ready.touch()
while not gate.exists():
    time.sleep(0.001)
try:
    job = job_process.start(checkout, lambda m: None)
    if machine:
        job_process.lock_machine(job, machine)
except job_process.JobConflict as exc:
    print(f"error: {exc}", file=sys.stderr)
    sys.exit(2)
print("in", flush=True)
deadline = time.monotonic() + 120
while not release.exists() and time.monotonic() < deadline:  # held until every other job has had its try
    time.sleep(0.01)
job_process.finish(job)
"""


def _start_together(tmp_path: Path, checkouts: list[Path], machine: str) -> list[subprocess.CompletedProcess]:
    gate = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "MXFP4_MAIN_JOB_LOCKS": str(tmp_path / "locks")}
    ready = [tmp_path / f"ready{i}" for i in range(len(checkouts))]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _JOB, str(gate), str(c), machine, str(r)],
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for c, r in zip(checkouts, ready)
    ]
    deadline = time.monotonic() + 120
    while not all(r.exists() for r in ready) and time.monotonic() < deadline:
        time.sleep(0.01)  # every interpreter started, its imports done, waiting at the gate
    gate.touch()
    # Whoever got in holds the lock until all the others have ended (or a minute passed): on a loaded CPU a
    # job may reach the lock seconds late, and must still find it held.
    deadline = time.monotonic() + 60
    while sum(p.poll() is not None for p in procs) < len(procs) - 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    (tmp_path / "release").touch()
    done = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


@pytest.mark.parametrize("same", ["checkout", "machine name"])
def test_eight_jobs_started_at_once_exactly_one_gets_in_the_others_exit_2_naming_it(tmp_path, same):
    if same == "checkout":
        checkouts, machine = [tmp_path / "checkout"] * 8, ""
    else:
        checkouts, machine = [tmp_path / f"clone{i}" for i in range(8)], "host-gpu"
    done = _start_together(tmp_path, checkouts, machine)
    winners = [d for d in done if d.returncode == 0]
    assert len(winners) == 1, [(d.returncode, d.stderr[-300:]) for d in done]
    assert winners[0].stdout == "in\n"
    for loser in (d for d in done if d is not winners[0]):
        assert loser.returncode == 2, loser.stderr
        assert "another main job is running" in loser.stderr and "Traceback" not in loser.stderr
        assert "pid " in loser.stderr and ".lock" in loser.stderr, loser.stderr
        if same == "machine name":
            assert "under the machine name 'host-gpu'" in loser.stderr


# ---------------------------------------------------------------------------
# concurrent pushes: one machine, one benchmark, different points
# ---------------------------------------------------------------------------


def _push_points(clone: str, commit: str, indices: list[int]) -> None:
    branch = ResultsBranch(Path(clone), "origin", log=lambda m: None)
    for i in indices:
        values = [float(i + 1) if j == i else None for j in range(len(SHAPES))]
        branch.commit_and_push({_path(commit): results_bytes(commit, values)}, f"point {i}", push=True, attempts=30)


def test_two_clones_pushing_points_of_one_benchmark_and_machine_at_once_keep_every_point(tmp_path, remote_and_clone):
    remote, clone = remote_and_clone
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(remote), str(other))
    commit = git(clone, "rev-parse", "HEAD")
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        jobs = [
            pool.apply_async(_push_points, (str(c), commit, list(range(k, 8, 2)))) for k, c in enumerate((clone, other))
        ]
        for job in jobs:
            job.get(timeout=240)
    assert _on_branch(remote, commit) == {shape: float(i + 1) for i, shape in enumerate(SHAPES)}


# ---------------------------------------------------------------------------
# a rewrite that would lose points
# ---------------------------------------------------------------------------


def test_a_row_rewritten_empty_keeps_every_point_on_the_branch_and_locally(remote_and_clone):
    """asv rewrote an older commit's results with no values (its build failed on a full disk)."""
    remote, clone = remote_and_clone
    recorded = [0.5 + i for i in range(8)]
    commit, branch, results_dir = _recorded(remote_and_clone, recorded)
    local = results_dir / MACHINE / f"{commit[:8]}-{ENV}.json"
    local.write_bytes(results_bytes(commit, [None] * 8))
    tip = branch.commit_and_push(results_branch.machine_files(results_dir, MACHINE), "after a failed build", push=True)
    results_branch.import_from_branch(branch, tip, results_dir, MACHINE)
    expected = dict(zip(SHAPES, recorded))
    assert _on_branch(remote, commit) == expected
    assert points(local.read_bytes()) == expected


def test_a_commit_that_would_lose_points_is_refused_unless_drop_names_them(remote_and_clone):
    remote, clone = remote_and_clone
    commit, branch, results_dir = _recorded(remote_and_clone, [1.0] * 8)
    before = git(remote, "rev-parse", BRANCH)
    # A new version of the benchmark measured at two shapes only: the six others would go.
    fewer = results_bytes(commit, [2.0, 2.0], version="2/kc", shapes=SHAPES[:2])
    with pytest.raises(
        ShrinkError, match=r"would remove 6 recorded points .* nothing was committed.*--drop"
    ) as refused:
        branch.commit_and_push({_path(commit): fewer}, "fewer", push=True)
    assert f"{MACHINE}/{commit[:8]}-{ENV}/{KEY}('s7')" in str(refused.value)
    assert git(remote, "rev-parse", BRANCH) == before
    assert _on_branch(remote, commit) == dict.fromkeys(SHAPES, 1.0)
    with pytest.raises(ShrinkError, match="would remove 2 recorded points"):  # a --drop that names only some
        branch.commit_and_push({_path(commit): fewer}, "fewer", push=True, drop=(r"'s[2-5]'",))
    branch.commit_and_push({_path(commit): fewer}, "fewer", push=True, drop=(r"'s[2-7]'",))
    assert _on_branch(remote, commit) == dict.fromkeys(SHAPES[:2], 2.0)


def test_drop_is_checked_up_front():
    with pytest.raises(main_job.OptionsError, match="--drop must name"):
        main_job.COMMAND.checked(["--drop", " "])
    with pytest.raises(main_job.OptionsError, match="not a regular expression"):
        main_job.COMMAND.checked(["--drop", "("])
    assert main_job.COMMAND.checked(["--drop", "s1", "--drop", "s2"]).drop == ("s1", "s2")


# ---------------------------------------------------------------------------
# truncated, duplicated, malformed files
# ---------------------------------------------------------------------------


def _one_shape_more(data: bytes) -> bytes:
    """A row whose parameter grid no longer matches its values (a bad hand merge)."""
    document = json.loads(data)
    params_at = document["result_columns"].index("params")
    document["results"][KEY][params_at][0].append("'extra'")
    return json.dumps(document).encode()


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda b: b[: len(b) // 2], "not valid JSON"),
        (lambda b: b + b, "not valid JSON"),
        (lambda b: _one_shape_more(b), "values for 9 parameter sets"),
    ],
    ids=["truncated", "duplicated", "malformed"],
)
def test_a_damaged_local_file_is_quarantined_and_nothing_leaves_the_branch(remote_and_clone, damage, reason):
    remote, clone = remote_and_clone
    recorded = [0.25 * (i + 1) for i in range(8)]
    commit, branch, results_dir = _recorded(remote_and_clone, recorded)
    local = results_dir / MACHINE / f"{commit[:8]}-{ENV}.json"
    local.write_bytes(damage(local.read_bytes()))
    messages = []
    moved = history_results.validate_tree(results_dir, clone / ".asv" / "quarantine", messages.append)
    assert [m.path for m in moved] == [f"{MACHINE}/{local.name}"] and reason in moved[0].reason
    assert any(f"quarantined {local}" in m and reason in m for m in messages), messages
    tip = branch.commit_and_push(results_branch.machine_files(results_dir, MACHINE), "after", push=True)
    results_branch.import_from_branch(branch, tip, results_dir, MACHINE)
    assert _on_branch(remote, commit) == dict(zip(SHAPES, recorded))
    assert points(local.read_bytes()) == dict(zip(SHAPES, recorded))


# ---------------------------------------------------------------------------
# disk full
# ---------------------------------------------------------------------------


@pytest.fixture
def full_disk(tmp_path, monkeypatch):
    """A folder with no space left: a 1 MiB tmpfs filled up (as root), else writes there fail with ENOSPC."""
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    mounted = (
        os.geteuid() == 0
        and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True
        ).returncode
        == 0
    )
    if mounted:
        yield mount, True
        subprocess.run(["umount", "-l", str(mount)], check=True)  # lazy: git cat-file processes may still sit in it
        return
    real_write = results_branch.write_bytes_atomic

    def failing(path, data):
        if str(path).startswith(str(mount)):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real_write(path, data)

    monkeypatch.setattr(results_branch, "write_bytes_atomic", failing)
    yield mount, False


def _fill(folder: Path) -> None:
    with open(folder / "filler", "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC


def test_disk_full_while_bringing_the_branch_over_is_a_harness_error_that_says_what_was_kept(
    remote_and_clone, full_disk
):
    remote, clone = remote_and_clone
    mount, mounted = full_disk
    recorded = [1.5] * 8
    commit, branch, _ = _recorded(remote_and_clone, recorded)
    results_dir = mount / "results"
    (results_dir / MACHINE).mkdir(parents=True)
    older = results_dir / MACHINE / f"{commit[:8]}-{ENV}.json"
    older.write_bytes(results_bytes(commit, [1.5, 1.5] + [None] * 6))
    before_local, before_tip = older.read_bytes(), git(remote, "rev-parse", BRANCH)
    if mounted:
        _fill(mount)
    with pytest.raises(HarnessError) as failed:
        results_branch.import_from_branch(branch, before_tip, results_dir, MACHINE)
    message = str(failed.value)
    assert "No space left on device" in message and "kept:" in message
    assert f"the {BRANCH} branch as it is ({before_tip[:8]}: every recorded point is still there)" in message
    assert "never half-written" in message
    assert older.read_bytes() == before_local  # the old file whole, not truncated
    assert git(remote, "rev-parse", BRANCH) == before_tip and _on_branch(remote, commit) == dict.fromkeys(SHAPES, 1.5)


def test_disk_full_under_git_leaves_the_branch_as_it_was(tmp_path, remote_and_clone, full_disk):
    remote, _ = remote_and_clone
    mount, mounted = full_disk
    if not mounted:
        pytest.skip("needs a tmpfs (root): git's own writes cannot be shimmed")
    clone = mount / "clone"
    git(tmp_path, "clone", "-q", str(remote), str(clone))
    commit, branch, _ = _recorded((remote, clone), [3.0] * 8)
    before_tip = git(remote, "rev-parse", BRANCH)
    _fill(mount)
    big = {f"results/{MACHINE}/x{i}-{ENV}.records": os.urandom(200_000).hex().encode() for i in range(4)}
    with pytest.raises(
        BranchError,
        match=r"(?s)cannot write the asv-results commit \(fatal: .*No space left on device\); "
        r"the branch is left as it was "
        r"\(\w{8}\), every recorded point is still on it",
    ):
        branch.commit_and_push({_path(commit): results_bytes(commit, [4.0] * 8), **big}, "on a full disk", push=True)
    assert git(remote, "rev-parse", BRANCH) == before_tip and _on_branch(remote, commit) == dict.fromkeys(SHAPES, 3.0)


def test_the_main_job_on_a_disk_that_fills_during_asv_exits_2_and_keeps_every_point(
    tmp_path, remote_and_clone, full_disk, monkeypatch, capsys
):
    """The reported case: asv's build failed for want of space and rewrote an older commit's results empty;
    the job exited 0 blaming the build, and the points were gone locally and on the branch."""
    import signal

    from ci.history import run as history_run
    from ci.history.measure import asv_driver, machine_info
    from ci.history.options import HistoryOptions

    remote, clone = remote_and_clone
    mount, mounted = full_disk
    if not mounted:
        pytest.skip("needs a tmpfs (root) under asv's results")
    older, _, _ = _recorded(remote_and_clone, [2.5] * 8)
    (clone / "x.txt").write_text("newest\n")
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", "newest")
    results_dir = mount / "results"

    def asv_on_a_filling_disk(env, commits, track, job, *how):  # asv_driver.run_asv
        (results_dir / MACHINE / f"{older[:8]}-{ENV}.json").write_bytes(results_bytes(older, [None] * 8))
        _fill(mount)
        codes = asv_driver.AsvCodes([2])
        codes.head_medians = [{}]
        return codes

    info = {
        "benchmarks": [KEY],
        "gpu": "none",
        "gpu_arch": "-",
        "gpu_runtime": "-",
        "gpu_driver": "-",
        "kernels": {},
        "torch": "-",
        "triton": "-",
        "flydsl": "-",
        "cpu": "-",
        "num_cpu": 1,
    }
    monkeypatch.setattr(history_run, "REPO_ROOT", clone)
    monkeypatch.setattr(history_run, "QUARANTINE_DIR", clone / ".asv" / "quarantine")
    monkeypatch.setattr(
        asv_driver, "asv_config", lambda: {"results_dir": str(results_dir), "html_dir": str(tmp_path / "html")}
    )
    monkeypatch.setattr(asv_driver, "run_asv", asv_on_a_filling_disk)
    monkeypatch.setattr(machine_info, "fingerprint_in_child", lambda python, env: info)
    monkeypatch.setattr(machine_info, "record_machine", lambda *a: None)
    monkeypatch.setattr(machine_info, "machine_fields", lambda info: {})
    monkeypatch.setenv("MXFP4_MAIN_JOB_LOCKS", str(tmp_path / "locks"))
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = history_run.run(HistoryOptions(commits=2, machine=MACHINE, push_results=True, publish=False))
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    stderr = capsys.readouterr().err
    assert code == 2, stderr[-3000:]
    assert "No space left on device" in stderr and "Kept:" in stderr.replace("kept:", "Kept:"), stderr[-3000:]
    assert "Traceback" not in stderr
    assert _on_branch(remote, older) == dict.fromkeys(SHAPES, 2.5)  # pushed, every point kept
    (mount / "filler").unlink()  # space again: the next run brings them back locally
    branch = ResultsBranch(clone, "origin", log=lambda m: None)
    results_branch.import_from_branch(branch, branch.fetch(), results_dir, MACHINE)
    assert points((results_dir / MACHINE / f"{older[:8]}-{ENV}.json").read_bytes()) == dict.fromkeys(SHAPES, 2.5)
