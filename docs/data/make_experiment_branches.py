"""Create the H200 cost experiment's branches in a clone (run from the clone's root, on main).

    python docs/data/make_experiment_branches.py

exp/docs-only     README gains a line                                     (identical code)
exp/comment-only  kernels/triton_mxfp4.py: comments, a docstring, layout  (identical code)
exp/torch-only    kernels/torch_dequant.py: the launch closure restructured, same work (launch path differs)
exp/slow          kernels/triton_mxfp4.py: one extra elementwise pass over C after the kernel (~+0.7%)
exp/wrong-at-8192 kernels/triton_mxfp4.py: C's first row zeroed when M == 8192 (right at 256 x 256)
exp/faster       on exp/slow: the extra pass removed again (an improvement against exp/slow, its merge-base)
exp/all-launch-paths kernels/mxfp4.py (imported by every kernel): a helper added, nothing it runs changed
                  (every benchmark's launch-path fingerprint differs: the whole default selection is measured)
exp/neutral-1     kernels/triton_mxfp4.py: `launch_options` renamed (issue 29: an A/A PR of the 20 Triton benchmarks)
exp/neutral-2     kernels/triton_mxfp4.py: `grid` renamed (another speed-neutral launch-path edit)
exp/neutral-3     kernels/triton_mxfp4.py: `meta` renamed (a third)
exp/tuning        kernels/triton_mxfp4.py: GROUP_M 16 / 4 / 2 for three of the four Triton configs (issue 37's
                  tuning PR: several benchmarks move by tenths of a percent to percents, both ways)
exp/slow-0p25     kernels/triton_mxfp4.py: triton_dot_scaled m128_n128_k128 at 8192^3 only: an extra elementwise pass
                  over 5/16 of C's rows after each launch, ~0.25% of its ~9.9 ms (issue 29's injected slowdown)
exp/mixed         on exp/tuning: the one config it left alone (triton_upcast m128_n128_k64_w8_s4) gets an extra pass
                  over half of C's rows (~0.35% at 8192^3 on an H200, less at the larger shapes): issue 46's mixed PR,
                  effects both ways, several near the thresholds

A speed-neutral edit renames a local of the launch wrapper: the same work, a launch-path fingerprint
that differs (ci.common.launch_path normalizes comments and docstrings away, not names), so the gate
measures every Triton benchmark (both Triton kernels share the module).
"""

import subprocess
from pathlib import Path


def git(*args: str) -> None:
    subprocess.run(["git", *args], check=True)


def branch(name: str, path: str, old: str, new: str, message: str) -> None:
    git("checkout", "-q", "-B", name, "main")
    file = Path(path)
    text = file.read_text()
    if old not in text:
        raise SystemExit(f"{name}: {old!r} not found in {path}")
    file.write_text(text.replace(old, new, 1))
    git("commit", "-q", "-am", message)


LAUNCH = "        def launch() -> None:\n            mxfp4_gemm_kernel[grid]("
branch(
    "exp/docs-only",
    "README.md",
    "# MXFP4 GEMM performance regression harness\n",
    "# MXFP4 GEMM performance regression harness\n\n(An experiment branch: docs only.)\n",
    "docs only",
)
branch(
    "exp/comment-only",
    "kernels/triton_mxfp4.py",
    LAUNCH,
    "        # A comment that changes nothing the GPU runs.\n        def launch() -> None:\n"
    '            """Launch once (a docstring that changes nothing)."""\n\n            mxfp4_gemm_kernel[grid](',
    "triton_mxfp4: comments and a docstring only",
)
branch(
    "exp/torch-only",
    "kernels/torch_dequant.py",
    "                out.copy_(torch.matmul(dequantize_fast(a, dtype), dequantize_fast(b, dtype).T))",
    "                a_wide, b_wide = dequantize_fast(a, dtype), dequantize_fast(b, dtype)\n"
    "                out.copy_(torch.matmul(a_wide, b_wide.T))",
    "torch_dequant: name the dequantized operands (same work)",
)
branch(
    "exp/slow",
    "kernels/triton_mxfp4.py",
    LAUNCH,
    "        def launch() -> None:\n            _slow_pass()\n            mxfp4_gemm_kernel[grid](",
    "triton_mxfp4: one extra elementwise pass over C (speed-gate experiment)",
)
Path("kernels/triton_mxfp4.py").write_text(
    Path("kernels/triton_mxfp4.py")
    .read_text()
    .replace(
        "        def launch() -> None:\n            _slow_pass()\n",
        "        def _slow_pass() -> None:\n            out.mul_(1)  # a read and a write of C; values unchanged\n\n"
        "        def launch() -> None:\n            _slow_pass()\n",
        1,
    )
)
git("commit", "-q", "-am", "triton_mxfp4: the extra pass as a function")
git("checkout", "-q", "-B", "exp/faster", "exp/slow")
Path("kernels/triton_mxfp4.py").write_text(
    Path("kernels/triton_mxfp4.py")
    .read_text()
    .replace("        def launch() -> None:\n            _slow_pass()\n", "        def launch() -> None:\n", 1)
)
git("commit", "-q", "-am", "triton_mxfp4: the extra pass removed (an improvement against exp/slow)")
KERNEL_CALL = "**meta, **launch_options)\n"
branch(
    "exp/wrong-at-8192",
    "kernels/triton_mxfp4.py",
    KERNEL_CALL,
    KERNEL_CALL + "            if m == 8192:\n                out[0].zero_()  # wrong only at the timed shape\n",
    "triton_mxfp4: wrong only at M == 8192 (gate experiment)",
)
branch(
    "exp/all-launch-paths",
    "kernels/mxfp4.py",
    "from __future__ import annotations\n",
    "from __future__ import annotations\n\n\ndef _experiment_helper(x: int) -> int:\n    return x + 1\n",
    "mxfp4: an unused helper in the module every kernel imports (every launch path's source differs)",
)

PREPARE = "kernels/triton_mxfp4.py"


def renamed(name: str, pairs: list[tuple[str, str]], message: str) -> None:
    """A branch off main with each ``old`` replaced by ``new`` in the Triton launch wrapper (every occurrence)."""
    git("checkout", "-q", "-B", name, "main")
    file = Path(PREPARE)
    text = file.read_text()
    for old, new in pairs:
        if old not in text:
            raise SystemExit(f"{name}: {old!r} not found in {PREPARE}")
        text = text.replace(old, new)
    file.write_text(text)
    git("commit", "-q", "-am", message)


renamed(
    "exp/neutral-1",
    [("launch_options = {} if", "options = {} if"), ("**meta, **launch_options)", "**meta, **options)")],
    "triton_mxfp4: rename launch_options (speed-neutral A/A experiment)",
)
renamed(
    "exp/neutral-2",
    [
        ("        grid = (triton.cdiv(", "        launch_grid = (triton.cdiv("),
        ("mxfp4_gemm_kernel[grid](a.data", "mxfp4_gemm_kernel[launch_grid](a.data"),
    ],
    "triton_mxfp4: rename grid (speed-neutral A/A experiment)",
)
renamed(
    "exp/neutral-3",
    [
        ("        meta = dict(\n            BLOCK_M", "        constants = dict(\n            BLOCK_M"),
        ("out, m, n, k, **meta, **launch_options)", "out, m, n, k, **constants, **launch_options)"),
    ],
    "triton_mxfp4: rename meta (speed-neutral A/A experiment)",
)
# The whole extra pass over C (exp/slow) cost the tracked config 0.75% (the recorded one-pass runs): ~0.72% its
# 128 MiB read and written, ~0.03% the extra launch. A pass over 5/16 of the rows: 0.03 + 0.72 * 5/16 = 0.25%.
# (The first cut spun the GPU with torch.cuda._sleep for ~23 us: it measured -0.12%, half of what its cycle count
# said, and added its own noise.)
renamed(
    "exp/slow-0p25",
    [
        (
            "        def launch() -> None:\n            mxfp4_gemm_kernel[grid](",
            "        # Issue 29's injected slowdown: the tracked config at 8192^3 only, ~0.25% of its time.\n"
            '        injected = self.name == "triton_dot_scaled" and config["BLOCK_K"] == 128 and (m, n, k) == (8192, 8192, 8192)\n'
            "        part = out[: m * 5 // 16]\n\n"
            "        def launch() -> None:\n"
            "            if injected:\n                part.mul_(1)  # a read and a write of 5/16 of C; values unchanged\n"
            "            mxfp4_gemm_kernel[grid](",
        )
    ],
    "triton_mxfp4: an extra pass over 5/16 of C before the tracked config's 8192^3 launch (a 0.25% slowdown, issue 29)",
)
# Issue 37's tuning PR: the tile order's GROUP_M (row tiles that share a column of B in L2; not in the config names,
# so every benchmark keeps its id) retuned for three of the four Triton configs, as a kernel engineer's tuning change
# would: effects of a few tenths of a percent to a few percent, both ways, differing by shape. The true effects are
# measured with many rounds (docs/data/h200_zone.sh truth); the gate is judged on deciding every benchmark.
renamed(
    "exp/tuning",
    [
        (
            '"m128_n128_k128_w8_s3": _config(128, 128, 128, num_warps=8, num_stages=3)',
            '"m128_n128_k128_w8_s3": _config(128, 128, 128, num_warps=8, num_stages=3, group_m=16)',
        ),
        (
            '"m128_n256_k64_w8_s3": _config(128, 256, 64, num_warps=8, num_stages=3)',
            '"m128_n256_k64_w8_s3": _config(128, 256, 64, num_warps=8, num_stages=3, group_m=4)',
        ),
        (
            '"m128_n128_k64_w8_s3": _config(128, 128, 64, num_warps=8, num_stages=3)',
            '"m128_n128_k64_w8_s3": _config(128, 128, 64, num_warps=8, num_stages=3, group_m=2)',
        ),
    ],
    "triton_mxfp4: GROUP_M retuned for three configs (issue 37's tuning PR)",
)
git("checkout", "-q", "-B", "exp/mixed", "exp/tuning")
mixed = Path(PREPARE)
mixed_text = mixed.read_text()
if LAUNCH not in mixed_text:
    raise SystemExit(f"exp/mixed: {LAUNCH!r} not found in {PREPARE}")
mixed.write_text(
    mixed_text.replace(
        LAUNCH,
        "        # Issue 46's mixed PR: half an extra pass over C for the config the tuning left alone.\n"
        '        slowed = out[: m // 2] if config["num_stages"] == 4 else None\n\n'
        "        def launch() -> None:\n"
        "            if slowed is not None:\n                slowed.mul_(1)  # a read and a write of half of C; values unchanged\n"
        "            mxfp4_gemm_kernel[grid](",
        1,
    )
)
git(
    "commit",
    "-q",
    "-am",
    "triton_mxfp4: half an extra pass over C for the s4 config, on the tuning (issue 46's mixed PR)",
)
git("checkout", "-q", "main")
