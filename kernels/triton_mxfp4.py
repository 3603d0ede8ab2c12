"""MXFP4 GEMMs in Triton, for NVIDIA and AMD GPUs alike.

``triton_dot_scaled`` (``tl.dot_scaled``: the scaled MFMA on gfx950, an upcast to bf16 and wgmma on
Hopper) and ``triton_upcast`` (the upcast written out; also runs in Triton's CPU interpreter) share one
launch wrapper and one tiling. Contract (kernels.mxfp4): A data [M, K/2], B data [N, K/2], scales
[rows, K/32] e8m0; C [M, N] bf16; B consumed as its transpose. On GPUs without fp4 matrix units an
element whose |value x scale| exceeds 6 x 2**127 overflows. docs/MEASURING.md, "Triton kernels".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import torch
import triton
import triton.language as tl

from kernels.mxfp4 import MXFP4Tensor
from kernels.registry import CompiledArtifact, Kernel, ShapeConstraints, register

# 2**-127: e8m0 b = 0. Not reachable with the exponent-field bit trick, which has no subnormals.
_E8M0_MIN = tl.constexpr(5.877471754111438e-39)


@triton.jit
def _e8m0_to_fp32(biased):
    """e8m0 bytes -> float32 2**(b - 127); 0 -> 2**-127; 255 -> NaN."""
    b = biased.to(tl.int32)
    value = (b << 23).to(tl.float32, bitcast=True)
    value = tl.where(b == 0, _E8M0_MIN, value)
    return tl.where(b == 255, float("nan"), value)


@triton.jit
def _e2m1_to_fp32(code):
    """4-bit e2m1 codes (in int32) -> float32: sign bit 3, exponent bits 2:1 (bias 1), mantissa bit 0."""
    exponent = (code >> 1) & 3
    mantissa = (code & 1).to(tl.float32)
    normal = (1.0 + 0.5 * mantissa) * tl.exp2((exponent - 1).to(tl.float32))
    magnitude = tl.where(exponent == 0, 0.5 * mantissa, normal)
    return tl.where((code & 8) != 0, -magnitude, magnitude)


@triton.jit
def _upcast_tile(packed, scales, ROWS: tl.constexpr, BLOCK_K: tl.constexpr, DOT_DTYPE: tl.constexpr):
    """[ROWS, BLOCK_K/2] packed bytes and [ROWS, BLOCK_K/32] scales -> [ROWS, BLOCK_K] DOT_DTYPE.

    Exact in bf16 and in fp32: an e2m1 value has 2 significant bits, the scale is a power of two.
    """
    p = packed.to(tl.int32)
    # Element 2i is the low nibble: join (low, high) on a new last axis, then flatten along K.
    codes = tl.reshape(tl.join(p & 15, p >> 4), (ROWS, BLOCK_K))
    values = tl.reshape(_e2m1_to_fp32(codes), (ROWS, BLOCK_K // 32, 32))
    scaled = values * _e8m0_to_fp32(scales)[:, :, None]
    return tl.reshape(scaled, (ROWS, BLOCK_K)).to(DOT_DTYPE)


@triton.jit
def _fp32_to_bf16_rne(x):
    """Round to nearest, ties to even, on the bits (what GPUs' cvt does in hardware)."""
    bits = x.to(tl.uint32, bitcast=True)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)
    return tl.where(x != x, float("nan"), rounded)  # a NaN with only low payload bits would round to inf


@triton.jit
def _tile_offsets(M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """Grouped tile order: GROUP_M row-tiles share each column of B while it sits in L2."""
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    group_rows = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_rows
    pid_n = (pid % per_group) // group_rows
    return pid_m, pid_n


@triton.jit
def mxfp4_gemm_kernel(
    a_ptr,
    a_scale_ptr,
    b_ptr,
    b_scale_ptr,
    c_ptr,
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    USE_DOT_SCALED: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
):
    pid_m, pid_n = _tile_offsets(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    # int64 row offsets: 57344 rows x 4096 bytes and 8192 x 57344 outputs approach 2**31.
    rows_a = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    rows_b = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    kb = tl.arange(0, BLOCK_K // 2)
    ks = tl.arange(0, BLOCK_K // 32)
    packed_k = K // 2
    scale_k = K // 32

    a_ptrs = a_ptr + rows_a[:, None] * packed_k + kb[None, :]
    a_scale_ptrs = a_scale_ptr + rows_a[:, None] * scale_k + ks[None, :]
    b_scale_ptrs = b_scale_ptr + rows_b[:, None] * scale_k + ks[None, :]
    if USE_DOT_SCALED:
        b_ptrs = b_ptr + rows_b[None, :] * packed_k + kb[:, None]  # [BLOCK_K/2, BLOCK_N]: B^T
    else:
        b_ptrs = b_ptr + rows_b[:, None] * packed_k + kb[None, :]  # [BLOCK_N, BLOCK_K/2]

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _k_step in tl.range(0, tl.cdiv(K, BLOCK_K), num_stages=NUM_STAGES):
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
        a_scale = tl.load(a_scale_ptrs)
        b_scale = tl.load(b_scale_ptrs)
        if USE_DOT_SCALED:
            acc = tl.dot_scaled(a, a_scale, "e2m1", b, b_scale, "e2m1", acc)
        else:
            a_values = _upcast_tile(a, a_scale, BLOCK_M, BLOCK_K, DOT_DTYPE)
            b_values = _upcast_tile(b, b_scale, BLOCK_N, BLOCK_K, DOT_DTYPE)
            acc = tl.dot(a_values, tl.trans(b_values), acc)
        a_ptrs += BLOCK_K // 2
        b_ptrs += BLOCK_K // 2
        a_scale_ptrs += BLOCK_K // 32
        b_scale_ptrs += BLOCK_K // 32

    c_ptrs = c_ptr + rows_a[:, None] * N + rows_b[None, :]
    if DOT_DTYPE == tl.float32:  # the interpreter: its fp32 -> bf16 cast truncates
        tl.store(c_ptrs, _fp32_to_bf16_rne(acc))
    else:
        tl.store(c_ptrs, acc.to(tl.bfloat16))


def _interpreting() -> bool:
    """Triton decided at import time whether @triton.jit builds interpreter functions."""
    return type(mxfp4_gemm_kernel).__name__ == "InterpretedFunction"


class _TritonMXFP4(Kernel):
    backend = "triton"
    use_dot_scaled: bool
    compile_archs: ClassVar[tuple[str, ...]] = ("sm_90",)

    def shape_constraints(self, config: str | None = None) -> ShapeConstraints:
        tiles = self.config(config)
        return ShapeConstraints(
            m_multiple=tiles["BLOCK_M"],
            n_multiple=tiles["BLOCK_N"],
            k_multiple=tiles["BLOCK_K"],
            why=f"config {config or self.default_config} has no masking: its tiles must divide M, N, K",
        )

    def _runtime_unavailable_reason(self, device: torch.device) -> str | None:
        if device.type == "cpu" and not _interpreting():
            return f"{self.name} needs a CUDA/ROCm GPU, or TRITON_INTERPRET=1 set before triton is imported"
        if device.type == "cuda" and _interpreting():
            return f"{self.name}: TRITON_INTERPRET=1 is set, so Triton cannot compile for {device}"
        return None

    def _prepare(
        self, a: MXFP4Tensor, b: MXFP4Tensor, out: torch.Tensor, config: Mapping[str, Any]
    ) -> Callable[[], None]:
        m, n, k = a.rows, b.rows, a.k
        grid = (triton.cdiv(m, config["BLOCK_M"]) * triton.cdiv(n, config["BLOCK_N"]),)
        meta = dict(
            BLOCK_M=config["BLOCK_M"],
            BLOCK_N=config["BLOCK_N"],
            BLOCK_K=config["BLOCK_K"],
            GROUP_M=config["GROUP_M"],
            NUM_STAGES=config["num_stages"],
            USE_DOT_SCALED=self.use_dot_scaled,
            # The interpreter multiplies bf16 tiles as raw 16-bit integers; fp32 is just as exact here
            # (and selects exact output rounding, see the kernel's epilogue).
            DOT_DTYPE=tl.float32 if _interpreting() else tl.bfloat16,
        )
        launch_options = {} if _interpreting() else dict(num_warps=config["num_warps"], num_stages=config["num_stages"])

        def launch() -> None:
            mxfp4_gemm_kernel[grid](a.data, a.scales, b.data, b.scales, out, m, n, k, **meta, **launch_options)

        return launch

    def _compile_only(self, arch: str, config_name: str, config: Mapping[str, Any]) -> CompiledArtifact:
        from kernels.triton_compile import compile_for_arch

        return compile_for_arch(
            mxfp4_gemm_kernel,
            kernel=self.name,
            config_name=config_name,
            arch=arch,
            signature={
                "a_ptr": "*u8",
                "a_scale_ptr": "*u8",
                "b_ptr": "*u8",
                "b_scale_ptr": "*u8",
                "c_ptr": "*bf16",
                "M": "i32",
                "N": "i32",
                "K": "i32",
            },
            constexprs={
                "BLOCK_M": config["BLOCK_M"],
                "BLOCK_N": config["BLOCK_N"],
                "BLOCK_K": config["BLOCK_K"],
                "GROUP_M": config["GROUP_M"],
                "NUM_STAGES": config["num_stages"],
                "USE_DOT_SCALED": self.use_dot_scaled,
                "DOT_DTYPE": tl.bfloat16,
            },
            num_warps=config["num_warps"],
            num_stages=config["num_stages"],
            # A launch specializes every argument: the pointers are whole tensors and
            # the shape constraints make M, N, K multiples of 16.
            divisible_by_16=["a_ptr", "a_scale_ptr", "b_ptr", "b_scale_ptr", "c_ptr", "M", "N", "K"],
        )


def _config(block_m: int, block_n: int, block_k: int, num_warps: int, num_stages: int, group_m: int = 8) -> dict:
    return dict(
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=group_m, num_warps=num_warps, num_stages=num_stages
    )


@register
class TritonDotScaled(_TritonMXFP4):
    name = "triton_dot_scaled"
    description = "Triton tl.dot_scaled e2m1 x e2m1 (native scaled MFMA on gfx950, bf16 upcast on Hopper)"
    # cpu: Triton's interpreter (3.9 runs dot_scaled there; 3.6 did not).
    runs_on = ("cpu", "sm_8?", "sm_9?", "sm_1??", "gfx94?", "gfx950")
    use_dot_scaled = True
    # Triton's AMD backend compiles it for gfx950 on any machine: the target's own register story.
    compile_archs = ("sm_90", "gfx950")
    # Spill-free on sm_90 (ptxas, Triton 3.9): 215 and 250 registers. 128x128x256 and
    # 128x256x128 spill 144-240 bytes per thread (ci/register_budget.json keeps them out).
    configs = {
        "m128_n128_k128_w8_s3": _config(128, 128, 128, num_warps=8, num_stages=3),
        "m128_n256_k64_w8_s3": _config(128, 256, 64, num_warps=8, num_stages=3),
    }


@register
class TritonUpcast(_TritonMXFP4):
    name = "triton_upcast"
    description = "Triton with a hand-written e2m1/e8m0 upcast to bf16 and tl.dot (also runs in the CPU interpreter)"
    runs_on = ("cpu", "sm_8?", "sm_9?", "sm_1??", "gfx94?", "gfx950")
    use_dot_scaled = False
    # Spill-free on sm_90 (194 registers); every 128-deep K tile tried spills.
    configs = {
        "m128_n128_k64_w8_s3": _config(128, 128, 64, num_warps=8, num_stages=3),
        "m128_n128_k64_w8_s4": _config(128, 128, 64, num_warps=8, num_stages=4),
    }
