"""What a compile without a GPU produces: the one artifact type.

Its own module because three places make or carry it -- each kernel's
``compile_only`` (through kernels.registry), Triton's cross-compile
(kernels.triton_compile) and the clean-child helper (kernels.compile_child), which
sends it back as JSON -- and none of them should need another to name it.
harness.resources reads it by its fields (any commit's, duck-typed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class CompiledArtifact:
    """What a compile without a GPU produced: enough to read resource usage."""

    kernel: str
    config: str
    arch: str  # "gfx950", "sm_90", ...
    assembly: str  # AMDGPU ISA text (with .amdgpu_metadata) or PTX
    compile_seconds: float
    extra: Mapping[str, str] = field(default_factory=dict)  # e.g. {"ptxas_verbose": ..., "sass": ...}
