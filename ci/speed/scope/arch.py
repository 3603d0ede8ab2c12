"""Which architecture's code the gate's fingerprints are for, without torch: NVML's compute capability (``sm_90``) or
amdsmi's graphics target (``gfx950``); ``cpu`` on a CPU run; None for a GPU whose arch cannot be read (every benchmark
is then measured: never skip on doubt). Why: docs/SPEED_GATE.md, "ci/speed/scope/arch.py".
"""

from __future__ import annotations

from pathlib import Path

from ci.common.options import KNOWN_ARCHS
from ci.speed.engine.devices import gpu_library

ARCH_CHOICES = ("auto", *KNOWN_ARCHS, "cpu")  # the speed gate's --arch: one of these
GPU_DEVICE_NODES = ("/dev/nvidiactl", "/dev/kfd")


def resolve_arch(requested: str, device: str) -> tuple[str | None, str]:
    """(arch or None, how it was found) for ``--arch requested`` on ``--device device``."""
    if requested != "auto":
        return requested, f"--arch {requested}"
    if device == "cpu":
        return "cpu", "--device cpu"
    found, why = gpu_arch()
    if found is not None:
        return found, why
    # A GPU that torch would use but no library reads must not be fingerprinted as a CPU: launch paths
    # alone would call a changed compiled kernel identical. Device nodes say whether there is one.
    if device == "auto" and not any(Path(node).exists() for node in GPU_DEVICE_NODES):
        return "cpu", f"no GPU ({why}; none of {', '.join(GPU_DEVICE_NODES)})"
    return None, why


def gpu_arch() -> tuple[str | None, str]:
    """The first GPU's arch through amdsmi or NVML; (None, why) when neither reads one."""
    problems = []
    for reader in (_amdsmi_arch, _nvml_arch):
        try:
            arch = reader()
        except Exception as exc:  # a library missing or failing: try the other, then say why
            problems.append(f"{reader.__doc__}: {type(exc).__name__}: {exc}")
            continue
        if arch:
            return arch, f"{reader.__doc__} (no torch in the gate's process)"
    return None, "no GPU arch readable (" + "; ".join(problems) + ")"


def _nvml_arch() -> str | None:
    """NVML compute capability"""
    with gpu_library("pynvml") as nvml:
        if nvml.nvmlDeviceGetCount() == 0:
            raise RuntimeError("no GPU")
        major, minor = nvml.nvmlDeviceGetCudaComputeCapability(nvml.nvmlDeviceGetHandleByIndex(0))
        return f"sm_{major}{minor}"


def _amdsmi_arch() -> str | None:
    """amdsmi graphics target"""
    # Written against amdsmi's documented API; NOT YET RUN ON AN MI355X (as ci/history/measure/machine_info.py).
    with gpu_library("amdsmi") as smi:
        handles = smi.amdsmi_get_processor_handles()
        if not handles:
            raise RuntimeError("no GPU")
        target = str(smi.amdsmi_get_gpu_asic_info(handles[0]).get("target_graphics_version") or "")
        return target.split(":")[0] or None
