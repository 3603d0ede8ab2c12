"""Create exp/history, issue 20's synthetic history, in a clone (run from the clone's root; the branch starts at HEAD).

    python docs/data/make_history_branch.py

Twelve commits, c1..c12, each a small real change. Only kernels/triton_mxfp4.py's tracked
benchmark (triton_dot_scaled, m128_n128_k128_w8_s3, 8192^3 on the H200) is meant to move:

c1   docs        a README line                                             measured (the run's oldest)
c2   neutral     the kernel's arguments named once, unpacked per launch    measured (launch path differs)
c3   neutral     the tile sizes of meta read in one comprehension          measured
c4   +1%         a scratch buffer of 1.35 x C's elements, one mul_(1.0) pass per launch   measured
c5   docs        a line in docs/CHANGE_POINTS.md                           copied from c4 (identical code)
c6   neutral     the grid computed by a module-level function              measured
c7   neutral     launch options built by one conditional expression        measured
c8   comment     comments in the kernel module                             copied from c7 (identical code)
c9   +3% more    a second scratch buffer of 4 x C's elements, one pass per launch          measured
c10  neutral     _interpreting() asked once per prepare                    measured
c11  docs        a README line                                             copied from c10
c12  neutral     the launch closure binds the grid's launcher once         measured

Why most commits change code: the main job measures a commit only when its speed
fingerprint is new (ci.history.measure.identical) and the change points and the drift guard see
measured commits only (copies are the same measurement twice). E-divisive cuts a segment
only with >= 2 commits on each side (a pooled t-test of commit medians, Bonferroni over the
splits), and the drift guard needs >= 5 measured commits; with only c1, c4, c6, c9 measured
neither could work. Nine measured commits: three at each level.

The sizes: one extra pass over C (read + write, bf16) measured +0.74..0.77% at 8192^3 on
the H200 (docs/data/h200_gpu_cost); 1.35 x C ~ +1%, 4 x C ~ +3%. The buffers are
allocated and zeroed once in prepare, never per launch, and C itself is never touched:
the results are bit-identical to HEAD's (tests/test_correctness.py still holds).
"""

import subprocess
from pathlib import Path

KERNEL = "kernels/triton_mxfp4.py"


def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout.strip()


def edit(path: str, old: str, new: str) -> None:
    file = Path(path)
    text = file.read_text()
    if text.count(old) != 1:
        raise SystemExit(f"{path}: expected {old!r} once, found it {text.count(old)} times")
    file.write_text(text.replace(old, new, 1))


def append(path: str, line: str) -> None:
    file = Path(path)
    file.write_text(file.read_text().rstrip("\n") + "\n\n" + line + "\n")


def commit(name: str, message: str) -> None:
    git("commit", "-q", "-am", f"{name}: {message}")
    print(f"{name} {git('rev-parse', '--short=12', 'HEAD')} {message.splitlines()[0]}")


KERNEL_CALL = (
    "            mxfp4_gemm_kernel[grid](a.data, a.scales, b.data, b.scales, out, m, n, k, **meta, **launch_options)\n"
)
GRID = '        grid = (triton.cdiv(m, config["BLOCK_M"]) * triton.cdiv(n, config["BLOCK_N"]),)\n'
TILES = (
    '            BLOCK_M=config["BLOCK_M"],\n            BLOCK_N=config["BLOCK_N"],\n'
    '            BLOCK_K=config["BLOCK_K"],\n            GROUP_M=config["GROUP_M"],\n'
)
OPTIONS = (
    '        launch_options = {} if _interpreting() else dict(num_warps=config["num_warps"], '
    'num_stages=config["num_stages"])\n'
)


def main() -> None:
    start = git("rev-parse", "--abbrev-ref", "HEAD")
    start = start if start != "HEAD" else git("rev-parse", "HEAD")
    git("checkout", "-q", "-B", "exp/history")

    append("README.md", "(exp/history, issue 20's synthetic history: c1, a docs-only commit.)")
    commit("c1", "docs only: a README line (expected: no change; measured, as the run's oldest commit)")

    edit(KERNEL, KERNEL_CALL, "            mxfp4_gemm_kernel[grid](*arguments, **meta, **launch_options)\n")
    edit(
        KERNEL,
        "        def launch() -> None:\n",
        "        arguments = (a.data, a.scales, b.data, b.scales, out, m, n, k)\n\n        def launch() -> None:\n",
    )
    commit("c2", "triton_mxfp4: the kernel's arguments named once, unpacked per launch (expected: no change)")

    edit(
        KERNEL, TILES, '            **{tile: config[tile] for tile in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")},\n'
    )
    commit("c3", "triton_mxfp4: meta's tile sizes read in one comprehension (expected: no change)")

    edit(
        KERNEL,
        "        def launch() -> None:\n",
        "        # exp/history c4: extra memory work, ~1.35 passes over C's size (one pass over C is +0.75% at 8192^3).\n"
        "        scratch_c4 = torch.zeros(int(out.numel() * 1.35), dtype=out.dtype, device=out.device)\n\n"
        "        def launch() -> None:\n",
    )
    edit(
        KERNEL,
        "            mxfp4_gemm_kernel[grid](*arguments, **meta, **launch_options)\n",
        "            mxfp4_gemm_kernel[grid](*arguments, **meta, **launch_options)\n"
        "            scratch_c4.mul_(1.0)  # a read and a write of the scratch buffer; C untouched\n",
    )
    commit(
        "c4",
        "triton_mxfp4: SLOWER, one elementwise pass over a scratch buffer of 1.35 x C per launch "
        "(expected: about +1% time at 8192^3; C unchanged)",
    )

    append("docs/CHANGE_POINTS.md", "(exp/history c5: a docs-only commit.)")
    commit("c5", "docs only: a line in docs/CHANGE_POINTS.md (expected: no change; identical code to c4, copied)")

    edit(KERNEL, GRID, "        grid = _launch_grid(m, n, config)\n")
    edit(
        KERNEL,
        "class _TritonMXFP4(Kernel):\n",
        "def _launch_grid(m: int, n: int, config: Mapping[str, Any]) -> tuple[int]:\n"
        '    """One program per BLOCK_M x BLOCK_N tile of C (the kernel maps it to its tile, grouped along M)."""\n'
        '    return (triton.cdiv(m, config["BLOCK_M"]) * triton.cdiv(n, config["BLOCK_N"]),)\n\n\n'
        "class _TritonMXFP4(Kernel):\n",
    )
    commit(
        "c6", "triton_mxfp4: the grid computed by a module-level function (a launch-path change; expected: no change)"
    )

    edit(
        KERNEL,
        OPTIONS,
        '        launch_options = (dict(num_warps=config["num_warps"], num_stages=config["num_stages"])\n'
        "                          if not _interpreting() else {})\n",
    )
    commit("c7", "triton_mxfp4: launch options built by one conditional, the compiled case first (expected: no change)")

    edit(
        KERNEL,
        "        grid = _launch_grid(m, n, config)\n",
        "        # exp/history c8: a comment only; the normalized launch path and the device code are c7's.\n"
        "        grid = _launch_grid(m, n, config)\n",
    )
    commit("c8", "triton_mxfp4: a comment only (expected: no change; identical code to c7, copied)")

    edit(
        KERNEL,
        "        def launch() -> None:\n",
        "        # exp/history c9: more extra memory work, ~4 passes over C's size.\n"
        "        scratch_c9 = torch.zeros(out.numel() * 4, dtype=out.dtype, device=out.device)\n\n"
        "        def launch() -> None:\n",
    )
    edit(
        KERNEL,
        "            scratch_c4.mul_(1.0)  # a read and a write of the scratch buffer; C untouched\n",
        "            scratch_c4.mul_(1.0)  # a read and a write of the scratch buffer; C untouched\n"
        "            scratch_c9.mul_(1.0)\n",
    )
    commit(
        "c9",
        "triton_mxfp4: SLOWER again, one more pass over a scratch buffer of 4 x C per launch "
        "(expected: about +3% more time at 8192^3, ~4% in all since c3; C unchanged)",
    )

    edit(KERNEL, "        meta = dict(\n", "        interpreting = _interpreting()\n        meta = dict(\n")
    edit(
        KERNEL,
        "            DOT_DTYPE=tl.float32 if _interpreting() else tl.bfloat16,\n",
        "            DOT_DTYPE=tl.float32 if interpreting else tl.bfloat16,\n",
    )
    edit(
        KERNEL,
        "                          if not _interpreting() else {})\n",
        "                          if not interpreting else {})\n",
    )
    commit("c10", "triton_mxfp4: _interpreting() asked once per prepare (expected: no change)")

    append("README.md", "(exp/history c11: another docs-only commit.)")
    commit("c11", "docs only: a README line (expected: no change; identical code to c10, copied)")

    edit(
        KERNEL,
        "        def launch() -> None:\n",
        "        launcher = mxfp4_gemm_kernel[grid]\n\n        def launch() -> None:\n",
    )
    edit(
        KERNEL,
        "            mxfp4_gemm_kernel[grid](*arguments, **meta, **launch_options)\n",
        "            launcher(*arguments, **meta, **launch_options)\n",
    )
    commit("c12", "triton_mxfp4: the launch closure binds the grid's launcher once (expected: no change)")

    git("checkout", "-q", start)


if __name__ == "__main__":
    main()
