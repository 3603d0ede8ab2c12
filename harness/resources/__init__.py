"""Resource usage of a compiled kernel (registers, spills, shared memory, occupancy): the one ISA/PTX parser and
resource model. Import from here (``harness.resources.usage_from_artifact``); docs/MEASURING.md, "Resources".
"""

from __future__ import annotations

from typing import Any

from harness.resources.amdgpu import amd_usage, parse_amdgpu_isa
from harness.resources.nvidia import nvidia_usage
from harness.resources.occupancy import (
    LIMITS,
    AmdLimits,
    NvidiaLimits,
    amd_occupancy,
    nvidia_occupancy,
    occupancy_by_resource,
)
from harness.resources.usage import ResourceParseError, ResourceUsage, target_id, usage_table

__all__ = [
    "AmdLimits",
    "NvidiaLimits",
    "ResourceParseError",
    "ResourceUsage",
    "amd_occupancy",
    "nvidia_occupancy",
    "occupancy_by_resource",
    "parse_amdgpu_isa",
    "target_id",
    "usage_from_artifact",
    "usage_table",
]

# What this package reads of a compile-only artifact (kernels.artifact.CompiledArtifact, any
# commit's): it is duck-typed, because the harness imports nothing from the code it measures.
ARTIFACT_FIELDS = ("kernel", "config", "arch", "assembly", "compile_seconds", "extra")


def usage_from_artifact(artifact: Any) -> ResourceUsage:
    """Read one compiled (kernel, arch, config) into a :class:`ResourceUsage`."""
    missing = [f for f in ARTIFACT_FIELDS if not hasattr(artifact, f)]
    if missing:
        raise ResourceParseError(
            f"artifact: {type(artifact).__name__} has no {', '.join(missing)} (not a CompiledArtifact)"
        )
    where = target_id(artifact.kernel, artifact.arch, artifact.config)
    if not isinstance(artifact.assembly, str) or not artifact.assembly.strip():
        raise ResourceParseError(f"{where}: the artifact has no assembly text")
    limits = LIMITS.get(artifact.arch)
    if isinstance(limits, AmdLimits):
        return amd_usage(artifact, limits, where)
    if isinstance(limits, NvidiaLimits):
        return nvidia_usage(artifact, limits, where)
    raise ResourceParseError(f"{where}: no resource model for arch {artifact.arch!r}; known: {sorted(LIMITS)}")
