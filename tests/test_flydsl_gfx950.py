"""The FlyDSL gfx950 MXFP4 GEMM: compile-only resources, errors, a CPU emulation of its
data movement, and (on a gfx950 only) the real run against the reference.

The emulation replays what every lane of every wave does -- LDS DMA addresses, LDS
reads, scale words, op_sel bytes, C stores -- by calling the SAME index functions
the kernel is built from (kernels.flydsl_gfx950.a_copy_offsets, ...), and feeds an
MFMA model written from the CDNA4 operand layout of v_mfma_scale_f32_16x16x128_f8f6f4
(lane l: row l % 16, K elements 32 (l // 16) ..+31, one scale byte; result lane l,
register r = D[4 (l // 16) + r][l % 16]). Its bf16 output must pass the project's
accuracy gate against kernels.reference; two injected layout faults must fail it.
"""

from __future__ import annotations

import re

import pytest
import torch
from operands import random_mxfp4

from harness.accuracy import compare
from harness.resources import usage_from_artifact
from kernels import devices, preshuffle
from kernels.flydsl_gfx950 import COMPILE_ONLY_K, KERNEL_NAME
from kernels.flydsl_gfx950 import index_math as fk
from kernels.mxfp4 import MXFP4Tensor, e2m1_to_float, unpack_nibbles
from kernels.reference import reference_gemm
from kernels.registry import UnsupportedDevice, UnsupportedShape, get_kernel

KERNEL = get_kernel(KERNEL_NAME)
LDS_LIMIT = 160 * 1024
# The instruction line (not a comment) of the scaled MFMA, with its modifiers.
MFMA_LINE = re.compile(r"^\s*v_mfma_scale_f32_16x16x128_f8f6f4\b(.*)$", re.MULTILINE)


# ---------------------------------------------------------------------------
# compile-only (no GPU): one compile per config, shared by the tests below
# ---------------------------------------------------------------------------


_ARTIFACTS: dict = {}


def _compile(config: str):
    if config not in _ARTIFACTS:  # ~2-4 s each on 2 cores; every test shares one per config
        _ARTIFACTS[config] = KERNEL.compile_only("gfx950", config)
    return _ARTIFACTS[config]


@pytest.fixture(scope="module", params=sorted(KERNEL.configs))
def compiled(request):
    return _compile(request.param)


def test_compile_only_resources(compiled) -> None:
    """Read by harness.resources, the parser the budget gate and the asv history use."""
    usage = usage_from_artifact(compiled)
    assert compiled.arch == "gfx950" and re.search(r"\.amdgcn_target \"amdgcn-amd-amdhsa-\w*-gfx950", compiled.assembly)
    assert compiled.extra["k"] == str(COMPILE_ONLY_K)
    assert usage.spills_or_scratch() == {}, usage
    assert usage.shared_bytes == fk.lds_bytes(KERNEL.config(compiled.config)["lds_stages"]) <= LDS_LIMIT, usage
    assert usage.threads_per_group == fk.THREADS, usage
    # 2 halves x 8 x 8 tiles per K step, in the (unrolled) loop body: the parser's count and the raw lines agree.
    assert usage.mma_count == len(MFMA_LINE.findall(compiled.assembly)) == 128, usage
    # gfx90a+ unified register file: total = arch VGPRs (allocated in 4s, .amdhsa_accum_offset) + AGPRs.
    # Both configs' arch counts are multiples of 4, so count and allocation agree.
    assert usage.arch_vgpr % 4 == 0 and usage.registers == usage.arch_vgpr + usage.agpr, usage
    num_vgpr = int(re.search(r"^\s*\.set\s+\.L\w+\.num_vgpr,\s*(\d+)", compiled.assembly, re.MULTILINE).group(1))
    assert usage.arch_vgpr == num_vgpr == -(-num_vgpr // 4) * 4, (num_vgpr, usage)  # the compiler's count


def test_default_config_pins_accumulators_to_agprs() -> None:
    compiled = _compile("default")
    usage = usage_from_artifact(compiled)
    assert usage.agpr == 256, usage  # 64 tiles x 4 f32 accumulators per lane
    # The epilogue's guard against reading an accumulator an MFMA still writes.
    tail = compiled.assembly[compiled.assembly.rindex("v_mfma_scale") :]
    first_read = tail.index("v_accvgpr_read_b32")
    assert tail[:first_read].count("s_nop 7") >= 3


def test_asm_and_intrinsic_forms_encode_the_same_op_sel() -> None:
    # The intrinsic's op_sel/op_sel_hi come from LLVM; the default config writes them
    # by hand. Both must give the same multiset of MFMA modifiers (byte selections).
    forms = {}
    for config in KERNEL.configs:
        assembly = _compile(config).assembly
        forms[config] = sorted(
            " ".join(re.findall(r"op_sel(?:_hi)?:\[[^\]]*\]|cbsz:\d|blgp:\d", mods))
            for mods in MFMA_LINE.findall(assembly)
        )
    default, intrinsic = forms["default"], forms["intrinsic_acc"]
    # LLVM omits an all-zero op_sel; normalise before comparing.
    norm = lambda mods: sorted(m.replace("op_sel:[0,0,0] ", "").replace(" op_sel:[0,0,0]", "") for m in mods)  # noqa: E731
    assert norm(default) == norm(intrinsic)
    # Both operands' bytes share the 128-K half h: (2h + tile parity A, 2h + tile parity B).
    assert len(set(norm(default))) == 8


def test_compile_only_rejects_other_archs() -> None:
    with pytest.raises(NotImplementedError, match="gfx950"):
        KERNEL.compile_only("gfx942")


# ---------------------------------------------------------------------------
# errors that name the constraint
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "m,n,k,dim,multiple", [(300, 256, 256, "M", 256), (256, 128, 256, "N", 256), (256, 256, 288, "K", 256)]
)
def test_shape_constraints_are_named(m, n, k, dim, multiple) -> None:
    with pytest.raises(UnsupportedShape, match=rf"{dim} = \d+ must be a positive multiple of {multiple}"):
        KERNEL.check_shape(m, n, k)


def test_32bit_offset_limit_is_named() -> None:
    with pytest.raises(UnsupportedShape, match="2\\*\\*31"):
        KERNEL.check_shape(32768, 32768, 256)


def test_cpu_device_is_refused_naming_gfx950() -> None:
    g = torch.Generator().manual_seed(0)
    a, b = random_mxfp4(256, 256, generator=g), random_mxfp4(256, 256, generator=g)
    out = torch.empty(256, 256, dtype=torch.bfloat16)
    assert "gfx950" in KERNEL.unavailable_reason("cpu")
    with pytest.raises(UnsupportedDevice, match="gfx950"):
        KERNEL.prepare(a, b, out)


def test_unknown_config_is_named() -> None:
    with pytest.raises(ValueError, match="no config 'nope'"):
        KERNEL.compile_only("gfx950", "nope")


# ---------------------------------------------------------------------------
# CPU emulation of the kernel's data movement + an MFMA model
# ---------------------------------------------------------------------------

LANES = torch.arange(64)
BYTES16 = torch.arange(16)


def _mfma_operand(op: torch.Tensor, words: torch.Tensor, opsel: int) -> torch.Tensor:
    """One MFMA operand as the hardware sees it: [64 lanes, 16 bytes] -> float64 [16 rows, 128 K].

    Lane l holds row l % 16, K elements 32 (l // 16) + j (element 2i in the low nibble of
    byte i), scaled by 2**(byte ``opsel`` of its scale word - 127).
    """
    values = e2m1_to_float(unpack_nibbles(op), torch.float64)  # [64, 32]
    exponent = (words >> (8 * opsel)) & 0xFF
    values = values * torch.pow(2.0, exponent.to(torch.float64) - 127)[:, None]
    return values.reshape(4, 16, 32).permute(1, 0, 2).reshape(16, 128)


# Result layout of a 16x16 f32 MFMA: lane l, register r holds D[4 (l // 16) + r][l % 16].
RESULT_ROWS = 4 * (LANES[:, None] // 16) + torch.arange(4)
RESULT_COLS = (LANES % 16)[:, None].expand(64, 4)


def emulate_kernel(a: MXFP4Tensor, b: MXFP4Tensor, stages: int = 2) -> torch.Tensor:
    """C as the kernel would write it (bf16), replaying every lane's addresses."""
    m, n, k = a.rows, b.rows, a.k
    k_bytes, k_steps = k // 2, k // fk.BLOCK_K
    a_mem = a.data.reshape(-1)
    b_mem = preshuffle.shuffle_weight(b.data).reshape(-1)
    scale_mem = [preshuffle.shuffle_scales(t.scales).reshape(-1) for t in (a, b)]
    c_mem = torch.full((m * n,), float("nan"), dtype=torch.float64)
    tiles_n = n // fk.BLOCK_N
    for bid in range((m // fk.BLOCK_M) * tiles_n):
        tile_m, tile_n = bid // tiles_n, bid - (bid // tiles_n) * tiles_n
        lds = torch.zeros(fk.lds_bytes(stages), dtype=torch.uint8)
        acc = torch.zeros(fk.WAVES, 64, 64, 4, dtype=torch.float64)  # wave, tile, lane, register

        def copy_stage(k_step: int, stage: int) -> None:
            for wave in range(fk.WAVES):
                for operand, mem, offsets, tile_mn in (
                    (0, a_mem, fk.a_copy_offsets, tile_m),
                    (1, b_mem, fk.b_copy_offsets, tile_n),
                ):
                    for j in range(fk.DMA_PER_WAVE):
                        chunk = fk.dma_chunk(wave, j)
                        uniform, per_lane = offsets(tile_mn, chunk, k_step, LANES, k_bytes)
                        src = (uniform + per_lane)[:, None] + BYTES16
                        dst = (fk.lds_chunk_offset(stage, operand, chunk) + 16 * LANES)[:, None] + BYTES16
                        lds[dst] = mem[src]

        for s in range(stages - 1):
            copy_stage(min(s, k_steps - 1), s)
        for k_step in range(k_steps):
            ahead = k_step + stages - 1
            copy_stage(min(ahead, k_steps - 1), ahead % stages)
            stage = k_step % stages
            for wave in range(fk.WAVES):
                wave_m, wave_n = wave >> 1, wave & 1
                words = []
                for mem, tile_mn, wave_mn in ((scale_mem[0], tile_m, wave_m), (scale_mem[1], tile_n, wave_n)):
                    for pair in range(fk.SCALE_WORDS_PER_WAVE):
                        uniform, per_lane = fk.scale_offsets(tile_mn, wave_mn, pair, k_step, LANES, k_steps)
                        raw = mem[(uniform + per_lane)[:, None] + torch.arange(4)].to(torch.int64)
                        words.append(raw[:, 0] | raw[:, 1] << 8 | raw[:, 2] << 16 | raw[:, 3] << 24)
                for half in range(fk.HALVES):

                    def operands(operand: int, wave_mn: int, scale_words: list) -> torch.Tensor:
                        mats = []
                        for tile in range(fk.TILES_PER_WAVE):
                            base = fk.lds_chunk_offset(stage, operand, fk.operand_chunk(wave_mn, tile, half))
                            op = lds[(base + 16 * LANES)[:, None] + BYTES16]
                            mats.append(_mfma_operand(op, scale_words[tile >> 1], fk.scale_opsel(half, tile)))
                        return torch.stack(mats)  # [tile, 16, 128]

                    a_mats = operands(0, wave_m, words[: fk.SCALE_WORDS_PER_WAVE])
                    b_mats = operands(1, wave_n, words[fk.SCALE_WORDS_PER_WAVE :])
                    # as in the kernel: B operand first, so D[mt, nt] = B_nt . A_mt^T is the C^T tile
                    d = torch.einsum("nik,mjk->mnij", b_mats, a_mats)
                    acc[wave] += d[:, :, RESULT_ROWS, RESULT_COLS].reshape(64, 64, 4)
        for wave in range(fk.WAVES):
            for mt in range(fk.TILES_PER_WAVE):
                for nt in range(fk.TILES_PER_WAVE):
                    offset = fk.c_offset(tile_m, tile_n, wave >> 1, wave & 1, mt, nt, LANES, n)
                    c_mem[(offset // 2)[:, None] + torch.arange(4)] = acc[wave, mt * 8 + nt]
    return c_mem.reshape(m, n).to(torch.bfloat16)


def _operands(m: int, n: int, k: int) -> tuple[MXFP4Tensor, MXFP4Tensor]:
    g = torch.Generator().manual_seed(m * 7 + n * 3 + k)
    return random_mxfp4(m, k, generator=g), random_mxfp4(n, k, generator=g)


def _judge(c: torch.Tensor, a: MXFP4Tensor, b: MXFP4Tensor):
    return compare(c, reference_gemm(a, b), reference_gemm(a, b, absolute=True), a.k)


def test_emulated_kernel_matches_reference() -> None:
    # 2 x 1 tiles (tile_m != tile_n), 3 K steps (both LDS stages, an odd count, the clamped tail)
    a, b = _operands(512, 256, 768)
    report = _judge(emulate_kernel(a, b), a, b)
    assert report.passed, report.summary()


@pytest.mark.parametrize(
    "fault,replacement",
    [
        # scale byte of the wrong 16-row tile
        ("scale_opsel", lambda half, tile: half * 2 + ((tile + 1) & 1)),
        # B read as if it were not preshuffled (row-major addressing)
        ("b_copy_offsets", fk.a_copy_offsets),
    ],
)
def test_emulation_catches_injected_layout_faults(monkeypatch, fault, replacement) -> None:
    a, b = _operands(256, 256, 512)
    monkeypatch.setattr(fk, fault, replacement)
    report = _judge(emulate_kernel(a, b), a, b)
    assert not report.passed, f"the emulation did not notice a broken {fault}"


# ---------------------------------------------------------------------------
# the real kernel (gfx950 only)
# ---------------------------------------------------------------------------


def _gfx950_or_skip() -> torch.device:
    device = devices.default_device()
    arch = devices.device_arch(device)
    if arch != "gfx950":
        pytest.skip(f"needs a gfx950 (MI355X) GPU; this device is {arch}")
    reason = KERNEL.unavailable_reason(device)
    if reason:
        pytest.skip(reason)
    return device


@pytest.mark.gpu
@pytest.mark.parametrize("config", sorted(KERNEL.configs))
@pytest.mark.parametrize("m,n,k", [(256, 256, 256), (512, 768, 1280), (1024, 512, 4096)])
def test_runtime_matches_reference_on_gfx950(config, m, n, k) -> None:
    device = _gfx950_or_skip()
    from ci.common.correctness import check_kernel  # lazily: the one runtime correctness path

    a, b = (t.to(device) for t in _operands(m, n, k))
    report = check_kernel(KERNEL, a, b, config)
    assert report.passed, report.summary()


# ---------------------------------------------------------------------------
# the linker provisioning of kernels.flydsl_gfx950.toolchain
# ---------------------------------------------------------------------------


def test_toolchain_prefers_rocm_then_shims_debian_lld_then_names_the_fix(tmp_path, monkeypatch) -> None:
    from kernels.flydsl_gfx950 import toolchain as tc

    rocm = tmp_path / "rocm"
    tc.rocm_linker(rocm).parent.mkdir(parents=True)
    tc.rocm_linker(rocm).write_text("")
    assert tc.rocm_path_for_compile({"ROCM_PATH": str(rocm)}, shim_root=tmp_path / "shim") == str(rocm)

    fake_lld = tmp_path / "ld.lld-19"
    fake_lld.write_text("")
    monkeypatch.setattr(tc, "DEBIAN_LLD", fake_lld)
    shim = tc.rocm_path_for_compile({"ROCM_PATH": str(tmp_path / "none")}, shim_root=tmp_path / "shim")
    assert tc.rocm_linker(shim).resolve() == fake_lld.resolve()
    assert tc.rocm_path_for_compile({"ROCM_PATH": str(tmp_path / "none")}, shim_root=tmp_path / "shim") == shim

    monkeypatch.setattr(tc, "DEBIAN_LLD", tmp_path / "missing")
    monkeypatch.setattr(tc.shutil, "which", lambda name: None)
    with pytest.raises(tc.ToolchainMissing, match="apt-get install lld-19"):
        tc.rocm_path_for_compile({"ROCM_PATH": str(tmp_path / "none")}, shim_root=tmp_path / "shim2")
