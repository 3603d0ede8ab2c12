"""The one entry point for timing a GEMM, :func:`measure_gemm`: idle check, input sets, one launch per set, timed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch

from harness import gpu_state
from harness.operands import Operand
from harness.timing.inputs import gemm_inputs
from harness.timing.result import Timing, TimingBudget
from harness.timing.sampling import benchmark


def gemm_flops(m: int, n: int, k: int) -> int:
    """Floating-point operations of one GEMM: a multiply and an add per term."""
    return 2 * m * n * k


# prepare(a, b, out) -> launch, once per input set (bf16 ``out``): the caller wraps the raw operands in the commit's
# own MXFP4 type and runs the kernel's untimed preparation; launch() is the only thing timed.
Prepare = Callable[[Operand, Operand, torch.Tensor], Callable[[], None]]


def measure_gemm(
    prepare: Prepare,
    m: int,
    n: int,
    k: int,
    *,
    device: torch.device | str,
    label: str = "",
    budget: TimingBudget = TimingBudget(),  # noqa: B008 (frozen: one shared default is safe)
    idle_policy: gpu_state.IdlePolicy | None = None,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> Timing:
    """Time an M x N x K MXFP4 GEMM whose kernel the caller has checked can run this shape here (``Prepare``); raises
    gpu_state.GpuBusyError when the GPU does not become idle (default: gpu_state.IdlePolicy.from_environment())."""
    device = torch.device(device)
    if min(m, n, k) <= 0:
        raise ValueError(f"shape: M, N, K must be positive, got {m} x {n} x {k}")
    label = label or f"{m}x{n}x{k} on {device}"
    monitor, idle = _open_and_wait_idle(device, idle_policy or gpu_state.IdlePolicy.from_environment(), log)
    try:
        inputs = gemm_inputs(m, n, k, device=device, seed=seed)
        launches = [prepare(a, b, out) for a, b, out in inputs.sets]
        timing = benchmark(
            launches,
            flops=gemm_flops(m, n, k),
            device=device,
            budget=budget,
            monitor=monitor,
            inputs_cold=inputs.cold,
            label=label,
        )
    finally:
        if monitor is not None:
            monitor.close()
    return replace(timing, idle=idle.to_json())


def _open_and_wait_idle(
    device: torch.device, policy: gpu_state.IdlePolicy, log: Callable[[str], None] | None
) -> tuple[gpu_state.GpuMonitor | None, gpu_state.IdleReport]:
    try:
        monitor = gpu_state.open_monitor(device)
    except gpu_state.MonitorUnavailable as exc:
        if gpu_state.override_requested():
            return None, gpu_state.IdleReport("overridden", 0.0, (f"not monitored: {exc}",), None)
        raise gpu_state.MonitorUnavailable(
            f"{exc}. Cannot check that the GPU is idle, so not timing; set {gpu_state.ALLOW_BUSY_ENV}=1 to time anyway."
        ) from None
    try:
        # Memory reserved by torch's allocator means this process already has a context on the
        # device (a pytest session timing its second kernel); a fresh asv process has none yet.
        own_context = device.type == "cuda" and torch.cuda.is_initialized() and torch.cuda.memory_reserved(device) > 0
        return monitor, gpu_state.wait_until_idle(monitor, policy, own_context=own_context, log=log)
    except BaseException:
        if monitor is not None:
            monitor.close()
        raise
