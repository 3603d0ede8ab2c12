"""The one timing module. Everything that times a kernel uses it: the asv suite,
the pytest-benchmark A/B runs and the PR speed gate.

How :func:`measure_gemm` times a GEMM on one shape:

1. Idle check (harness.gpu_state): no other compute process, utilization about
   zero, no throttling -- waited for up to a bound, then refused.
2. Input sets (harness.operands, seeded): enough (A, B, C) sets that, rotating through them, every set has
   been pushed out of the last-level cache before it is used again (the H200 has
   60 MB of L2, the MI355X 256 MiB of Infinity Cache). A GEMM that finds its
   operands in cache is faster than the one a model runs.
3. Priming: every launch runs once untimed (JIT compilation, allocations).
4. Warm-up until steady: chunks of launches are timed until three in a row agree
   within ``steady_tolerance`` (clocks and caches have settled) -- at least
   ``warmup_ms``, at most ``max_warmup_ms`` (then the timing says ``steady=False``).
5. Timed launches: as many as fit ``rep_ms`` (within ``min_reps``..``max_reps``),
   one device-event pair per launch (``torch.cuda.Event`` works on CUDA and ROCm;
   the CPU uses ``time.perf_counter``), inputs rotated.
6. Statistics: median, quartiles, MAD; TFLOPS = 2*M*N*K / median time.
   The GPU's clock, temperature and power are recorded before and after step 5.

The asv suite compares results only within one asv_bench.common.TIMING_METHOD_VERSION:
bump it when a change here changes what a time means.

Imports nothing from kernels/ or ci/: the kernel arrives as a ``prepare``
callable, so this module measures any commit's kernel the same way.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Sequence

import torch

from harness import gpu_state
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


@dataclass(frozen=True)
class TimingBudget:
    warmup_ms: float = 200.0  # minimum warm-up
    max_warmup_ms: float = 3000.0  # give up waiting for steady timings (recorded as steady=False)
    steady_tolerance: float = 0.03  # three warm-up chunks within 3% of each other = steady
    rep_ms: float = 500.0  # target total time of the timed launches
    min_reps: int = 10
    max_reps: int = 2000
    chunk_ms: float = 5.0  # warm-up chunks last at least this long (amortizes the sync)


@dataclass(frozen=True)
class Timing:
    samples_s: tuple[float, ...]  # one per timed launch
    flops: int  # of one launch
    device: str
    clock: str  # "device events" | "perf_counter"
    input_sets: int
    inputs_cold: bool  # rotation covers more bytes than the last-level cache
    warmup_launches: int
    warmup_s: float
    steady: bool
    label: str = ""
    gpu_before: dict[str, Any] | None = None
    gpu_after: dict[str, Any] | None = None
    idle: dict[str, Any] | None = None

    @property
    def median_s(self) -> float:
        return _quantile(sorted(self.samples_s), 0.5)

    @property
    def q25_s(self) -> float:
        return _quantile(sorted(self.samples_s), 0.25)

    @property
    def q75_s(self) -> float:
        return _quantile(sorted(self.samples_s), 0.75)

    @property
    def iqr_s(self) -> float:
        return self.q75_s - self.q25_s

    @property
    def mad_s(self) -> float:
        median = self.median_s
        return _quantile(sorted(abs(s - median) for s in self.samples_s), 0.5)

    @property
    def relative_iqr(self) -> float:
        return self.iqr_s / self.median_s

    @property
    def tflops(self) -> float:
        return self.flops / self.median_s / 1e12

    def asv_samples(self) -> dict[str, Any]:
        """The samples in asv's result format: asv then keeps them and computes its statistics."""
        return {"samples": list(self.samples_s), "number": 1}

    def summary(self) -> str:
        text = (
            f"{self.label or 'timing'}: median {self.median_s * 1e3:.4g} ms "
            f"(IQR {self.relative_iqr * 100:.1f}%, n={len(self.samples_s)}), {self.tflops:.4g} TFLOPS, "
            f"{self.input_sets} input sets{'' if self.inputs_cold else ' (may be cache resident)'}, "
            f"warm-up {self.warmup_launches} launches{'' if self.steady else ' NOT STEADY'}"
        )
        for when, state in (("before", self.gpu_before), ("after", self.gpu_after)):
            if state:
                text += f"; {when}: SM {state.get('sm_clock_mhz')} MHz, {state.get('temperature_c')} C, {state.get('power_w')} W"
        if self.idle and self.idle.get("status") == "overridden":
            text += f"; IDLE CHECK OVERRIDDEN: {'; '.join(self.idle.get('problems', []))}"
        return text

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["samples_s"] = list(self.samples_s)
        d.update(
            median_s=self.median_s,
            q25_s=self.q25_s,
            q75_s=self.q75_s,
            mad_s=self.mad_s,
            tflops=self.tflops,
        )
        return d


def _quantile(ordered: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile of sorted data (numpy's default method)."""
    if not ordered:
        raise ValueError("no samples")
    position = q * (len(ordered) - 1)
    lo = math.floor(position)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (position - lo)


# ---------------------------------------------------------------------------
# clocks: device events on GPUs, perf_counter on the CPU
# ---------------------------------------------------------------------------


class _EventClock:
    name = "device events"

    def __init__(self, device: torch.device):
        self.device = device

    def time_chunk(self, launches: Sequence[Callable[[], None]], start: int, count: int) -> float:
        """Seconds for ``count`` launches, rotating from ``start``; one event pair around all of them."""
        with torch.cuda.device(self.device):
            begin = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            begin.record()
            for i in range(start, start + count):
                launches[i % len(launches)]()
            end.record()
            end.synchronize()
            return begin.elapsed_time(end) * 1e-3

    def time_each(self, launches: Sequence[Callable[[], None]], start: int, count: int) -> list[float]:
        """Seconds of each of ``count`` launches: one event pair per launch, one sync at the end."""
        with torch.cuda.device(self.device):
            begins = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
            for j in range(count):
                begins[j].record()
                launches[(start + j) % len(launches)]()
                ends[j].record()
            torch.cuda.synchronize(self.device)
            return [b.elapsed_time(e) * 1e-3 for b, e in zip(begins, ends)]

    def sync(self) -> None:
        torch.cuda.synchronize(self.device)


class _HostClock:
    name = "perf_counter"

    def time_chunk(self, launches: Sequence[Callable[[], None]], start: int, count: int) -> float:
        begin = time.perf_counter()
        for i in range(start, start + count):
            launches[i % len(launches)]()
        return time.perf_counter() - begin

    def time_each(self, launches: Sequence[Callable[[], None]], start: int, count: int) -> list[float]:
        samples = []
        for j in range(count):
            launch = launches[(start + j) % len(launches)]
            begin = time.perf_counter()
            launch()
            samples.append(time.perf_counter() - begin)
        return samples

    def sync(self) -> None:
        pass


def _clock_for(device: torch.device) -> _EventClock | _HostClock:
    if device.type == "cuda":
        return _EventClock(device)
    if device.type == "cpu":
        return _HostClock()
    raise ValueError(f"device: cannot time on {device} (expected cpu or cuda/rocm)")


# ---------------------------------------------------------------------------
# timing callables
# ---------------------------------------------------------------------------


def benchmark(
    launches: Sequence[Callable[[], None]],
    *,
    flops: int,
    device: torch.device | str,
    budget: TimingBudget = TimingBudget(),
    monitor: gpu_state.GpuMonitor | None = None,
    inputs_cold: bool = True,
    label: str = "",
) -> Timing:
    """Time zero-argument ``launches`` (one per input set, used in rotation); see the module doc."""
    if not launches:
        raise ValueError("launches: need at least one launch callable")
    if flops <= 0:
        raise ValueError(f"flops: must be positive, got {flops}")
    device = torch.device(device)
    clock = _clock_for(device)

    for launch in launches:  # priming: compilation and first-touch allocations stay out of the warm-up
        launch()
    clock.sync()

    warm = _warm_up(clock, launches, budget)
    before = monitor.snapshot().to_json() if monitor is not None else None
    reps = int(min(max(math.ceil(budget.rep_ms * 1e-3 / warm.per_launch_s), budget.min_reps), budget.max_reps))
    # Continue the rotation where the warm-up stopped: the first timed set is not the one just used.
    samples = clock.time_each(launches, warm.launches, reps)
    after = monitor.snapshot().to_json() if monitor is not None else None
    return Timing(
        samples_s=tuple(samples),
        flops=flops,
        device=str(device),
        clock=clock.name,
        input_sets=len(launches),
        inputs_cold=inputs_cold,
        warmup_launches=warm.launches,
        warmup_s=warm.seconds,
        steady=warm.steady,
        label=label,
        gpu_before=before,
        gpu_after=after,
    )


@dataclass(frozen=True)
class _WarmUp:
    launches: int
    seconds: float
    per_launch_s: float
    steady: bool


def _warm_up(clock: _EventClock | _HostClock, launches: Sequence[Callable[[], None]], budget: TimingBudget) -> _WarmUp:
    chunk = 1
    done = 0
    per_launch: list[float] = []
    begin = time.perf_counter()
    while True:
        seconds = clock.time_chunk(launches, done, chunk)
        done += chunk
        per_launch.append(seconds / chunk)
        elapsed = time.perf_counter() - begin
        last = per_launch[-3:]
        steady = len(last) == 3 and max(last) <= min(last) * (1 + budget.steady_tolerance)
        if (steady and elapsed * 1e3 >= budget.warmup_ms) or elapsed * 1e3 >= budget.max_warmup_ms:
            return _WarmUp(done, elapsed, per_launch[-1], steady)
        # Chunks long enough to amortize the synchronisation between them.
        chunk = max(1, min(math.ceil(budget.chunk_ms * 1e-3 / max(per_launch[-1], 1e-9)), 1 << 16))


# ---------------------------------------------------------------------------
# GEMM inputs and the one entry point for timing a registered kernel
# ---------------------------------------------------------------------------


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
    """"gfx950" (ROCm gcnArchName without features) or "sm_90". kernels.devices has the same rule for
    the registry; it is repeated here because the harness imports nothing from the code it measures."""
    props = torch.cuda.get_device_properties(device)
    if getattr(torch.version, "hip", None):
        return props.gcnArchName.split(":")[0]
    return f"sm_{props.major}{props.minor}"


def _cpu_llc_bytes() -> int:
    """Largest cache level of CPU 0 from sysfs; 32 MiB where sysfs does not say."""
    best_level, best_size = -1, _DEFAULT_CPU_LLC_BYTES
    root = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = os.listdir(root)
    except OSError:
        return best_size
    for entry in entries:
        try:
            with open(f"{root}/{entry}/level") as f:
                level = int(f.read())
            with open(f"{root}/{entry}/size") as f:
                text = f.read().strip()
        except (OSError, ValueError):
            continue
        units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
        size = int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)
        if level > best_level:
            best_level, best_size = level, size
    return best_size


def _free_memory_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
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
    """How many input sets to rotate, and whether that evicts each set before its reuse.

    Between two uses of one set the other ``sets - 1`` sets are touched; twice
    the cache size of them evicts it from an LRU-like cache. At least two sets,
    so consecutive launches never share inputs.
    """
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


def gemm_flops(m: int, n: int, k: int) -> int:
    """Floating-point operations of one GEMM: a multiply and an add per term."""
    return 2 * m * n * k


# prepare(a, b, out) -> launch: the caller wraps the raw operands in the commit's own MXFP4
# type and runs the kernel's untimed preparation; launch() is the only thing timed.
Prepare = Callable[[Operand, Operand, torch.Tensor], Callable[[], None]]


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


def measure_gemm(
    prepare: Prepare,
    m: int,
    n: int,
    k: int,
    *,
    device: torch.device | str,
    label: str = "",
    budget: TimingBudget = TimingBudget(),
    idle_policy: gpu_state.IdlePolicy | None = None,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> Timing:
    """Time an M x N x K MXFP4 GEMM; see the module doc.

    ``prepare(a, b, out)`` is called once per input set with raw operands
    (:class:`harness.operands.Operand`) and a bf16 ``out``; it returns the
    zero-argument launch that is timed. The caller has already checked that
    the kernel can run this shape here. Raises gpu_state.GpuBusyError when the
    GPU does not become idle (default policy: gpu_state.IdlePolicy.from_environment()).
    """
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
