"""sm_90 (H100/H200): resource usage from the cubin's ``cuobjdump --dump-resource-usage`` (REG, STACK, LOCAL, static
SHARED), a ``ptxas -v`` log (spill bytes), the PTX (``.reqntid``) and Triton (dynamic shared memory)."""

from __future__ import annotations

import math
import re
from typing import Any

from harness.resources.occupancy import NvidiaLimits, nvidia_occupancy
from harness.resources.usage import ResourceParseError, ResourceUsage, extra_int


def parse_cuobjdump_resource_usage(text: str, where: str = "cuobjdump", function: str | None = None) -> dict[str, int]:
    """``REG``, ``STACK``, ``SHARED``, ``LOCAL`` of one function from ``cuobjdump --dump-resource-usage``."""
    functions = re.findall(r"^\s*Function\s+(\S+?):\s*\n\s*(.*)$", text, re.MULTILINE)
    if function is not None:
        functions = [f for f in functions if f[0] == function]
    if len(functions) != 1:
        names = [f[0] for f in functions]
        raise ResourceParseError(
            f"{where}: expected one 'Function <name>:' entry{f' for {function}' if function else ''}, found {names}"
        )
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


def nvidia_usage(artifact: Any, limits: NvidiaLimits, where: str) -> ResourceUsage:
    extra = artifact.extra
    function = extra.get("function")
    for key in ("cuobjdump_resource_usage", "ptxas_verbose"):
        if not extra.get(key):
            raise ResourceParseError(
                f"{where}: artifact.extra has no {key!r} (Triton's compile_only fills it: kernels/triton_compile.py)"
            )
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
    smem = binary["SHARED"] + extra_int(artifact, "dynamic_shared_bytes", where)
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
    match = re.search(
        r"^\s*\.(?:reqntid|maxntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", artifact.assembly, re.MULTILINE
    )
    if match:
        return math.prod(int(v) for v in match.groups() if v)
    if "num_warps" in artifact.extra:
        return extra_int(artifact, "num_warps", where) * 32
    raise ResourceParseError(f"{where}: the PTX has no .reqntid/.maxntid and artifact.extra has no 'num_warps'")
