"""gfx950 (AMD Instinct MI350/MI355X, CDNA4): resource usage from the AMDGPU ISA text.

What is read, its sources and why each: docs/MEASURING.md, "gfx950 ISA".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.resources.occupancy import AmdLimits, amd_occupancy
from harness.resources.usage import ResourceParseError, ResourceUsage, extra_int, round_up

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
    arch_vgpr: int  # arch VGPRs the compiler reports (docs/MEASURING.md), <= .vgpr_count
    accum_offset: int  # .amdhsa_accum_offset: the arch allocation, roundup(max(1, arch_vgpr), 4)
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
        raise ResourceParseError(
            f"{where}: expected one kernel in .amdgpu_metadata, found {len(kernels)} {names}; name one"
        )
    meta = kernels[0]
    name = meta.get(".name")
    if not isinstance(name, str):
        raise ResourceParseError(f"{where}: the kernel in .amdgpu_metadata has no .name")
    for key in _AMD_REQUIRED:
        if key not in meta:
            raise ResourceParseError(f"{where}: .amdgpu_metadata of kernel {name} has no {key}")
        if not isinstance(meta[key], int) or meta[key] < 0:
            raise ResourceParseError(f"{where}: {key} of kernel {name} is {meta[key]!r}, not a non-negative integer")
    descriptor, descriptor_end = _kernel_descriptor(text, name, where)
    accum_offset = _accum_offset(text, name, descriptor, where)
    return AmdKernelInfo(
        name=name,
        target=target_match.group(1) if target_match else "",
        metadata=meta,
        descriptor=descriptor,
        arch_vgpr=_arch_vgpr(text, name, meta, accum_offset, descriptor_end, where),
        accum_offset=accum_offset,
        mfma_count=len(re.findall(r"^\s*v_mfma\w*\s", text, re.MULTILINE)),
        **_accvgpr_copies(text),
    )


_ACCVGPR_COPY = re.compile(r"^\s*v_accvgpr_(?:read|write|mov)\w*\s")
_LABEL = re.compile(r"^([.\w$]+):")
_BRANCH = re.compile(r"^\s*s_(?:c?branch\w*)\s+([.\w$]+)")


def _accvgpr_copies(text: str) -> dict[str, int]:
    """VGPR<->AGPR copy instructions, in all and inside loops: the lines from a label to a later branch back to it (LLVM
    lays a loop out contiguously, its latch branching back to the header), nested and several loops their union."""
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
        raise ResourceParseError(
            f"{where}: no .amdgpu_metadata ... .end_amdgpu_metadata block (is this AMDGPU ISA text?)"
        )
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


def _kernel_descriptor(text: str, name: str, where: str) -> tuple[dict[str, str], int]:
    """The ``.amdhsa_*`` directives of kernel ``name``'s descriptor, and where in ``text`` it ends."""
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
    return directives, match.end()


def _accum_offset(text: str, name: str, descriptor: Mapping[str, str], where: str) -> int:
    value = descriptor.get(".amdhsa_accum_offset")
    if value is None:
        raise ResourceParseError(
            f"{where}: kernel descriptor of {name} has no .amdhsa_accum_offset (not a gfx90a+ target?)"
        )
    if re.fullmatch(r"\d+", value):
        return int(value)
    # Newer LLVM writes it as an expression over .set symbols:
    # accum_offset = roundup(max(1, num_vgpr), 4).
    num_vgpr = _num_vgpr_symbol(text, name)
    if num_vgpr is None:
        raise ResourceParseError(
            f"{where}: .amdhsa_accum_offset of {name} is the expression {value!r} and no "
            f".set [.L]{name}.num_vgpr gives its value"
        )
    return round_up(max(1, num_vgpr), 4)


def _num_vgpr_symbol(text: str, name: str) -> int | None:
    """``.set [.L]<name>.num_vgpr, N`` (LLVM 19+ names it .L<kernel>.num_vgpr, earlier releases
    <kernel>.num_vgpr); None when absent or an expression (a kernel that calls functions)."""
    match = re.search(rf"^\s*\.set\s+(?:\.L)?{re.escape(name)}\.num_vgpr,\s*(\d+)\s*$", text, re.MULTILINE)
    return int(match.group(1)) if match else None


def _arch_vgpr(
    text: str, name: str, meta: Mapping[str, Any], accum_offset: int, descriptor_end: int, where: str
) -> int:
    """The arch VGPRs of kernel ``name``, as exact as the compiler's output allows (docs/MEASURING.md, "gfx950 ISA")."""
    total = meta[".vgpr_count"]
    count = _num_vgpr_symbol(text, name)
    if count is None:
        # LLVM prints the kernel's info block after its descriptor and before the next kernel's.
        following = text[descriptor_end:]
        next_kernel = re.search(r"^\s*\.amdhsa_kernel\s", following, re.MULTILINE)
        info_block = following[: next_kernel.start()] if next_kernel else following
        comment = re.search(r"^\s*;\s*NumVgprs:\s*(\d+)\s*$", info_block, re.MULTILINE)
        if comment:
            count = int(comment.group(1))
        elif meta[".agpr_count"] == 0:
            count = total  # gfx90a+: without AGPRs the unified total is the arch count itself
        else:
            count = accum_offset  # the allocation: at most 3 above the count, never above the total
    if count > total:
        raise ResourceParseError(f"{where}: {name} reports {count} arch VGPRs, more than its .vgpr_count {total}")
    return count


def amd_usage(artifact: Any, limits: AmdLimits, where: str) -> ResourceUsage:
    info = parse_amdgpu_isa(artifact.assembly, where, artifact.extra.get("function"))
    if info.target and not info.target.split(":")[0].endswith(artifact.arch):
        raise ResourceParseError(f"{where}: the ISA is for {info.target}, not {artifact.arch}")
    meta = info.metadata
    total_vgpr, sgpr = meta[".vgpr_count"], meta[".sgpr_count"]
    wave_size = meta[".wavefront_size"]
    if wave_size != limits.wave_size:
        raise ResourceParseError(
            f"{where}: .wavefront_size is {wave_size}; the {artifact.arch} model assumes {limits.wave_size}"
        )
    lds = meta[".group_segment_fixed_size"] + extra_int(artifact, "dynamic_shared_bytes", where)
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
