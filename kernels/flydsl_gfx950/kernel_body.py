"""The kernel body: the FlyDSL ``@flyc.kernel`` of the gfx950 4-wave MXFP4 GEMM and its ``@flyc.jit`` launch.

One workgroup of 4 waves computes one 256x256 C tile, each wave a 128x128 quadrant of scaled-MFMA
accumulators; A and B go global -> LDS by the 16-byte LDS DMA in MFMA operand order, multi-buffered
(``lds_stages``), one barrier per K step; scales ride in VGPRs a step ahead; the MFMA is fed (B, A) so
the epilogue stores 8 bytes per lane. Offsets: index_math.py. NOT YET RUN ON A GFX950 (its ISA and
resources are checked in CI; its data movement emulated in tests/test_flydsl_gfx950.py). The design
in full: docs/MEASURING.md, "The FlyDSL kernel body".
"""

# No ``from __future__ import annotations`` here: FlyDSL reads the annotations of
# @flyc.kernel / @flyc.jit parameters (fx.Tensor, fx.Int32) and of fx.struct fields
# as live objects; deferred (string) annotations make it mistype the arguments.
# Everything below is valid on Python 3.10 as written.

import functools

from kernels.flydsl_gfx950.index_math import (
    BF16_BYTES,
    BLOCK_K,
    BLOCK_M,
    BLOCK_N,
    DMA_PER_WAVE,
    E2M1_FORMAT_CODE,
    HALVES,
    LANE_BYTES,
    LDS_LIMIT_BYTES,
    SCALE_ROWS_PER_WORD,
    SCALE_WORD_BYTES,
    SCALE_WORDS_PER_WAVE,
    STAGE_BYTES,
    THREADS,
    TILES_PER_WAVE,
    WAVE_SHIFT,
    WAVE_SIZE,
    a_copy_offsets,
    b_copy_offsets,
    c_offset,
    dma_chunk,
    lds_bytes,
    lds_chunk_offset,
    operand_chunk,
    scale_offsets,
    scale_opsel,
    scale_words_per_group,
)


@functools.cache
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
            f"lds_stages: {lds_stages} stages x {STAGE_BYTES // 1024} KiB "
            f"exceed the {LDS_LIMIT_BYTES // 1024} KiB of LDS"
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
    scale_words = scale_words_per_group(k)  # int32 per 32-row group of scales

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
            f"cbsz:{E2M1_FORMAT_CODE} blgp:{E2M1_FORMAT_CODE}"
        )
        v4f32 = ir.VectorType.get([4], T.f32)
        return llvm.inline_asm(v4f32, [a, b, scale_a, scale_b, acc], asm, "=a,v,v,v,v,0", has_side_effects=False)

    def mfma_intrinsic(a, b, acc, scale_a, opsel_a, scale_b, opsel_b):
        """Same operation through llvm.amdgcn.mfma.scale.f32.16x16x128.f8f6f4."""
        v4f32 = ir.VectorType.get([4], T.f32)
        return rocdl.mfma_scale_f32_16x16x128_f8f6f4(
            v4f32, [a, b, acc, E2M1_FORMAT_CODE, E2M1_FORMAT_CODE, opsel_a, scale_a, opsel_b, scale_b]
        )

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
        lane = tid & (WAVE_SIZE - 1)
        # Wave-uniform values go through readfirstlane so they live in SGPRs.
        wave = uniform_i32(tid >> WAVE_SHIFT)
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
                    A_scale,
                    max_size=False,
                    num_records_bytes=fx.Int64(m // SCALE_ROWS_PER_WORD) * (scale_words * SCALE_WORD_BYTES),
                )
            )
        )
        sb_rsrc = rocdl.get_buffer_rsrc(
            fx.get_iter(
                fx.rocdl.make_buffer_tensor(
                    B_scale,
                    max_size=False,
                    num_records_bytes=fx.Int64(n // SCALE_ROWS_PER_WORD) * (scale_words * SCALE_WORD_BYTES),
                )
            )
        )
        c_rsrc = rocdl.get_buffer_rsrc(
            fx.get_iter(fx.rocdl.make_buffer_tensor(C, max_size=False, num_records_bytes=fx.Int64(m) * n * BF16_BYTES))
        )

        # -- global -> LDS DMA (one async group of 16 per wave per K step) -----
        def issue_stage_copy(k_step, stage):
            for operand, rsrc, offsets, tile_mn in (
                (0, a_rsrc, a_copy_offsets, tile_m),
                (1, b_rsrc, b_copy_offsets, tile_n),
            ):
                for j in range_constexpr(DMA_PER_WAVE):
                    chunk = dma_chunk(wave, j)
                    uniform, per_lane = offsets(tile_mn, chunk, k_step, lane, k_bytes)
                    # The DMA writes lane l's 16 bytes at M0 + 16 l: M0 is the chunk base.
                    dst = uniform_i32(lds_base + lds_chunk_offset(stage, operand, chunk))
                    rocdl.raw_ptr_buffer_load_async_lds(
                        rsrc,
                        lds_ptr(dst),
                        i32(LANE_BYTES),
                        per_lane.ir_value(),
                        uniform_i32(uniform).ir_value(),
                        i32(0),
                    )
            rocdl.asyncmark()

        # -- scales: global -> VGPR, one int32 per lane per 32-row group -------
        def load_scales(k_step):
            words = []
            for rsrc, tile_mn, wave_mn in ((sa_rsrc, tile_m, wave_m), (sb_rsrc, tile_n, wave_n)):
                for pair in range_constexpr(SCALE_WORDS_PER_WAVE):
                    uniform, per_lane = scale_offsets(tile_mn, wave_mn, pair, k_step, lane, k_steps)
                    words.append(
                        rocdl.raw_ptr_buffer_load(T.i32, rsrc, per_lane.ir_value(), uniform_i32(uniform).ir_value())
                    )
            return words  # [A pairs 0..3, B pairs 0..3]

        # -- LDS -> VGPR operands and the MFMAs ---------------------------------
        v4i32 = ir.VectorType.get([4], T.i32)
        lane_lds = lds_base + lane * LANE_BYTES

        def read_operand(stage, operand, wave_mn, tile, half):
            addr = lane_lds + lds_chunk_offset(stage, operand, operand_chunk(wave_mn, tile, half))
            return llvm.LoadOp(v4i32, lds_ptr(addr), alignment=16).result

        def mfma_step(accs, stage, scales):
            """128 scaled MFMAs of one K step; accs[mt*8 + nt] is the 16x16 tile (mt, nt)."""
            for half in range_constexpr(HALVES):
                a_ops = [read_operand(stage, 0, wave_m, t, half) for t in range_constexpr(TILES_PER_WAVE)]
                b_ops = [read_operand(stage, 1, wave_n, t, half) for t in range_constexpr(TILES_PER_WAVE)]
                for mt in range_constexpr(TILES_PER_WAVE):
                    for nt in range_constexpr(TILES_PER_WAVE):
                        idx = mt * TILES_PER_WAVE + nt
                        # Operands swapped (B first): the result is the C^T tile, see c_offset.
                        accs[idx] = scaled_mfma(
                            b_ops[nt],
                            a_ops[mt],
                            accs[idx],
                            scales[SCALE_WORDS_PER_WAVE + (nt >> 1)],
                            scale_opsel(half, nt),
                            scales[mt >> 1],
                            scale_opsel(half, mt),
                        )
            return accs

        # -- prologue: fill stages 0 .. stages-2 --------------------------------
        for s in range_constexpr(stages - 1):
            issue_stage_copy(fx.Int32(min(s, k_steps - 1)), s)
        zero = Vec.filled(4, 0.0, fx.Float32).ir_value()
        init = [zero] * (TILES_PER_WAVE * TILES_PER_WAVE) + load_scales(fx.Int32(0))
        n_acc = TILES_PER_WAVE * TILES_PER_WAVE

        for kk, state in range(0, k_steps, 1, init=init):  # type: ignore[call-overload]  # FlyDSL rewrites range(init=)
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
        for mt in range_constexpr(TILES_PER_WAVE):
            for nt in range_constexpr(TILES_PER_WAVE):
                packed = Vec(accs[mt * TILES_PER_WAVE + nt]).to(fx.BFloat16)
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
        stream: fx.Stream = fx.Stream(None),  # noqa: B008 (FlyDSL's own launch signature form)
    ):
        grid = (m // BLOCK_M) * (n // BLOCK_N)
        attrs: dict[str, str | int] = {"rocdl.flat_work_group_size": f"{THREADS},{THREADS}"}
        if waves_per_eu:
            attrs["rocdl.waves_per_eu"] = waves_per_eu
        mxfp4_gemm_4wave(A, B, C, A_scale, B_scale, m, n, value_attrs=attrs).launch(
            grid=(grid, 1, 1), block=(THREADS, 1, 1), stream=stream
        )

    return launch
