"""The speed gate on a kernel wrong only at the shape it times: fails, never a speed (issue 18, item 3).

A temporary repository (tests/test_asv_suite.make_project) whose torch_dequant zeroes row 0 of C
only when M == 128, the M of the timed CPU shape cpu_m00128_n00128_k02048: the survey's
correctness check at 256x256x1024 passes it, so only the check of the timed output can see it.
A head wrong there fails the gate (exit 1, "wrong result at 128x128x2048"); a base wrong there is
reported and the head's benchmark is "new", not compared (a PR that fixes it must not be blocked by it).
"""

from __future__ import annotations

import json

import pytest
from test_asv_suite import git, make_project
from test_speed_gate import run_gate

SHAPE = "cpu_m00128_n00128_k02048"
BENCH = f"torch_dequant[bf16]/{SHAPE}"
# One benchmark, a one-look plan of 2 rounds, a 50% interval (alpha 0.25 per tail), a short timing budget
# (as tests/test_speed_gate.py's SMALL).
ARGS = [
    "--kernel",
    "torch_dequant",
    "--config",
    "bf16",
    "--shape",
    SHAPE,
    "--plan",
    "min_rounds=2",
    "--plan",
    "max_rounds=2",
    "--plan",
    "round_budget=2",
    "--plan",
    "alpha=0.25",
    *[
        f"--timing={t}"
        for t in ("warmup_ms=30", "max_warmup_ms=5000", "rep_ms=100", "min_reps=5", "steady_tolerance=1000")
    ],
]

WRONG_AT_SHAPE = """

# Injected by tests/test_speed_wrong_at_shape.py: row 0 of C is zeroed when M == 128, only.
def _inject_wrong_at_one_shape():
    prepare = TorchDequantGemm._prepare

    def wrong(self, a, b, out, config, _prepare=prepare):
        launch = _prepare(self, a, b, out, config)

        def wrong_launch():
            launch()
            if out.shape[0] == 128:
                out[0].zero_()

        return wrong_launch

    TorchDequantGemm._prepare = wrong


_inject_wrong_at_one_shape()
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """Branches: ``wrong`` (off main: wrong at the timed shape), ``fixed`` (off wrong: the kernel restored)."""
    repo = make_project(tmp_path_factory.mktemp("wrong-at-shape"))
    c0 = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "wrong", c0)
    with open(repo / "kernels" / "torch_dequant.py", "a") as f:
        f.write(WRONG_AT_SHAPE)
    git(repo, "commit", "-q", "-am", "wrong at one shape")
    git(repo, "checkout", "-q", "-b", "fixed")
    git(repo, "checkout", c0, "--", "kernels/torch_dequant.py")
    git(repo, "commit", "-q", "-am", "fixed")
    git(repo, "checkout", "-q", "main")
    return repo


def test_a_head_wrong_only_at_the_timed_shape_fails_the_gate(repo, tmp_path):
    done = run_gate(repo, "--base", "main", "--head", "wrong", *ARGS, "--json", str(tmp_path / "v.json"))
    out = done.stdout + done.stderr
    assert done.returncode == 1, out[-4000:]
    assert "wrong result at 128x128x2048: " in out and "first bad element C[0," in out
    assert f"{BENCH}: wrong result at head, not timed" in done.stdout
    record = json.loads((tmp_path / "v.json").read_text())
    (bench,) = record["benchmarks"]
    assert bench["status"] == "wrong result" and bench["head_tflops"] is None and bench["decision"] is None
    assert bench["note"].startswith("head: wrong result at 128x128x2048")
    assert record["summary"]["wrong result"] == [BENCH]
    # The survey's small-shape check passed it; the check of the timed output did not.
    checks = {(c["side"], c.get("timed_shape", False)): c["status"] for c in record["correctness"]}
    assert checks[("head", False)] == "pass" and checks[("head", True)] == "fail"
    assert ("base", True) not in checks
    (first,) = record["rounds"]  # found in the first round; no round after it
    head = next(p for p in first["processes"] if p["side"] == "head")["records"][BENCH]
    assert head["error_type"] == "WrongResult" and "samples_s" not in head and head["wrong_result"]["first_bad"][0] == 0


def test_a_base_wrong_only_at_the_timed_shape_is_reported_and_does_not_fail(repo, tmp_path):
    done = run_gate(repo, "--base", "wrong", "--head", "fixed", *ARGS, "--json", str(tmp_path / "v.json"))
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    record = json.loads((tmp_path / "v.json").read_text())
    (bench,) = record["benchmarks"]
    assert bench["status"] == "new" and bench["decision"] is None
    assert bench["note"].startswith("base computed a wrong result, not compared: wrong result at 128x128x2048")
    assert "wrong result at 128x128x2048" in done.stdout  # reported
    checks = {(c["side"], c.get("timed_shape", False)): c["status"] for c in record["correctness"]}
    assert checks[("base", True)] == "fail" and ("head", True) not in checks


def test_once_the_pr_has_failed_no_round_starts_unless_all_verdicts_are_asked(repo, tmp_path):
    """The wrong shape fails the PR in round 1; the other shape (right there) is then not measured on:
    the status is known. --all-verdicts measures it to its verdict."""
    other = "96x128x1024"  # M != 128: the injected fault is not there
    args = [*ARGS, "--shape", other]
    stopped = run_gate(repo, "--base", "main", "--head", "wrong", *args, "--json", str(tmp_path / "stop.json"))
    assert stopped.returncode == 1, (stopped.stdout + stopped.stderr)[-4000:]
    record = json.loads((tmp_path / "stop.json").read_text())
    assert len(record["rounds"]) == 1 and "the PR fails" in stopped.stderr
    by_id = {b["id"]: b for b in record["benchmarks"]}
    assert by_id[BENCH]["status"] == "wrong result"
    undecided = by_id[f"torch_dequant[bf16]/{other}"]
    assert undecided["stopped_by"] == "pr failed" and undecided["verdict"] == "inconclusive"
    assert "measuring stopped once the PR had failed" in undecided["decision"]["reason"]
    assert "not decided: the PR had already failed" in stopped.stdout
    assert (
        "(1 not decided: the PR had failed)" in stopped.stdout.splitlines()[0]
        and "inconclusive" not in stopped.stdout.splitlines()[0]
    )
    assert "**1 not decided**" in stopped.stdout and "**1 inconclusive**" not in stopped.stdout

    every = run_gate(
        repo, "--base", "main", "--head", "wrong", *args, "--all-verdicts", "--json", str(tmp_path / "all.json")
    )
    assert every.returncode == 1, (every.stdout + every.stderr)[-4000:]
    record = json.loads((tmp_path / "all.json").read_text())
    assert len(record["rounds"]) == 2  # the plan's one look, at 2 rounds
    measured = next(b for b in record["benchmarks"] if b["id"] == f"torch_dequant[bf16]/{other}")
    assert measured["stopped_by"] == "decision" and measured["decision"]["rounds_used"] == 2
