"""Resource usage of a compiled kernel: registers, spills, shared memory, occupancy.

Reads a compile-only artifact (``kernels.registry.CompiledArtifact``: what a
kernel's ``compile_only`` produced without a GPU) into a :class:`ResourceUsage`.
This is the one ISA/PTX parser and resource model: ``python -m ci.budget.resources``,
the asv resource history and the budget gate all read compilers' output here. Every
number comes from the compiler's own output; occupancy is derived here from
those numbers with the documented hardware limits below.

gfx950 (AMD Instinct MI350/MI355X, CDNA4), from the AMDGPU ISA text:

* ``.amdgpu_metadata`` (code object metadata, LLVM AMDGPUUsage "Code Object V3+
  Metadata"): ``.vgpr_count`` (on gfx90a and later the unified total: arch VGPRs
  rounded to 4, then AGPRs), ``.agpr_count``, ``.sgpr_count``,
  ``.vgpr_spill_count``, ``.sgpr_spill_count``, ``.group_segment_fixed_size``
  (LDS bytes), ``.private_segment_fixed_size`` (scratch bytes per lane),
  ``.max_flat_workgroup_size``, ``.wavefront_size``.
* ``.amdhsa_accum_offset`` in the kernel descriptor: where the AGPRs start in
  the unified file, i.e. the arch-VGPR allocation (a multiple of 4).
* ``v_mfma*`` instructions are counted.
* VGPR<->AGPR copies -- ``v_accvgpr_read*`` (AGPR to arch VGPR),
  ``v_accvgpr_write*`` (VGPR or constant to AGPR) and ``v_accvgpr_mov*`` (AGPR to
  AGPR) -- are counted in the whole kernel and inside its loops (the lines from a
  label to a later branch back to it). Accumulators pinned to AGPRs cost a
  zero-fill and a read-out outside the loop; copies inside the loop are LLVM
  using AGPRs as spill space for arch VGPRs, traffic no register count shows.

Occupancy on gfx950, in waves per SIMD; the rules are LLVM's
(``AMDGPUBaseInfo.cpp``: ``getNumWavesPerEUWithNumVGPRs``,
``getOccupancyWithNumSGPRs``, ``getMaxWorkGroupsPerCU``; ``AMDGPUSubtarget.cpp``:
``getOccupancyWithLocalMemSize``) with gfx950's numbers (CDNA4 ISA reference
guide; LLVM AMDGPUUsage processor table):

* VGPRs: 512 per lane per SIMD, allocated in granules of 8 (gfx90a+):
  ``waves_vgpr = min(8, 512 // roundup(total_vgpr, 8))``.
* SGPRs (GFX9 rule): ``<= 80: 10, <= 88: 9, <= 100: 8, else 7``, capped at 8.
* LDS: 160 KiB per CU shared by the workgroups on it:
  ``groups = min(163840 // lds_bytes, max_groups_per_cu)``,
  ``waves_lds = min(8, ceil(groups * waves_per_group / 4))`` (4 SIMDs per CU),
  where ``max_groups_per_cu = 32`` for one-wave groups, else
  ``min(32 // waves_per_group, 16)`` (16 barriers per CU).
* ``waves_per_simd = min(waves_vgpr, waves_sgpr, waves_lds)``, max 8.

sm_90 (H100/H200), from ``cuobjdump --dump-resource-usage`` of the cubin
(``REG``, ``STACK``, ``LOCAL``, static ``SHARED``), ``ptxas -v`` (spill store /
load bytes), the PTX (``.reqntid``) and Triton's dynamic shared memory size.
Occupancy follows CUDA's occupancy calculator (``cuda_occupancy.h``) with
compute capability 9.0 limits (CUDA C++ Programming Guide, "Technical
Specifications per Compute Capability"): 65536 registers per SM in 4
sub-partitions, allocated per warp in units of 256; at most 255 registers per
thread, 64 warps and 32 blocks per SM; 228 KiB shared memory per SM, 227 KiB per
block, 1 KiB per block reserved by the runtime, allocated in 128-byte units. It
assumes the maximum shared-memory carveout.

Not yet checked against hardware: the gfx950 occupancy model (no MI355X here)
and the sm_90 one (to be compared with ``cuOccupancyMaxActiveBlocksPerMultiprocessor``
on an H100/H200; see tests/test_resources.py, marked ``gpu``).
"""

from __future__ import annotations

import math
import re
from dataclasses import MISSING, asdict, dataclass
from typing import Any, Iterable, Mapping


# ---------------------------------------------------------------------------
# hardware limits (units in the names; sources in the module docstring)
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AmdLimits:
    vgprs_per_lane: int = 512  # unified arch + acc VGPR file, per SIMD lane
    arch_vgprs: int = 256  # addressable arch VGPRs (v0-v255)
    agprs: int = 256  # addressable AGPRs (a0-a255)
    vgpr_granule: int = 8
    max_waves_per_simd: int = 8
    simds_per_cu: int = 4
    lds_bytes_per_cu: int = 160 * 1024
    max_groups_per_cu: int = 16  # hardware barriers per CU
    wave_size: int = 64


@dataclass(frozen=True)
class NvidiaLimits:
    registers_per_sm: int = 65536
    sub_partitions: int = 4
    register_unit_per_warp: int = 256
    max_registers_per_thread: int = 255
    max_warps_per_sm: int = 64
    max_blocks_per_sm: int = 32
    smem_bytes_per_sm: int = 228 * 1024
    max_smem_bytes_per_block: int = 227 * 1024
    reserved_smem_bytes_per_block: int = 1024
    smem_unit_bytes: int = 128
    warp_size: int = 32


LIMITS: dict[str, AmdLimits | NvidiaLimits] = {"gfx950": AmdLimits(), "sm_90": NvidiaLimits()}


class ResourceParseError(ValueError):
    """The compiler output cannot be read (a harness problem, not a kernel that failed to compile)."""


@dataclass(frozen=True)
class ResourceUsage:
    """What one compiled (kernel, arch, config) uses. ``None``: not defined on this arch."""

    kernel: str
    arch: str
    config: str
    function: str
    # The register count the budget gate watches: total unified VGPRs per lane
    # (gfx950) or registers per thread (sm_90); its ceiling and what is left.
    registers: int
    register_limit: int
    register_headroom: int
    arch_vgpr: int | None  # gfx950: arch VGPRs allocated (.amdhsa_accum_offset)
    arch_vgpr_headroom: int | None  # 256 - arch_vgpr
    agpr: int | None
    sgpr: int | None
    # Spills and scratch: the gate requires all of them to be 0.
    vgpr_spills: int | None  # gfx950: spill count from the metadata
    sgpr_spills: int | None  # gfx950: SGPRs spilled (to VGPR lanes or memory)
    spill_store_bytes: int | None  # sm_90: ptxas -v
    spill_load_bytes: int | None  # sm_90: ptxas -v
    scratch_bytes: int  # gfx950: private segment per lane; sm_90: stack frame + local per thread
    dynamic_stack: bool  # gfx950 .uses_dynamic_stack: scratch of unknown size
    # Shared memory / LDS per workgroup (static + dynamic) and its per-block limit.
    shared_bytes: int
    shared_limit: int
    threads_per_group: int
    wave_size: int
    # Occupancy: waves per SIMD (gfx950) or warps per SM (sm_90).
    occupancy: int
    occupancy_max: int
    occupancy_unit: str
    groups_per_unit: int  # workgroups per CU (gfx950) or blocks per SM (sm_90)
    occupancy_limited_by: str
    mma_count: int  # v_mfma* in the ISA (gfx950); HGMMA/HMMA in the SASS (sm_90)
    compile_seconds: float
    # gfx950: v_accvgpr_read/write/mov instructions, all and inside loops; sm_90: None (no AGPRs).
    accvgpr_copies: int | None = None
    accvgpr_copies_in_loop: int | None = None

    @property
    def target(self) -> str:
        return target_id(self.kernel, self.arch, self.config)

    def spills_or_scratch(self) -> dict[str, int]:
        """The nonzero spill and scratch counters, by name (empty when clean)."""
        names = ("vgpr_spills", "sgpr_spills", "spill_store_bytes", "spill_load_bytes", "scratch_bytes", "dynamic_stack")
        return {n: int(getattr(self, n)) for n in names if getattr(self, n)}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "resource record") -> "ResourceUsage":
        if not isinstance(data, Mapping):
            raise ValueError(f"{where}: expected an object, got {type(data).__name__}")
        fields = cls.__dataclass_fields__
        # Fields added later have defaults: a record written before them still reads.
        required = {name for name, f in fields.items() if f.default is MISSING}
        missing = sorted(required - set(data))
        if missing:
            raise ValueError(f"{where}: missing field(s) {missing}")
        return cls(**{name: data[name] for name in fields if name in data})


def target_id(kernel: str, arch: str, config: str) -> str:
    """The one spelling of a compile target, used as key in JSON and the budget file."""
    return f"{kernel}/{arch}/{config}"


# What this module reads of a compile-only artifact (kernels.registry.CompiledArtifact, any
# commit's): it is duck-typed, because the harness imports nothing from the code it measures.
ARTIFACT_FIELDS = ("kernel", "config", "arch", "assembly", "compile_seconds", "extra")


def usage_from_artifact(artifact: Any) -> ResourceUsage:
    """Read one compiled (kernel, arch, config) into a :class:`ResourceUsage`."""
    missing = [f for f in ARTIFACT_FIELDS if not hasattr(artifact, f)]
    if missing:
        raise ResourceParseError(f"artifact: {type(artifact).__name__} has no {', '.join(missing)} (not a CompiledArtifact)")
    where = target_id(artifact.kernel, artifact.arch, artifact.config)
    if not isinstance(artifact.assembly, str) or not artifact.assembly.strip():
        raise ResourceParseError(f"{where}: the artifact has no assembly text")
    limits = LIMITS.get(artifact.arch)
    if isinstance(limits, AmdLimits):
        return _amd_usage(artifact, limits, where)
    if isinstance(limits, NvidiaLimits):
        return _nvidia_usage(artifact, limits, where)
    raise ResourceParseError(f"{where}: no resource model for arch {artifact.arch!r}; known: {sorted(LIMITS)}")


# ---------------------------------------------------------------------------
# AMDGPU ISA
# ---------------------------------------------------------------------------

_AMD_REQUIRED = (
    ".vgpr_count",
    ".agpr_count",
    ".sgpr_count",
    ".vgpr_spill_count",
    ".sgpr_spill_count",
    ".group_segment_fixed_size",
    ".private_segment_fixed_size",
    ".max_flat_workgroup_size",
    ".wavefront_size",
)


@dataclass(frozen=True)
class AmdKernelInfo:
    """The fields of one kernel in an AMDGPU ISA text, as the compiler wrote them."""

    name: str
    target: str  # e.g. amdgcn-amd-amdhsa--gfx950
    metadata: Mapping[str, Any]  # the scalar .keys of its amdhsa.kernels entry
    descriptor: Mapping[str, str]  # .amdhsa_* directives of its kernel descriptor
    arch_vgpr: int  # .amdhsa_accum_offset
    mfma_count: int
    accvgpr_copies: int  # v_accvgpr_read/write/mov anywhere
    accvgpr_copies_in_loop: int  # ... of them inside a loop


def parse_amdgpu_isa(text: str, where: str = "ISA", function: str | None = None) -> AmdKernelInfo:
    """Read one kernel's resource fields from AMDGPU assembly; ``ValueError`` names anything missing."""
    target_match = re.search(r'^\s*\.amdgcn_target\s+"([^"]+)"', text, re.MULTILINE)
    kernels = _parse_metadata_kernels(_metadata_block(text, where), where)
    if function is not None:
        kernels = [k for k in kernels if k.get(".name") == function]
        if not kernels:
            raise ResourceParseError(f"{where}: .amdgpu_metadata has no kernel named {function!r}")
    if len(kernels) != 1:
        names = [k.get(".name") for k in kernels]
        raise ResourceParseError(f"{where}: expected one kernel in .amdgpu_metadata, found {len(kernels)} {names}; name one")
    meta = kernels[0]
    name = meta.get(".name")
    if not isinstance(name, str):
        raise ResourceParseError(f"{where}: the kernel in .amdgpu_metadata has no .name")
    for key in _AMD_REQUIRED:
        if key not in meta:
            raise ResourceParseError(f"{where}: .amdgpu_metadata of kernel {name} has no {key}")
        if not isinstance(meta[key], int) or meta[key] < 0:
            raise ResourceParseError(f"{where}: {key} of kernel {name} is {meta[key]!r}, not a non-negative integer")
    descriptor = _kernel_descriptor(text, name, where)
    return AmdKernelInfo(
        name=name,
        target=target_match.group(1) if target_match else "",
        metadata=meta,
        descriptor=descriptor,
        arch_vgpr=_accum_offset(text, name, descriptor, where),
        mfma_count=len(re.findall(r"^\s*v_mfma\w*\s", text, re.MULTILINE)),
        **_accvgpr_copies(text),
    )


_ACCVGPR_COPY = re.compile(r"^\s*v_accvgpr_(?:read|write|mov)\w*\s")
_LABEL = re.compile(r"^([.\w$]+):")
_BRANCH = re.compile(r"^\s*s_(?:c?branch\w*)\s+([.\w$]+)")


def _accvgpr_copies(text: str) -> dict[str, int]:
    """VGPR<->AGPR copy instructions, in all and inside loops.

    A loop is the run of lines from a label to a later branch back to it (LLVM
    lays a loop out contiguously, its latch branching back to the header); nested
    and several loops are the union of such runs.
    """
    lines = text.splitlines()
    labels: dict[str, int] = {}
    in_loop = [False] * len(lines)
    for index, line in enumerate(lines):
        label = _LABEL.match(line)
        if label:
            labels[label.group(1)] = index
            continue
        branch = _BRANCH.match(line)
        if branch and branch.group(1) in labels:  # a branch back to an earlier label: a loop
            for inside in range(labels[branch.group(1)], index + 1):
                in_loop[inside] = True
    copies = [index for index, line in enumerate(lines) if _ACCVGPR_COPY.match(line)]
    return {"accvgpr_copies": len(copies), "accvgpr_copies_in_loop": sum(in_loop[i] for i in copies)}


def _metadata_block(text: str, where: str) -> list[str]:
    match = re.search(r"^\s*\.amdgpu_metadata\s*$(.*?)^\s*\.end_amdgpu_metadata\s*$", text, re.MULTILINE | re.DOTALL)
    if not match:
        raise ResourceParseError(f"{where}: no .amdgpu_metadata ... .end_amdgpu_metadata block (is this AMDGPU ISA text?)")
    return match.group(1).splitlines()


def _parse_metadata_kernels(lines: list[str], where: str) -> list[dict[str, Any]]:
    """The scalar keys of each item of ``amdhsa.kernels`` (a small YAML subset, enough for LLVM's output)."""
    try:
        start = next(i for i, line in enumerate(lines) if line.rstrip() == "amdhsa.kernels:")
    except StopIteration:
        raise ResourceParseError(f"{where}: .amdgpu_metadata has no amdhsa.kernels list") from None
    kernels: list[dict[str, Any]] = []
    item_indent = None
    for line in lines[start + 1 :]:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip(" "))
        if indent == 0:  # the next top-level key: the list is over
            break
        body = line[indent:]
        if body.startswith("- ") and (item_indent is None or indent == item_indent):
            item_indent = indent
            kernels.append({})
            body, indent = body[2:], indent + 2
        if item_indent is None or not kernels:
            raise ResourceParseError(f"{where}: amdhsa.kernels is not a list of kernels (line {line.strip()!r})")
        if indent != item_indent + 2:  # nested values (.args, ...) are not needed
            continue
        key, sep, value = body.partition(":")
        if sep and key.startswith("."):
            kernels[-1][key] = _yaml_scalar(value.strip())
    if not kernels:
        raise ResourceParseError(f"{where}: amdhsa.kernels in .amdgpu_metadata is empty")
    return kernels


def _yaml_scalar(value: str) -> Any:
    if re.fullmatch(r"-?\d+", value):
        return int(value)
    if value in ("true", "false"):
        return value == "true"
    return value.strip("'\"")


def _kernel_descriptor(text: str, name: str, where: str) -> dict[str, str]:
    match = re.search(
        rf"^\s*\.amdhsa_kernel\s+{re.escape(name)}\s*$(.*?)^\s*\.end_amdhsa_kernel", text, re.MULTILINE | re.DOTALL
    )
    if not match:
        raise ResourceParseError(f"{where}: no .amdhsa_kernel {name} ... .end_amdhsa_kernel descriptor")
    directives = {}
    for line in match.group(1).splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[0].startswith(".amdhsa_"):
            directives[parts[0]] = parts[1].strip()
    return directives


def _accum_offset(text: str, name: str, descriptor: Mapping[str, str], where: str) -> int:
    value = descriptor.get(".amdhsa_accum_offset")
    if value is None:
        raise ResourceParseError(f"{where}: kernel descriptor of {name} has no .amdhsa_accum_offset (not a gfx90a+ target?)")
    if re.fullmatch(r"\d+", value):
        return int(value)
    # Newer LLVM writes it as an expression over .set symbols:
    # accum_offset = roundup(max(1, num_vgpr), 4).
    # (LLVM names the symbol .L<kernel>.num_vgpr or, in older releases, <kernel>.num_vgpr.)
    num_vgpr = re.search(rf"^\s*\.set\s+(?:\.L)?{re.escape(name)}\.num_vgpr,\s*(\d+)\s*$", text, re.MULTILINE)
    if num_vgpr is None:
        raise ResourceParseError(
            f"{where}: .amdhsa_accum_offset of {name} is the expression {value!r} and no "
            f".set [.L]{name}.num_vgpr gives its value"
        )
    return _round_up(max(1, int(num_vgpr.group(1))), 4)


def _amd_usage(artifact: Any, limits: AmdLimits, where: str) -> ResourceUsage:
    info = parse_amdgpu_isa(artifact.assembly, where, artifact.extra.get("function"))
    if info.target and not info.target.split(":")[0].endswith(artifact.arch):
        raise ResourceParseError(f"{where}: the ISA is for {info.target}, not {artifact.arch}")
    meta = info.metadata
    total_vgpr, sgpr = meta[".vgpr_count"], meta[".sgpr_count"]
    wave_size = meta[".wavefront_size"]
    if wave_size != limits.wave_size:
        raise ResourceParseError(f"{where}: .wavefront_size is {wave_size}; the {artifact.arch} model assumes {limits.wave_size}")
    lds = meta[".group_segment_fixed_size"] + _extra_int(artifact, "dynamic_shared_bytes", where)
    threads = meta[".max_flat_workgroup_size"]
    occupancy = amd_occupancy(total_vgpr=total_vgpr, sgpr=sgpr, lds_bytes=lds, threads_per_group=threads, limits=limits)
    return ResourceUsage(
        kernel=artifact.kernel,
        arch=artifact.arch,
        config=artifact.config,
        function=info.name,
        registers=total_vgpr,
        register_limit=limits.vgprs_per_lane,
        register_headroom=limits.vgprs_per_lane - total_vgpr,
        arch_vgpr=info.arch_vgpr,
        arch_vgpr_headroom=limits.arch_vgprs - info.arch_vgpr,
        agpr=meta[".agpr_count"],
        sgpr=sgpr,
        vgpr_spills=meta[".vgpr_spill_count"],
        sgpr_spills=meta[".sgpr_spill_count"],
        spill_store_bytes=None,
        spill_load_bytes=None,
        scratch_bytes=meta[".private_segment_fixed_size"],
        dynamic_stack=meta.get(".uses_dynamic_stack") is True,
        shared_bytes=lds,
        shared_limit=limits.lds_bytes_per_cu,
        threads_per_group=threads,
        wave_size=wave_size,
        occupancy_unit="waves/SIMD",
        occupancy_max=limits.max_waves_per_simd,
        mma_count=info.mfma_count,
        compile_seconds=round(float(artifact.compile_seconds), 3),
        accvgpr_copies=info.accvgpr_copies,
        accvgpr_copies_in_loop=info.accvgpr_copies_in_loop,
        **occupancy,
    )


def amd_occupancy(*, total_vgpr: int, sgpr: int, lds_bytes: int, threads_per_group: int, limits: AmdLimits) -> dict[str, Any]:
    """Waves per SIMD and workgroups per CU (rules and sources in the module docstring)."""
    by, groups_by_lds, waves_per_group = _amd_waves_by(total_vgpr, sgpr, lds_bytes, threads_per_group, limits)
    limiter = min(by, key=lambda k: by[k])
    waves = by[limiter]
    if waves == limits.max_waves_per_simd:
        limiter = "max waves"
    # Whole workgroups that fit on a CU with `waves` waves per SIMD.
    groups = min(groups_by_lds, waves * limits.simds_per_cu // waves_per_group)
    return {"occupancy": waves, "groups_per_unit": groups, "occupancy_limited_by": limiter}


def _amd_waves_by(total_vgpr: int, sgpr: int, lds_bytes: int, threads_per_group: int, limits: AmdLimits):
    """(waves/SIMD each resource alone allows, workgroups per CU by LDS, waves per workgroup)."""
    waves_per_group = math.ceil(max(1, threads_per_group) / limits.wave_size)
    by = {}
    if total_vgpr < limits.vgpr_granule:
        by["VGPRs"] = limits.max_waves_per_simd
    else:
        by["VGPRs"] = min(limits.max_waves_per_simd, limits.vgprs_per_lane // _round_up(total_vgpr, limits.vgpr_granule))
    by["SGPRs"] = min(limits.max_waves_per_simd, 10 if sgpr <= 80 else 9 if sgpr <= 88 else 8 if sgpr <= 100 else 7)
    max_groups = (
        limits.max_waves_per_simd * limits.simds_per_cu
        if waves_per_group == 1
        else min(limits.max_waves_per_simd * limits.simds_per_cu // waves_per_group, limits.max_groups_per_cu)
    )
    groups_by_lds = min(limits.lds_bytes_per_cu // max(lds_bytes, 1), max_groups)
    by["LDS" if lds_bytes else "workgroup slots"] = min(
        limits.max_waves_per_simd, math.ceil(groups_by_lds * waves_per_group / limits.simds_per_cu)
    )
    return by, groups_by_lds, waves_per_group


def occupancy_by_resource(usage: Mapping[str, Any]) -> dict[str, int]:
    """The occupancy each resource field of a usage record allows on its own, in the record's unit.

    ``{"registers": ..., "sgpr": ..., "shared_bytes": ...}`` (``sgpr`` on gfx950 only):
    the budget gate uses it to tell a growth that costs a wave or warp from one that
    stays inside an occupancy step. ``usage`` is a :class:`ResourceUsage` as a dict.
    """
    limits = LIMITS.get(usage["arch"])
    if isinstance(limits, AmdLimits):
        by, _, _ = _amd_waves_by(usage["registers"], usage["sgpr"], usage["shared_bytes"], usage["threads_per_group"], limits)
        return {"registers": by["VGPRs"], "sgpr": by["SGPRs"], "shared_bytes": by.get("LDS", by.get("workgroup slots"))}
    if isinstance(limits, NvidiaLimits):
        blocks, warps_per_block = _nvidia_blocks_by(usage["registers"], usage["shared_bytes"], usage["threads_per_group"], limits)
        return {"registers": blocks["registers"] * warps_per_block, "shared_bytes": blocks["shared memory"] * warps_per_block}
    raise ValueError(f"no occupancy model for arch {usage['arch']!r}; known: {sorted(LIMITS)}")


# ---------------------------------------------------------------------------
# NVIDIA PTX / cubin
# ---------------------------------------------------------------------------


def parse_cuobjdump_resource_usage(text: str, where: str = "cuobjdump", function: str | None = None) -> dict[str, int]:
    """``REG``, ``STACK``, ``SHARED``, ``LOCAL`` of one function from ``cuobjdump --dump-resource-usage``."""
    functions = re.findall(r"^\s*Function\s+(\S+?):\s*\n\s*(.*)$", text, re.MULTILINE)
    if function is not None:
        functions = [f for f in functions if f[0] == function]
    if len(functions) != 1:
        names = [f[0] for f in functions]
        raise ResourceParseError(f"{where}: expected one 'Function <name>:' entry{f' for {function}' if function else ''}, found {names}")
    fields = dict(re.findall(r"(\w+(?:\[\d+\])?):(\d+)", functions[0][1]))
    missing = [key for key in ("REG", "STACK", "SHARED", "LOCAL") if key not in fields]
    if missing:
        raise ResourceParseError(f"{where}: resource usage of {functions[0][0]} has no {', '.join(missing)}")
    return {key: int(fields[key]) for key in ("REG", "STACK", "SHARED", "LOCAL")}


def parse_ptxas_verbose(text: str, where: str = "ptxas -v") -> dict[str, int]:
    """Registers, stack frame and spill bytes from a ``ptxas -v`` log of one entry function."""
    spills = re.findall(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", text)
    registers = re.findall(r"Used (\d+) registers", text)
    if len(spills) != 1 or len(registers) != 1:
        raise ResourceParseError(
            f"{where}: expected one 'N bytes stack frame, N bytes spill stores, N bytes spill loads' line and one "
            f"'Used N registers' line, found {len(spills)} and {len(registers)}"
        )
    stack, stores, loads = (int(v) for v in spills[0])
    return {"registers": int(registers[0]), "stack_frame": stack, "spill_stores": stores, "spill_loads": loads}


def _nvidia_usage(artifact: Any, limits: NvidiaLimits, where: str) -> ResourceUsage:
    extra = artifact.extra
    function = extra.get("function")
    for key in ("cuobjdump_resource_usage", "ptxas_verbose"):
        if not extra.get(key):
            raise ResourceParseError(f"{where}: artifact.extra has no {key!r} (Triton's compile_only fills it: kernels/triton_compile.py)")
    binary = parse_cuobjdump_resource_usage(extra["cuobjdump_resource_usage"], f"{where} cuobjdump", function)
    log = parse_ptxas_verbose(extra["ptxas_verbose"], f"{where} ptxas -v")
    if log["registers"] != binary["REG"]:
        # The rerun is only for the spill counts; if it allocated differently
        # from the binary Triton built, those counts describe another binary.
        raise ResourceParseError(
            f"{where}: ptxas -v rerun used {log['registers']} registers but the cubin has {binary['REG']} "
            f"({extra.get('ptxas_command', 'ptxas')} does not match Triton's ptxas flags)"
        )
    threads = _threads_per_block(artifact, where)
    smem = binary["SHARED"] + _extra_int(artifact, "dynamic_shared_bytes", where)
    occupancy = nvidia_occupancy(registers=binary["REG"], smem_bytes=smem, threads_per_block=threads, limits=limits)
    return ResourceUsage(
        kernel=artifact.kernel,
        arch=artifact.arch,
        config=artifact.config,
        function=function or "",
        registers=binary["REG"],
        register_limit=limits.max_registers_per_thread,
        register_headroom=limits.max_registers_per_thread - binary["REG"],
        arch_vgpr=None,
        arch_vgpr_headroom=None,
        agpr=None,
        sgpr=None,
        vgpr_spills=None,
        sgpr_spills=None,
        spill_store_bytes=log["spill_stores"],
        spill_load_bytes=log["spill_loads"],
        scratch_bytes=binary["STACK"] + binary["LOCAL"],
        dynamic_stack=False,
        shared_bytes=smem,
        shared_limit=limits.max_smem_bytes_per_block,
        threads_per_group=threads,
        wave_size=limits.warp_size,
        occupancy_unit="warps/SM",
        occupancy_max=limits.max_warps_per_sm,
        mma_count=len(re.findall(r"\b(?:HGMMA|HMMA|QGMMA|IMMA|OMMA)\.", extra.get("sass", ""))),
        compile_seconds=round(float(artifact.compile_seconds), 3),
        **occupancy,
    )


def _threads_per_block(artifact: Any, where: str) -> int:
    match = re.search(r"^\s*\.(?:reqntid|maxntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", artifact.assembly, re.MULTILINE)
    if match:
        return math.prod(int(v) for v in match.groups() if v)
    if "num_warps" in artifact.extra:
        return _extra_int(artifact, "num_warps", where) * 32
    raise ResourceParseError(f"{where}: the PTX has no .reqntid/.maxntid and artifact.extra has no 'num_warps'")


def nvidia_occupancy(*, registers: int, smem_bytes: int, threads_per_block: int, limits: NvidiaLimits) -> dict[str, Any]:
    """Blocks and warps per SM, the CUDA occupancy calculator's way (see the module docstring)."""
    by, warps_per_block = _nvidia_blocks_by(registers, smem_bytes, threads_per_block, limits)
    limiter = min(by, key=lambda k: by[k])
    blocks = by[limiter]
    return {"occupancy": blocks * warps_per_block, "groups_per_unit": blocks, "occupancy_limited_by": limiter}


def _nvidia_blocks_by(registers: int, smem_bytes: int, threads_per_block: int, limits: NvidiaLimits):
    """(blocks per SM each limit alone allows, warps per block)."""
    warps_per_block = math.ceil(max(1, threads_per_block) / limits.warp_size)
    by = {"warp slots": limits.max_warps_per_sm // warps_per_block, "block slots": limits.max_blocks_per_sm}
    regs_per_warp = _round_up(max(1, registers) * limits.warp_size, limits.register_unit_per_warp)
    warps_per_partition = (limits.registers_per_sm // limits.sub_partitions) // regs_per_warp
    by["registers"] = warps_per_partition * limits.sub_partitions // warps_per_block
    if smem_bytes > limits.max_smem_bytes_per_block:
        by["shared memory"] = 0
    else:
        per_block = _round_up(smem_bytes + limits.reserved_smem_bytes_per_block, limits.smem_unit_bytes)
        by["shared memory"] = limits.smem_bytes_per_sm // per_block
    return by, warps_per_block


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def _extra_int(artifact: Any, key: str, where: str) -> int:
    value = artifact.extra.get(key, "0")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ResourceParseError(f"{where}: artifact.extra[{key!r}] is {value!r}, not an integer") from None
    if number < 0:
        raise ResourceParseError(f"{where}: artifact.extra[{key!r}] is negative ({number})")
    return number


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def usage_table(usages: Iterable[ResourceUsage]) -> list[dict[str, str]]:
    """Rows for a human table (one per target), the same columns for every arch."""
    rows = []
    for u in usages:
        spills = ", ".join(f"{k}={v}" for k, v in u.spills_or_scratch().items()) or "0"
        rows.append(
            {
                "target": u.target,
                "regs": f"{u.registers}/{u.register_limit}",
                "arch_vgpr": "-" if u.arch_vgpr is None else str(u.arch_vgpr),
                "agpr": "-" if u.agpr is None else str(u.agpr),
                "sgpr": "-" if u.sgpr is None else str(u.sgpr),
                "spills/scratch": spills,
                "shared": f"{u.shared_bytes // 1024} KiB" if u.shared_bytes % 1024 == 0 else f"{u.shared_bytes} B",
                "threads": str(u.threads_per_group),
                "occupancy": f"{u.occupancy}/{u.occupancy_max} {u.occupancy_unit} ({u.occupancy_limited_by})",
                "mma": str(u.mma_count),
                "acc_copies": "-" if u.accvgpr_copies is None else f"{u.accvgpr_copies} ({u.accvgpr_copies_in_loop} in loop)",
                "compile_s": f"{u.compile_seconds:.2f}",
            }
        )
    return rows
