"""Issue 17 in the speed gate: identical code costs no measuring, and what was skipped, saved and spent is recorded.

End to end on the CPU (``python -m ci.speed --device cpu``), in a temporary git repository as
tests/test_speed_gate.py builds it: on a CPU the fingerprint's arch is ``cpu``, so only launch paths
count, and torch_dequant (its two configs) is what a CPU times (Triton and FlyDSL are not timed on a
CPU). A change to kernels/triton_mxfp4.py only leaves torch_dequant's launch path as it was: nothing
is measured. A change to kernels/torch_dequant.py measures torch_dequant, saying what differs.
"""

from __future__ import annotations

import json
import time

import pytest
from test_asv_suite import SLOWDOWN, git, make_project
from test_speed_gate import BENCH, SMALL, run_gate

TRITON_EDIT = "\n\ndef _unused_helper_added_by_the_test():\n    return 1\n"
ALL_UNCHANGED = "PASS: unchanged (identical code), 0 GPU seconds"
TORCH_PIN = "2.13.0"  # ci/constraints-cpu.txt's torch pin, which the "pin" head raises
PIN_WARNING = (
    f"this PR changes pinned dependencies (torch {TORCH_PIN} -> 9.9.9); the gate measures both sides in the "
    "runner's one environment, so their effect is not measured here"
)


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """Branches off ``c0``: docs (README only), triton (kernels/triton_mxfp4.py only), slow
    (kernels/torch_dequant.py).
    """
    root = make_project(tmp_path_factory.mktemp("speed-unchanged"))
    c0 = git(root, "rev-parse", "HEAD")
    for branch, path, text in (
        ("docs", "README.md", "\ndocs only\n"),
        ("triton", "kernels/triton_mxfp4.py", TRITON_EDIT),
        ("slow", "kernels/torch_dequant.py", SLOWDOWN),
    ):
        git(root, "checkout", "-q", "-b", branch, c0)
        with open(root / path, "a") as f:
            f.write(text)
        git(root, "commit", "-q", "-am", branch)
    # pin: a raised torch pin, kernels untouched: identical code, and a warning that the pin is not measured.
    git(root, "checkout", "-q", "-b", "pin", c0)
    constraints = root / "ci/constraints-cpu.txt"
    constraints.write_text(constraints.read_text().replace(f"torch=={TORCH_PIN}\n", "torch==9.9.9\n", 1))
    git(root, "commit", "-q", "-am", "pin")
    git(root, "checkout", "-q", "main")
    wide = root.parent / "wide.json"
    wide.write_text(
        json.dumps(
            {
                "schema": "mxfp4-speed-thresholds/1",
                "default_threshold": 0.01,
                "overrides": [
                    {"match": "torch_dequant[*]/*", "threshold": 0.9, "why": "orchestration test on a shared CPU"}
                ],
            }
        )
    )
    return root, c0, wide


@pytest.mark.parametrize("head", ["docs", "triton", "pin"])
def test_identical_code_is_not_measured_and_costs_no_gpu_second(repo, tmp_path, head):
    root, c0, _ = repo
    started = time.perf_counter()
    done = run_gate(
        root,
        "--base",
        c0,
        "--head",
        head,
        "--device",
        "cpu",
        "--json",
        str(tmp_path / "v.json"),
        summary=tmp_path / "summary.md",
    )
    seconds = time.perf_counter() - started
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"speed_gate: {ALL_UNCHANGED}" in done.stderr and f"### Speed gate: {ALL_UNCHANGED}" in done.stdout
    assert "survey" not in done.stderr and "round 1" not in done.stderr  # no child that measures was started
    record = json.loads((tmp_path / "v.json").read_text())
    assert record["exit_code"] == 0 and record["rounds"] == [] and record["correctness"] == []
    assert record["gpu_seconds_spent"] == 0 and record["costs"] == {} and record["rounds_to_verdict"] == {}
    ids = sorted(b["id"] for b in record["benchmarks"])
    assert ids == sorted(
        f"torch_dequant[{c}]/{s}"
        for c in ("bf16", "fp32")
        for s in ("cpu_m00128_n00128_k02048", "cpu_m00256_n00256_k01024")
    )
    assert {b["status"] for b in record["benchmarks"]} == {"unchanged (identical code)"}
    assert record["summary"]["unchanged (identical code)"] == ids and record["skipped_identical"] == ids
    assert record["gpu_seconds_saved_estimated"] > 0 and record["code"]["arch"] == "cpu"
    assert "unchanged (identical code)" in (tmp_path / "summary.md").read_text()
    # Compact: no measuring lines where nothing was measured, and no unknown version shown as "?".
    assert (
        "every selected benchmark has identical code: nothing measured, 0 GPU seconds, "
        f"~{record['gpu_seconds_saved_estimated']:.0f} s saved (estimated)" in done.stdout
    )
    for line in (
        "plan:",
        "a round is excluded",
        "GPU runner:",
        "device:",
        "torch ?",
        "no benchmark was gated",
        "_resolvable_",
    ):
        assert line not in done.stdout, line
    assert "**Not gated**" in done.stdout and "**Code** for cpu: cpu (--device cpu)" in done.stdout
    if head == "pin":
        assert PIN_WARNING in done.stdout and record["dependency_changes"] == [f"torch {TORCH_PIN} -> 9.9.9"]
    else:
        assert "pinned dependencies" not in done.stdout and record["dependency_changes"] == []
    print(f"{head}: whole gate {seconds:.1f} s")


def test_a_torch_dequant_change_is_measured_and_says_what_differs(repo, tmp_path):
    root, c0, wide = repo
    done = run_gate(
        root,
        "--base",
        c0,
        "--head",
        "slow",
        "--device",
        "cpu",
        *SMALL,
        "--thresholds",
        str(wide),
        "--json",
        str(tmp_path / "v.json"),
    )
    assert done.returncode in (0, 1, 3), done.stdout[-3000:] + done.stderr[-3000:]  # the verdict is not what is tested
    record = json.loads((tmp_path / "v.json").read_text())
    (bench,) = record["benchmarks"]
    assert bench["id"] == BENCH and bench["status"] == "gated"
    assert "launch path: kernels/torch_dequant.py" in done.stdout  # the code column and the table above the verdict
    assert "plan:" in done.stdout and "_resolvable_" in done.stdout and "torch ?" not in done.stdout  # the full header
    assert record["code"]["decisions"]["torch_dequant[bf16]"] == "changed: launch path: kernels/torch_dequant.py"
    assert record["skipped_identical"] == [] and record["rounds_to_verdict"] == {BENCH: 2}
    # The measured cost, in the form ci.speed.changes --costs reads; the GPU seconds spent are its sum.
    spent = sum(p["wall_s"] for r in record["rounds"] for p in r["processes"])
    assert record["costs"][BENCH] == pytest.approx(spent, abs=0.05) and record["gpu_seconds_spent"] == pytest.approx(
        spent, abs=0.1
    )
    from ci.speed.scope.summary import load_costs

    assert load_costs(tmp_path / "v.json") == record["costs"]


def test_measure_identical_measures_identical_code(repo, tmp_path):
    root, c0, wide = repo
    done = run_gate(
        root,
        "--base",
        c0,
        "--head",
        "docs",
        "--device",
        "cpu",
        *SMALL,
        "--thresholds",
        str(wide),
        "--measure-identical",
        "--json",
        str(tmp_path / "v.json"),
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    record = json.loads((tmp_path / "v.json").read_text())
    (bench,) = record["benchmarks"]
    assert bench["status"] == "gated" and len(record["rounds"]) == 2 and record["gpu_seconds_spent"] > 0
    assert "measured (--measure-identical): unchanged (identical code)" in done.stdout


def _changes_file(path, base, head, outcome="IDENTICAL"):
    bench = {
        "kernel": "torch_dequant",
        "config": "bf16",
        "shape": "cpu_m00256_n00256_k01024",
        "m": 256,
        "n": 256,
        "k": 1024,
    }
    path.write_text(
        json.dumps(
            {
                "schema": "mxfp4-changes/1",
                "base": base,
                "head": head,
                "archs": ["cpu"],
                "gpu_needed": outcome != "IDENTICAL",
                "by_arch": {
                    "cpu": {
                        "torch_dequant[bf16]/cpu_m00256_n00256_k01024": {"outcome": outcome, "summary": "from the file"}
                    }
                },
                "benchmarks_by_arch": {"cpu": [bench]},
                "registered": [{"name": "torch_dequant", "configs": ["bf16"]}],
                "code_changes": [],
            }
        )
    )
    return path


def test_changes_of_other_commits_are_a_harness_error(repo, tmp_path):
    root, c0, _ = repo
    head = git(root, "rev-parse", "docs")
    wrong = _changes_file(tmp_path / "changes.json", "0" * 40, head)
    done = run_gate(root, "--base", c0, "--head", "docs", "--device", "cpu", "--changes", str(wrong))
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"its base is 000000000000, this gate's base is {c0[:12]}" in done.stderr
    assert "survey" not in done.stderr and "fingerprinting" not in done.stderr


def test_changes_of_these_commits_decide_without_fingerprinting(repo, tmp_path):
    root, c0, _ = repo
    head = git(root, "rev-parse", "slow")  # torch_dequant changed, but the file says identical: the file decides
    right = _changes_file(tmp_path / "changes.json", c0, head)
    done = run_gate(
        root,
        "--base",
        c0,
        "--head",
        "slow",
        "--device",
        "cpu",
        "--kernel",
        "torch_dequant",
        "--config",
        "bf16",
        "--changes",
        str(right),
        "--json",
        str(tmp_path / "v.json"),
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "fingerprinting" not in done.stderr and ALL_UNCHANGED in done.stderr
    assert json.loads((tmp_path / "v.json").read_text())["skipped_identical"] == [
        "torch_dequant[bf16]/cpu_m00256_n00256_k01024"
    ]
