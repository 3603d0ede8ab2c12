"""Issue 17's FlyDSL case: a PR that changes one FlyDSL pipeline parameter shows its gfx950 ISA and resource diff.

A temporary git repository holds a copy of kernels/ (tests/test_code_fingerprint.py's
helpers); the head sets the FlyDSL kernel's ``default`` config to
``agpr_accumulators: False`` (the accumulators left to LLVM instead of pinned to
AGPRs), a config parameter that still compiles (it is the ``intrinsic_acc``
config's setting) and changes the code. ``ci.speed.changes`` for gfx950 must
then put the instruction-mix and register/LDS table of that config in its
Markdown, and leave every Triton benchmark "unchanged (identical code)". One
compile per side and target: FlyDSL and Triton both compile for gfx950 on this
CPU (ld.lld); 18 s of CPU, ~35 s wall on the shared 2-core machine: marked slow.
"""

from __future__ import annotations

import git
import pytest
from test_code_fingerprint import _sub, _tree

from ci.speed import changes

KERNELS = ("flydsl_gfx950_4wave", "triton_dot_scaled")
TARGET = "flydsl_gfx950_4wave/gfx950/default"
PARAMETER = _sub(
    r'"default": \{"lds_stages": 2, "agpr_accumulators": True\}',
    '"default": {"lds_stages": 2, "agpr_accumulators": False}',
)


@pytest.mark.slow
def test_one_flydsl_parameter_shows_the_gfx950_mix_and_resources_and_leaves_triton_unchanged(tmp_path):
    repo_dir = _tree(tmp_path, "repo")
    repo = git.Repo.init(repo_dir, initial_branch="main")
    repo.git.add(A=True)
    repo.index.commit("c0")
    init = repo_dir / "kernels/flydsl_gfx950/__init__.py"
    init.write_text(PARAMETER(init.read_text()))
    repo.git.add(A=True)
    repo.index.commit("flydsl: default config without AGPR-pinned accumulators")

    options = changes.Options(
        base="HEAD~1", head="HEAD", repo=repo_dir, archs=("gfx950",), json=None, costs=None, kernels=KERNELS
    )
    data, text = changes.run(options, log=lambda line: None)
    print(text)

    decisions = data["by_arch"]["gfx950"]
    flydsl = {i: r["summary"] for i, r in decisions.items() if i.startswith("flydsl_gfx950_4wave[default]")}
    triton = {i: r["summary"] for i, r in decisions.items() if i.startswith("triton_dot_scaled[")}
    # The configs live in the kernel's module, so its launch path changed too; only default's code did.
    launch = "changed: launch path: kernels/flydsl_gfx950/__init__.py"
    assert flydsl and set(flydsl.values()) == {f"{launch}; gfx950 code of default"}, flydsl
    other = {r["summary"] for i, r in decisions.items() if i.startswith("flydsl_gfx950_4wave[intrinsic_acc]")}
    assert other == {launch}, other
    assert triton and set(triton.values()) == {"unchanged (identical code)"}, triton
    assert data["gpu_needed"] is True and set(data["to_measure"]) == {i for i in decisions if i.startswith("flydsl")}

    (change,) = data["code_changes"]  # only the changed target: the Triton and intrinsic_acc code is the same
    assert change["target"] == TARGET and change["dialect"] == "amdgcn"
    mix = {row["instructions"]: row for row in change["instruction_mix"]}
    assert mix["scaled MFMA"]["delta"] == ""  # the same 128 MFMAs ...
    assert mix["v_accvgpr move"]["delta"] not in ("", "+0")  # ... with the accumulators moved differently
    resources = {row["resource"]: row for row in change["resources"]}
    assert resources["agpr"]["delta"] and resources["registers"]["base"] != resources["registers"]["head"]
    assert resources["shared_bytes"]["delta"] == "" and resources["shared_bytes"]["base"] == "131072"  # LDS as it was

    assert f"#### {TARGET}: instruction mix (amdgcn, static counts)" in text and "Resources:" in text
    assert "| v_accvgpr move" in text and "| agpr" in text and "| shared_bytes" in text
    assert text.count("unchanged (identical code)") >= len(triton)
