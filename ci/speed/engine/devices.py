"""Which device measures which benchmark (:func:`assign_devices`), how a worker process is pinned to its device
(:func:`pinned_environment`: it then sees its GPU as ``cuda:0``), and the GPU libraries read without torch.
Why: docs/SPEED_GATE.md, "ci/speed/engine/devices.py".
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# What a measurement costs on a GPU, for balancing only (harness.timing's GPU budget): at least the
# warm-up and the timed launches (0.2 s + 0.5 s), more when min_reps launches of a slow GEMM exceed
# that; a launch at NOMINAL_FLOPS_PER_S (about an H200's MXFP4-as-bf16 rate, in FLOP/s).
FLOOR_S = 0.7
NOMINAL_FLOPS_PER_S = 400e12
MIN_TIMED_LAUNCHES = 10 + 3  # min_reps plus the three warm-up chunks that must agree

HIP_VARIABLES = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")


def estimated_seconds(bench: Any) -> float:
    """Rough seconds one measurement of ``bench`` (anything with m, n, k) takes: for balancing, not reporting."""
    launch_s = 2.0 * bench.m * bench.n * bench.k / NOMINAL_FLOPS_PER_S
    return max(FLOOR_S, MIN_TIMED_LAUNCHES * launch_s)


def assign_devices(
    benchmarks: Sequence[Any],
    devices: Sequence[int],
    cost: Callable[[Any], float] = estimated_seconds,
    load: Mapping[int, float] | None = None,
) -> dict[int, list[Any]]:
    """Spread ``benchmarks`` (base and head together) over ``devices``: device -> its benchmarks, in the order given,
    every device listed. Longest first, each to the device with the least work (``load``: work it already has;
    ties: the lower device)."""
    if not devices:
        raise ValueError("assign_devices: no devices")
    if len(set(devices)) != len(devices):
        raise ValueError(f"assign_devices: a device is named twice in {list(devices)}")
    load = {d: float((load or {}).get(d, 0.0)) for d in devices}
    chosen: dict[int, list[int]] = {d: [] for d in devices}
    by_cost = sorted(range(len(benchmarks)), key=lambda i: -cost(benchmarks[i]))  # stable: equal costs keep their order
    for i in by_cost:
        device = min(devices, key=lambda d: (load[d], devices.index(d)))
        load[device] += cost(benchmarks[i])
        chosen[device].append(i)
    return {d: [benchmarks[i] for i in sorted(indices)] for d, indices in chosen.items()}


def visible_devices_variable(environ: Mapping[str, str] | None = None, rocm_marker: Path = Path("/dev/kfd")) -> str:
    """HIP_VISIBLE_DEVICES on a ROCm machine (a ROCm variable set, or /dev/kfd), else CUDA_VISIBLE_DEVICES: only one,
    since on ROCm a CUDA_VISIBLE_DEVICES beside it would select again among the devices the first left visible."""
    environ = os.environ if environ is None else environ
    if any(environ.get(name) for name in HIP_VARIABLES) or rocm_marker.exists():
        return "HIP_VISIBLE_DEVICES"
    return "CUDA_VISIBLE_DEVICES"


def pinned_environment(
    device: int, environ: Mapping[str, str] | None = None, variable: str | None = None
) -> dict[str, str]:
    """The variables that leave only device ``device`` (the parent's numbering) visible to a child: when the parent
    itself sees a subset (the variable already set, e.g. by the CI runner), device i is its i-th entry."""
    environ = os.environ if environ is None else environ
    variable = variable or visible_devices_variable(environ)
    current = environ.get(variable, "").strip()
    if device < 0:
        raise ValueError(f"device index must be >= 0 (got {device})")
    if current:
        entries = [e.strip() for e in current.split(",") if e.strip()]
        if device >= len(entries):
            raise ValueError(f"device {device}: {variable}={current!r} leaves only {len(entries)} device(s) visible")
        return {variable: entries[device]}
    return {variable: str(device)}


def visible_gpu_count(environ: Mapping[str, str] | None = None) -> int:
    """How many GPUs this process may use, without torch: the visible-devices variable when the runner set one, else
    NVML's (or amdsmi's) count; 1 when neither answers (a machine this cannot read is measured on one GPU)."""
    environ = os.environ if environ is None else environ
    current = environ.get(visible_devices_variable(environ), "").strip()
    if current:
        return len([e for e in current.split(",") if e.strip()])
    counts: dict[str, Callable[[Any], int]] = {
        "pynvml": lambda nvml: int(nvml.nvmlDeviceGetCount()),
        "amdsmi": lambda smi: len(smi.amdsmi_get_processor_handles()),
    }
    for name, count in counts.items():
        try:
            with gpu_library(name) as library:
                return max(1, count(library))
        except Exception:  # noqa: BLE001 - no NVML (CPU, ROCm): try amdsmi, then one
            continue
    return 1


@contextmanager
def gpu_library(name: str) -> Iterator[Any]:
    """``pynvml`` or ``amdsmi``, initialized for the block and shut down after (ImportError: not installed)."""
    library: Any = importlib.import_module(name)
    init, shut_down = ("nvmlInit", "nvmlShutdown") if name == "pynvml" else ("amdsmi_init", "amdsmi_shut_down")
    getattr(library, init)()
    try:
        yield library
    finally:
        getattr(library, shut_down)()
