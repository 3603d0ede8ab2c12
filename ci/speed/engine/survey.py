"""What a warm worker (ci.speed.engine.worker) knows about its commit: :func:`survey` (its benchmarks on this device,
each selected (kernel, config)'s correctness at a small shape, nothing timed), and its device as records name it.
Why: docs/SPEED_GATE.md, "ci/speed/engine/survey.py".
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from typing import Any

from ci.speed.engine.devices import gpu_library

# Correctness is checked at M, N >= this (one 256 x 256 tile of the gfx950 kernel), rounded up to the
# kernel's multiples, and at K = CHECK_K[device type] (rounded up likewise): a GPU kernel's K loop
# runs many iterations at 8192, and a CPU checks 1024 in milliseconds.
CHECK_MN = 256
CHECK_K = {"cpu": 1024, "cuda": 8192}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def resolve_device(requested: str) -> str:
    import torch

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested not in ("cpu", "cuda"):
        raise ValueError(f"device: expected auto, cpu or cuda, got {requested!r}")
    if requested == "cuda" and not torch.cuda.is_available():
        raise ValueError("device cuda: this machine has no CUDA/ROCm GPU visible to torch")
    return requested


def setup_device(device: str) -> None:
    if device == "cpu":
        import torch

        # One thread, like the asv CPU history: on a shared runner a second thread times the neighbours.
        torch.set_num_threads(1)


def parse_shape(text: str) -> tuple[int, int, int] | None:
    """``"256x256x1024"`` -> (256, 256, 1024); None when ``text`` is not of that form."""
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        return None
    m, n, k = (int(p) for p in parts)
    return m, n, k


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def check_shape(constraints: Any, device: str) -> tuple[int, int, int]:
    """The small shape a kernel's correctness is checked at (see CHECK_MN, CHECK_K)."""
    return (
        _round_up(CHECK_MN, constraints.m_multiple),
        _round_up(CHECK_MN, constraints.n_multiple),
        _round_up(CHECK_K[device], constraints.k_multiple),
    )


def _shapes(requested: list[str], device: str) -> tuple[list[dict[str, Any]], list[str]]:
    """(selected shapes, selectors naming no shape). Default: the GPU benchmark shapes, or asv's CPU shapes."""
    from asv_bench import common

    default = common.CPU_SHAPES if device == "cpu" else common.GPU_SHAPES
    shapes, unknown = [], []
    for text in dict.fromkeys(requested or [s.name for s in default]):  # a shape named twice is one benchmark
        mnk = parse_shape(text)
        name = text if mnk is None else "x".join(map(str, mnk))
        if mnk is None and text in common.SHAPES_BY_NAME:
            known = common.SHAPES_BY_NAME[text]
            mnk = (known.m, known.n, known.k)
        if mnk is None:
            unknown.append(text)
        else:
            shapes.append({"name": name, "m": mnk[0], "n": mnk[1], "k": mnk[2]})
    return shapes, unknown


def survey(request: dict[str, Any]) -> dict[str, Any]:
    from asv_bench import common
    from ci.common.options import name_matches

    device = resolve_device(request.get("device", "auto"))
    setup_device(device)
    registry = common.import_project("registry")
    mxfp4 = common.import_project("mxfp4")
    # A commit older than the n/a exceptions has none: nothing is then treated as n/a by type.
    names = [name for name in ("UnsupportedShape", "UnsupportedDevice") if hasattr(registry, name)]
    not_applicable: tuple[type[BaseException], ...] = tuple(getattr(registry, name) for name in names)
    kernel_patterns, config_patterns = request.get("kernels", []), request.get("configs", [])
    # Only these (kernel, config)s (the gate leaves out those with identical code at base and head).
    pairs = None if request.get("pairs") is None else {tuple(p) for p in request["pairs"]}
    shapes, unknown_shapes = _shapes(request.get("shapes", []), device)
    kernels = registry.all_kernels()
    answer: dict[str, Any] = {
        "device": device,
        "environment": device_environment(device),
        "kernels_source": os.path.dirname(os.path.realpath(str(registry.__file__))),
        "registered": [{"name": k.name, "backend": k.backend, "configs": list(k.configs)} for k in kernels],
        "shapes": shapes,
        "unknown_shapes": unknown_shapes,
        "benchmarks": [],
        "correctness": [],
    }
    for kernel in kernels:
        if not name_matches(kernel.name, kernel_patterns):
            continue
        excluded = common.CPU_EXCLUDED_BACKENDS.get(kernel.backend) if device == "cpu" else None
        unavailable = excluded or kernel.unavailable_reason(device)
        for config in kernel.configs:
            if not name_matches(config, config_patterns) or (pairs is not None and (kernel.name, config) not in pairs):
                continue
            available_any = False
            for shape in shapes:
                reason = unavailable
                if reason is None:
                    try:
                        kernel.check_shape(shape["m"], shape["n"], shape["k"], config)
                    except ValueError as exc:  # the registry's UnsupportedShape
                        reason = str(exc)
                available_any |= reason is None
                answer["benchmarks"].append(
                    {
                        "kernel": kernel.name,
                        "config": config,
                        "backend": kernel.backend,
                        "shape": shape["name"],
                        "m": shape["m"],
                        "n": shape["n"],
                        "k": shape["k"],
                        "available": reason is None,
                        "reason": reason,
                    }
                )
            if available_any:
                answer["correctness"].append(_check(kernel, config, device, mxfp4, not_applicable))
    if device == "cuda":
        answer["memory"] = device_memory()
    return answer


def device_memory() -> dict[str, int]:
    """The device's free and total bytes as this worker sees them once its own cache is returned (the parent's memory
    check, ci.speed.engine.memory), and its last-level cache (how many input sets a benchmark makes)."""
    import gc

    import torch

    from harness.timing.inputs import last_level_cache_bytes

    gc.collect()
    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info()
    return {"free_bytes": int(free), "total_bytes": int(total), "llc_bytes": int(last_level_cache_bytes("cuda"))}


def _check(
    kernel: Any, config: str, device: str, mxfp4: Any, not_applicable: tuple[type[BaseException], ...]
) -> dict[str, Any]:
    from ci.common.correctness import check_kernel
    from harness.operands import gemm_operands

    # shape_constraints(config) is the registry's newer API (tile-size configs); older commits have only .constraints.
    constraints = kernel.shape_constraints(config) if hasattr(kernel, "shape_constraints") else kernel.constraints
    mnk = check_shape(constraints, device)
    entry: dict[str, Any] = {"kernel": kernel.name, "config": config, "shape": list(mnk)}
    started = time.perf_counter()
    try:
        a, b = gemm_operands(*mnk, seed=0, device=device)
        report = check_kernel(kernel, mxfp4.MXFP4Tensor(a.data, a.scales), mxfp4.MXFP4Tensor(b.data, b.scales), config)
    except not_applicable as exc:
        entry.update(status="n/a", message=f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # the kernel raised: the parent makes this a harness error naming kernel and side
        entry.update(
            status="error",
            message=f"{type(exc).__name__}: {exc}",
            traceback="".join(traceback.format_exception(exc))[-4000:],
        )
    else:
        entry.update(
            status="pass" if report.passed else "fail",
            message=report.summary(),
            failures=report.failures,
            rel_err=report.rel_err,
            cosine=report.cosine,
            worst_element_ratio=report.worst_element_ratio,
        )
    entry["seconds"] = round(time.perf_counter() - started, 3)
    log(f"correctness {kernel.name}[{config}] at {'x'.join(map(str, mnk))}: {entry['status']}: {entry['message']}")
    return entry


def device_environment(device: str) -> dict[str, Any]:
    import platform

    import torch

    env: dict[str, Any] = {"torch": torch.__version__, "python": platform.python_version(), "host": platform.node()}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        env.update(
            gpu=torch.cuda.get_device_name(0),
            rocm=getattr(torch.version, "hip", None),
            cuda=torch.version.cuda,
            arch=getattr(props, "gcnArchName", None) or f"sm_{props.major}{props.minor}",
            driver=_driver_version(bool(getattr(torch.version, "hip", None))),
        )
    else:
        env.update(gpu=None, cpu=platform.processor() or platform.machine())
    return env


def _driver_version(rocm: bool) -> str | None:
    """The GPU driver's version (NVML or amdsmi), for the noise model's runner identity; None when unreadable."""
    try:
        with gpu_library("amdsmi" if rocm else "pynvml") as smi:
            if rocm:
                return str(smi.amdsmi_get_gpu_driver_info(smi.amdsmi_get_processor_handles()[0]).get("driver_version"))
            version = smi.nvmlSystemGetDriverVersion()
            return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:  # a missing library or an old driver: the identity says "unknown", nothing fails
        return None
