"""ci.budget_gate end to end, in temporary git repositories.

Each repository holds a copy of the project's registry, compile and gate code
plus a probe Triton GEMM (tests/test_resources.py) as its only kernel. Commits
off the first one inject real changes -- fewer warps for the same tile (more
registers per thread), a tile that spills, a renamed config, unreadable compiler
output -- and the gate, run as CI runs it (``python -m ci.budget_gate``) must
pass or fail each for the right reason. A second repository copies the whole
project and raises the FlyDSL kernel's VGPRs by leaving its accumulators to LLVM.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import git
import pytest

from ci.budget_gate import BUDGET_SCHEMA, suggested_entry
from kernels.registry import KERNEL_MODULES
from test_resources import PROBE_KERNEL_SOURCE

PROJECT = Path(__file__).resolve().parents[1]
TARGET = "probe_gemm/sm_90/default"
BASE_CONFIG = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 2}


def _commit(repo: git.Repo, message: str) -> str:
    repo.git.add(A=True)
    repo.index.commit(message, author=git.Actor("gate test", "gate@test"), committer=git.Actor("gate test", "gate@test"))
    return repo.head.commit.hexsha


def _set_line(path: Path, name: str, value) -> None:
    """Rewrite the one-line assignment ``name = ...`` in a probe module."""
    text, count = re.subn(rf"^{name} = .*$", f"{name} = {value!r}", path.read_text(), count=1, flags=re.MULTILINE)
    assert count == 1, f"{path} has no line '{name} = ...'"
    path.write_text(text)


def _branch_from(repo: git.Repo, start: str, name: str) -> None:
    repo.git.checkout(start, b=name, quiet=True)


def run_gate(repo_dir: Path, *args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GITHUB_STEP_SUMMARY")}
    env.update(env_extra or {})
    env["PYTHONPATH"] = str(repo_dir)
    return subprocess.run(
        [sys.executable, "-m", "ci.budget_gate", *args], cwd=repo_dir, env=env, capture_output=True, text=True, timeout=900
    )


def _measure_budget(repo_dir: Path, env_extra: dict) -> dict:
    """A budget that accepts exactly what the probe measures now (from a real ci.resources run)."""
    out = repo_dir.parent / "measured.json"
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "PYTHONPATH")}
    env.update(env_extra, PYTHONPATH=str(repo_dir))
    done = subprocess.run([sys.executable, "-m", "ci.resources", "--json", str(out)], cwd=repo_dir, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    targets = json.loads(out.read_text())["targets"]
    return {"schema": BUDGET_SCHEMA, "default_tolerance": 0,
            "targets": {t: suggested_entry(r["usage"], None) for t, r in targets.items()}}


@pytest.fixture(scope="module")
def gate_env(tmp_path_factory):
    """A private Triton cache, so the first compile of each variant is a real one."""
    return {"TRITON_CACHE_DIR": str(tmp_path_factory.mktemp("triton-cache"))}


@pytest.fixture(scope="module")
def probe_repo(tmp_path_factory, gate_env):
    """Branches off one base commit ``c0``, each one change for the gate to judge."""
    root = tmp_path_factory.mktemp("gate") / "repo"
    # The project's code as it is (registry, compile, parsers, gate), with every
    # registered kernel module replaced: the probe is the only kernel.
    for rel in ["pyproject.toml", *(str(p.relative_to(PROJECT)) for d in ("kernels", "ci", "harness")
                                    for p in (PROJECT / d).glob("*.py"))]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(PROJECT / rel, root / rel)
    for module in KERNEL_MODULES:
        (root / (module.replace(".", "/") + ".py")).write_text('"""Replaced by the budget-gate tests."""\n')
    assert "kernels.triton_mxfp4" in KERNEL_MODULES, "the probe stands in for kernels.triton_mxfp4"
    probe = root / "kernels/triton_mxfp4.py"
    probe.write_text(PROBE_KERNEL_SOURCE)
    _set_line(probe, "CONFIGS", {"default": BASE_CONFIG})
    repo = git.Repo.init(root, initial_branch="main")
    (root / "ci/register_budget.json").write_text(json.dumps(_measure_budget(root, gate_env), indent=2) + "\n")
    c0 = _commit(repo, "c0: probe kernel and its budget")

    _branch_from(repo, c0, "noop")
    (root / "README.md").write_text("docs only\n")
    _commit(repo, "docs")

    _branch_from(repo, c0, "fewer_warps")
    _set_line(probe, "CONFIGS", {"default": dict(BASE_CONFIG, num_warps=4)})
    _commit(repo, "same tile on 4 warps")

    _branch_from(repo, "fewer_warps", "fewer_warps_budgeted")
    budget = json.loads((root / "ci/register_budget.json").read_text())
    budget["targets"][TARGET] = dict(_measure_budget(root, gate_env)["targets"][TARGET])
    (root / "ci/register_budget.json").write_text(json.dumps(budget, indent=2) + "\n")
    _commit(repo, "accept the 4-warp register count")

    _branch_from(repo, c0, "spills")
    _set_line(probe, "CONFIGS", {"default": dict(BASE_CONFIG, BLOCK_N=256, num_warps=4)})
    _commit(repo, "128x256 tile on 4 warps")

    _branch_from(repo, c0, "renamed")
    _set_line(probe, "CONFIGS", {"wide": BASE_CONFIG})
    _commit(repo, "rename the config")

    _branch_from(repo, c0, "unreadable")
    _set_line(probe, "MANGLE_OUTPUT", True)
    _commit(repo, "compiler output the parser cannot read")

    repo.git.checkout("main", quiet=True)
    return root, c0


def test_noop_commit_passes(probe_repo, gate_env, tmp_path):
    root, c0 = probe_repo
    out = tmp_path / "gate.json"
    done = run_gate(root, "--base", c0, "--head", "noop", "--json", str(out), env_extra=gate_env)
    assert done.returncode == 0, done.stdout + done.stderr
    verdict = json.loads(out.read_text())
    assert verdict["verdict"] == "pass" and verdict["base"]["sha"] == c0
    (check,) = verdict["targets"]
    assert check["target"] == TARGET and check["status"] == "pass"
    assert check["head"]["registers"] == check["base"]["registers"] > 0


def test_fewer_warps_raise_registers_and_fail_naming_the_kernel(probe_repo, gate_env, tmp_path):
    root, c0 = probe_repo
    out, summary = tmp_path / "gate.json", tmp_path / "summary.md"
    done = run_gate(root, "--base", c0, "--head", "fewer_warps", "--json", str(out),
                    env_extra=dict(gate_env, GITHUB_STEP_SUMMARY=str(summary)))
    assert done.returncode == 1, done.stdout + done.stderr
    (check,) = json.loads(out.read_text())["targets"]
    assert check["status"] == "fail" and check["head"]["registers"] > check["base"]["registers"]
    assert any(r.startswith("register headroom shrank by") for r in check["reasons"])
    assert any(r.startswith("registers ") and "> budget max_registers" in r for r in check["reasons"])
    assert f"budget_gate: FAIL: 1 target(s) failed: {TARGET}" in done.stdout
    # The suggested edit accepts exactly the measured numbers.
    assert f'"{TARGET}": {{"max_registers": {check["head"]["registers"]}' in done.stdout
    assert "Register budget gate: FAIL" in summary.read_text() and TARGET in summary.read_text()


def test_a_budget_edit_in_the_same_change_accepts_the_increase(probe_repo, gate_env):
    root, c0 = probe_repo
    done = run_gate(root, "--base", c0, "--head", "fewer_warps_budgeted", env_extra=gate_env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "accepted: this change edits the target's budget entry" in done.stdout


def test_spilling_commit_fails(probe_repo, gate_env, tmp_path):
    root, c0 = probe_repo
    out = tmp_path / "gate.json"
    done = run_gate(root, "--base", c0, "--head", "spills", "--json", str(out), env_extra=gate_env)
    assert done.returncode == 1, done.stdout + done.stderr
    (check,) = json.loads(out.read_text())["targets"]
    assert any(r.startswith("spills/scratch must be 0: ") and "spill_store_bytes=" in r for r in check["reasons"])
    assert check["suggested_budget"] is None  # spills cannot be budgeted away


def test_renamed_config_is_a_missing_target_and_an_unbudgeted_one(probe_repo, gate_env, tmp_path):
    root, c0 = probe_repo
    out = tmp_path / "gate.json"
    done = run_gate(root, "--base", c0, "--head", "renamed", "--json", str(out), env_extra=gate_env)
    assert done.returncode == 1, done.stdout + done.stderr
    checks = {c["target"]: c for c in json.loads(out.read_text())["targets"]}
    assert checks[TARGET]["reasons"] == [
        "no longer compiled at head: listed in the base and the budget but not by head's registry"
    ]
    assert checks["probe_gemm/sm_90/wide"]["reasons"][0].startswith("no budget entry")
    assert '"probe_gemm/sm_90/wide": {"max_registers":' in done.stdout


def test_no_base_checks_the_budget_only(probe_repo, gate_env, tmp_path):
    """A fresh single-commit clone: no origin/main, the base ref does not resolve."""
    root, _ = probe_repo
    clone = tmp_path / "clone"
    git.Repo.clone_from(f"file://{root}", clone, depth=1, branch="main")
    done = run_gate(clone, "--base", "HEAD~1", env_extra=gate_env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no base: 'HEAD~1' does not resolve in this single-commit/shallow clone; checked against budget only" in done.stdout
    done = run_gate(clone, env_extra=gate_env)  # default base origin/main == HEAD
    assert done.returncode == 0 and "checked against budget only" in done.stdout


def test_working_tree_edits_are_gated(probe_repo, gate_env, tmp_path):
    root, _ = probe_repo
    work = tmp_path / "work"
    git.Repo.clone_from(f"file://{root}", work, branch="main")
    _set_line(work / "kernels/triton_mxfp4.py", "CONFIGS", {"default": dict(BASE_CONFIG, num_warps=4)})
    out = tmp_path / "gate.json"
    done = run_gate(work, "--working-tree", "--base", "origin/main", "--json", str(out), env_extra=gate_env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"budget_gate: FAIL: 1 target(s) failed: {TARGET}" in done.stdout
    (check,) = json.loads(out.read_text())["targets"]  # compared with HEAD, the commit under the edits
    assert any(r.startswith("register headroom shrank by") for r in check["reasons"])


def _assert_harness_error(done: subprocess.CompletedProcess, message: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("budget_gate: error: ")
    assert message in done.stderr


def test_unparseable_compiler_output_is_a_harness_error(probe_repo, gate_env):
    root, c0 = probe_repo
    done = run_gate(root, "--base", c0, "--head", "unreadable", env_extra=gate_env)
    _assert_harness_error(done, f"cannot parse the compiler output of {TARGET}")


def test_malformed_budget_and_bad_ref_are_harness_errors(probe_repo, tmp_path):
    root, c0 = probe_repo
    bad = tmp_path / "budget.json"
    cases = {
        '{"schema": "mxfp4-register-budget/1", "targets": {': "not valid JSON",
        '{"schema": "mxfp4-register-budget/1", "targets": {"probe_gemm/sm_90/default": {"max_registers": 10}}}':
            "missing required key(s) ['max_shared_bytes']",
        '{"schema": "mxfp4-register-budget/1", "targets": {"probe_gemm/sm_90/default": '
        '{"max_registers": 10, "max_shared_bytes": 1, "max_spills": 3}}}': "unknown key(s) ['max_spills']",
        '{"schema": "mxfp4-register-budget/1", "targets": {"probe_gemm/default": {}}}': "the key must be kernel/arch/config",
        '{"schema": "mxfp4-register-budget/1", "targets": {"probe_gemm/sm_90/default": '
        '{"max_registers": -1, "max_shared_bytes": 1}}}': "max_registers: must be a non-negative integer",
        '{"targets": {}}': '"schema" must be',
    }
    for text, message in cases.items():
        bad.write_text(text)
        _assert_harness_error(run_gate(root, "--base", c0, "--head", "noop", "--budget", str(bad)), message)
    _assert_harness_error(run_gate(root, "--base", "no-such-branch", "--head", "noop"), "--base 'no-such-branch' does not name a commit")
    _assert_harness_error(run_gate(root, "--head", "no-such-branch"), "ref 'no-such-branch' does not name a commit")


def _usage(registers: int, **fields) -> dict:
    """A resource record for the decision-logic tests (the numbers are inputs, not measurements)."""
    usage = {"registers": registers, "register_limit": 255, "arch_vgpr": None, "agpr": None, "sgpr": None,
             "shared_bytes": 1024, "shared_limit": 232448, "occupancy": 8, "occupancy_unit": "warps/SM",
             "vgpr_spills": None, "sgpr_spills": None, "spill_store_bytes": 0, "spill_load_bytes": 0,
             "scratch_bytes": 0, "dynamic_stack": False}
    return dict(usage, **fields)


def test_tolerance_and_intentional_removal():
    from ci.budget_gate import Budget, evaluate

    entry = {"max_registers": 200, "max_shared_bytes": 4096, "tolerance": 2}
    budget = Budget({"k/sm_90/a": entry})
    base = {"k/sm_90/a": {"ok": True, "usage": _usage(100)}, "k/sm_90/gone": {"ok": True, "usage": _usage(90)}}
    base_budget = Budget({"k/sm_90/a": entry, "k/sm_90/gone": entry})
    within, over = (evaluate({"k/sm_90/a": {"ok": True, "usage": _usage(r)}}, base, budget, base_budget) for r in (102, 103))
    assert [c.status for c in within] == ["pass", "removed"]
    assert [c.status for c in over] == ["fail", "removed"]
    assert over[0].reasons == ["register headroom shrank by 3 vs base (registers 100 -> 103, tolerance 2)"]
    # Without deleting its budget entry, a vanished target fails.
    (kept,) = [c for c in evaluate({}, base, base_budget, base_budget) if c.target == "k/sm_90/gone"]
    assert kept.status == "fail" and kept.reasons[0].startswith("no longer compiled at head")


def test_help_explains_the_gate():
    done = subprocess.run([sys.executable, "-m", "ci.budget_gate", "--help"], cwd=PROJECT, capture_output=True, text=True)
    assert done.returncode == 0
    for phrase in ("--base", "--working-tree", "tolerance", "spills", "160 KiB", "no base", "Exit: 0 pass, 1 gate failed, 2"):
        assert phrase in done.stdout, phrase


def test_flydsl_kernel_vgpr_increase_fails(tmp_path, gate_env):
    """The real FlyDSL kernel: accumulators left to LLVM instead of pinned to AGPRs -> more arch VGPRs."""
    root = tmp_path / "project"
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=PROJECT,
                           capture_output=True, text=True, check=True).stdout.split()
    for rel in files:
        if (PROJECT / rel).is_file():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(PROJECT / rel, root / rel)
    repo = git.Repo.init(root, initial_branch="main")
    c0 = _commit(repo, "the project as it is")
    source = root / "kernels/flydsl_gfx950/__init__.py"
    text, edits = re.subn(r'("default":\s*\{[^}]*"agpr_accumulators":\s*)True', r"\1False", source.read_text(), count=1)
    assert edits == 1, "the FlyDSL kernel's default config no longer has agpr_accumulators=True; update this edit"
    source.write_text(text)
    _commit(repo, "accumulators in VGPRs")
    out = tmp_path / "gate.json"
    done = run_gate(root, "--base", c0, "--kernel", "flydsl_gfx950_4wave", "--config", "default", "--json", str(out),
                    env_extra=gate_env)
    assert done.returncode == 1, done.stdout + done.stderr
    (check,) = json.loads(out.read_text())["targets"]
    assert check["target"] == "flydsl_gfx950_4wave/gfx950/default" and check["status"] == "fail"
    assert check["head"]["arch_vgpr"] > check["base"]["arch_vgpr"]
    assert any(r.startswith("arch-VGPR headroom shrank by") for r in check["reasons"])
    assert "budget_gate: FAIL: 1 target(s) failed: flydsl_gfx950_4wave/gfx950/default" in done.stdout
