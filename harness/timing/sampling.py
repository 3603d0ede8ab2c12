"""Timing zero-argument launches: priming, warm-up until steady, then one sample per launch (steps 3 to 5)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from harness import gpu_state
from harness.timing.clocks import Clock, clock_for
from harness.timing.result import Timing, TimingBudget


def benchmark(
    launches: Sequence[Callable[[], None]],
    *,
    flops: int,
    device: torch.device | str,
    budget: TimingBudget = TimingBudget(),  # noqa: B008 (frozen: one shared default is safe)
    monitor: gpu_state.GpuMonitor | None = None,
    inputs_cold: bool = True,
    label: str = "",
    primed: bool = False,
    settled: bool = False,
) -> Timing:
    """Time zero-argument ``launches`` (one per input set, used in rotation); see the module doc.

    ``primed``: every launch already ran in this process, so step 3 is skipped. ``settled`` (with ``primed``): the
    device has just run this same work, so step 4 is one launch and steadiness is judged on the timed launches
    (:func:`samples_steady`); unsteady ones count as warm-up, and the full warm-up and a second timing follow.
    """
    if settled and not primed:
        raise ValueError("settled: only a primed timing (every launch already ran) can skip its warm-up")
    if not launches:
        raise ValueError("launches: need at least one launch callable")
    if flops <= 0:
        raise ValueError(f"flops: must be positive, got {flops}")
    device = torch.device(device)
    clock = clock_for(device)

    if not primed:
        for launch in launches:  # priming: compilation and first-touch allocations stay out of the warm-up
            launch()
        clock.sync()

    began = time.perf_counter()
    warm = _one_launch(clock, launches) if settled else _warm_up(clock, launches, budget)
    samples, before, after = _timed(clock, launches, warm, budget, monitor)
    steady = samples_steady(samples, budget.steady_tolerance) if settled else warm.steady
    if settled and not steady:
        # The device had not settled after all (a power cap swinging the clock, say): what was timed
        # becomes warm-up, and the full warm-up, retried until steady, precedes a second timing.
        discarded, discarded_s = warm.launches + len(samples), time.perf_counter() - began
        full = _warm_up(clock, launches, budget)
        samples, before, after = _timed(clock, launches, full, budget, monitor)
        steady = full.steady
        # The record's warm-up: everything before the kept timing, the discarded one included.
        warm = _WarmUp(discarded + full.launches, discarded_s + full.seconds, full.per_launch_s, full.steady)
    return Timing(
        samples_s=tuple(samples),
        flops=flops,
        device=str(device),
        clock=clock.name,
        input_sets=len(launches),
        inputs_cold=inputs_cold,
        warmup_launches=warm.launches,
        warmup_s=warm.seconds,
        steady=steady,
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


def _timed(
    clock: Clock,
    launches: Sequence[Callable[[], None]],
    warm: _WarmUp,
    budget: TimingBudget,
    monitor: gpu_state.GpuMonitor | None,
) -> tuple[list[float], dict | None, dict | None]:
    """Step 5 right after ``warm`` (its launches started the rotation at the first input set): the
    samples, and the GPU's state just before and after them."""
    before = monitor.snapshot().to_json() if monitor is not None else None
    reps = int(min(max(math.ceil(budget.rep_ms * 1e-3 / warm.per_launch_s), budget.min_reps), budget.max_reps))
    # Continue the rotation where the warm-up stopped: the first timed set is not the one just used.
    samples = clock.time_each(launches, warm.launches, reps)
    after = monitor.snapshot().to_json() if monitor is not None else None
    return samples, before, after


def samples_steady(samples: Sequence[float], tolerance: float) -> bool:
    """The warm-up's rule applied to timed launches: the medians of their first, middle and last
    thirds agree within ``tolerance`` (a clock still rising or falling moves them apart)."""
    if len(samples) < 3:
        return False
    third = len(samples) // 3
    blocks = (samples[:third], samples[third : len(samples) - third], samples[len(samples) - third :])
    medians = [sorted(block)[len(block) // 2] for block in blocks]
    return max(medians) <= min(medians) * (1 + tolerance)


def _one_launch(clock: Clock, launches: Sequence[Callable[[], None]]) -> _WarmUp:
    begin = time.perf_counter()
    seconds = clock.time_chunk(launches, 0, 1)
    return _WarmUp(1, time.perf_counter() - begin, seconds, True)


def _warm_up(clock: Clock, launches: Sequence[Callable[[], None]], budget: TimingBudget) -> _WarmUp:
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
