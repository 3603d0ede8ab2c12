"""Where are we running? One place for every device and architecture check of the kernels.

(Named ``devices``, not ``platform``: a module named after the standard library's
shadows it for any command started from inside kernels/.)

Architecture names are the compilers' own: ``"cpu"``, ``"sm_90"`` (CUDA compute
capability 9.0), ``"gfx950"`` (ROCm gcnArchName without its feature suffix).
"""

from __future__ import annotations

import fnmatch
import functools

import torch


def is_rocm_build() -> bool:
    return getattr(torch.version, "hip", None) is not None


def gpu_available() -> bool:
    return torch.cuda.is_available()  # true for ROCm builds too


def default_device() -> torch.device:
    return torch.device("cuda") if gpu_available() else torch.device("cpu")


@functools.cache
def _gpu_arch(index: int) -> str:
    props = torch.cuda.get_device_properties(index)
    if is_rocm_build():
        # e.g. "gfx950:sramecc+:xnack-" -> "gfx950"
        return props.gcnArchName.split(":")[0]
    return f"sm_{props.major}{props.minor}"


def device_arch(device: torch.device | str) -> str:
    device = torch.device(device)
    if device.type == "cpu":
        return "cpu"
    if device.type == "cuda":
        return _gpu_arch(device.index if device.index is not None else torch.cuda.current_device())
    raise ValueError(f"device: unsupported device type {device.type!r} (expected cpu or cuda/rocm)")


def arch_matches(arch: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(arch, p) for p in patterns)


def gpu_name(device: torch.device | str) -> str:
    device = torch.device(device)
    if device.type == "cpu":
        return "cpu"
    return torch.cuda.get_device_name(device)
