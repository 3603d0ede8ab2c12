"""GEMM input sets (step 2): how many to rotate so each leaves the last-level cache before its reuse; making them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import torch

from harness.operands import Operand, gemm_operands

# Last-level cache of GPUs whose torch-reported L2 is not the last level: CDNA3/4
# have a 256 MiB Infinity Cache (MALL) behind the per-XCD L2.
_LLC_BYTES_BY_ARCH = {"gfx942": 256 << 20, "gfx950": 256 << 20}
_DEFAULT_CPU_LLC_BYTES = 32 << 20
# Input sets may use this share of free device memory; the rest is for the kernel's own temporaries.
_INPUT_MEMORY_SHARE = 0.5
MAX_INPUT_SETS = 64
# On a CPU the kernel's own temporaries (dequantized operands) dwarf its inputs and
# slow launches make every extra set expensive to prime: two sets, so consecutive
# launches differ; Timing.inputs_cold says whether they can be cache resident.
CPU_MAX_INPUT_SETS = 2


def gemm_bytes(m: int, n: int, k: int) -> int:
    """Bytes one GEMM touches: packed A and B, their e8m0 scales, the bf16 C."""
    return (m + n) * (k // 2 + k // 32) + m * n * 2


def last_level_cache_bytes(device: torch.device | str) -> int:
    device = torch.device(device)
    if device.type == "cpu":
        return _cpu_llc_bytes()
    arch = _gpu_arch(device)
    if arch in _LLC_BYTES_BY_ARCH:
        return _LLC_BYTES_BY_ARCH[arch]
    return int(torch.cuda.get_device_properties(device).L2_cache_size)


def _gpu_arch(device: torch.device) -> str:
    """ "gfx950" (ROCm gcnArchName without features) or "sm_90". kernels.devices has the same rule for
    the registry; it is repeated here because the harness imports nothing from the code it measures."""
    props = torch.cuda.get_device_properties(device)
    if getattr(torch.version, "hip", None):
        return props.gcnArchName.split(":")[0]
    return f"sm_{props.major}{props.minor}"


def _cpu_llc_bytes() -> int:
    """Largest cache level of CPU 0 from sysfs; 32 MiB where sysfs does not say."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    sizes = {}  # level -> bytes
    for entry in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            level, text = int((entry / "level").read_text()), (entry / "size").read_text().strip()
            sizes[level] = int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)
        except (OSError, ValueError, IndexError):
            continue
    return sizes[max(sizes)] if sizes else _DEFAULT_CPU_LLC_BYTES


def _free_memory_bytes(device: torch.device) -> int:
    """Bytes this process may still allocate on ``device``: the driver's free memory and, on a GPU, the blocks torch's
    caching allocator holds unused (an earlier launch's temporaries, an output check's reference chunks): the allocator
    reuses them or hands them back before it fails. The driver alone counts them as taken: an H100's calibration
    worker, after the torch_dequant references' temporaries, saw 1.06 GiB free and could not make two sets of 0.7 GiB.
    """
    if device.type == "cuda":
        cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return int(torch.cuda.mem_get_info(device)[0]) + max(0, int(cached))
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 8 << 30


def input_set_count(
    set_bytes: int, cache_bytes: int, free_bytes: int, *, max_sets: int = MAX_INPUT_SETS
) -> tuple[int, bool]:
    """How many input sets to rotate (at least two: consecutive launches never share inputs), and whether that evicts
    each set before its reuse (the other ``sets - 1`` sets touched in between; twice the cache size of them)."""
    if set_bytes <= 0:
        raise ValueError(f"set_bytes: must be positive, got {set_bytes}")
    fit = int(free_bytes * _INPUT_MEMORY_SHARE) // set_bytes
    if fit < 2:
        raise MemoryError(
            f"two GEMM input sets need {2 * set_bytes / 2**30:.2f} GiB; only {free_bytes / 2**30:.2f} GiB is free "
            f"({_INPUT_MEMORY_SHARE:.0%} of it may hold inputs)"
        )
    wanted = max(2, math.ceil(2 * cache_bytes / set_bytes) + 1)
    sets = min(wanted, max_sets, fit)
    return sets, (sets - 1) * set_bytes >= cache_bytes


@dataclass
class GemmInputs:
    sets: list[tuple[Operand, Operand, torch.Tensor]] = field(default_factory=list)  # (a, b, out) per set
    cold: bool = True


def gemm_inputs(
    m: int, n: int, k: int, *, device: torch.device | str, seed: int = 0, max_sets: int | None = None
) -> GemmInputs:
    """Random MXFP4 operand sets (harness.operands), generated on ``device``; set ``i`` is seeded ``seed + i``."""
    device = torch.device(device)
    if max_sets is None:
        max_sets = CPU_MAX_INPUT_SETS if device.type == "cpu" else MAX_INPUT_SETS
    set_bytes = gemm_bytes(m, n, k)
    count, cold = input_set_count(
        set_bytes, last_level_cache_bytes(device), _free_memory_bytes(device), max_sets=max_sets
    )
    inputs = GemmInputs(cold=cold)
    for i in range(count):
        a, b = gemm_operands(m, n, k, seed=seed + i, device=device)
        inputs.sets.append((a, b, torch.empty((m, n), dtype=torch.bfloat16, device=device)))
    return inputs
