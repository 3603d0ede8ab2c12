"""Faults and bad input against the gates and the history job (issue 18): each case asserts the exit code,
the message, and that nothing was lost (the data reach a file; no worktree or temporary folder is left).

The end-to-end cases run ``python -m ci.speed`` / ``python -m ci.history`` in a temporary copy of this
working tree (tests/test_asv_suite.make_project) on the CPU, one tiny benchmark.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from test_asv_suite import git, make_project
from test_speed_gate import RAISES, SMALL, run_gate

from ci.common import interrupts
from ci.common.json_file import JsonFileError, parse_json
from ci.speed.decide.thresholds import ThresholdsError, load_thresholds
from ci.speed.decide.verdict import GATE_SCHEMA, RecordError, load_record
from ci.speed.engine.grace import GRACE_ENV
from harness.report import append_step_summary_or_fallback, write_json_atomic, write_or_fallback

# ---------------------------------------------------------------------------
# files: permissions, fallbacks, duplicate keys
# ---------------------------------------------------------------------------


def test_the_atomic_writer_honours_the_umask_and_keeps_a_replaced_files_mode(tmp_path):
    old = os.umask(0o022)
    try:
        new = write_json_atomic(tmp_path / "new.json", {"a": 1})
        assert stat.S_IMODE(new.stat().st_mode) == 0o644  # mkstemp alone gives 0600: unreadable to a web server
        os.umask(0o077)
        assert stat.S_IMODE(write_json_atomic(tmp_path / "private.json", {}).stat().st_mode) == 0o600
        os.chmod(new, 0o640)
        write_json_atomic(new, {"a": 2})
        assert stat.S_IMODE(new.stat().st_mode) == 0o640 and json.loads(new.read_text()) == {"a": 2}
    finally:
        os.umask(old)


def test_an_unwritable_output_at_the_end_goes_to_a_named_fallback_file(tmp_path):
    (tmp_path / "file").write_text("a file where a folder was expected")
    lines: list[str] = []
    where = write_or_fallback(tmp_path / "file" / "verdict.json", b'{"rounds": [1, 2]}', "--json", lines.append)
    try:
        assert where.parent == Path(tempfile.gettempdir()) and where.read_bytes() == b'{"rounds": [1, 2]}'
        assert len(lines) == 1 and f"kept: the data in {where}" in lines[0] and "cannot write there" in lines[0]
    finally:
        where.unlink()
    spare = append_step_summary_or_fallback(
        "### Speed gate: PASS", lines.append, {"GITHUB_STEP_SUMMARY": str(tmp_path / "file" / "summary.md")}
    )
    try:
        assert "### Speed gate: PASS" in spare.read_text() and f"kept: the summary in {spare}" in lines[-1]
    finally:
        spare.unlink()


def test_a_key_given_twice_is_an_error_in_every_json_the_gates_read(tmp_path):
    with pytest.raises(JsonFileError, match=r"where: duplicate key 'b'"):
        parse_json('{"a": {"b": 1, "b": 2}}', "where")
    thresholds = tmp_path / "t.json"
    thresholds.write_text('{"schema": "mxfp4-speed-thresholds/1", "default_threshold": 0.5, "default_threshold": 0.01}')
    with pytest.raises(ThresholdsError, match=rf"{thresholds}: duplicate key 'default_threshold'"):
        load_thresholds(thresholds)
    record = tmp_path / "r.json"
    record.write_text('{"schema": "x", "schema": "y"}')
    with pytest.raises(RecordError, match=rf"{record}: duplicate key 'schema'"):
        load_record(record)


# ---------------------------------------------------------------------------
# what a killed run leaves: swept at the next start
# ---------------------------------------------------------------------------


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_temporary_folders_of_a_killed_run_are_swept_and_a_live_ones_kept(tmp_path):
    dead = tmp_path / f"{interrupts.MARKER}{_dead_pid()}-worktree-abc"
    live = tmp_path / f"{interrupts.MARKER}{os.getppid()}-worktree-def"
    other = tmp_path / "gate-worktree-unmarked"
    for folder in (dead, live, other):
        (folder / "inside").mkdir(parents=True)
    lines: list[str] = []
    assert interrupts.sweep_stale(lines.append, root=tmp_path) == [dead]
    assert not dead.exists() and live.exists() and other.exists()
    assert "left by a gate run that was killed" in lines[0]


def test_a_worktree_of_a_killed_run_is_pruned_at_the_next_checkout(tmp_path):
    from ci.common import gitutil

    repo_dir = tmp_path / "repo"
    repo_dir.mkdir()
    git(repo_dir, "init", "-q", "-b", "main")
    (repo_dir / "f").write_text("x")
    git(repo_dir, "add", "-A")
    git(repo_dir, "commit", "-q", "-m", "c")
    stale = Path(tempfile.gettempdir()) / f"{interrupts.MARKER}{_dead_pid()}-worktree-test"
    git(repo_dir, "worktree", "add", "--detach", "-q", str(stale / "wt"), "HEAD")
    assert str(stale / "wt") in git(repo_dir, "worktree", "list")
    repo = gitutil.open_repo(repo_dir)
    with gitutil.checkout(repo, repo.head.commit.hexsha) as path:
        assert (path / "f").read_text() == "x"
    assert not stale.exists() and git(repo_dir, "worktree", "list").count("\n") == 0  # only the main tree


# ---------------------------------------------------------------------------
# end to end: the speed gate and the history job
# ---------------------------------------------------------------------------

HANGS = """

# Injected by tests/test_gate_faults.py: torch_dequant never returns from its preparation.
def _inject_hang():
    import time as _time

    def hang(self, a, b, out, config):
        _time.sleep(3600)

    TorchDequantGemm._prepare = hang


_inject_hang()
"""

IMPORT_BROKEN = "\nraise RuntimeError('injected: the base does not import')\n"


@pytest.fixture(scope="module")
def fault_repo(tmp_path_factory):
    """``c0``; ``raises`` and ``broken`` (a base that raises / does not import) each with a ``fix`` on top;
    ``hangs``.
    """
    repo = make_project(tmp_path_factory.mktemp("gate-faults"))
    c0 = git(repo, "rev-parse", "HEAD")
    kernel = repo / "kernels/torch_dequant.py"
    fixed = kernel.read_text()
    for branch, text in (("raises", RAISES), ("broken", IMPORT_BROKEN), ("hangs", HANGS)):
        git(repo, "checkout", "-q", "-b", branch, c0)
        kernel.write_text(fixed + text)
        git(repo, "commit", "-q", "-am", branch)
        if branch != "hangs":
            git(repo, "checkout", "-q", "-b", f"{branch}-fix")
            kernel.write_text(fixed + "\n# fixed\n")
            git(repo, "commit", "-q", "-am", f"fix {branch}")
    git(repo, "checkout", "-q", "main")
    return repo, c0


def _leftovers(pid: int) -> list[Path]:
    return list(Path(tempfile.gettempdir()).glob(f"{interrupts.MARKER}{pid}-*"))


@pytest.mark.parametrize("base", ["raises", "broken"])
def test_a_broken_base_makes_the_heads_benchmarks_new_and_does_not_block_the_fix(fault_repo, tmp_path, base):
    repo, _ = fault_repo
    done = run_gate(repo, "--base", base, "--head", f"{base}-fix", *SMALL, "--json", str(tmp_path / "v.json"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (bench,) = json.loads((tmp_path / "v.json").read_text())["benchmarks"]
    why = "base raised" if base == "raises" else "the base could not be surveyed"
    assert bench["status"] == "new" and why in bench["note"], bench
    assert "round 1" not in done.stderr  # nothing to time against


def test_a_hanging_kernel_is_stopped_by_max_minutes(fault_repo, monkeypatch):
    repo, c0 = fault_repo
    # The deadline (3 s) passes during the surveys: the hanging one is cut off after the grace, 15 s here (30 s by
    # default: a worker start on a busy 2-core CPU takes a few seconds, so 15 s still lets the base answer).
    monkeypatch.setenv(GRACE_ENV, "15")
    started = time.monotonic()
    done = run_gate(repo, "--base", c0, "--head", "hangs", *SMALL, "--max-minutes", "0.05", timeout=300)
    assert done.returncode == 2, done.stdout[-3000:] + done.stderr[-3000:]
    assert "head survey: " in done.stderr and "within 15 s" in done.stderr and "Traceback" not in done.stderr
    assert time.monotonic() - started < 200


class _Lines:
    """A process's stderr read by a thread: wait for a line with a deadline (a read never blocks the test for good)."""

    def __init__(self, stream):
        self.seen: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._reader.start()

    def _read(self, stream) -> None:
        for line in stream:
            self._lines.put(line)
        self._lines.put(None)

    def wait_for(self, wanted, timeout_s: float) -> str:
        """The first line for which ``wanted(line)``; fails naming what was seen at end of output or after
        ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self._lines.get(timeout=max(deadline - time.monotonic(), 0.0))
            except queue.Empty:
                pytest.fail(f"no such line within {timeout_s:.0f} s; seen:\n{''.join(self.seen)[-3000:]}")
            if line is None:
                pytest.fail(f"the output ended without such a line; seen:\n{''.join(self.seen)[-3000:]}")
            self.seen.append(line)
            if wanted(line):
                return line

    def rest(self) -> str:
        """What the process wrote after the line waited for, to its end (call once it has exited)."""
        self._reader.join(timeout=30)
        rest = []
        while not self._lines.empty():
            line = self._lines.get()
            if line is not None:
                rest.append(line)
        return "".join(rest)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_gate_removes_its_worktrees_and_says_so(fault_repo, tmp_path, signum):
    repo, c0 = fault_repo
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GITHUB_STEP_SUMMARY", "TRITON_INTERPRET")}
    env["PYTHONPATH"] = str(repo)
    gate = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ci.speed",
            "--repo",
            str(repo),
            "--base",
            c0,
            "--head",
            "hangs",
            *SMALL,
            "--json",
            str(tmp_path / "v.json"),
        ],
        cwd=repo,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    stderr = _Lines(gate.stderr)
    try:
        # The surveys run side by side: once the base's has checked its kernel, the head's is in (or at) its hang.
        stderr.wait_for(lambda line: " base w" in line and "correctness torch_dequant[bf16]" in line, timeout_s=180)
        assert _leftovers(gate.pid), "the gate's worktrees should exist while it runs"
        gate.send_signal(signum)
        code = gate.wait(timeout=120)
    finally:
        if gate.poll() is None:
            gate.kill()
    rest = stderr.rest()
    assert code == 128 + signum, "".join(stderr.seen) + rest
    name = signal.Signals(signum).name
    assert f"python -m ci.speed: interrupted by {name}: child processes stopped" in rest and "Traceback" not in rest, (
        rest
    )
    assert json.loads((tmp_path / "v.json").read_text())["verdict"] == "error"
    assert _leftovers(gate.pid) == [] and git(repo, "worktree", "list").count("\n") == 0


@pytest.mark.parametrize("to_group", [False, True], ids=["the gate", "its process group"])
def test_an_interrupted_gate_records_its_complete_rounds_and_replays_them(fault_repo, tmp_path, to_group):
    """Issue 49, item 3: SIGTERM (a cancelled job, its timeout) after some rounds: exit 143, and the record holds every
    complete round, marked interrupted, the benchmark inconclusive (stopped by the interrupt); --replay reads it.
    To the gate alone (a job's cancel), or to its whole process group at once, workers included, as GNU timeout sends
    it (an H100 lease, 2026-12-07: the workers died first, and the gate wrote an error record over its rounds)."""
    repo, c0 = fault_repo
    git(repo, "checkout", "-q", "-B", "aa", c0)
    (repo / "kernels/torch_dequant.py").write_text((repo / "kernels/torch_dequant.py").read_text() + "\n# A/A\n")
    git(repo, "commit", "-q", "-am", "a comment only")
    git(repo, "checkout", "-q", "main")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GITHUB_STEP_SUMMARY", "TRITON_INTERPRET")}
    env["PYTHONPATH"] = str(repo)
    record = tmp_path / "v.json"
    timing = [a for a in SMALL if a.startswith("--timing")]
    args = [*SMALL[:6], *timing, "--measure-identical", "--plan", "rounds=40", "--plan", "restart_every=1"]
    args += ["--json", str(record)]
    gate = subprocess.Popen(
        [sys.executable, "-m", "ci.speed", "--repo", str(repo), "--base", c0, "--head", "aa", *args, "--traceback"],
        cwd=repo,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=to_group,
    )
    stderr = _Lines(gate.stderr)
    try:
        stderr.wait_for(lambda line: "speed_gate: round 4/40" in line, timeout_s=300)
        if to_group:
            os.killpg(gate.pid, signal.SIGTERM)
        else:
            gate.send_signal(signal.SIGTERM)
        code = gate.wait(timeout=120)
    finally:
        if gate.poll() is None:
            gate.kill()
    rest = stderr.rest()
    assert code == 143, "".join(stderr.seen) + rest
    data = json.loads(record.read_text())
    assert "rounds" in data, f"the record kept no rounds: {data.get('error')}"  # before issue 49: an error record
    kept = len(data["rounds"])  # round 4 had started: 3 complete, unless it ended before the signal landed
    assert kept in (3, 4) and f"interrupted after {kept} complete round(s)" in rest and "Traceback" not in rest, rest
    assert data["interrupted"] == "SIGTERM" and data["exit_code"] == 143
    (bench,) = data["benchmarks"]
    assert bench["stopped_by"] == "interrupted" and bench["decision"]["rounds_used"] == kept
    assert _leftovers(gate.pid) == [] and git(repo, "worktree", "list").count("\n") == 0
    replay = run_gate(repo, "--replay", str(record), "--json", str(tmp_path / "r.json"))
    # Its verdict is the CPU's timing noise under load (any of pass, fail, inconclusive); what matters is that it reads.
    assert replay.returncode in (0, 1, 3), replay.stderr[-2000:]
    assert len(json.loads((tmp_path / "r.json").read_text())["rounds"]) == kept


def test_a_malformed_replay_file_is_an_error_naming_the_file(fault_repo, tmp_path):
    repo, _ = fault_repo
    bad = tmp_path / "cut.json"
    bad.write_text(
        json.dumps(
            {
                "schema": GATE_SCHEMA,
                "rounds": [{"index": 0}],
                "benchmarks": [{"id": "x"}],
                "plan": {},
                "exclusion": {},
                "thresholds": {},
            }
        )
    )  # valid JSON, cut short
    done = run_gate(repo, "--replay", str(bad))
    assert done.returncode == 2, done.stderr[-2000:]
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith(f"python -m ci.speed: error: {bad}: ") and "internal error" not in line, line


def test_an_unwritable_step_summary_is_refused_before_any_work(fault_repo, tmp_path):
    repo, c0 = fault_repo
    (tmp_path / "file").write_text("")
    done = run_gate(repo, "--base", c0, "--head", "raises-fix", *SMALL, summary=tmp_path / "file" / "summary.md")
    assert done.returncode == 2 and "$GITHUB_STEP_SUMMARY" in done.stderr and "cannot write there" in done.stderr
    assert "survey" not in done.stderr


def test_an_unwritable_results_folder_is_a_harness_error_naming_it(tmp_path):
    repo = make_project(tmp_path)
    asv_dir = repo / ".asv"
    if asv_dir.exists():
        import shutil

        shutil.rmtree(asv_dir)
    asv_dir.write_text("a file where the results folder belongs (as root, chmod cannot make a folder read-only)")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GITHUB_STEP_SUMMARY")}
    env["PYTHONPATH"] = str(repo)
    done = subprocess.run(
        [sys.executable, "-m", "ci.history", "--commits", "1"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert (
        f"python -m ci.history: error: the results folder (.asv): {asv_dir}/main_job.json: cannot write there"
        in done.stderr
    )
    assert "Traceback" not in done.stderr and asv_dir.read_text().startswith("a file where")
