"""The one timing module: the asv suite, the pytest-benchmark A/B runs and the PR speed gate all time through it.

Bump asv_bench.common.TIMING_METHOD_VERSION when a change here changes what a time means. Import from here
(``timing.measure_gemm``); the steps, the parts and why: docs/MEASURING.md, "Timing".
"""

from __future__ import annotations

from harness.timing.gemm import gemm_flops, measure_gemm
from harness.timing.inputs import CPU_MAX_INPUT_SETS, MAX_INPUT_SETS, gemm_bytes, gemm_inputs, input_set_count
from harness.timing.result import Timing, TimingBudget
from harness.timing.sampling import benchmark

__all__ = [
    "CPU_MAX_INPUT_SETS",
    "MAX_INPUT_SETS",
    "Timing",
    "TimingBudget",
    "benchmark",
    "gemm_bytes",
    "gemm_flops",
    "gemm_inputs",
    "input_set_count",
    "measure_gemm",
]
