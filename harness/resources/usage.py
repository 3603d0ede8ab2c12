"""The resource record of one compiled (kernel, arch, config), the same fields on every arch, and its table."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import MISSING, asdict, dataclass
from typing import Any

from harness.errors import MeasurementError

SPILL_FIELDS = ("vgpr_spills", "sgpr_spills", "spill_store_bytes", "spill_load_bytes", "scratch_bytes", "dynamic_stack")


class ResourceParseError(MeasurementError, ValueError):
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
    arch_vgpr: int | None  # gfx950: arch VGPRs the compiler reports (num_vgpr / NumVgprs), <= registers
    arch_vgpr_headroom: int | None  # 256 - arch_vgpr
    agpr: int | None
    sgpr: int | None
    # Spills and scratch (SPILL_FIELDS): the budget gate requires all of them to be 0.
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
        return {n: int(getattr(self, n)) for n in SPILL_FIELDS if getattr(self, n)}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "resource record") -> ResourceUsage:
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
                "acc_copies": "-"
                if u.accvgpr_copies is None
                else f"{u.accvgpr_copies} ({u.accvgpr_copies_in_loop} in loop)",
                "compile_s": f"{u.compile_seconds:.2f}",
            }
        )
    return rows


def extra_int(artifact: Any, key: str, where: str) -> int:
    """A non-negative integer from ``artifact.extra`` (0 when absent)."""
    value = artifact.extra.get(key, "0")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ResourceParseError(f"{where}: artifact.extra[{key!r}] is {value!r}, not an integer") from None
    if number < 0:
        raise ResourceParseError(f"{where}: artifact.extra[{key!r}] is negative ({number})")
    return number


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple
