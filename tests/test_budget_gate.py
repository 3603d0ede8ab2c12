"""ci.budget.gate end to end, in temporary git repositories, and its decision logic.

Each repository holds a copy of the project's registry, compile and gate code
with two kernels in place of the project's: a probe Triton GEMM
(tests/test_resources.py), compiled for sm_90, and a canned gfx950 kernel whose
"compile" writes a small AMDGPU ISA text from the numbers in its config (arch
VGPRs, AGPRs, SGPRs, LDS, VGPR<->AGPR copies before and inside its loop), so a
branch can move exactly one resource without a compiler. Commits off the first
one inject real changes -- fewer warps for the same tile (more registers per
thread), a tile that spills, a renamed config, unreadable compiler output, SGPR
growth inside the budget's room, a budget edit that tightens one field while
another grows, more copies -- and the gate, run as CI runs it (``python -m
ci.budget``), must pass or fail each for the right reason. A second
repository copies the whole project and moves the FlyDSL kernel's accumulators
out of its AGPRs.
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
from test_resources import PROBE_KERNEL_SOURCE

from ci.budget.budget_file import BUDGET_SCHEMA, Budget, parse_budget, suggested_entry, update_budget_file
from ci.budget.compare import evaluate
from ci.budget.findings import Reason
from ci.budget.options import GateOptions
from ci.common.errors import HarnessError
from ci.common.options import OptionsError
from kernels.registry import KERNEL_MODULES

PROJECT = Path(__file__).resolve().parents[1]
TARGET = "probe_gemm/sm_90/default"
BASE_CONFIG = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 2}
# The project's own tolerances, reasons included: the temporary budgets are judged by the real defaults.
DEFAULT_TOLERANCES = json.loads((PROJECT / "ci/register_budget.json").read_text())["default_tolerances"]

CANNED = "canned_gfx950"
EXACT, ROOMY = f"{CANNED}/gfx950/exact", f"{CANNED}/gfx950/roomy"
# 80 arch VGPRs + 32 AGPRs = 112 of 512: 4 waves/SIMD, 16 below the 128 step, so +8 keeps the occupancy.
CANNED_CONFIG = {"arch_vgpr": 80, "agpr": 32, "sgpr": 68, "lds": 16384, "copies": 8, "loop_copies": 2}
CANNED_KERNEL_SOURCE = '''\
"""Canned gfx950 kernel: an AMDGPU ISA text written from its config's numbers (no compiler)."""

from kernels.registry import CompiledArtifact, Kernel, register

# One line: the tests rewrite it.
CONFIGS = {"exact": {}, "roomy": {}}


def canned_isa(name, c):
    copies = "\\tv_accvgpr_write_b32 a0, v0\\n" * c["copies"]
    loop_copies = "\\tv_accvgpr_read_b32 v0, a0\\n" * c["loop_copies"]
    return f"""\\t.amdgcn_target "amdgcn-amd-amdhsa--gfx950"
\\t.text
{name}:
{copies}.LBB0_1:
{loop_copies}\\ts_cbranch_scc1 .LBB0_1
\\ts_endpgm
\\t.amdhsa_kernel {name}
\\t\\t.amdhsa_accum_offset {c['arch_vgpr']}
\\t.end_amdhsa_kernel
\\t.amdgpu_metadata
---
amdhsa.kernels:
  - .agpr_count:     {c['agpr']}
    .group_segment_fixed_size: {c['lds']}
    .max_flat_workgroup_size: 256
    .name:           {name}
    .private_segment_fixed_size: 0
    .sgpr_count:     {c['sgpr']}
    .sgpr_spill_count: 0
    .vgpr_count:     {c['arch_vgpr'] + c['agpr']}
    .vgpr_spill_count: 0
    .wavefront_size: 64
amdhsa.target:   amdgcn-amd-amdhsa--gfx950
...
\\t.end_amdgpu_metadata
"""


@register
class CannedGfx950(Kernel):
    name = "canned_gfx950"
    backend = "triton"
    description = "test stand-in: canned gfx950 ISA"
    runs_on = ()
    compile_archs = ("gfx950",)
    configs = CONFIGS

    def _prepare(self, a, b, out, config):
        raise NotImplementedError("compile-only stand-in")

    def _compile_only(self, arch, config_name, config):
        return CompiledArtifact(self.name, config_name, arch, canned_isa("canned_" + config_name, config), 0.0, {})
'''


def _commit(repo: git.Repo, message: str) -> str:
    repo.git.add(A=True)
    repo.index.commit(
        message, author=git.Actor("gate test", "gate@test"), committer=git.Actor("gate test", "gate@test")
    )
    return repo.head.commit.hexsha


def _set_line(path: Path, name: str, value) -> None:
    """Rewrite the one-line assignment ``name = ...`` in a probe module."""
    text, count = re.subn(rf"^{name} = .*$", f"{name} = {value!r}", path.read_text(), count=1, flags=re.MULTILINE)
    assert count == 1, f"{path} has no line '{name} = ...'"
    path.write_text(text)


def _set_canned(root: Path, **changes: dict) -> None:
    """The canned kernel's configs: the base numbers, each config changed as given (``roomy={"sgpr": 71}``)."""
    _set_line(
        root / "kernels/flydsl_gfx950.py",
        "CONFIGS",
        {name: dict(CANNED_CONFIG, **changes.get(name, {})) for name in ("exact", "roomy")},
    )


def _edit_budget(root: Path, target: str, **limits: int) -> None:
    path = root / "ci/register_budget.json"
    budget = json.loads(path.read_text())
    budget["targets"][target].update(limits)
    path.write_text(json.dumps(budget, indent=2) + "\n")


def _branch_from(repo: git.Repo, start: str, name: str) -> None:
    repo.git.checkout(start, b=name, quiet=True)


def run_gate(repo_dir: Path, *args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    # Not under CI unless a test says so: the default base's rules differ there.
    dropped = ("PYTHONPATH", "GITHUB_STEP_SUMMARY", "CI", "GITHUB_ACTIONS")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update(env_extra or {})
    env["PYTHONPATH"] = str(repo_dir)
    return subprocess.run(
        [sys.executable, "-m", "ci.budget", *args], cwd=repo_dir, env=env, capture_output=True, text=True, timeout=900
    )


def _measure_budget(repo_dir: Path, env_extra: dict) -> dict:
    """A budget that accepts exactly what the kernels measure now (from a real ci.budget.resources run)."""
    out = repo_dir.parent / "measured.json"
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "PYTHONPATH")}
    env.update(env_extra, PYTHONPATH=str(repo_dir))
    done = subprocess.run(
        [sys.executable, "-m", "ci.budget.resources", "--json", str(out)],
        cwd=repo_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    targets = json.loads(out.read_text())["targets"]
    return {
        "schema": BUDGET_SCHEMA,
        "default_tolerances": DEFAULT_TOLERANCES,
        "targets": {t: suggested_entry(r["usage"], None) for t, r in targets.items()},
    }


@pytest.fixture(scope="module")
def gate_env(tmp_path_factory):
    """A private Triton cache, so the first compile of each variant is a real one."""
    return {"TRITON_CACHE_DIR": str(tmp_path_factory.mktemp("triton-cache"))}


@pytest.fixture(scope="module")
def probe_repo(tmp_path_factory, gate_env):
    """Branches off one base commit ``c0``, each one change for the gate to judge."""
    root = tmp_path_factory.mktemp("gate") / "repo"
    # The project's code as it is (registry, compile, parsers, gate), with every
    # registered kernel module replaced: the probe and the canned kernel are the only kernels.
    # kernels/: its top level only (its subpackages are kernel modules, replaced below); ci/ and harness/: whole.
    for rel in [
        "pyproject.toml",
        *(
            str(p.relative_to(PROJECT))
            for d, pattern in (("kernels", "*.py"), ("ci", "**/*.py"), ("harness", "**/*.py"))
            for p in (PROJECT / d).glob(pattern)
        ),
    ]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(PROJECT / rel, root / rel)
    for module in KERNEL_MODULES:
        (root / (module.replace(".", "/") + ".py")).write_text('"""Replaced by the budget-gate tests."""\n')
    assert {"kernels.triton_mxfp4", "kernels.flydsl_gfx950"} <= set(KERNEL_MODULES), "the stand-ins take these slots"
    probe = root / "kernels/triton_mxfp4.py"
    probe.write_text(PROBE_KERNEL_SOURCE)
    _set_line(probe, "CONFIGS", {"default": BASE_CONFIG})
    (root / "kernels/flydsl_gfx950.py").write_text(CANNED_KERNEL_SOURCE)
    _set_canned(root)
    repo = git.Repo.init(root, initial_branch="main")
    (root / "ci/register_budget.json").write_text(json.dumps(_measure_budget(root, gate_env), indent=2) + "\n")
    # "roomy" has room under its maxima (as budgets had before the ratchet); "exact" has none.
    _edit_budget(root, ROOMY, max_registers=112 + 16, max_arch_vgpr=80 + 16, max_sgpr=80)
    c0 = _commit(repo, "c0: probe and canned kernels and their budget")

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

    # Issue 10, case 1: +8 VGPRs under the budget's maxima, with max_sgpr tightened in the same change.
    _branch_from(repo, c0, "tighten_and_grow")
    _set_canned(root, roomy={"arch_vgpr": 88})
    _edit_budget(root, ROOMY, max_sgpr=68)
    _commit(repo, "8 more VGPRs; tighten max_sgpr")

    # Case 2: SGPRs 68 -> 71 inside the budget's room (max_sgpr 80) ...
    _branch_from(repo, c0, "sgpr_in_room")
    _set_canned(root, roomy={"sgpr": 71})
    _commit(repo, "3 more SGPRs")

    # ... and 4 VGPRs traded for 1 SGPR against an exact budget.
    _branch_from(repo, c0, "trade")
    _set_canned(root, exact={"arch_vgpr": 76, "sgpr": 69})
    _commit(repo, "4 fewer VGPRs for 1 more SGPR")

    # Case 7: four more VGPR<->AGPR copies inside the loop, no register count moves.
    _branch_from(repo, c0, "more_copies")
    _set_canned(root, exact={"loop_copies": 6})
    _commit(repo, "copies in the loop")

    repo.git.checkout("main", quiet=True)
    return root, c0


def _checks(path: Path) -> dict[str, dict]:
    return {c["target"]: c for c in json.loads(path.read_text())["targets"]}


# ---------------------------------------------------------------------------
# the probe Triton kernel (sm_90): registers, spills, targets that come and go
# ---------------------------------------------------------------------------


def test_noop_commit_passes_and_proposes_the_ratchet_for_room(probe_repo, gate_env, tmp_path):
    root, c0 = probe_repo
    out = tmp_path / "gate.json"
    done = run_gate(root, "--base", c0, "--head", "noop", "--json", str(out), env_extra=gate_env)
    assert done.returncode == 0, done.stdout + done.stderr
    verdict = json.loads(out.read_text())
    assert verdict["verdict"] == "pass" and verdict["base"]["sha"] == c0
    checks = _checks(out)
    assert set(checks) == {TARGET, EXACT, ROOMY} and all(c["status"] == "pass" for c in checks.values())
    assert checks[TARGET]["head"]["registers"] == checks[TARGET]["base"]["registers"] > 0
    assert checks[EXACT]["head"]["accvgpr_copies"] == 10 and checks[EXACT]["head"]["accvgpr_copies_in_loop"] == 2
    # The roomy entry has room: the gate proposes the tightened entry; the exact ones have none.
    assert verdict["tightened_budget"] == {
        ROOMY: dict(checks[ROOMY]["budget"], max_registers=112, max_arch_vgpr=80, max_sgpr=68)
    }
    assert (
        "Ratchet: these targets now use less than their budget" in done.stdout
        and f'"{ROOMY}": {{"max_registers": 112' in done.stdout
    )
    assert "budget_gate: WARNING" not in done.stdout + done.stderr  # a clean tree


def test_fewer_warps_raise_registers_and_fail_naming_the_kernel(probe_repo, gate_env, tmp_path):
    root, c0 = probe_repo
    out, summary = tmp_path / "gate.json", tmp_path / "summary.md"
    done = run_gate(
        root,
        "--base",
        c0,
        "--head",
        "fewer_warps",
        "--kernel",
        "probe_gemm",
        "--json",
        str(out),
        env_extra=dict(gate_env, GITHUB_STEP_SUMMARY=str(summary)),
    )
    assert done.returncode == 1, done.stdout + done.stderr
    (check,) = json.loads(out.read_text())["targets"]
    growth = check["head"]["registers"] - check["base"]["registers"]
    assert check["status"] == "fail" and growth > 0
    assert (
        f"registers grew by {growth} vs base ({check['base']['registers']} -> {check['head']['registers']}), "
        "allowed 0 (tolerance 0)" in check["reasons"]
    )
    assert any(r.startswith("registers ") and "> budget max_registers" in r for r in check["reasons"])
    assert f"budget_gate: FAIL: 1 target(s) failed: {TARGET}" in done.stdout
    # The suggested edit accepts exactly the measured numbers.
    assert f'"{TARGET}": {{"max_registers": {check["head"]["registers"]}' in done.stdout
    assert "Register budget gate: FAIL" in summary.read_text() and TARGET in summary.read_text()


def test_a_budget_edit_accepts_exactly_what_it_loosens(probe_repo, gate_env, tmp_path):
    root, c0 = probe_repo
    out = tmp_path / "gate.json"
    done = run_gate(
        root,
        "--base",
        c0,
        "--head",
        "fewer_warps_budgeted",
        "--kernel",
        "probe_gemm",
        "--json",
        str(out),
        env_extra=gate_env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (check,) = json.loads(out.read_text())["targets"]
    before, after = check["base"]["registers"], check["head"]["registers"]
    assert (
        f"registers grew by {after - before} vs base ({before} -> {after}): accepted by this change's budget edit "
        f"(max_registers {before} -> {after})" in check["notes"]
    )


def test_spilling_commit_fails(probe_repo, gate_env, tmp_path):
    root, c0 = probe_repo
    out = tmp_path / "gate.json"
    done = run_gate(
        root, "--base", c0, "--head", "spills", "--kernel", "probe_gemm", "--json", str(out), env_extra=gate_env
    )
    assert done.returncode == 1, done.stdout + done.stderr
    (check,) = json.loads(out.read_text())["targets"]
    assert any(r.startswith("spills/scratch must be 0: ") and "spill_store_bytes=" in r for r in check["reasons"])
    assert any(r.startswith("spill_store_bytes grew by") for r in check["reasons"])  # vs base, too
    assert check["suggested_budget"] is None  # spills cannot be budgeted away


def test_renamed_config_is_a_missing_target_and_an_unbudgeted_one(probe_repo, gate_env, tmp_path):
    root, c0 = probe_repo
    out = tmp_path / "gate.json"
    done = run_gate(
        root, "--base", c0, "--head", "renamed", "--kernel", "probe_gemm", "--json", str(out), env_extra=gate_env
    )
    assert done.returncode == 1, done.stdout + done.stderr
    checks = _checks(out)
    assert checks[TARGET]["reasons"] == [
        "no longer compiled at head: listed in the base and the budget but not by head's registry"
    ]
    assert checks["probe_gemm/sm_90/wide"]["reasons"][0].startswith("no budget entry")
    assert '"probe_gemm/sm_90/wide": {"max_registers":' in done.stdout


def test_unparseable_compiler_output_is_a_harness_error(probe_repo, gate_env):
    root, c0 = probe_repo
    done = run_gate(root, "--base", c0, "--head", "unreadable", "--kernel", "probe_gemm", env_extra=gate_env)
    _assert_harness_error(done, f"cannot parse the compiler output of {TARGET}")


# ---------------------------------------------------------------------------
# the canned gfx950 kernel: one resource at a time (issue 10's cases)
# ---------------------------------------------------------------------------


def _run_canned(root: Path, head: str, base: str, out: Path, *args: str) -> subprocess.CompletedProcess:
    return run_gate(root, "--base", base, "--head", head, "--kernel", CANNED, "--json", str(out), *args)


def test_tightening_one_field_does_not_excuse_another_that_grew(probe_repo, tmp_path):
    root, c0 = probe_repo
    out = tmp_path / "gate.json"
    done = _run_canned(root, "tighten_and_grow", c0, out)
    assert done.returncode == 1, done.stdout + done.stderr
    check = _checks(out)[ROOMY]
    # Still under max_registers 128 / max_arch_vgpr 96: only the comparison with the base catches it.
    assert check["reasons"] == [
        "registers grew by 8 vs base (112 -> 120), allowed 0 (tolerance 0)",
        "arch_vgpr grew by 8 vs base (80 -> 88), allowed 0 (tolerance 0)",
    ]
    assert not any("budget edit" in note for note in check["notes"])
    # The entry that accepts it raises exactly those two limits by 8 over the base's.
    assert check["suggested_budget"]["max_registers"] == 136 and check["suggested_budget"]["max_arch_vgpr"] == 104
    assert check["suggested_budget"]["max_sgpr"] == 68  # the tightening stays


def test_sgpr_growth_inside_the_budget_room_fails_beyond_its_tolerance(probe_repo, tmp_path):
    root, c0 = probe_repo
    out = tmp_path / "gate.json"
    done = _run_canned(root, "sgpr_in_room", c0, out)
    assert done.returncode == 1, done.stdout + done.stderr
    check = _checks(out)[ROOMY]
    assert check["head"]["sgpr"] == 71 <= check["budget"]["max_sgpr"]
    assert check["reasons"] == ["sgpr grew by 3 vs base (68 -> 71), allowed 2 (tolerance 2)"]
    # Accepting it on purpose: max_sgpr 80 -> 81 allows 3 over the base (1 loosened + the tolerance of 2).
    assert check["suggested_budget"]["max_sgpr"] == 81


def test_vgprs_traded_for_one_sgpr_pass_with_a_note_and_update_budget_ratchets(probe_repo, tmp_path):
    root, _ = probe_repo
    work = tmp_path / "work"
    repo = git.Repo.clone_from(f"file://{root}", work)
    repo.git.checkout("origin/trade", b="trade", quiet=True)
    out = tmp_path / "gate.json"
    done = _run_canned(work, "HEAD", "origin/main", out, "--update-budget")
    assert done.returncode == 0, done.stdout + done.stderr
    check = _checks(out)[EXACT]
    assert check["notes"] == [
        "sgpr 69 > budget max_sgpr 68 by 1: within its tolerance 2",
        "sgpr grew by 1 vs base (68 -> 69): within its tolerance 2",
    ]
    assert check["tightened_budget"] == dict(check["budget"], max_registers=108, max_arch_vgpr=76)
    assert "Ratchet:" in done.stdout and f'"{EXACT}": {{"max_registers": 108, "max_arch_vgpr": 76' in done.stdout
    # --update-budget wrote only tightenings (max_sgpr stays 68 though the head uses 69) of passing targets.
    written = json.loads((work / "ci/register_budget.json").read_text())["targets"]
    assert written[EXACT] == check["tightened_budget"] and written[EXACT]["max_sgpr"] == 68
    assert written[ROOMY]["max_sgpr"] == 68 and written[ROOMY]["max_registers"] == 112
    assert f"budget_gate: --update-budget: tightened {EXACT}" in done.stdout
    _commit(repo, "ratchet the budget")
    again = _run_canned(work, "HEAD", "origin/main", out)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "Ratchet:" not in again.stdout and json.loads(out.read_text())["tightened_budget"] == {}


def test_more_vgpr_agpr_copies_fail(probe_repo, tmp_path):
    root, c0 = probe_repo
    out = tmp_path / "gate.json"
    done = _run_canned(root, "more_copies", c0, out)
    assert done.returncode == 1, done.stdout + done.stderr
    check = _checks(out)[EXACT]
    assert check["head"]["registers"] == check["base"]["registers"]  # invisible to every register count
    assert "accvgpr_copies_in_loop grew by 4 vs base (2 -> 6), allowed 0 (tolerance 0)" in check["reasons"]
    assert "accvgpr_copies 14 > budget max_accvgpr_copies 10" in check["reasons"]


def test_selectors_matching_nothing_are_a_harness_error(probe_repo, tmp_path):
    root, c0 = probe_repo
    done = _run_canned(root, "noop", c0, tmp_path / "gate.json", "--config", "nope")
    _assert_harness_error(
        done,
        f"--kernel {CANNED} --config nope matches no target at head, base or in the budget; "
        f"known kernels: {CANNED}, probe_gemm; archs: gfx950, sm_90; configs: default, exact, roomy",
    )
    # No verdict is made up: the --json says the gate stopped, and why (the PR comment shows it, issue 30).
    record = json.loads((tmp_path / "gate.json").read_text())
    assert (
        record["verdict"] == "error"
        and record["exit_code"] == 2
        and "--config nope matches no target" in record["error"]
    )
    assert "targets" not in record


# ---------------------------------------------------------------------------
# the base: shallow clones, CI, no base; the working tree
# ---------------------------------------------------------------------------


def test_shallow_clone_with_an_explicit_base_is_a_harness_error(probe_repo, tmp_path):
    """actions/checkout's default clone: one commit, no history to find a merge-base in."""
    root, _ = probe_repo
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", "--depth", "1", f"file://{root}", str(clone)], check=True)
    _assert_harness_error(
        run_gate(clone, "--base", "HEAD~1"),
        "--base 'HEAD~1' does not name a commit; this is a shallow clone: fetch the history, "
        "e.g. `git fetch --unshallow` or `git fetch --deepen=200 origin main:refs/remotes/origin/main`",
    )
    _assert_harness_error(
        run_gate(clone, "--base", "origin/noop"), "`git fetch --deepen=200 origin noop:refs/remotes/origin/noop`"
    )


def test_shallow_clone_without_a_common_ancestor_says_how_to_deepen(probe_repo, tmp_path):
    root, _ = probe_repo
    clone = tmp_path / "clone"
    subprocess.run(
        ["git", "clone", "--quiet", "--depth", "1", "--no-single-branch", f"file://{root}", str(clone)], check=True
    )
    done = run_gate(clone, "--head", "origin/fewer_warps", "--base", "origin/noop")
    _assert_harness_error(done, "and 'origin/noop' have no common ancestor; this is a shallow clone: fetch the history")


def test_a_bare_repository_is_a_harness_error(probe_repo, tmp_path):
    root, _ = probe_repo
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "--quiet", "--bare", str(root), str(bare)], check=True)
    done = run_gate(root, "--repo", str(bare), "--base", "noop")
    _assert_harness_error(done, "is a bare repository: this needs a checkout")


def test_default_base_missing_is_an_error_under_ci_only(probe_repo, gate_env, tmp_path):
    root, _ = probe_repo
    clone = tmp_path / "clone"
    repo = git.Repo.clone_from(f"file://{root}", clone, depth=1, branch="main")
    # On main itself the merge-base is HEAD: nothing to compare, the budget still applies (CI or not).
    done = run_gate(clone, "--kernel", CANNED, env_extra=dict(gate_env, CI="true"))
    assert (
        done.returncode == 0
        and "merge-base of HEAD and origin/main is HEAD itself; checked against budget only" in done.stdout
    )
    repo.git.branch("-m", "main", "topic")
    repo.delete_remote(repo.remote("origin"))
    _assert_harness_error(
        run_gate(clone, env_extra={"GITHUB_ACTIONS": "true"}),
        "no base to compare with: none of origin/main, main exists, and under CI a base is required",
    )
    done = run_gate(clone, "--kernel", CANNED, env_extra=gate_env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no base: none of origin/main, main exists; checked against budget only" in done.stdout


def test_working_tree_edits_are_gated_and_named_when_left_out(probe_repo, gate_env, tmp_path):
    root, _ = probe_repo
    work = tmp_path / "work"
    git.Repo.clone_from(f"file://{root}", work, branch="main")
    _set_line(work / "kernels/triton_mxfp4.py", "CONFIGS", {"default": dict(BASE_CONFIG, num_warps=4)})
    (work / "notes.txt").write_text("untracked\n")
    # Without --working-tree the commit is checked: the edits are named, not silently ignored.
    left_out = run_gate(work, "--base", "origin/main", "--kernel", CANNED, env_extra=gate_env)
    assert left_out.returncode == 0, left_out.stdout + left_out.stderr
    warning = "budget_gate: WARNING: 2 uncommitted file(s) NOT measured (this run checks commit "
    assert warning in left_out.stdout and warning in left_out.stderr
    assert "add --working-tree to include them): kernels/triton_mxfp4.py, notes.txt" in left_out.stdout
    out = tmp_path / "gate.json"
    done = run_gate(
        work,
        "--working-tree",
        "--base",
        "origin/main",
        "--kernel",
        "probe_gemm",
        "--json",
        str(out),
        env_extra=gate_env,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"budget_gate: FAIL: 1 target(s) failed: {TARGET}" in done.stdout and "WARNING" not in done.stdout
    (check,) = json.loads(out.read_text())["targets"]  # compared with HEAD, the commit under the edits
    assert any(r.startswith("registers grew by") for r in check["reasons"])


def _assert_harness_error(done: subprocess.CompletedProcess, message: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("python -m ci.budget: error: ")
    assert message in done.stderr, done.stderr[-2000:]


def test_malformed_budget_and_bad_ref_are_harness_errors(probe_repo, tmp_path):
    root, c0 = probe_repo
    bad = tmp_path / "budget.json"
    good = json.loads((root / "ci/register_budget.json").read_text())
    sm90 = {"max_registers": 10, "max_shared_bytes": 1, "min_occupancy": 1}

    def budget(targets=None, **top) -> str:
        return json.dumps(dict(good, targets={TARGET: sm90} if targets is None else targets, **top))

    cases = {
        '{"schema": "mxfp4-register-budget/2", "targets": {': "not valid JSON",
        budget({TARGET: {"max_registers": 10}}): "missing required key(s) ['max_shared_bytes', 'min_occupancy']",
        budget({TARGET: dict(sm90, max_spills=3)}): "unknown key(s) ['max_spills'] for sm_90",
        budget({TARGET: dict(sm90, max_sgpr=3)}): "unknown key(s) ['max_sgpr'] for sm_90",
        budget({"probe_gemm/default": {}}): "the key must be kernel/arch/config",
        budget({TARGET: dict(sm90, max_registers=-1)}): "max_registers: must be a non-negative integer",
        budget({TARGET: dict(sm90, tolerance={"sgpr": 1})}): "tolerance: unknown field 'sgpr' for sm_90",
        budget(
            {TARGET: dict(sm90, tolerance={"scratch_bytes": 8})}
        ): "must be 0 -- spills and scratch cannot be tolerated",
        budget(default_tolerances={k: v for k, v in DEFAULT_TOLERANCES.items() if k != "sgpr"}): "missing ['sgpr']",
        budget(
            default_tolerances=dict(DEFAULT_TOLERANCES, sgpr={"tolerance": 2, "why": ""})
        ): "say what this tolerance protects",
        budget(schema="mxfp4-register-budget/1"): '"schema" must be',
    }
    for text, message in cases.items():
        bad.write_text(text)
        _assert_harness_error(run_gate(root, "--base", c0, "--head", "noop", "--budget", str(bad)), message)
    _assert_harness_error(
        run_gate(root, "--base", "no-such-branch", "--head", "noop"), "--base 'no-such-branch' does not name a commit"
    )
    _assert_harness_error(run_gate(root, "--head", "no-such-branch"), "--head 'no-such-branch' does not name a commit")
    # --json still says why it stopped: the PR comment reads it (issue 30).
    out = tmp_path / "verdict.json"
    _assert_harness_error(
        run_gate(root, "--base", "no-such-branch", "--head", "noop", "--json", str(out)), "does not name a commit"
    )
    record = json.loads(out.read_text())
    assert record["verdict"] == "error" and record["exit_code"] == 2 and record["schema"] == "mxfp4-budget-gate/2"
    assert "--base 'no-such-branch' does not name a commit" in record["error"]


# ---------------------------------------------------------------------------
# the decision logic on given numbers
# ---------------------------------------------------------------------------


def _usage(registers: int, arch: str = "sm_90", **fields) -> dict:
    """A resource record for the decision-logic tests (the numbers are inputs, not measurements)."""
    if arch == "sm_90":
        usage = {
            "registers": registers,
            "register_limit": 255,
            "arch_vgpr": None,
            "agpr": None,
            "sgpr": None,
            "shared_bytes": 1024,
            "shared_limit": 232448,
            "occupancy": 8,
            "occupancy_unit": "warps/SM",
            "vgpr_spills": None,
            "sgpr_spills": None,
            "spill_store_bytes": 0,
            "spill_load_bytes": 0,
            "accvgpr_copies": None,
            "accvgpr_copies_in_loop": None,
        }
    else:
        usage = {
            "registers": registers,
            "register_limit": 512,
            "arch_vgpr": registers - 32,
            "agpr": 32,
            "sgpr": 60,
            "shared_bytes": 16384,
            "shared_limit": 163840,
            "occupancy": 4,
            "occupancy_unit": "waves/SIMD",
            "vgpr_spills": 0,
            "sgpr_spills": 0,
            "spill_store_bytes": None,
            "spill_load_bytes": None,
            "accvgpr_copies": 10,
            "accvgpr_copies_in_loop": 2,
        }
    return dict(usage, arch=arch, threads_per_group=256, scratch_bytes=0, dynamic_stack=False, **fields)


def _budget(entries: dict, overrides: dict | None = None) -> Budget:
    return Budget(entries, {name: spec["tolerance"] for name, spec in DEFAULT_TOLERANCES.items()}, overrides or {})


def _one(head_usage: dict, base_usage: dict, entry: dict, base_entry: dict | None, target="k/gfx950/a"):
    base_budget = _budget({} if base_entry is None else {target: base_entry})
    (check,) = evaluate(
        {target: {"ok": True, "usage": head_usage}},
        {target: {"ok": True, "usage": base_usage}},
        _budget({target: entry}),
        base_budget,
    )
    return check


GFX_ENTRY = {
    "max_registers": 112,
    "max_arch_vgpr": 80,
    "max_agpr": 32,
    "max_sgpr": 60,
    "max_shared_bytes": 16384,
    "min_occupancy": 4,
    "max_accvgpr_copies": 10,
    "max_accvgpr_copies_in_loop": 2,
}


def test_a_loosened_limit_exempts_its_own_field_by_exactly_the_loosening():
    grown = _usage(120, "gfx950")  # +8 registers, +8 arch VGPRs
    by_less = _one(grown, _usage(112, "gfx950"), dict(GFX_ENTRY, max_registers=120, max_arch_vgpr=84), GFX_ENTRY)
    assert by_less.status == "fail"
    assert by_less.reasons == [
        "arch_vgpr 88 > budget max_arch_vgpr 84",
        "arch_vgpr grew by 8 vs base (80 -> 88), allowed 4 (tolerance 0 + 4 loosened by this "
        "change's budget edit: max_arch_vgpr 80 -> 84)",
    ]
    assert by_less.suggested_budget["max_arch_vgpr"] == 88
    exactly = _one(grown, _usage(112, "gfx950"), dict(GFX_ENTRY, max_registers=120, max_arch_vgpr=88), GFX_ENTRY)
    assert exactly.status == "pass", exactly.reasons
    assert (
        "registers grew by 8 vs base (112 -> 120): accepted by this change's budget edit (max_registers 112 -> 120)"
        in exactly.notes
    )
    # A tightened field exempts nothing: the pull request (+8 VGPRs, max_sgpr tightened).
    tightened = _one(
        grown,
        _usage(112, "gfx950"),
        dict(GFX_ENTRY, max_registers=128, max_arch_vgpr=96, max_sgpr=60),
        dict(GFX_ENTRY, max_registers=128, max_arch_vgpr=96, max_sgpr=64),
    )
    assert tightened.status == "fail" and [r.split(",")[0] for r in tightened.reasons] == [
        "registers grew by 8 vs base (112 -> 120)",
        "arch_vgpr grew by 8 vs base (80 -> 88)",
    ]


def test_a_new_entry_is_accepted_whole_only_for_a_target_the_base_did_not_have():
    head = {"k/gfx950/a": {"ok": True, "usage": _usage(120, "gfx950")}}
    entry = dict(GFX_ENTRY, max_registers=120, max_arch_vgpr=88)
    (new,) = evaluate(head, {}, _budget({"k/gfx950/a": entry}), _budget({}))
    assert new.status == "pass" and new.notes == []
    # The base had it, unbudgeted: its measured numbers stand in for the missing entry.
    base = {"k/gfx950/a": {"ok": True, "usage": _usage(112, "gfx950")}}
    (had,) = evaluate(head, base, _budget({"k/gfx950/a": dict(entry, max_arch_vgpr=84)}), _budget({}))
    assert had.status == "fail" and "arch_vgpr grew by 8 vs base (80 -> 88)" in had.reasons[-1]
    assert had.notes[0].startswith("the base had this target but no budget entry")
    (accepted,) = evaluate(head, base, _budget({"k/gfx950/a": entry}), None)  # a base without a budget file
    assert accepted.status == "pass", accepted.reasons


def test_sgpr_tolerance_covers_a_pair_but_never_an_occupancy_step():
    base = _usage(112, "gfx950", sgpr=68)
    within = _one(_usage(112, "gfx950", sgpr=70), base, dict(GFX_ENTRY, max_sgpr=80), dict(GFX_ENTRY, max_sgpr=80))
    assert within.status == "pass" and within.notes == ["sgpr grew by 2 vs base (68 -> 70): within its tolerance 2"]
    beyond = _one(_usage(112, "gfx950", sgpr=71), base, dict(GFX_ENTRY, max_sgpr=80), dict(GFX_ENTRY, max_sgpr=80))
    assert beyond.status == "fail" and beyond.reasons == ["sgpr grew by 3 vs base (68 -> 71), allowed 2 (tolerance 2)"]
    # GFX9 rule: up to 100 SGPRs allow 8 waves/SIMD, 101 allow 7: a tolerance cannot cover that step.
    step = _one(
        _usage(112, "gfx950", sgpr=101),
        _usage(112, "gfx950", sgpr=99),
        dict(GFX_ENTRY, max_sgpr=104),
        dict(GFX_ENTRY, max_sgpr=104),
    )
    assert step.status == "fail" and step.reasons == [
        "sgpr grew by 2 vs base (99 -> 101), which crosses an occupancy step (sgpr alone allows 8 -> 7 waves/SIMD): "
        "no tolerance covers that, only a budget edit"
    ]
    assert step.suggested_budget["max_sgpr"] == 106  # loosened by the whole growth
    # Against the budget alone (no base) the same: within the tolerance of max_sgpr 100, but a lost step.
    (over,) = evaluate(
        {"k/gfx950/a": {"ok": True, "usage": _usage(112, "gfx950", sgpr=101)}},
        None,
        _budget({"k/gfx950/a": dict(GFX_ENTRY, max_sgpr=100)}),
        None,
    )
    assert over.status == "fail" and over.reasons == [
        "sgpr 101 > budget max_sgpr 100, which crosses an occupancy step (sgpr alone allows 8 -> 7 waves/SIMD): "
        "no tolerance covers that, only a budget edit"
    ]
    (far,) = evaluate(
        {"k/gfx950/a": {"ok": True, "usage": _usage(112, "gfx950", sgpr=63)}},
        None,
        _budget({"k/gfx950/a": GFX_ENTRY}),
        None,
    )
    assert far.reasons == ["sgpr 63 > budget max_sgpr 60 by 3, more than its tolerance 2"]
    # A per-target override raises the tolerance, and says so.
    override = Budget(
        {"k/gfx950/a": dict(GFX_ENTRY, max_sgpr=80)}, _budget({}).default_tolerances, {"k/gfx950/a": {"sgpr": 3}}
    )
    (raised,) = evaluate(
        {"k/gfx950/a": {"ok": True, "usage": _usage(112, "gfx950", sgpr=71)}},
        {"k/gfx950/a": {"ok": True, "usage": base}},
        override,
        _budget({"k/gfx950/a": dict(GFX_ENTRY, max_sgpr=80)}),
    )
    assert raised.status == "pass" and raised.notes == [
        "sgpr grew by 3 vs base (68 -> 71): within its tolerance 3; this change raises its tolerance 2 -> 3"
    ]


def test_every_field_is_compared_with_the_base():
    base = _usage(112, "gfx950")
    roomy = {
        "max_registers": 200,
        "max_arch_vgpr": 200,
        "max_agpr": 64,
        "max_sgpr": 100,
        "max_shared_bytes": 65536,
        "min_occupancy": 1,
        "max_accvgpr_copies": 100,
        "max_accvgpr_copies_in_loop": 100,
    }
    changes = {
        "agpr": dict(agpr=36, registers=116),
        "shared_bytes": dict(shared_bytes=16384 + 512),
        "occupancy": dict(occupancy=3),
        "accvgpr_copies": dict(accvgpr_copies=11),
        "accvgpr_copies_in_loop": dict(accvgpr_copies_in_loop=3),
    }
    for field_name, change in changes.items():
        check = _one(dict(base, **change), base, roomy, roomy)
        assert check.status == "fail" and any(r.startswith(f"{field_name} ") for r in check.reasons), (
            field_name,
            check.reasons,
        )
    drop = _one(dict(base, occupancy=3), base, roomy, roomy)
    assert "occupancy dropped by 1 vs base (4 -> 3), allowed 0 (tolerance 0)" in drop.reasons


def test_tolerance_and_intentional_removal():
    entry = {"max_registers": 200, "max_shared_bytes": 4096, "min_occupancy": 8}
    budget = _budget({"k/sm_90/a": entry}, {"k/sm_90/a": {"registers": 2}})
    base = {"k/sm_90/a": {"ok": True, "usage": _usage(100)}, "k/sm_90/gone": {"ok": True, "usage": _usage(90)}}
    base_budget = _budget({"k/sm_90/a": entry, "k/sm_90/gone": entry})
    within, over = (
        evaluate({"k/sm_90/a": {"ok": True, "usage": _usage(r)}}, base, budget, base_budget) for r in (102, 103)
    )
    assert [c.status for c in within] == ["pass", "removed"]
    assert [c.status for c in over] == ["fail", "removed"]
    assert over[0].reasons == ["registers grew by 3 vs base (100 -> 103), allowed 2 (tolerance 2)"]
    # Without deleting its budget entry, a vanished target fails.
    (kept,) = [c for c in evaluate({}, base, base_budget, base_budget) if c.target == "k/sm_90/gone"]
    assert kept.status == "fail" and kept.reasons[0].startswith("no longer compiled at head")


def test_the_ratchet_only_tightens_and_only_passing_targets(tmp_path):
    entry = dict(GFX_ENTRY, max_registers=120, max_arch_vgpr=88)
    head = {
        "k/gfx950/a": {"ok": True, "usage": _usage(112, "gfx950", sgpr=61)},  # 1 SGPR over, within tolerance
        "k/gfx950/b": {"ok": True, "usage": _usage(112, "gfx950", agpr=40)},
    }  # fails on AGPRs
    checks = {c.target: c for c in evaluate(head, None, _budget({"k/gfx950/a": entry, "k/gfx950/b": entry}), None)}
    assert checks["k/gfx950/a"].tightened_budget == dict(
        entry, max_registers=112, max_arch_vgpr=80
    )  # max_sgpr stays 60
    assert checks["k/gfx950/b"].status == "fail" and checks["k/gfx950/b"].tightened_budget is None
    path = tmp_path / "budget.json"
    path.write_text(
        json.dumps(
            {
                "schema": BUDGET_SCHEMA,
                "default_tolerances": DEFAULT_TOLERANCES,
                "targets": {"k/gfx950/a": dict(entry, max_agpr=30)},
            },
            indent=2,
        )
    )
    # A looser value than the file's (max_agpr 32 > 30) is never written; a target the file lacks is not added.
    changed = update_budget_file(path, {"k/gfx950/a": checks["k/gfx950/a"].tightened_budget, "k/gfx950/b": entry})
    assert changed == {"k/gfx950/a": {"max_registers": 112, "max_arch_vgpr": 80}}
    written = parse_budget(path.read_text(), "written").entries
    assert written == {"k/gfx950/a": dict(entry, max_registers=112, max_arch_vgpr=80, max_agpr=30)}


def test_a_legacy_base_budget_is_read_for_its_limits():
    legacy = json.dumps(
        {
            "schema": "mxfp4-register-budget/1",
            "default_tolerance": 0,
            "targets": {"k/gfx950/a": {"max_registers": 112, "max_sgpr": 60, "tolerance": 0}},
        }
    )
    base_budget = parse_budget(legacy, "base", allow_legacy=True)
    assert base_budget.entries == {"k/gfx950/a": {"max_registers": 112, "max_sgpr": 60}}
    with pytest.raises(Exception, match="schema"):
        parse_budget(legacy, "head")


def test_help_explains_the_gate():
    done = subprocess.run([sys.executable, "-m", "ci.budget", "--help"], cwd=PROJECT, capture_output=True, text=True)
    assert done.returncode == 0
    for phrase in (
        "--base",
        "--working-tree",
        "--update-budget",
        "docs/BUDGET_GATE.md",
        "exit codes:\n  0    pass\n  1    the gate failed",
    ):
        assert phrase in done.stdout, phrase
    why = (PROJECT / "docs" / "BUDGET_GATE.md").read_text()  # the reasons live in the docs, which --help names
    for phrase in ("tolerance", "spills", "160 KiB", "no base", "git fetch", "CI=true"):
        assert phrase in why, phrase


# ---------------------------------------------------------------------------
# the real FlyDSL kernel
# ---------------------------------------------------------------------------


def test_flydsl_kernel_vgpr_increase_fails(tmp_path, gate_env):
    """The real FlyDSL kernel: accumulators left to LLVM instead of pinned to AGPRs -> more arch VGPRs, copies in the
    loop.
    """
    root = tmp_path / "project"
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
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
    done = run_gate(
        root,
        "--base",
        c0,
        "--kernel",
        "flydsl_gfx950_4wave",
        "--config",
        "default",
        "--json",
        str(out),
        env_extra=gate_env,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    (check,) = json.loads(out.read_text())["targets"]
    assert check["target"] == "flydsl_gfx950_4wave/gfx950/default" and check["status"] == "fail"
    assert check["head"]["arch_vgpr"] > check["base"]["arch_vgpr"]
    assert any(r.startswith("arch_vgpr grew by") for r in check["reasons"])
    # With the arch VGPRs full, LLVM parks values in AGPRs: copies inside the K loop appear.
    assert check["base"]["accvgpr_copies_in_loop"] == 0 < check["head"]["accvgpr_copies_in_loop"]
    assert any(r.startswith("accvgpr_copies_in_loop grew by") for r in check["reasons"])
    assert "budget_gate: FAIL: 1 target(s) failed: flydsl_gfx950_4wave/gfx950/default" in done.stdout


# ---------------------------------------------------------------------------
# the budget file, the reason codes, the front
# ---------------------------------------------------------------------------


def test_a_key_given_twice_in_the_budget_is_an_error_naming_the_key_and_the_file(tmp_path):
    good = json.loads((PROJECT / "ci/register_budget.json").read_text())
    text = json.dumps(good, indent=2)
    twice_at_top = text.replace('"targets": {', '"schema": "mxfp4-register-budget/2",\n  "targets": {', 1)
    entry = '"max_registers": '
    twice_in_entry = text.replace(entry, f"{entry}1, {entry}", 1)
    for doubled, key in ((twice_at_top, "schema"), (twice_in_entry, "max_registers")):
        assert doubled != text
        with pytest.raises(HarnessError, match=re.escape(f"my/budget.json: duplicate key {key!r}")):
            parse_budget(doubled, "my/budget.json")
    # --update-budget never rewrites such a file either (json would keep the last value without a word).
    path = tmp_path / "budget.json"
    path.write_text(twice_in_entry)
    with pytest.raises(HarnessError, match="duplicate key 'max_registers'"):
        update_budget_file(path, {})


def test_outcomes_carry_reason_codes_and_the_decision_reads_only_the_codes():
    spilled = _usage(120, "gfx950", vgpr_spills=4)
    (check,) = evaluate(
        {"k/gfx950/a": {"ok": True, "usage": spilled}},
        {"k/gfx950/a": {"ok": True, "usage": _usage(112, "gfx950")}},
        _budget({"k/gfx950/a": GFX_ENTRY}),
        _budget({"k/gfx950/a": GFX_ENTRY}),
    )
    assert {Reason.SPILLS, Reason.OVER_BUDGET, Reason.WORSE_THAN_BASE} <= check.codes and check.status == "fail"
    assert check.suggested_budget is None  # SPILLS is not budgetable: decided by the code, not the sentence
    grown = {f.metric for f in check.findings if f.code is Reason.WORSE_THAN_BASE}
    assert grown == {"registers", "arch_vgpr", "vgpr_spills"}
    # A sentence reworded would change nothing: the status comes from Reason.fails.
    assert check.failed == any(f.code.fails for f in check.findings)
    within = _one(
        _usage(112, "gfx950", sgpr=70),
        _usage(112, "gfx950", sgpr=68),
        dict(GFX_ENTRY, max_sgpr=80),
        dict(GFX_ENTRY, max_sgpr=80),
    )
    assert [f.code for f in within.findings] == [Reason.WORSE_THAN_BASE_WITHIN_TOLERANCE] and within.status == "pass"
    assert within.findings[0].to_json()["code"] == "WORSE_THAN_BASE_WITHIN_TOLERANCE"
    step = _one(
        _usage(112, "gfx950", sgpr=101),
        _usage(112, "gfx950", sgpr=99),
        dict(GFX_ENTRY, max_sgpr=104),
        dict(GFX_ENTRY, max_sgpr=104),
    )
    (lost,) = step.findings
    assert lost.code is Reason.WORSE_THAN_BASE and (lost.step.then, lost.step.now) == (8, 7)


def test_every_reason_has_a_sentence():
    from ci.budget import wording

    assert set(wording._SENTENCES) == set(Reason)


def test_options_are_checked_before_any_work(tmp_path):
    """An unwritable --json is exit 2 at once: no checkout, no compile (here, not even a git repository)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")

    def gate(*args: str) -> subprocess.CompletedProcess:  # this checkout's gate, run outside any repository
        env = dict(os.environ, PYTHONPATH=str(PROJECT))
        return subprocess.run(
            [sys.executable, "-m", "ci.budget", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    done = gate("--json", str(blocker / "gate.json"))
    _assert_harness_error(done, f"--json {blocker / 'gate.json'}: cannot write there")
    assert "measuring" not in done.stderr and "not inside a git repository" not in done.stderr
    _assert_harness_error(
        gate("--working-tree", "--head", "HEAD~1"), "--head HEAD~1 and --working-tree exclude each other"
    )
    _assert_harness_error(
        gate("--budget", str(tmp_path / "none.json")), f"budget file {tmp_path / 'none.json'} does not exist"
    )
    with pytest.raises(OptionsError, match="--kernel 'a/b': expected a name or a pattern"):
        GateOptions.checked(kernel="a/b")
    with pytest.raises(OptionsError, match="--arch 'gfx942': expected a comma-separated subset of sm_90, gfx950"):
        GateOptions.checked(arch="gfx942")
    assert GateOptions.checked(kernel="k", arch="gfx950").selects("k/gfx950/c")
    assert not GateOptions.checked(kernel="k", arch="gfx950").selects("k/sm_90/c")
    # The shared selectors' one meaning (ci.common.options): repeatable names with * and ?, archs comma-separated.
    both = GateOptions.checked(kernel=["flydsl_*", "k"], arch="gfx950,sm_90", config=["c?"])
    assert (
        both.selects("flydsl_gfx950_4wave/gfx950/c1")
        and both.selects("k/sm_90/c2")
        and not both.selects("k/sm_90/default")
    )


def test_a_base_that_does_not_import_does_not_block_its_fix(probe_repo, tmp_path):
    """Issue 18: a broken base makes the head's targets new (checked against the budget only); exit 0, not 2."""
    root, c0 = probe_repo
    repo = git.Repo(root)
    canned = root / "kernels/flydsl_gfx950.py"
    fixed = canned.read_text()
    _branch_from(repo, c0, "broken_base")
    canned.write_text(fixed + "\nraise RuntimeError('injected: the base does not import')\n")
    broken = _commit(repo, "break the canned kernel's import")
    _branch_from(repo, broken, "fix_broken_base")
    canned.write_text(fixed)
    _commit(repo, "fix it")
    repo.git.checkout("main", quiet=True)
    out = tmp_path / "gate.json"
    done = _run_canned(root, "fix_broken_base", "broken_base", out)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        "the base could not be measured" in done.stdout
        and "every target is new, checked against budget only" in done.stdout
    )
    assert "injected: the base does not import" in done.stderr and "Traceback" not in done.stdout
    verdict = json.loads(out.read_text())
    assert verdict["verdict"] == "pass" and {c["target"] for c in verdict["targets"]} == {EXACT, ROOMY}
    # Only the head's own failures fail: the same break at head is still a harness error.
    _assert_harness_error(
        _run_canned(root, "broken_base", c0, tmp_path / "head.json"), "ci.budget.resources failed in the head"
    )
