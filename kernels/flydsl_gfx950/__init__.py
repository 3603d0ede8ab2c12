"""The project's own FlyDSL MXFP4 GEMM for gfx950 (MI355X, CDNA4): its registry entry.

Parts: ``index_math.py`` (tile sizes, every byte offset), ``kernel_body.py`` (the ``@flyc.kernel``),
``launcher.py`` (preshuffle, compile for K, launch), ``toolchain.py`` (compile-only on any machine).
Contract: ``C[M, N] (bf16) = A[M, K] . B[N, K]^T`` (kernels.mxfp4); A row-major packed e2m1, B and the
scales as :func:`kernels.preshuffle.shuffle_weight` / :func:`~kernels.preshuffle.shuffle_scales` lay
them out. The runtime path (FlyDSL 0.5.0 API) is NOT YET RUN ON A GFX950; ``compile_only("gfx950")``
runs wherever ``ld.lld`` is. docs/MEASURING.md, "The FlyDSL gfx950 kernel".
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import torch

from kernels.flydsl_gfx950 import toolchain
from kernels.flydsl_gfx950.index_math import BLOCK_K, BLOCK_M, BLOCK_N
from kernels.flydsl_gfx950.launcher import prepare_launch
from kernels.mxfp4 import MXFP4Tensor
from kernels.registry import CompiledArtifact, Kernel, ShapeConstraints, UnsupportedShape, register

ARCH = "gfx950"
KERNEL_NAME = "flydsl_gfx950_4wave"
# Compile-only needs a K: the loop body is the same for every K, only the trip count
# (a constant) differs. 8192 is the K of the square benchmark shapes.
COMPILE_ONLY_K = 8192

_INT32_LIMIT = 2**31  # buffer offsets are 32-bit signed in the index math above


@register
class FlyDSLGfx950FourWave(Kernel):
    """256x256-tile, 4-wave, LDS double-buffered MXFP4 GEMM in FlyDSL for gfx950.

    Runtime path (``prepare``): written against the installed FlyDSL 0.5.0 API and
    NOT YET RUN ON A GFX950. Compile-only path: verified on CPU (see tests).
    """

    name = KERNEL_NAME
    backend = "flydsl"
    description = (
        "FlyDSL MXFP4 GEMM for gfx950: 256x256 tile, 4 waves of 128x128, scaled MFMA 16x16x128 (e2m1, e8m0 per 32), "
        "global->LDS DMA double-buffered, preshuffled B and scales"
    )
    runs_on = (ARCH,)
    compile_archs = (ARCH,)
    constraints = ShapeConstraints(
        m_multiple=BLOCK_M,
        n_multiple=BLOCK_N,
        k_multiple=BLOCK_K,
        why=f"one workgroup computes a full {BLOCK_M}x{BLOCK_N} tile per {BLOCK_K}-deep K step; no edge masking",
    )
    # Two LDS stages is the most a 256x256x256 step allows: 3 x 64 KiB > 160 KiB of LDS.
    configs = {
        # Accumulators pinned to AGPRs (inline-asm MFMA), two 64 KiB LDS stages.
        "default": {"lds_stages": 2, "agpr_accumulators": True},
        # Same pipeline through the LLVM intrinsic: LLVM places the accumulators itself
        # (measured: split across VGPRs/AGPRs with copies every K step). Kept as the
        # comparison point that shows what the pinning buys.
        "intrinsic_acc": {"lds_stages": 2, "agpr_accumulators": False},
    }

    def check_shape(self, m: int, n: int, k: int, config: str | None = None) -> None:
        super().check_shape(m, n, k, config)
        for what, size in (
            ("M x K/2 (A bytes)", m * k // 2),
            ("N x K/2 (B bytes)", n * k // 2),
            ("M x N x 2 (C bytes)", m * n * 2),
        ):
            if size >= _INT32_LIMIT:
                raise UnsupportedShape(f"{self.name}: {what} = {size} must be < 2**31 (32-bit buffer offsets)")

    def _runtime_unavailable_reason(self, device: torch.device) -> str | None:
        try:
            import flydsl.compiler  # noqa: F401
        except Exception as exc:  # an import error of any kind means no runtime
            return f"FlyDSL is not importable: {exc}"
        return toolchain.hip_runtime_missing_reason()

    def _prepare(
        self, a: MXFP4Tensor, b: MXFP4Tensor, out: torch.Tensor, config: Mapping[str, Any]
    ) -> Callable[[], None]:
        """NOT YET RUN ON A GFX950 (see launcher.py)."""
        return prepare_launch(a, b, out, config)

    def _compile_needs_clean_process(self) -> bool:
        return True  # FlyDSL's compile-only switches are env vars read once per process

    def _compile_only(self, arch: str, config_name: str, config: Mapping[str, Any]) -> CompiledArtifact:
        assembly, seconds = toolchain.compile_isa(arch=arch, config=dict(config), k=COMPILE_ONLY_K)
        return CompiledArtifact(
            kernel=self.name,
            config=config_name,
            arch=arch,
            assembly=assembly,
            compile_seconds=seconds,
            extra={"k": str(COMPILE_ONLY_K), "rocm_path": os.environ.get("ROCM_PATH", "")},
        )
