"""kernels.triton_compile, harness.resources (the one parser) and ci.budget.resources on real compiler output.

The probe kernel below is a plain bf16 ``tl.dot`` GEMM: its tile and warp count
move register use in known directions (fewer warps for the same tile -> more
registers per thread; a 128x256 tile on 4 warps -> spills on sm_90), which the
parsers must see. Every number checked here comes from a compile run in the test.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from harness import resources
from harness.resources import AmdLimits, NvidiaLimits, ResourceParseError, amd_occupancy, amdgpu, nvidia_occupancy
from kernels.registry import _REGISTRY, CompiledArtifact, Kernel, all_kernels, register

PROJECT = Path(__file__).resolve().parents[1]

# A self-contained Triton GEMM, also written into the budget gate's temporary
# repositories (tests/test_budget_gate.py) as their only Triton kernel.
PROBE_KERNEL_SOURCE = '''\
"""Probe kernel: a bf16 tl.dot GEMM whose configs the resource tests edit."""

from __future__ import annotations

import triton
import triton.language as tl

from kernels.registry import CompiledArtifact, Kernel, register

# One line each: the tests rewrite them.
CONFIGS = {"default": {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 2}}
ARCHS = ("sm_90",)
MANGLE_OUTPUT = False

SIGNATURE = {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", "M": "i32", "N": "i32", "K": "i32",
             "stride_am": "i32", "stride_bn": "i32", "stride_cm": "i32"}


@triton.jit
def probe_gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_cm,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rows[:, None] * stride_am + ks[None, :]
    b_ptrs = b_ptr + cols[:, None] * stride_bn + ks[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, K, BLOCK_K):
        acc += tl.dot(tl.load(a_ptrs), tl.trans(tl.load(b_ptrs)))
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :], acc.to(tl.bfloat16))


def compile_probe(arch, config_name, config, kernel="probe_gemm"):
    from kernels.triton_compile import compile_for_arch

    return compile_for_arch(
        probe_gemm_kernel, kernel=kernel, config_name=config_name, arch=arch, signature=SIGNATURE,
        constexprs={k: config[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K")},
        num_warps=config["num_warps"], num_stages=config["num_stages"], divisible_by_16=list(SIGNATURE),
    )


@register
class ProbeGemm(Kernel):
    name = "probe_gemm"
    backend = "triton"
    description = "test probe: bf16 tl.dot GEMM"
    runs_on = ()
    compile_archs = ARCHS
    configs = CONFIGS

    def _prepare(self, a, b, out, config):
        raise NotImplementedError("compile-only probe")

    def _compile_only(self, arch, config_name, config):
        artifact = compile_probe(arch, config_name, config, self.name)
        if MANGLE_OUTPUT:  # a compiler whose output the parser cannot read
            extra = dict(artifact.extra, cuobjdump_resource_usage="Resource usage: (truncated)")
            return CompiledArtifact(artifact.kernel, artifact.config, artifact.arch, artifact.assembly,
                                    artifact.compile_seconds, extra)
        return artifact
'''

TILE_128 = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_stages": 2}


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    """The probe module, importable by name (Triton's interpreter mode re-imports it in a child)."""
    root = tmp_path_factory.mktemp("probe")
    (root / "resource_probe_kernels.py").write_text(
        PROBE_KERNEL_SOURCE.replace('name = "probe_gemm"', 'name = "probe_gemm_unit"')
    )
    sys.path.insert(0, str(root))
    try:
        module = importlib.import_module("resource_probe_kernels")
        yield module
    finally:
        sys.path.remove(str(root))
        _REGISTRY.pop("probe_gemm_unit", None)
        sys.modules.pop("resource_probe_kernels", None)


@pytest.fixture(scope="module")
def sm90(probe):
    """Three real sm_90 compiles: 8 warps, 4 warps (same tile), and a spilling 128x256 tile."""
    return {
        "w8": probe.compile_probe("sm_90", "w8", dict(TILE_128, num_warps=8)),
        "w4": probe.compile_probe("sm_90", "w4", dict(TILE_128, num_warps=4)),
        "spill": probe.compile_probe("sm_90", "spill", dict(TILE_128, BLOCK_N=256, num_warps=4)),
    }


@pytest.fixture(scope="module")
def gfx950(probe):
    return probe.compile_probe("gfx950", "w4", dict(TILE_128, num_warps=4))


# ---------------------------------------------------------------------------
# sm_90
# ---------------------------------------------------------------------------


def test_sm90_fewer_warps_for_the_same_tile_raise_registers(sm90):
    w8, w4 = resources.usage_from_artifact(sm90["w8"]), resources.usage_from_artifact(sm90["w4"])
    assert w4.registers > w8.registers, (w8.registers, w4.registers)
    for usage, artifact in ((w8, sm90["w8"]), (w4, sm90["w4"])):
        assert usage.spills_or_scratch() == {}
        # The cubin Triton built, read by cuobjdump, is where the count comes from.
        assert f"REG:{usage.registers} " in artifact.extra["cuobjdump_resource_usage"]
        assert usage.register_headroom == 255 - usage.registers
        static = int(re.search(r"SHARED:(\d+)", artifact.extra["cuobjdump_resource_usage"]).group(1))
        assert usage.shared_bytes == static + int(artifact.extra["dynamic_shared_bytes"]) > 0
        assert usage.mma_count > 0  # HGMMA in the SASS
    assert (w8.threads_per_group, w4.threads_per_group) == (256, 128)


def test_sm90_spills_are_reported(sm90):
    usage = resources.usage_from_artifact(sm90["spill"])
    assert usage.spill_store_bytes > 0 and usage.spill_load_bytes > 0 and usage.scratch_bytes > 0
    assert set(usage.spills_or_scratch()) >= {"spill_store_bytes", "spill_load_bytes", "scratch_bytes"}
    assert f"{usage.spill_store_bytes} bytes spill stores" in sm90["spill"].extra["ptxas_verbose"]


def test_sm90_malformed_tool_output_is_a_clear_error(sm90):
    good = sm90["w8"]

    def with_extra(**changes):
        return CompiledArtifact(good.kernel, good.config, good.arch, good.assembly, 0.0, dict(good.extra, **changes))

    cases = {
        "has no 'cuobjdump_resource_usage'": with_extra(cuobjdump_resource_usage=""),
        "expected one 'Function <name>:'": with_extra(cuobjdump_resource_usage="Resource usage:\n Common:\n  GLOBAL:0"),
        "has no REG": with_extra(
            cuobjdump_resource_usage=re.sub(r"REG:\d+ ", "", good.extra["cuobjdump_resource_usage"])
        ),
        "bytes spill stores": with_extra(ptxas_verbose="ptxas info    : Used 10 registers"),
        "ptxas -v rerun used 1 registers": with_extra(
            ptxas_verbose=re.sub(r"Used \d+ registers", "Used 1 registers", good.extra["ptxas_verbose"])
        ),
        "not an integer": with_extra(dynamic_shared_bytes="lots"),
    }
    for message, artifact in cases.items():
        with pytest.raises(ResourceParseError, match=re.escape(message)):
            resources.usage_from_artifact(artifact)


# ---------------------------------------------------------------------------
# gfx950
# ---------------------------------------------------------------------------


def test_gfx950_isa_fields_and_unified_register_accounting(gfx950):
    usage = resources.usage_from_artifact(gfx950)
    info = resources.parse_amdgpu_isa(gfx950.assembly)
    assert info.target.endswith("gfx950")
    assert usage.registers == info.metadata[".vgpr_count"] and usage.arch_vgpr == info.arch_vgpr
    # LLVM: total = roundup(arch, 4) + AGPRs when AGPRs are used, else the arch count itself.
    if usage.agpr:
        assert usage.registers == -(-usage.arch_vgpr // 4) * 4 + usage.agpr
    else:
        assert usage.arch_vgpr == usage.registers
    # The accumulators start at the arch count rounded up to 4: the allocation, not the count.
    assert info.accum_offset == -(-max(1, usage.arch_vgpr) // 4) * 4
    assert usage.register_headroom == 512 - usage.registers
    assert usage.arch_vgpr_headroom == 256 - usage.arch_vgpr
    # Triton's LDS is dynamic: the ISA says 0, the launch size comes from Triton's metadata.
    assert info.metadata[".group_segment_fixed_size"] == 0
    assert usage.shared_bytes == int(gfx950.extra["dynamic_shared_bytes"]) > 0
    assert usage.mma_count == gfx950.assembly.count("\tv_mfma") > 0
    assert usage.threads_per_group == 256 and usage.wave_size == 64
    assert 1 <= usage.occupancy <= 8


def test_flydsl_kernel_counts_agprs_in_the_unified_file(tmp_path):
    from ci.budget.compiling import inspect

    usage = inspect("flydsl_gfx950_4wave", "gfx950", "default", isa_dir=tmp_path)
    assert usage.agpr > 0, "the default config pins its accumulators to AGPRs"
    assert usage.registers == usage.arch_vgpr + usage.agpr
    assert usage.spills_or_scratch() == {}
    assert 0 < usage.shared_bytes <= 160 * 1024
    assert usage.mma_count > 0
    # Pinned accumulators cost a zero-fill and a read-out of each AGPR, both outside the K loop.
    isa = (tmp_path / "flydsl_gfx950_4wave.gfx950.default.s").read_text()
    assert (
        usage.accvgpr_copies
        == len(re.findall(r"^\s*v_accvgpr_(?:read|write|mov)", isa, re.MULTILINE))
        == 2 * usage.agpr
    )
    assert usage.accvgpr_copies_in_loop == 0


def test_flydsl_accumulators_left_to_llvm_copy_between_vgprs_and_agprs_inside_the_loop(tmp_path):
    """intrinsic_acc: the arch VGPRs fill up (256) and LLVM parks values in AGPRs, every K step."""
    from ci.budget.compiling import inspect

    usage = inspect("flydsl_gfx950_4wave", "gfx950", "intrinsic_acc", isa_dir=tmp_path)
    assert usage.arch_vgpr == 256 and usage.agpr > 0
    isa = (tmp_path / "flydsl_gfx950_4wave.gfx950.intrinsic_acc.s").read_text()
    # The loop by hand: from its header label to the branch back to it.
    header = re.search(r"^\s*s_cbranch_\w+\s+(\.LBB\w+)", isa, re.MULTILINE).group(1)
    loop = isa[isa.index(f"\n{header}:") : isa.index(f" {header}\n")]
    in_loop = len(re.findall(r"^\s*v_accvgpr_(?:read|write|mov)", loop, re.MULTILINE))
    assert usage.accvgpr_copies_in_loop == in_loop > 100, (usage.accvgpr_copies_in_loop, in_loop)
    assert usage.accvgpr_copies > usage.accvgpr_copies_in_loop


def test_accvgpr_copies_inside_loops():
    """Loops are the lines from a label to a later branch back to it: nested, several, and forward branches."""
    isa = "\n".join(
        [
            "k:",
            "\tv_accvgpr_write_b32 a0, 0",  # before any loop
            ".LBB0_1:",
            "\tv_accvgpr_read_b32 v0, a1",  # outer loop
            ".LBB0_2:",
            "\tv_accvgpr_mov_b32 a2, a3",  # inner loop
            "\ts_cbranch_scc1 .LBB0_2",
            "\ts_cbranch_execz .LBB0_9",  # forward: not a loop
            "\tv_accvgpr_write_b32 a4, v1",
            "\ts_branch .LBB0_1",
            ".LBB0_9:",
            "\tv_accvgpr_read_b32 v2, a5",  # after the loops
            "\tv_mov_b32 v3, v4",
            "\ts_endpgm",
        ]
    )
    assert amdgpu._accvgpr_copies(isa) == {"accvgpr_copies": 5, "accvgpr_copies_in_loop": 3}


def test_sm90_has_no_vgpr_agpr_copies_and_old_records_still_read(sm90):
    usage = resources.usage_from_artifact(sm90["w8"])
    assert usage.accvgpr_copies is None and usage.accvgpr_copies_in_loop is None
    record = usage.to_dict()
    del record["accvgpr_copies"], record["accvgpr_copies_in_loop"]  # written before the copy count existed
    assert resources.ResourceUsage.from_dict(record) == usage


def _edit(text: str, old: str, new: str, count: int = 1) -> str:
    assert old in text, f"{old!r} not in the ISA"
    return text.replace(old, new, count)


def test_gfx950_malformed_isa_is_a_clear_error(gfx950):
    isa = gfx950.assembly
    vgpr_line = re.search(r"^\s*\.vgpr_count:.*\n", isa, re.MULTILINE).group(0)
    accum = re.search(r"\.amdhsa_accum_offset \d+", isa).group(0)
    metadata_block = re.search(r"\.amdgpu_metadata.*\.end_amdgpu_metadata", isa, re.DOTALL).group(0)
    cases = {
        "has no .vgpr_count": _edit(isa, vgpr_line, ""),
        ".sgpr_count of kernel": re.sub(r"\.sgpr_count:\s+\d+", ".sgpr_count: many", isa),
        "no .amdgpu_metadata": _edit(isa, metadata_block, ""),
        "has no .amdhsa_accum_offset": _edit(isa, accum, ""),
        "and no .set": re.sub(r"\.set \S+\.num_vgpr, \d+\n", "", _edit(isa, accum, ".amdhsa_accum_offset (x+1)*4")),
        "found 2": _edit(isa, "amdhsa.kernels:\n", "amdhsa.kernels:\n  - .name: other\n"),
        "gfx942, not gfx950": _edit(isa, "gfx950", "gfx942", 1),
    }
    for message, text in cases.items():
        artifact = CompiledArtifact(gfx950.kernel, gfx950.config, "gfx950", text, 0.0, {})
        with pytest.raises(ResourceParseError, match=re.escape(message)):
            resources.usage_from_artifact(artifact)


def test_gfx950_accum_offset_expression_falls_back_to_the_set_symbol(gfx950):
    isa = gfx950.assembly
    accum = re.search(r"\.amdhsa_accum_offset (\d+)", isa)
    name = resources.parse_amdgpu_isa(isa).name
    symbol = re.search(rf"\.set ((?:\.L)?{re.escape(name)}\.num_vgpr), (\d+)", isa)  # .L prefix: newer LLVM
    num_vgpr = int(symbol.group(2))
    expression = f".amdhsa_accum_offset ((alignto(max(1, {symbol.group(1)}), 4))/4)*4"
    parsed = resources.parse_amdgpu_isa(isa.replace(accum.group(0), expression))
    assert parsed.accum_offset == int(accum.group(1)) == -(-max(1, num_vgpr) // 4) * 4
    assert parsed.arch_vgpr == num_vgpr


def test_gfx950_arch_vgpr_sources_in_order(gfx950):
    """The .set symbol, else the NumVgprs comment, else the total (no AGPRs) or the accum offset (AGPRs)."""
    isa = gfx950.assembly
    info = resources.parse_amdgpu_isa(isa)
    total = info.metadata[".vgpr_count"]
    assert info.metadata[".agpr_count"] == 0, "the probe uses no AGPRs: the cases below assume it"
    symbol_line = re.search(r"^\s*\.set \S+\.num_vgpr, (\d+)\n", isa, re.MULTILINE)
    comment_line = re.search(r"^; NumVgprs: (\d+)\n", isa, re.MULTILINE)
    assert symbol_line and comment_line, "the probe's ISA has both the resource symbol and the info comment"
    assert info.arch_vgpr == int(symbol_line.group(1)) == int(comment_line.group(1))
    # Each source, made to disagree with the others, is the one read.
    no_symbol = _edit(isa, symbol_line.group(0), "")
    assert resources.parse_amdgpu_isa(_edit(no_symbol, comment_line.group(0), "; NumVgprs: 7\n")).arch_vgpr == 7
    no_count = _edit(no_symbol, comment_line.group(0), "")
    assert resources.parse_amdgpu_isa(no_count).arch_vgpr == total
    # With AGPRs and no exact count, the allocation (.amdhsa_accum_offset) is all there is.
    with_agprs = re.sub(r"\.agpr_count:\s+0\b", ".agpr_count: 8", no_count)
    with_agprs = re.sub(r"\.vgpr_count:\s+\d+", f".vgpr_count: {info.accum_offset + 8}", with_agprs)
    assert resources.parse_amdgpu_isa(with_agprs).arch_vgpr == info.accum_offset
    # A count above the total is inconsistent output, not a number to report.
    too_many = _edit(isa, symbol_line.group(0), symbol_line.group(0).replace(symbol_line.group(1), str(total + 1)))
    with pytest.raises(
        ResourceParseError, match=re.escape(f"reports {total + 1} arch VGPRs, more than its .vgpr_count {total}")
    ):
        resources.parse_amdgpu_isa(too_many)


def test_triton_gfx950_arch_vgpr_is_the_compilers_count_not_the_accum_offset_granule():
    """triton_dot_scaled on gfx950 reported 104 arch VGPRs (its accum offset) for a 102-VGPR total."""
    from kernels.registry import get_kernel

    kernel = get_kernel("triton_dot_scaled")
    artifact = kernel.compile_only("gfx950", "m128_n128_k128_w8_s3")
    usage = resources.usage_from_artifact(artifact)
    info = resources.parse_amdgpu_isa(artifact.assembly)
    reported = int(re.search(r"^; NumVgprs: (\d+)$", artifact.assembly, re.MULTILINE).group(1))
    assert usage.arch_vgpr == reported <= usage.registers, (reported, usage)
    assert usage.agpr == 0 and usage.registers == reported  # no AGPRs: the total is the arch count
    assert info.accum_offset == -(-reported // 4) * 4
    if reported % 4:  # 102 with today's compiler: the granule would say 104, more than the total
        assert usage.arch_vgpr < info.accum_offset


def test_arch_vgpr_never_exceeds_the_total_on_any_compile_target():
    """Every (kernel, arch, config) the registry compiles here: arch VGPRs <= total, LLVM's unified-file rule."""
    from ci.budget.targets import compile_targets
    from kernels.registry import get_kernel

    targets = compile_targets()
    assert targets
    for kernel, arch, config in targets:
        usage = resources.usage_from_artifact(get_kernel(kernel).compile_only(arch, config))
        if usage.arch_vgpr is None:  # sm_90: one register file, no arch/AGPR split
            assert arch != "gfx950" and usage.agpr is None, usage
            continue
        assert 0 < usage.arch_vgpr <= usage.registers, usage
        assert usage.arch_vgpr_headroom == 256 - usage.arch_vgpr >= 0, usage
        rounded = -(-usage.arch_vgpr // 4) * 4
        assert usage.registers == (rounded + usage.agpr if usage.agpr else usage.arch_vgpr), usage


# ---------------------------------------------------------------------------
# occupancy models (hand-worked from the formulas in harness/resources/occupancy.py)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "total_vgpr, sgpr, lds, threads, waves, limited_by",
    [
        (94, 40, 0, 256, 5, "VGPRs"),  # 512 // roundup(94, 8)=96 -> 5
        (128, 40, 0, 256, 4, "VGPRs"),
        (256, 40, 0, 256, 2, "VGPRs"),
        (257, 40, 0, 256, 1, "VGPRs"),  # 512 // 264
        (408, 93, 131072, 256, 1, "VGPRs"),  # the FlyDSL kernel's shape of usage
        (32, 40, 0, 256, 8, "max waves"),
        (64, 40, 65536, 256, 2, "LDS"),  # 2 groups of 4 waves over 4 SIMDs
        (64, 40, 98304, 256, 1, "LDS"),
        (64, 40, 163841, 256, 0, "LDS"),  # over 160 KiB: cannot launch
        (64, 102, 0, 256, 7, "SGPRs"),  # GFX9: more than 100 SGPRs -> 7
        (32, 40, 0, 64, 8, "max waves"),  # one-wave groups: 32 per CU
    ],
)
def test_amd_occupancy(total_vgpr, sgpr, lds, threads, waves, limited_by):
    got = amd_occupancy(total_vgpr=total_vgpr, sgpr=sgpr, lds_bytes=lds, threads_per_group=threads, limits=AmdLimits())
    assert (got["occupancy"], got["occupancy_limited_by"]) == (waves, limited_by)


@pytest.mark.parametrize(
    "registers, smem, threads, warps, blocks, limited_by",
    [
        (255, 65536, 256, 8, 1, "registers"),  # 255*32 -> 8192 per warp; 2 per 16K partition
        (128, 0, 128, 16, 4, "registers"),
        (106, 66560, 256, 16, 2, "registers"),  # 3424 -> 3584/warp: 4 per partition = 16 warps
        (72, 33792, 128, 24, 6, "shared memory"),  # 233472 // (33792 + 1024) = 6 blocks
        (32, 0, 1024, 64, 2, "warp slots"),
        (16, 0, 32, 32, 32, "block slots"),
        (64, 232449, 128, 0, 0, "shared memory"),  # over 227 KiB per block
    ],
)
def test_nvidia_occupancy(registers, smem, threads, warps, blocks, limited_by):
    got = nvidia_occupancy(registers=registers, smem_bytes=smem, threads_per_block=threads, limits=NvidiaLimits())
    assert (got["occupancy"], got["groups_per_unit"], got["occupancy_limited_by"]) == (warps, blocks, limited_by)


# ---------------------------------------------------------------------------
# compiling under TRITON_INTERPRET=1, the registry view, the CLI
# ---------------------------------------------------------------------------


def test_interpreter_mode_and_in_process_compiles_agree(probe, sm90):
    """A kernel made under TRITON_INTERPRET=1 compiles in a child without it; the result is the same.

    The fixtures compiled in this process's mode; a subprocess compiles in the other one.
    """
    interpreted_here = type(probe.probe_gemm_kernel).__name__ == "InterpretedFunction"
    script = textwrap.dedent(
        f"""
        import json, sys
        sys.path[:0] = [{str(PROJECT)!r}, {str(Path(probe.__file__).parent)!r}]
        import resource_probe_kernels as probe
        print(type(probe.probe_gemm_kernel).__name__)
        from harness.resources import usage_from_artifact
        artifact = probe.compile_probe("sm_90", "w8", {json.dumps(dict(TILE_128, num_warps=8))})
        print(usage_from_artifact(artifact).registers)
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if not interpreted_here:
        env["TRITON_INTERPRET"] = "1"
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    kind, registers = done.stdout.strip().splitlines()[-2:]
    assert kind == ("JITFunction" if interpreted_here else "InterpretedFunction")
    assert int(registers) == resources.usage_from_artifact(sm90["w8"]).registers


def test_compile_for_arch_rejects_bad_requests(probe):
    from kernels.triton_compile import compile_for_arch

    good = dict(
        kernel="k",
        config_name="c",
        arch="sm_90",
        signature=probe.SIGNATURE,
        constexprs={"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64},
        num_warps=4,
        num_stages=2,
    )
    cases = {
        "arch: 'sm90x'": dict(arch="sm90x"),
        "num_warps: must be a power of two": dict(num_warps=6),
        "no type for argument(s) ['stride_cm']": dict(
            signature={k: v for k, v in probe.SIGNATURE.items() if k != "stride_cm"}
        ),
        "['BLOCK_Q'] are not arguments": dict(constexprs={"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "BLOCK_Q": 1}),
        "divisible_by_16: ['BLOCK_M']": dict(divisible_by_16=["BLOCK_M"]),
    }
    for message, change in cases.items():
        with pytest.raises(ValueError, match=re.escape(message)):
            compile_for_arch(probe.probe_gemm_kernel, **dict(good, **change))
    with pytest.raises(ValueError, match="expected a triton.jit function"):
        compile_for_arch(lambda: None, **good)


def test_compile_targets_cover_every_compile_arch_and_config():
    expected = {(k.name, a, c) for k in all_kernels() for a in k.compile_archs for c in k.configs}
    from ci.budget.targets import compile_targets

    targets = compile_targets()
    assert set(targets) == expected and len(targets) == len(expected)
    assert ("flydsl_gfx950_4wave", "gfx950", "default") in expected


class _FakeKernel(Kernel):
    backend = "triton"
    description = "test double"
    runs_on = ()
    compile_archs = ("gfx950",)

    def _prepare(self, a, b, out, config):
        raise NotImplementedError


@pytest.fixture
def fake_kernels():
    @register
    class Unreadable(_FakeKernel):
        name = "test_unreadable_output"

        def _compile_only(self, arch, config_name, config):
            return CompiledArtifact(self.name, config_name, arch, "\tv_mfma_f32_16x16x4_f32 v[0:3], v4, v8, 0\n", 0.1)

    @register
    class Broken(_FakeKernel):
        name = "test_compile_error"

        def _compile_only(self, arch, config_name, config):
            raise RuntimeError("ld.lld: undefined symbol")

    yield
    _REGISTRY.pop("test_unreadable_output")
    _REGISTRY.pop("test_compile_error")


def test_ci_resources_exit_codes(fake_kernels, tmp_path, capsys):
    from ci.budget import resources as cli

    out = tmp_path / "r.json"
    assert cli.main(["--kernel", "test_compile_error", "--json", str(out)]) == 1
    result = json.loads(out.read_text())["targets"]["test_compile_error/gfx950/default"]
    assert result == {"ok": False, "kind": "compile", "error": "RuntimeError: ld.lld: undefined symbol"}
    assert cli.main(["--kernel", "test_unreadable_output", "--json", str(out)]) == 2
    assert (
        "no .amdgpu_metadata"
        in json.loads(out.read_text())["targets"]["test_unreadable_output/gfx950/default"]["error"]
    )
    assert cli.main(["--kernel", "no_such_kernel"]) == 2
    assert cli.main(["--kernel", "no_such_kernel", "--allow-empty"]) == 0
    err = capsys.readouterr().err
    assert "cannot read the compiler output of test_unreadable_output/gfx950/default" in err
    assert "Traceback" not in err


# ---------------------------------------------------------------------------
# on a GPU: the compile-only numbers against the driver's
# ---------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or torch.version.hip is not None, reason="needs an NVIDIA GPU")
def test_sm90_numbers_match_the_driver(probe):
    """Registers, spills and occupancy from compile-only vs what CUDA reports for the loaded kernel."""
    import ctypes

    from kernels import devices

    arch = devices.device_arch("cuda")
    if arch != "sm_90":
        pytest.skip(f"the sm_90 model needs an sm_90 GPU, this is {arch}")
    libcuda = ctypes.CDLL("libcuda.so.1")
    for config in (dict(TILE_128, num_warps=8), dict(TILE_128, num_warps=4), dict(TILE_128, BLOCK_N=256, num_warps=4)):
        artifact = probe.compile_probe("sm_90", "gpu", config)
        usage = resources.usage_from_artifact(artifact)
        a = torch.empty(256, 256, dtype=torch.bfloat16, device="cuda")
        kernel = probe.probe_gemm_kernel.warmup(
            a,
            a,
            a,
            256,
            256,
            256,
            256,
            256,
            256,
            BLOCK_M=config["BLOCK_M"],
            BLOCK_N=config["BLOCK_N"],
            BLOCK_K=config["BLOCK_K"],
            num_warps=config["num_warps"],
            num_stages=config["num_stages"],
            grid=(1,),
        )
        kernel._init_handles()
        assert kernel.n_regs == usage.registers, config
        assert (kernel.n_spills > 0) == bool(usage.spill_store_bytes), config
        blocks = ctypes.c_int()
        libcuda.cuFuncSetAttribute(
            ctypes.c_void_p(kernel.function), 8, ctypes.c_int(kernel.metadata.shared)
        )  # max dyn smem
        status = libcuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(
            ctypes.byref(blocks),
            ctypes.c_void_p(kernel.function),
            usage.threads_per_group,
            ctypes.c_size_t(kernel.metadata.shared),
        )
        assert status == 0, f"cuOccupancyMaxActiveBlocksPerMultiprocessor: CUresult {status}"
        assert blocks.value == usage.groups_per_unit, (config, blocks.value, usage)
