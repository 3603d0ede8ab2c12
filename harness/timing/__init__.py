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
   A warm worker timing a benchmark again on a GPU that has just been timing it
   (``benchmark(primed=True, settled=True)``) skips steps 3 and 4 but for one
   launch, and its steadiness is judged on the timed launches of step 5.
5. Timed launches: as many as fit ``rep_ms`` (within ``min_reps``..``max_reps``),
   one device-event pair per launch (``torch.cuda.Event`` works on CUDA and ROCm;
   the CPU uses ``time.perf_counter``), inputs rotated.
6. Statistics: median, quartiles, MAD; TFLOPS = 2*M*N*K / median time.
   The GPU's clock, temperature and power are recorded before and after step 5.

The asv suite compares results only within one asv_bench.common.TIMING_METHOD_VERSION:
bump it when a change here changes what a time means.

Imports nothing from kernels/ or ci/: the kernel arrives as a ``prepare``
callable, so this package measures any commit's kernel the same way.

Its parts, in the order of the steps: :mod:`~harness.timing.gemm` (step 1 and the
entry point), :mod:`~harness.timing.inputs` (step 2), :mod:`~harness.timing.sampling`
(steps 3-5, over the clocks of :mod:`~harness.timing.clocks`),
:mod:`~harness.timing.result` (step 6). Import from here
(``from harness import timing``; ``timing.measure_gemm``): the modules are its
parts, not separate entry points.
"""

from __future__ import annotations

from harness.timing.gemm import Prepare, gemm_flops, measure_gemm
from harness.timing.inputs import (
    CPU_MAX_INPUT_SETS,
    MAX_INPUT_SETS,
    GemmInputs,
    gemm_bytes,
    gemm_inputs,
    input_set_count,
    last_level_cache_bytes,
)
from harness.timing.result import Timing, TimingBudget
from harness.timing.sampling import benchmark

__all__ = [
    "CPU_MAX_INPUT_SETS",
    "MAX_INPUT_SETS",
    "GemmInputs",
    "Prepare",
    "Timing",
    "TimingBudget",
    "benchmark",
    "gemm_bytes",
    "gemm_flops",
    "gemm_inputs",
    "input_set_count",
    "last_level_cache_bytes",
    "measure_gemm",
]
