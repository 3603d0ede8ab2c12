"""Occupancy from a kernel's register and shared-memory counts, with each arch's hardware limits: gfx950 in waves per
SIMD (LLVM's rules), sm_90 in warps per SM (CUDA's calculator). Formulas, sources: docs/MEASURING.md, "Occupancy".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.resources.usage import round_up


@dataclass(frozen=True)
class AmdLimits:
    vgprs_per_lane: int = 512  # unified arch + acc VGPR file, per SIMD lane
    arch_vgprs: int = 256  # addressable arch VGPRs (v0-v255)
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


def amd_occupancy(
    *, total_vgpr: int, sgpr: int, lds_bytes: int, threads_per_group: int, limits: AmdLimits
) -> dict[str, Any]:
    """Waves per SIMD and workgroups per CU."""
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
        by["VGPRs"] = min(limits.max_waves_per_simd, limits.vgprs_per_lane // round_up(total_vgpr, limits.vgpr_granule))
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


def nvidia_occupancy(
    *, registers: int, smem_bytes: int, threads_per_block: int, limits: NvidiaLimits
) -> dict[str, Any]:
    """Blocks and warps per SM, the CUDA occupancy calculator's way."""
    by, warps_per_block = _nvidia_blocks_by(registers, smem_bytes, threads_per_block, limits)
    limiter = min(by, key=lambda k: by[k])
    blocks = by[limiter]
    return {"occupancy": blocks * warps_per_block, "groups_per_unit": blocks, "occupancy_limited_by": limiter}


def _nvidia_blocks_by(registers: int, smem_bytes: int, threads_per_block: int, limits: NvidiaLimits):
    """(blocks per SM each limit alone allows, warps per block)."""
    warps_per_block = math.ceil(max(1, threads_per_block) / limits.warp_size)
    by = {"warp slots": limits.max_warps_per_sm // warps_per_block, "block slots": limits.max_blocks_per_sm}
    regs_per_warp = round_up(max(1, registers) * limits.warp_size, limits.register_unit_per_warp)
    warps_per_partition = (limits.registers_per_sm // limits.sub_partitions) // regs_per_warp
    by["registers"] = warps_per_partition * limits.sub_partitions // warps_per_block
    if smem_bytes > limits.max_smem_bytes_per_block:
        by["shared memory"] = 0
    else:
        per_block = round_up(smem_bytes + limits.reserved_smem_bytes_per_block, limits.smem_unit_bytes)
        by["shared memory"] = limits.smem_bytes_per_sm // per_block
    return by, warps_per_block


def occupancy_by_resource(usage: Mapping[str, Any]) -> dict[str, int]:
    """The occupancy each resource field of ``usage`` (a ResourceUsage as a dict) allows on its own, in its unit:
    ``{"registers", "sgpr" (gfx950 only), "shared_bytes"}``; the budget gate's occupancy steps."""
    limits = LIMITS.get(usage["arch"])
    if isinstance(limits, AmdLimits):
        by, _, _ = _amd_waves_by(
            usage["registers"], usage["sgpr"], usage["shared_bytes"], usage["threads_per_group"], limits
        )
        return {"registers": by["VGPRs"], "sgpr": by["SGPRs"], "shared_bytes": by.get("LDS", by.get("workgroup slots"))}
    if isinstance(limits, NvidiaLimits):
        blocks, warps_per_block = _nvidia_blocks_by(
            usage["registers"], usage["shared_bytes"], usage["threads_per_group"], limits
        )
        return {
            "registers": blocks["registers"] * warps_per_block,
            "shared_bytes": blocks["shared memory"] * warps_per_block,
        }
    raise ValueError(f"no occupancy model for arch {usage['arch']!r}; known: {sorted(LIMITS)}")
