"""The project's own FlyDSL MXFP4 GEMM for gfx950 (MI355X, CDNA4).

Contract: ``C[M, N] (bf16) = A[M, K] . B[N, K]^T`` with MXFP4 operands (see
kernels.mxfp4). The kernel consumes

* ``A``        -- row-major packed e2m1, ``uint8 [M, K/2]`` (untouched);
* ``B``        -- :func:`kernels.preshuffle.shuffle_weight` of ``B.data``: 16-row x
  32-element blocks, 1 KiB per (16 rows, 128 K) MFMA operand, contiguous;
* scales       -- :func:`kernels.preshuffle.shuffle_scales` of ``A.scales`` and
  ``B.scales``: one int32 per lane holding the four e8m0 bytes the MFMA's op_sel picks.

Design (one workgroup = 256 threads = 4 waves, one 256x256 C tile):

* Waves form a 2x2 grid; each owns a 128x128 quadrant = 8x8 tiles of 16x16, i.e.
  64 ``v_mfma_scale_f32_16x16x128_f8f6f4`` accumulators (256 f32 per lane, meant to
  live in AGPRs) and 128 scaled MFMAs per 256-deep K step.
* K step = 256 elements = 128 bytes per row. A and B tiles of one K step (32 KiB
  each) go global -> LDS with the gfx950 16-byte LDS DMA (``buffer_load_dwordx4 ...
  lds``), straight into "MFMA operand order": one 1 KiB chunk per (16-row tile, 128-K
  half), lane ``l`` at byte ``16 l`` holding row ``l % 16``, K bytes ``16 (l // 16)``
  of that half. A wave's ``ds_read_b128`` of one operand is then one contiguous KiB
  (no bank conflicts) and no swizzle is needed.
* LDS is multi-buffered: ``lds_stages`` copies of the 64 KiB (A + B) stage; the DMA
  of K step ``k + stages - 1`` is issued before the MFMAs of step ``k``, so the copy
  runs under the math. One barrier per K step.
* Scales are loaded global -> VGPR (one coalesced dword per lane per 32 rows) one K
  step ahead and ride in the loop-carried state.
* The MFMA is fed (B, A) rather than (A, B): it then computes C^T tiles, whose
  accumulator lane layout gives each lane 4 consecutive columns of one row of C, so
  the epilogue stores 8 bytes per lane (bf16 RNE conversion).

Runtime path: written against the installed FlyDSL 0.5.0 API; NOT YET RUN ON A
GFX950. The compile-only path (``compile_only("gfx950")``) runs on any machine with
an ``ld.lld`` (see kernels.flydsl_toolchain).
"""

# No ``from __future__ import annotations`` here: FlyDSL reads the annotations of
# @flyc.kernel / @flyc.jit parameters (fx.Tensor, fx.Int32) and of fx.struct fields
# as live objects; deferred (string) annotations make it mistype the arguments.
# Everything below is valid on Python 3.10 as written.

import argparse
import functools
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import torch

from kernels import flydsl_toolchain, preshuffle
from kernels.mxfp4 import MXFP4Tensor
from kernels.registry import CompiledArtifact, Kernel, ShapeConstraints, UnsupportedShape, register

ARCH = "gfx950"
BLOCK_M = 256
BLOCK_N = 256
BLOCK_K = 256  # K elements per main-loop step (= 2 MFMAs deep)
WAVES = 4
THREADS = WAVES * 64
MFMA_K = 128  # K elements per v_mfma_scale_f32_16x16x128
TILE = 16  # MFMA M/N
CHUNK_BYTES = 1024  # one MFMA operand for 16 rows: 64 lanes x 16 bytes
ROW_BYTES_PER_STEP = BLOCK_K // 2  # 128 bytes of packed e2m1 per row per K step
OPERAND_STAGE_BYTES = BLOCK_M * ROW_BYTES_PER_STEP  # 32 KiB (A) or (B)
STAGE_BYTES = 2 * OPERAND_STAGE_BYTES  # A + B of one K step: 64 KiB
LDS_LIMIT_BYTES = 160 * 1024  # gfx950 LDS per workgroup
# Compile-only needs a K: the loop body is the same for every K, only the trip count
# (a constant) differs. 8192 is the K of the square benchmark shapes.
COMPILE_ONLY_K = 8192
KERNEL_NAME = "flydsl_gfx950_4wave"

_TILES_PER_WAVE = 8  # 16-row tiles per wave and operand: 128 rows / 16
_HALVES = BLOCK_K // MFMA_K  # 2 MFMAs deep per K step
_CHUNKS_PER_OPERAND = (BLOCK_M // TILE) * _HALVES  # 32 chunks of 1 KiB per operand per stage
_DMA_PER_WAVE = _CHUNKS_PER_OPERAND // WAVES  # 8 A + 8 B LDS DMAs per wave per step
_SCALE_WORDS_PER_WAVE = _TILES_PER_WAVE // 2  # one int32 per lane per 32 rows
_E2M1 = 4  # cbsz/blgp format code of FP4 e2m1 for the f8f6f4 MFMA


# ---------------------------------------------------------------------------
# Index math, shared by the kernel (called with FlyDSL Int32 values) and by the
# CPU emulation in tests/test_flydsl_gfx950.py (called with ints / torch
# tensors). Only +, *, >>, & so both kinds of value work. All offsets in bytes.
# ---------------------------------------------------------------------------


def dma_chunk(wave, j):
    """Chunk (= 2 * tile + half) of an operand that DMA ``j`` of ``wave`` fills."""
    return wave * _DMA_PER_WAVE + j


def a_copy_offsets(tile_m, chunk, k_step, lane, k_bytes):
    """(uniform, per-lane) global offsets of A (row-major) for one LDS DMA chunk.

    Lane l fetches row ``256 tile_m + 16 tile + l % 16``, bytes ``128 k_step + 64 half
    + 16 (l // 16)`` -- its MFMA operand (module doc of kernels.preshuffle).
    """
    tile, half = chunk >> 1, chunk & 1
    uniform = tile_m * (BLOCK_M * k_bytes) + tile * (TILE * k_bytes) + k_step * ROW_BYTES_PER_STEP + half * 64
    per_lane = (lane & 15) * k_bytes + (lane >> 4) * 16
    return uniform, per_lane


def b_copy_offsets(tile_n, chunk, k_step, lane, k_bytes):
    """(uniform, per-lane) global offsets of preshuffled B for one LDS DMA chunk.

    16-row group ``g = 16 tile_n + tile`` starts at ``g * 16 * k_bytes``; 32-block
    ``c = 8 k_step + 4 half + l // 16`` at ``256 c`` in it; row ``l % 16`` at ``16 (l % 16)``.
    """
    tile, half = chunk >> 1, chunk & 1
    uniform = tile_n * (BLOCK_N * k_bytes) + tile * (TILE * k_bytes) + k_step * (8 * 256) + half * (4 * 256)
    per_lane = lane * 16
    return uniform, per_lane


def lds_chunk_offset(stage, operand, chunk):
    """LDS byte offset of ``chunk`` of operand 0 (A) or 1 (B) in ``stage``; lane l adds 16 l."""
    return stage * STAGE_BYTES + operand * OPERAND_STAGE_BYTES + chunk * CHUNK_BYTES


def operand_chunk(wave_mn, tile, half):
    """Chunk holding 16-row tile ``tile`` (0..7) of the wave's 128 rows, 128-K half ``half``."""
    return (wave_mn * _TILES_PER_WAVE + tile) * _HALVES + half


def scale_offsets(tile_mn, wave_mn, pair, k_step, lane, k_steps):
    """(uniform, per-lane) byte offsets of the scale word for 32-row group ``pair`` (0..3)."""
    group = tile_mn * (BLOCK_M // 32) + wave_mn * _SCALE_WORDS_PER_WAVE + pair
    return (group * (k_steps * 64) + k_step * 64) * 4, lane * 4


def scale_opsel(half, tile):
    """Byte of the scale word for 128-K ``half`` and 16-row ``tile`` (see kernels.preshuffle)."""
    return half * 2 + (tile & 1)


def c_offset(tile_m, tile_n, wave_m, wave_n, mt, nt, lane, n):
    """Byte offset in C of the 4 consecutive bf16 lane ``lane`` holds for tile (mt, nt).

    The MFMA runs with (B, A) operands, so its 16x16 result D is the C^T tile:
    lane l, register r holds ``D[4 (l // 16) + r][l % 16]`` = C[row 16 mt + l % 16,
    col 16 nt + 4 (l // 16) + r].
    """
    row = tile_m * BLOCK_M + wave_m * (_TILES_PER_WAVE * TILE) + mt * TILE + (lane & 15)
    col = tile_n * BLOCK_N + wave_n * (_TILES_PER_WAVE * TILE) + nt * TILE + (lane >> 4) * 4
    return (row * n + col) * 2


def lds_bytes(lds_stages: int) -> int:
    return lds_stages * STAGE_BYTES


# ---------------------------------------------------------------------------
# the kernel (FlyDSL); built per (K, stages) because K sets the loop trip count
# ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def build_launcher(*, k: int, lds_stages: int = 2, agpr_accumulators: bool = True, waves_per_eu: int = 1):
    """Return the ``@flyc.jit`` launcher ``launch(A, B, C, A_scale, B_scale, m, n, stream)``.

    ``k`` is baked in (trip count and row strides). M and N are runtime values; the
    grid covers ``(M/256) * (N/256)`` tiles. Operands are flat torch tensors:
    A uint8 ``[M*K/2]``, B uint8 preshuffled ``[N*K/2]``, C bf16 ``[M*N]``, scales
    uint8 preshuffled ``[rows*K/32]`` (read as one int32 word per lane).
    """
    if k <= 0 or k % BLOCK_K:
        raise ValueError(f"k: {k} must be a positive multiple of {BLOCK_K}")
    if lds_stages < 2:
        raise ValueError(f"lds_stages: {lds_stages} must be >= 2 (double buffering)")
    if lds_bytes(lds_stages) > LDS_LIMIT_BYTES:
        raise ValueError(
            f"lds_stages: {lds_stages} stages x {STAGE_BYTES // 1024} KiB exceed the {LDS_LIMIT_BYTES // 1024} KiB of LDS"
        )

    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from flydsl._mlir import ir
    from flydsl._mlir.dialects import llvm
    from flydsl.expr import range_constexpr, rocdl
    from flydsl.expr.typing import T
    from flydsl.expr.typing import Vector as Vec

    k_bytes = k // 2  # row stride of A, and of one 16-row group of B is 16 * k_bytes
    k_steps = k // BLOCK_K
    stages = lds_stages
    scale_words_per_group = (k // BLOCK_K) * 64  # int32 per 32-row group of scales

    @fx.struct
    class SharedStages:
        # stage s: [A chunks (32 KiB) | B chunks (32 KiB)]
        data: fx.Array[fx.Int8, stages * STAGE_BYTES, 16]

    def lds_ptr(address):
        """An LDS pointer (addrspace 3) at a 32-bit LDS byte address."""
        return llvm.inttoptr(ir.Type.parse("!llvm.ptr<3>"), fx.Int64(address).ir_value())

    def i32(value):
        return fx.Int32(value).ir_value()

    def uniform_i32(value):
        """``value`` (the same in every lane) forced into an SGPR."""
        return fx.Int32(rocdl.readfirstlane(T.i32, fx.Int32(value).ir_value()))

    # The two MFMA forms and the epilogue guard are chosen here, in plain Python: the
    # @flyc.kernel AST rewriter turns `if`s inside the kernel into IR control flow.
    def mfma_pinned_to_agpr(a, b, acc, scale_a, opsel_a, scale_b, opsel_b):
        """acc += (a * 2**scale_a) . (b * 2**scale_b)^T, one 16x16x128 e2m1 tile, acc in AGPRs.

        Inline asm so the accumulator is pinned to AGPRs ("=a", tied "0"): with the
        intrinsic, LLVM splits the 64 loop-carried accumulators between VGPRs and AGPRs
        and copies them around every K step (config "intrinsic_acc" keeps that form).
        op_sel's bit picks bit 0 of the scale byte, op_sel_hi bit 1 (byte = opsel).
        """
        asm = (
            "v_mfma_scale_f32_16x16x128_f8f6f4 $0, $1, $2, $0, $3, $4 "
            f"op_sel:[{opsel_a & 1},{opsel_b & 1},0] op_sel_hi:[{opsel_a >> 1},{opsel_b >> 1},0] "
            f"cbsz:{_E2M1} blgp:{_E2M1}"
        )
        v4f32 = ir.VectorType.get([4], T.f32)
        return llvm.inline_asm(v4f32, [a, b, scale_a, scale_b, acc], asm, "=a,v,v,v,v,0", has_side_effects=False)

    def mfma_intrinsic(a, b, acc, scale_a, opsel_a, scale_b, opsel_b):
        """Same operation through llvm.amdgcn.mfma.scale.f32.16x16x128.f8f6f4."""
        v4f32 = ir.VectorType.get([4], T.f32)
        return rocdl.mfma_scale_f32_16x16x128_f8f6f4(v4f32, [a, b, acc, _E2M1, _E2M1, opsel_a, scale_a, opsel_b, scale_b])

    def guard_inline_asm_mfma():
        """Wait out the MFMA result latency before the epilogue reads the accumulators.

        LLVM's hazard recognizer cannot see that the inline asm is an MFMA, so it would
        not keep the epilogue's v_accvgpr_read from reading an accumulator the last
        MFMAs still write. CDNA3/4 need up to 19 wait states between an XDL write and a
        VALU read; 3 x s_nop 7 = 24. The sched_barrier keeps the epilogue below them.
        """
        llvm.inline_asm(None, [], "s_nop 7\ns_nop 7\ns_nop 7", "", has_side_effects=True)
        rocdl.sched_barrier(0)

    scaled_mfma = mfma_pinned_to_agpr if agpr_accumulators else mfma_intrinsic
    wait_for_last_mfma = guard_inline_asm_mfma if agpr_accumulators else (lambda: None)

    @flyc.kernel
    def mxfp4_gemm_4wave(
        A: fx.Tensor,
        B: fx.Tensor,
        C: fx.Tensor,
        A_scale: fx.Tensor,
        B_scale: fx.Tensor,
        m: fx.Int32,
        n: fx.Int32,
    ):
        smem = fx.SharedAllocator().allocate(SharedStages).peek()
        lds_base = fx.Int32(fx.ptrtoint(smem.data.ptr))

        tid = fx.Int32(fx.thread_idx.x)
        lane = tid & 63
        # Wave-uniform values go through readfirstlane so they live in SGPRs.
        wave = uniform_i32(tid >> 6)
        wave_m = wave >> 1
        wave_n = wave & 1

        tiles_n = n // BLOCK_N
        bid = fx.Int32(fx.block_idx.x)
        tile_m = bid // tiles_n
        tile_n = bid - tile_m * tiles_n

        a_rsrc = rocdl.get_buffer_rsrc(
            fx.get_iter(fx.rocdl.make_buffer_tensor(A, max_size=False, num_records_bytes=fx.Int64(m) * k_bytes))
        )
        b_rsrc = rocdl.get_buffer_rsrc(
            fx.get_iter(fx.rocdl.make_buffer_tensor(B, max_size=False, num_records_bytes=fx.Int64(n) * k_bytes))
        )
        sa_rsrc = rocdl.get_buffer_rsrc(
            fx.get_iter(
                fx.rocdl.make_buffer_tensor(
                    A_scale, max_size=False, num_records_bytes=fx.Int64(m // 32) * (scale_words_per_group * 4)
                )
            )
        )
        sb_rsrc = rocdl.get_buffer_rsrc(
            fx.get_iter(
                fx.rocdl.make_buffer_tensor(
                    B_scale, max_size=False, num_records_bytes=fx.Int64(n // 32) * (scale_words_per_group * 4)
                )
            )
        )
        c_rsrc = rocdl.get_buffer_rsrc(
            fx.get_iter(fx.rocdl.make_buffer_tensor(C, max_size=False, num_records_bytes=fx.Int64(m) * n * 2))
        )

        # -- global -> LDS DMA (one async group of 16 per wave per K step) -----
        def issue_stage_copy(k_step, stage):
            for operand, rsrc, offsets, tile_mn in ((0, a_rsrc, a_copy_offsets, tile_m), (1, b_rsrc, b_copy_offsets, tile_n)):
                for j in range_constexpr(_DMA_PER_WAVE):
                    chunk = dma_chunk(wave, j)
                    uniform, per_lane = offsets(tile_mn, chunk, k_step, lane, k_bytes)
                    # The DMA writes lane l's 16 bytes at M0 + 16 l: M0 is the chunk base.
                    dst = uniform_i32(lds_base + lds_chunk_offset(stage, operand, chunk))
                    rocdl.raw_ptr_buffer_load_async_lds(
                        rsrc, lds_ptr(dst), i32(16), per_lane.ir_value(), uniform_i32(uniform).ir_value(), i32(0)
                    )
            rocdl.asyncmark()

        # -- scales: global -> VGPR, one int32 per lane per 32-row group -------
        def load_scales(k_step):
            words = []
            for rsrc, tile_mn, wave_mn in ((sa_rsrc, tile_m, wave_m), (sb_rsrc, tile_n, wave_n)):
                for pair in range_constexpr(_SCALE_WORDS_PER_WAVE):
                    uniform, per_lane = scale_offsets(tile_mn, wave_mn, pair, k_step, lane, k_steps)
                    words.append(
                        rocdl.raw_ptr_buffer_load(T.i32, rsrc, per_lane.ir_value(), uniform_i32(uniform).ir_value())
                    )
            return words  # [A pairs 0..3, B pairs 0..3]

        # -- LDS -> VGPR operands and the MFMAs ---------------------------------
        v4i32 = ir.VectorType.get([4], T.i32)
        lane_lds = lds_base + lane * 16

        def read_operand(stage, operand, wave_mn, tile, half):
            addr = lane_lds + lds_chunk_offset(stage, operand, operand_chunk(wave_mn, tile, half))
            return llvm.LoadOp(v4i32, lds_ptr(addr), alignment=16).result

        def mfma_step(accs, stage, scales):
            """128 scaled MFMAs of one K step; accs[mt*8 + nt] is the 16x16 tile (mt, nt)."""
            for half in range_constexpr(_HALVES):
                a_ops = [read_operand(stage, 0, wave_m, t, half) for t in range_constexpr(_TILES_PER_WAVE)]
                b_ops = [read_operand(stage, 1, wave_n, t, half) for t in range_constexpr(_TILES_PER_WAVE)]
                for mt in range_constexpr(_TILES_PER_WAVE):
                    for nt in range_constexpr(_TILES_PER_WAVE):
                        idx = mt * _TILES_PER_WAVE + nt
                        # Operands swapped (B first): the result is the C^T tile, see c_offset.
                        accs[idx] = scaled_mfma(
                            b_ops[nt],
                            a_ops[mt],
                            accs[idx],
                            scales[_SCALE_WORDS_PER_WAVE + (nt >> 1)],
                            scale_opsel(half, nt),
                            scales[mt >> 1],
                            scale_opsel(half, mt),
                        )
            return accs

        # -- prologue: fill stages 0 .. stages-2 --------------------------------
        for s in range_constexpr(stages - 1):
            issue_stage_copy(fx.Int32(min(s, k_steps - 1)), s)
        zero = Vec.filled(4, 0.0, fx.Float32).ir_value()
        init = [zero] * (_TILES_PER_WAVE * _TILES_PER_WAVE) + load_scales(fx.Int32(0))
        n_acc = _TILES_PER_WAVE * _TILES_PER_WAVE

        for kk, state in range(0, k_steps, 1, init=init):
            k_step = fx.Int32(kk)
            accs = list(state[:n_acc])
            scales = list(state[n_acc:])
            # Step k's DMA is the oldest group in flight; every wave waits for its own,
            # and the barrier makes all of them visible -- and says every wave is done
            # reading the stage the next DMA overwrites (read in step k-1).
            rocdl.wait_asyncmark(stages - 2)
            fx.gpu.barrier()
            # Prefetch K step k+stages-1 (clamped: the last steps re-read the final
            # tile into a stage nobody reads, which keeps the loop free of branches).
            # Next step's scales go first: the loop-carried copy of them at the bottom
            # then waits only for these 8 loads, not for the DMA issued after them.
            next_k = fx.arith.select(k_step + 1 < k_steps, k_step + 1, fx.Int32(k_steps - 1))
            next_scales = load_scales(fx.Int32(next_k))
            ahead = k_step + (stages - 1)
            ahead_clamped = fx.arith.select(ahead < k_steps, ahead, fx.Int32(k_steps - 1))
            issue_stage_copy(fx.Int32(ahead_clamped), fx.Int32(ahead) % stages)
            accs = mfma_step(accs, k_step % stages, scales)
            results = yield [fx.as_ir_value(a) for a in accs] + [fx.as_ir_value(s) for s in next_scales]
        accs = list(results[:n_acc])
        rocdl.wait_asyncmark(0)  # no LDS DMA may be in flight when the wave ends
        wait_for_last_mfma()

        # -- epilogue: bf16 (RNE) and 8-byte stores, layout in c_offset ----------
        v2i32 = ir.VectorType.get([2], T.i32)
        for mt in range_constexpr(_TILES_PER_WAVE):
            for nt in range_constexpr(_TILES_PER_WAVE):
                packed = Vec(accs[mt * _TILES_PER_WAVE + nt]).to(fx.BFloat16)
                data = llvm.BitcastOp(v2i32, fx.as_ir_value(packed)).result
                offset = c_offset(tile_m, tile_n, wave_m, wave_n, mt, nt, lane, n)
                rocdl.raw_ptr_buffer_store(data, c_rsrc, offset.ir_value(), i32(0))

    @flyc.jit
    def launch(
        A: fx.Tensor,
        B: fx.Tensor,
        C: fx.Tensor,
        A_scale: fx.Tensor,
        B_scale: fx.Tensor,
        m: fx.Int32,
        n: fx.Int32,
        stream: fx.Stream = fx.Stream(None),
    ):
        grid = (m // BLOCK_M) * (n // BLOCK_N)
        attrs = {"rocdl.flat_work_group_size": f"{THREADS},{THREADS}"}
        if waves_per_eu:
            attrs["rocdl.waves_per_eu"] = waves_per_eu
        mxfp4_gemm_4wave(A, B, C, A_scale, B_scale, m, n, value_attrs=attrs).launch(
            grid=(grid, 1, 1), block=(THREADS, 1, 1), stream=stream
        )

    return launch


# ---------------------------------------------------------------------------
# registry entry
# ---------------------------------------------------------------------------

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
        for what, size in (("M x K/2 (A bytes)", m * k // 2), ("N x K/2 (B bytes)", n * k // 2), ("M x N x 2 (C bytes)", m * n * 2)):
            if size >= _INT32_LIMIT:
                raise UnsupportedShape(f"{self.name}: {what} = {size} must be < 2**31 (32-bit buffer offsets)")

    def _runtime_unavailable_reason(self, device: torch.device) -> str | None:
        try:
            import flydsl.compiler  # noqa: F401
        except Exception as exc:  # an import error of any kind means no runtime
            return f"FlyDSL is not importable: {exc}"
        return flydsl_toolchain.hip_runtime_missing_reason()

    def _prepare(self, a: MXFP4Tensor, b: MXFP4Tensor, out: torch.Tensor, config: Mapping[str, Any]) -> Callable[[], None]:
        """Preshuffle B and both scales, compile for K, return the launch closure.

        NOT YET RUN ON A GFX950: the argument passing (flat torch tensors as fx.Tensor,
        the current torch stream as fx.Stream) follows FlyDSL's own gfx950 GEMM tests.
        """
        import flydsl.compiler as flyc

        m, n, k = a.rows, b.rows, a.k
        b_data = preshuffle.shuffle_weight(b.data)
        a_scales = preshuffle.shuffle_scales(a.scales)
        b_scales = preshuffle.shuffle_scales(b.scales)
        launch = build_launcher(k=k, **config)
        args = (
            a.data.reshape(-1),
            b_data.reshape(-1),
            out.view(-1),
            a_scales.reshape(-1),
            b_scales.reshape(-1),
            m,
            n,
            torch.cuda.current_stream(out.device),
        )
        compiled = flyc.compile(launch, *args)

        def run() -> None:
            compiled(*args)

        return run

    def _compile_only(self, arch: str, config_name: str, config: Mapping[str, Any]) -> CompiledArtifact:
        """Compile in a child process (FlyDSL's compile-only switches are env vars)."""
        env = dict(os.environ)
        env["ROCM_PATH"] = flydsl_toolchain.rocm_path_for_compile(env)
        repo_root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (repo_root, env.get("PYTHONPATH")) if p)
        with tempfile.TemporaryDirectory(prefix="flydsl-compile-") as out_dir:
            cmd = [sys.executable, "-m", "kernels.flydsl_gfx950", "--compile-only", "--arch", arch]
            cmd += ["--config", config_name, "--out", out_dir, "--quiet"]
            proc = subprocess.run(cmd, cwd=repo_root, env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(
                    f"{self.name} compile-only ({arch}, {config_name}) failed with exit {proc.returncode}:\n"
                    f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
                )
            summary = json.loads(Path(out_dir, "compile.json").read_text())
            assembly = Path(out_dir, summary["assembly_file"]).read_text()
        return CompiledArtifact(
            kernel=self.name,
            config=config_name,
            arch=arch,
            assembly=assembly,
            compile_seconds=summary["compile_seconds"],
            extra={"k": str(summary["k"]), "rocm_path": env["ROCM_PATH"]},
        )


# ---------------------------------------------------------------------------
# compile-only command line (the child process of _compile_only)
# ---------------------------------------------------------------------------


def compile_in_this_process(*, arch: str, config_name: str, out_dir: Path, k: int = COMPILE_ONLY_K) -> dict:
    """Compile without a GPU; write the final ISA and ``compile.json`` into ``out_dir``.

    Sets FlyDSL's env switches before FlyDSL is first used, so call it in a fresh
    process (FlyDSL reads some of them once).
    """
    kernel = FlyDSLGfx950FourWave()
    config = kernel.config(config_name)
    dump_dir = Path(tempfile.mkdtemp(prefix="dump-", dir=out_dir))
    os.environ.update(
        {
            "COMPILE_ONLY": "1",
            "FLYDSL_GPU_ARCH": arch,  # without it FlyDSL silently targets gfx942
            "FLYDSL_DEBUG_DUMP_ASM": "1",
            "FLYDSL_DUMP_DIR": str(dump_dir),
            "FLYDSL_RUNTIME_ENABLE_CACHE": "0",  # a cached binary would skip the ISA dump
        }
    )
    os.environ["ROCM_PATH"] = flydsl_toolchain.rocm_path_for_compile()
    import flydsl.compiler as flyc

    m = n = 2 * BLOCK_M  # runtime values; any multiple of the tile gives the same code
    placeholders = (
        torch.empty(m * k // 2, dtype=torch.uint8),
        torch.empty(n * k // 2, dtype=torch.uint8),
        torch.empty(m * n, dtype=torch.bfloat16),
        torch.empty(m * k // 32, dtype=torch.uint8),
        torch.empty(n * k // 32, dtype=torch.uint8),
        m,
        n,
    )
    started = time.perf_counter()
    flyc.compile(build_launcher(k=k, **config), *placeholders)
    seconds = time.perf_counter() - started
    isa_files = sorted(dump_dir.glob("*/22_final_isa.s"))
    if len(isa_files) != 1:
        raise RuntimeError(f"expected one final ISA dump under {dump_dir}, found {[str(p) for p in isa_files]}")
    assembly_file = f"{KERNEL_NAME}.{config_name}.{arch}.s"
    Path(out_dir, assembly_file).write_text(isa_files[0].read_text())
    summary = {
        "kernel": KERNEL_NAME,
        "config": config_name,
        "arch": arch,
        "k": k,
        "compile_seconds": seconds,
        "assembly_file": assembly_file,
    }
    tmp = Path(out_dir, "compile.json.tmp")
    tmp.write_text(json.dumps(summary, indent=2))
    os.replace(tmp, Path(out_dir, "compile.json"))
    return summary


def resource_summary(assembly: str) -> dict[str, int]:
    """Registers, spills, scratch, LDS and MFMA count from AMDGPU ISA text (its metadata)."""

    def field(key: str) -> int:
        found = re.search(rf"^\s*(?:- )?\.{re.escape(key)}:\s+(\d+)", assembly, re.MULTILINE)
        if not found:
            raise ValueError(f"assembly: no .{key} in the .amdgpu_metadata")
        return int(found.group(1))

    def symbol(suffix: str) -> int:
        found = re.search(rf"^\s*\.set\s+\.L\w+\.{suffix},\s*(\d+)", assembly, re.MULTILINE)
        if not found:
            raise ValueError(f"assembly: no .set ....{suffix}")
        return int(found.group(1))

    return {
        "vgpr_total": field("vgpr_count"),
        "agpr": field("agpr_count"),
        "arch_vgpr": symbol("num_vgpr"),
        "sgpr": field("sgpr_count"),
        "vgpr_spill": field("vgpr_spill_count"),
        "sgpr_spill": field("sgpr_spill_count"),
        "scratch_bytes": field("private_segment_fixed_size"),
        "lds_bytes": field("group_segment_fixed_size"),
        "max_threads": field("max_flat_workgroup_size"),
        "scaled_mfma": len(re.findall(r"^\s*v_mfma_scale_f32_16x16x128_f8f6f4\b", assembly, re.MULTILINE)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kernels.flydsl_gfx950",
        description="Compile the FlyDSL gfx950 MXFP4 GEMM without a GPU and print its resource usage.",
    )
    parser.add_argument("--compile-only", action="store_true", required=True, help="compile without a GPU (required)")
    parser.add_argument("--arch", default=ARCH, choices=[ARCH], help="target architecture")
    parser.add_argument("--config", default="default", help=f"one of {sorted(FlyDSLGfx950FourWave.configs)}")
    parser.add_argument("--k", type=int, default=COMPILE_ONLY_K, help="K baked into the kernel (a multiple of 256)")
    parser.add_argument("--out", type=Path, default=None, help="folder for the ISA and compile.json (default: a temp dir)")
    parser.add_argument("--quiet", action="store_true", help="print nothing on success")
    args = parser.parse_args(argv)
    try:
        out_dir = args.out or Path(tempfile.mkdtemp(prefix="flydsl-compile-"))
        out_dir.mkdir(parents=True, exist_ok=True)
        summary = compile_in_this_process(arch=args.arch, config_name=args.config, out_dir=out_dir, k=args.k)
        resources = resource_summary(Path(out_dir, summary["assembly_file"]).read_text())
    except Exception as exc:  # harness error: say what failed, exit 2
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(json.dumps({**summary, "resources": resources, "out": str(out_dir)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
