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
branch("exp/docs-only", "README.md", "# MXFP4 GEMM performance regression harness\n",
       "# MXFP4 GEMM performance regression harness\n\n(An experiment branch: docs only.)\n", "docs only")
branch("exp/comment-only", "kernels/triton_mxfp4.py", LAUNCH,
       "        # A comment that changes nothing the GPU runs.\n        def launch() -> None:\n"
       "            \"\"\"Launch once (a docstring that changes nothing).\"\"\"\n\n            mxfp4_gemm_kernel[grid](",
       "triton_mxfp4: comments and a docstring only")
branch("exp/torch-only", "kernels/torch_dequant.py",
       "                out.copy_(torch.matmul(dequantize_fast(a, dtype), dequantize_fast(b, dtype).T))",
       "                a_wide, b_wide = dequantize_fast(a, dtype), dequantize_fast(b, dtype)\n"
       "                out.copy_(torch.matmul(a_wide, b_wide.T))",
       "torch_dequant: name the dequantized operands (same work)")
branch("exp/slow", "kernels/triton_mxfp4.py", LAUNCH,
       "        def launch() -> None:\n            _slow_pass()\n            mxfp4_gemm_kernel[grid](",
       "triton_mxfp4: one extra elementwise pass over C (speed-gate experiment)")
Path("kernels/triton_mxfp4.py").write_text(Path("kernels/triton_mxfp4.py").read_text().replace(
    "        def launch() -> None:\n            _slow_pass()\n",
    "        def _slow_pass() -> None:\n            out.mul_(1)  # a read and a write of C; values unchanged\n\n"
    "        def launch() -> None:\n            _slow_pass()\n", 1))
git("commit", "-q", "-am", "triton_mxfp4: the extra pass as a function")
git("checkout", "-q", "-B", "exp/faster", "exp/slow")
Path("kernels/triton_mxfp4.py").write_text(Path("kernels/triton_mxfp4.py").read_text().replace(
    "        def launch() -> None:\n            _slow_pass()\n", "        def launch() -> None:\n", 1))
git("commit", "-q", "-am", "triton_mxfp4: the extra pass removed (an improvement against exp/slow)")
KERNEL_CALL = "**meta, **launch_options)\n"
branch("exp/wrong-at-8192", "kernels/triton_mxfp4.py", KERNEL_CALL,
       KERNEL_CALL + "            if m == 8192:\n                out[0].zero_()  # wrong only at the timed shape\n",
       "triton_mxfp4: wrong only at M == 8192 (gate experiment)")
branch("exp/all-launch-paths", "kernels/mxfp4.py", "from __future__ import annotations\n",
       "from __future__ import annotations\n\n\ndef _experiment_helper(x: int) -> int:\n    return x + 1\n",
       "mxfp4: an unused helper in the module every kernel imports (every launch path's source differs)")
git("checkout", "-q", "main")
