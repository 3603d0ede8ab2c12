"""``python -m ci.speed.changes`` (the CPU job) and ``python -m ci.speed`` (the GPU job) agree on every input (issue 49,
item 5): the same cases through both, the same exit code and the same stopping line, and the CPU job's
``gpu_needed`` false wherever the gate would not measure.

Found: on a fresh clone (base = head) ci.speed.changes answered "GPU needed: yes (10 to measure)" while ci.speed
refused the same input with "nothing to compare": the CPU job booked the GPU runner for a gate that stops at once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_asv_suite import commit_change, git, make_project

ROOT = Path(__file__).resolve().parents[1]
SELECTED = ["--kernel", "triton_dot_scaled"]  # one kernel: the fingerprints of both sides in seconds


def _run(module: str, repo: Path, tmp: Path, *argv: str, ci: bool = False) -> tuple[int, str, dict | None, str]:
    """(exit code, the last line of stderr, its --json record or None, what it appended to $GITHUB_OUTPUT)."""
    dropped = ("GITHUB_STEP_SUMMARY", "CI", "GITHUB_ACTIONS", "GITHUB_OUTPUT")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env["PYTHONPATH"] = str(ROOT)
    output = tmp / f"{module}.github_output"
    output.write_text("")
    extra = []
    if module == "ci.speed.changes":
        extra = ["--github-output"]
        env["GITHUB_OUTPUT"] = str(output)
    if ci:
        env["CI"] = "true"
    out = tmp / f"{module}.json"
    out.unlink(missing_ok=True)
    if module == "ci.speed":
        extra = ["--device", "cpu"]
    done = subprocess.run(
        [sys.executable, "-m", module, *argv, *extra, "--json", str(out)],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    record = json.loads(out.read_text()) if out.exists() else None
    return done.returncode, lines[-1] if lines else "", record, output.read_text()


def _stop_line(module: str, line: str) -> str:
    prefix = f"python -m {module}: error: "
    assert line.startswith(prefix), line
    return line[len(prefix) :]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """A repository of one commit on main: the cases where both stop before any fingerprint or measurement."""
    repo = tmp_path_factory.mktemp("tiny") / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("one\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "one")
    return repo


STOPPING = [
    # case, argv, CI, what both say, gpu_needed in the CPU job's record
    ("base is head", ["--base", "main"], False, "nothing to compare the head with: no base: the merge-base", False),
    ("base is head, default base", [], False, "nothing to compare the head with: no base: the merge-base", False),
    ("a base that names nothing", ["--base", "no-such-ref"], False, "--base 'no-such-ref' does not name", True),
]


@pytest.mark.parametrize(
    "case, argv, ci, said, gpu_needed", STOPPING, ids=[c[0] if isinstance(c, tuple) else c.id for c in STOPPING]
)
def test_both_fronts_stop_the_same_way(tiny, tmp_path, case, argv, ci, said, gpu_needed):
    changes = _run("ci.speed.changes", tiny, tmp_path, *argv, ci=ci)
    gate = _run("ci.speed", tiny, tmp_path, *argv, ci=ci)
    assert changes[0] == gate[0] == 2, (changes, gate)
    assert _stop_line("ci.speed.changes", changes[1]) == _stop_line("ci.speed", gate[1]), (changes[1], gate[1])
    assert said in changes[1]
    record = changes[2]
    assert record is not None and record["gpu_needed"] is gpu_needed and record["verdict"] == "error", record
    assert changes[3] == f"gpu_needed={'true' if gpu_needed else 'false'}\n"


def test_no_default_base_outside_ci_and_under_ci(tiny, tmp_path):
    """No origin/main and no main: outside CI both say there is nothing to compare; under CI both require a base."""
    clone = tmp_path / "topic"
    git(tmp_path, "clone", "-q", str(tiny), str(clone))
    git(clone, "branch", "-m", "main", "topic")
    git(clone, "remote", "remove", "origin")
    for ci, said, gpu_needed in (
        (False, "nothing to compare the head with: no base: none of origin/main, main exists", False),
        (True, "no base to compare with: none of origin/main, main exists, and under CI a base is required", True),
    ):
        changes = _run("ci.speed.changes", clone, tmp_path, ci=ci)
        gate = _run("ci.speed", clone, tmp_path, ci=ci)
        assert changes[0] == gate[0] == 2, (changes, gate)
        assert _stop_line("ci.speed.changes", changes[1]) == _stop_line("ci.speed", gate[1])
        assert said in changes[1] and changes[2] is not None and changes[2]["gpu_needed"] is gpu_needed


@pytest.mark.slow
def test_a_docs_only_change_is_nothing_to_measure_for_both(tmp_path):
    """Both go on and fingerprint: identical code, so the CPU job books no GPU and the gate measures nothing."""
    repo = make_project(tmp_path)
    commit_change(repo, "README.md", "\nA docs-only change.\n", "docs")
    changes = _run("ci.speed.changes", repo, tmp_path, "--base", "HEAD~1", "--arch", "sm_90", *SELECTED)
    gate = _run("ci.speed", repo, tmp_path, "--base", "HEAD~1", "--arch", "sm_90", *SELECTED)
    assert changes[0] == gate[0] == 0, (changes, gate)
    assert changes[2] is not None and changes[2]["gpu_needed"] is False and changes[2]["to_measure"] == []
    assert changes[3] == "gpu_needed=false\n"
    assert gate[2] is not None and gate[2]["benchmarks"], gate[2]
    assert {b["id"] for b in gate[2]["benchmarks"]} == set(changes[2]["unchanged"])
    assert all(b["status"] == "unchanged (identical code)" and not b["rounds"] for b in gate[2]["benchmarks"])
