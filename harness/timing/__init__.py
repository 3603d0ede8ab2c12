"""The one timing module: the asv suite, the pytest-benchmark A/B runs and the PR speed gate all time through it.

:func:`measure_gemm` times a GEMM on one shape: idle check (harness.gpu_state), rotated input sets that no cache holds,
priming, warm-up until steady, timed launches with one device-event pair each, then median, quartiles, MAD and TFLOPS,
the GPU's state recorded around them. Bump asv_bench.common.TIMING_METHOD_VERSION when a change here changes what a time
means. The kernel arrives as a ``prepare`` callable: nothing from kernels/ or ci/. Parts, in step order: ``gemm`` (entry
point, idle check), ``inputs``, ``sampling`` over ``clocks``, ``result``; import from here (``timing.measure_gemm``).
Why each step: docs/MEASURING.md, "Timing".
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
