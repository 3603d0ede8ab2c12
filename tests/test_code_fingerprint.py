"""Speed fingerprints on edited copies of the project's kernels/, and the instruction mix.

Each tree is a copy of kernels/ with one edit; the fingerprints compile the real
Triton kernels for sm_90 (compile-only, ptxas and cuobjdump from the Triton
wheel) in a child process. Only triton_dot_scaled and torch_dequant are
fingerprinted, to keep this file near a minute on a 2-core CPU; trees with the
same kernels/ bytes are compiled once (ci.common.code_fingerprint's cache).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import git
import pytest

from ci.common.code_fingerprint import Outcome, UnknownReason, compare, fingerprint_tree
from ci.common.launch_path import normalized_source
from ci.speed import changes
from harness.instruction_mix import instruction_mix, mix_diff, mnemonics

PROJECT = Path(__file__).resolve().parents[1]
ARCHS = ("sm_90",)
KERNELS = ("triton_dot_scaled", "torch_dequant")
CONFIG = "m128_n128_k128_w8_s3"
OTHER_CONFIG = "m128_n256_k64_w8_s3"
TRITON_8K = f"triton_dot_scaled[{CONFIG}]/square_m08192_n08192_k08192"
TORCH_8K = "torch_dequant[bf16]/square_m08192_n08192_k08192"


def _tree(root: Path, name: str, edits: dict[str, callable] | None = None) -> Path:
    tree = root / name
    shutil.copytree(PROJECT / "kernels", tree / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    for rel, edit in (edits or {}).items():
        path = tree / rel
        new = edit(path.read_text())
        assert new != path.read_text(), f"the edit of {rel} changed nothing"
        path.write_text(new)
    return tree


def _fingerprints(tree: Path):
    return fingerprint_tree(tree, ARCHS, kernels=KERNELS)


def _sub(pattern: str, replacement: str, count: int = 1):
    def edit(text: str) -> str:
        new, n = re.subn(pattern, replacement, text, count=count, flags=re.M)
        assert n, f"pattern {pattern!r} not found"
        return new

    return edit


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("fingerprint")


@pytest.fixture(scope="module")
def base(root):
    return _fingerprints(_tree(root, "base"))


def _sm90(base_fp, head_fp):
    return compare(base_fp, head_fp)["sm_90"]


def test_comment_docstring_and_format_edits_are_identical(root, base):
    cosmetic = _sub(r'^"""MXFP4 GEMMs in Triton', '# A comment that shifts every line.\n\n"""MXFP4 GEMMs, in Triton')
    reformat = _sub(
        r'grid = \(triton\.cdiv\(m, config\["BLOCK_M"\]\) \* ',
        'grid = (\n            triton.cdiv(m, config["BLOCK_M"])  # tiles along M\n            * ',
    )
    docstring = _sub(r'"""e8m0 bytes -> float32', '"""Decode e8m0 bytes -> float32')
    head = _fingerprints(
        _tree(root, "cosmetic", {"kernels/triton_mxfp4.py": lambda t: docstring(reformat(cosmetic(t)))})
    )
    results = _sm90(base, head)
    assert {r.outcome for r in results.values()} == {Outcome.IDENTICAL}, {k: r.describe() for k, r in results.items()}
    # Line numbers moved, so the compiled code really was rebuilt and normalized to the same digest.
    assert head.fingerprints[("triton_dot_scaled", CONFIG, "sm_90")].device_code.known


def test_launch_path_edit_differs_in_launch_path_only(root, base):
    edit = _sub(r'grid = \(triton\.cdiv\(m, config\["BLOCK_M"\]\)', 'grid = (triton.cdiv(m + 0, config["BLOCK_M"])')
    head = _fingerprints(_tree(root, "launch", {"kernels/triton_mxfp4.py": edit}))
    result = _sm90(base, head)[TRITON_8K]
    assert result.outcome is Outcome.DIFFERS
    assert result.what == ("launch path: kernels/triton_mxfp4.py",)
    assert _sm90(base, head)[TORCH_8K].outcome is Outcome.IDENTICAL


def test_config_edit_differs_in_device_code_of_that_config(root, base):
    edit = _sub(
        r'"m128_n128_k128_w8_s3": _config\(128, 128, 128, num_warps=8, num_stages=3\)',
        '"m128_n128_k128_w8_s3": _config(128, 128, 128, num_warps=8, num_stages=2)',
    )
    head = _fingerprints(_tree(root, "stages", {"kernels/triton_mxfp4.py": edit}))
    results = _sm90(base, head)
    assert f"sm_90 code of {CONFIG}" in results[TRITON_8K].what
    key, other = ("triton_dot_scaled", CONFIG, "sm_90"), ("triton_dot_scaled", OTHER_CONFIG, "sm_90")
    assert head.fingerprints[key].device_code.digest != base.fingerprints[key].device_code.digest
    assert head.fingerprints[other].device_code.digest == base.fingerprints[other].device_code.digest


def test_imported_module_edit_differs(root, base):
    head = _fingerprints(_tree(root, "mxfp4", {"kernels/mxfp4.py": _sub(r"^BLOCK_SIZE = 32", "BLOCK_SIZE = 16 * 2")}))
    results = _sm90(base, head)
    assert "launch path: kernels/mxfp4.py" in results[TRITON_8K].what
    assert "launch path: kernels/mxfp4.py" in results[TORCH_8K].what


def test_torch_dequant_only_change_leaves_triton_unchanged(root, base):
    edit = _sub(r"dtype = _DTYPES\[config\[\"dtype\"\]\]", 'dtype = _DTYPES[str(config["dtype"])]')
    results = _sm90(base, _fingerprints(_tree(root, "torch", {"kernels/torch_dequant.py": edit})))
    for bench_id, result in results.items():
        expected = Outcome.DIFFERS if bench_id.startswith("torch_dequant") else Outcome.IDENTICAL
        assert result.outcome is expected, (bench_id, result.describe())
    assert results[TORCH_8K].what == ("launch path: kernels/torch_dequant.py",)


def test_module_raising_on_import_is_measured_with_the_reason(root, base):
    edit = _sub(r"^_E8M0_MIN = ", 'raise RuntimeError("broken on purpose")\n_E8M0_MIN = ')
    head = _fingerprints(_tree(root, "raises", {"kernels/triton_mxfp4.py": edit}))
    results = _sm90(base, head)
    assert results, "the base's benchmarks are listed when the head's registry cannot be read"
    for result in results.values():
        assert result.outcome is Outcome.UNKNOWN and result.reason is UnknownReason.REGISTRY_FAILED
        assert "broken on purpose" in result.detail
        assert result.describe().startswith("measure: ")


def test_failing_compile_is_measured_with_the_reason(root, base):
    edit = _sub(r"num_warps=8, num_stages=3\)", "num_warps=6, num_stages=3)")  # not a power of two
    results = _sm90(base, _fingerprints(_tree(root, "nocompile", {"kernels/triton_mxfp4.py": edit})))
    result = results[TRITON_8K]
    assert result.outcome is Outcome.UNKNOWN and result.reason is UnknownReason.COMPILE_FAILED
    assert "num_warps" in result.detail and result.describe().startswith("measure: the compile-only build failed")


def test_normalized_source_ignores_comments_docstrings_and_layout_only():
    a = 'def f(x):\n    """Doc."""\n    return x + 1  # one\n'
    b = "def f(x):\n\n    return (x +\n            1)\n"
    assert normalized_source(a) == normalized_source(b)
    assert normalized_source(a) != normalized_source("def f(x):\n    return x + 2\n")


def test_changes_command_json_on_a_torch_only_pr(root, base):
    repo_dir = _tree(root, "repo")
    repo = git.Repo.init(repo_dir, initial_branch="main")
    repo.git.add(A=True)
    repo.index.commit("c0")
    path = repo_dir / "kernels/torch_dequant.py"
    path.write_text(
        _sub(r"dtype = _DTYPES\[config\[\"dtype\"\]\]", 'dtype = _DTYPES[str(config["dtype"])]')(path.read_text())
    )
    repo.git.add(A=True)
    repo.index.commit("torch only")
    options = changes.Options(
        base="HEAD~1", head="HEAD", repo=repo_dir, archs=ARCHS, json=None, costs=None, kernels=KERNELS
    )
    data, text = changes.run(options, log=lambda line: None)
    assert data["gpu_needed"] is True
    assert TORCH_8K in data["to_measure"] and TRITON_8K in data["unchanged"]
    assert not set(data["to_measure"]) & set(data["unchanged"])
    assert data["saved"]["benchmarks_skipped"] == len(data["unchanged"]) > 0 and data["saved"]["estimated"]
    assert "unchanged (identical code)" in text and "changed: launch path: kernels/torch_dequant.py" in text


# ---------------------------------------------------------------------------
# instruction mix
# ---------------------------------------------------------------------------

AMD_SNIPPET = """\
\t.text
kernel:
\tv_mfma_scale_f32_16x16x128_f8f6f4 a[0:3], v[0:7], v[8:15], a[0:3] ; scaled
\tv_mfma_f32_16x16x32_bf16 v[0:3], v[4:7], v[8:11], v[0:3]
\tbuffer_load_dwordx4 v[0:3], v4, s[0:3], 0 offen
\tglobal_store_dwordx4 v[0:1], v[2:5], off
\tds_read_b128 v[0:3], v4
\tds_write_b64 v0, v[1:2]
\ts_waitcnt vmcnt(0)
\ts_nop 1
\tv_accvgpr_read_b32 v0, a0
\ts_cbranch_scc1 .LBB0_2
\ts_barrier
.LBB0_2:
\ts_endpgm
\t.amdgpu_metadata
amdhsa.kernels:
  - .name: kernel
\t.end_amdgpu_metadata
"""

SASS_SNIPPET = """\
        /*0000*/                   LDG.E.128 R4, desc[UR4][R2.64] ;      /* 0x0000000402047981 */
        /*0010*/                   STS.128 [R0], R4 ;                   /* 0x0000000400007388 */
        /*0020*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;        /* 0x0000000000007b1d */
        /*0030*/                   LDSM.16.M88.4 R8, [R0] ;             /* 0x000000000008783b */
        /*0040*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], R24 ;  /* 0x00e00008181879f0 */
        /*0050*/              @!P0 BRA 0x10 ;                           /* 0x0000000000008947 */
        /*0060*/                   STG.E.U16 desc[UR4][R2.64], R4 ;     /* 0x0000000402007986 */
"""

PTX_SNIPPET = """\
.visible .entry k(
\t.param .u64 k_param_0
)
{
\tld.global.v4.b32 {%r1, %r2, %r3, %r4}, [%rd1];
\tcp.async.cg.shared.global [%r5], [%rd2], 16;
\tbar.sync 0;
\tldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r6, %r7, %r8, %r9}, [%r10];
\twgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%f1}, %rd3, %rd4, 1, 1, 1, 0, 1;
\t@%p1 bra $L__BB0_1;
$L__BB0_1:
\tst.global.b16 [%rd5], %rs1; // store
\tret;
}
"""


def test_amdgcn_mix_counts_each_category_and_skips_metadata():
    mix = instruction_mix("amdgcn", AMD_SNIPPET)
    for name in (
        "scaled MFMA",
        "other MFMA",
        "global/buffer load",
        "global/buffer store",
        "LDS read",
        "LDS write",
        "s_waitcnt",
        "s_nop",
        "v_accvgpr move",
        "branch",
        "barrier",
    ):
        assert mix[name] == 1, (name, mix)
    assert mix["all instructions"] == 12  # the 11 above and s_endpgm; no metadata key counted


def test_sass_and_ptx_mix():
    sass = instruction_mix("sass", SASS_SNIPPET)
    assert (
        sass["MMA"],
        sass["global load"],
        sass["global store"],
        sass["shared load"],
        sass["shared store"],
        sass["barrier"],
        sass["branch"],
        sass["all instructions"],
    ) == (1, 1, 1, 1, 1, 1, 1, 7)
    ptx = instruction_mix("ptx", PTX_SNIPPET)
    assert (
        ptx["MMA"],
        ptx["global load"],
        ptx["global store"],
        ptx["shared load"],
        ptx["async copy (cp.async/TMA)"],
        ptx["barrier"],
        ptx["branch"],
    ) == (1, 1, 1, 1, 1, 1, 1)
    assert "ret" in mnemonics("ptx", PTX_SNIPPET) and ".param" not in mnemonics("ptx", PTX_SNIPPET)


def test_mix_diff_marks_the_changed_categories():
    rows = mix_diff({"s_nop": 3, "branch": 1}, {"s_nop": 5, "branch": 1})
    assert rows == [
        {"instructions": "s_nop", "base": "3", "head": "5", "delta": "+2"},
        {"instructions": "branch", "base": "1", "head": "1", "delta": ""},
    ]


def test_real_gfx950_isa_mix_agrees_with_the_resource_parser(tmp_path):
    """FlyDSL compiles for gfx950 here (ld.lld); its MFMAs by mix = harness.resources' MFMA count."""
    out = tmp_path / "res.json"
    isa_dir = tmp_path / "isa"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ci.budget.resources",
            "--kernel",
            "flydsl_gfx950_4wave",
            "--config",
            "default",
            "--isa-dir",
            str(isa_dir),
            "--json",
            str(out),
        ],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    usage = json.loads(out.read_text())["targets"]["flydsl_gfx950_4wave/gfx950/default"]["usage"]
    mix = instruction_mix("amdgcn", (isa_dir / "flydsl_gfx950_4wave.gfx950.default.s").read_text())
    assert mix["scaled MFMA"] > 0 and mix["scaled MFMA"] + mix["other MFMA"] == usage["mma_count"]
    assert mix["global/buffer load"] > 0 and mix["LDS read"] > 0 and mix["s_waitcnt"] > 0
    assert mix["v_accvgpr move"] == usage["accvgpr_copies"]


def test_sources_are_parsed_one_thread_at_a_time(monkeypatch):
    """Base and head are fingerprinted in two threads; CPython 3.11's AST constructor is not thread-safe
    (a CPU-hog run failed with "AST constructor recursion depth mismatch"), so parsing is serialized."""
    import ast
    import threading
    import time

    from ci.common import launch_path

    inside, most = 0, 0
    guard = threading.Lock()
    real_parse = ast.parse

    def slow_parse(*args, **kwargs):
        nonlocal inside, most
        with guard:
            inside += 1
            most = max(most, inside)
        time.sleep(0.02)  # long enough for another thread to enter if nothing stops it
        try:
            return real_parse(*args, **kwargs)
        finally:
            with guard:
                inside -= 1

    monkeypatch.setattr(launch_path.ast, "parse", slow_parse)
    threads = [threading.Thread(target=launch_path.source_digest, args=("x = 1\n",)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most == 1, f"{most} threads were parsing at once"
