"""The one correctness check: run a kernel once, compare with the reference.

``check_kernel`` is the path every correctness gate, mutation test and the
speed gate's pre-check go through: a NaN-poisoned output (an unwritten element
fails as non-finite), one launch, the commit's float64 reference
(kernels.reference), the harness's judgement (harness.accuracy).
"""

from __future__ import annotations

import math

import torch

from harness.accuracy import AccuracyReport, compare
from kernels.mxfp4 import MXFP4Tensor
from kernels.reference import reference_gemm


def run_once(kernel, a: MXFP4Tensor, b: MXFP4Tensor, config: str | None = None) -> torch.Tensor:
    """One launch of ``kernel`` into a NaN-poisoned bf16 output; returns the output."""
    out = torch.full((a.rows, b.rows), math.nan, dtype=torch.bfloat16, device=a.device)
    kernel.prepare(a, b, out, config)()
    if out.is_cuda:
        torch.cuda.synchronize(out.device)
    return out


def check_kernel(kernel, a: MXFP4Tensor, b: MXFP4Tensor, config: str | None = None) -> AccuracyReport:
    """Run ``kernel`` once on (a, b) and judge its output against the float64 reference."""
    out = run_once(kernel, a, b, config)
    return compare(out, reference_gemm(a, b), reference_gemm(a, b, absolute=True), a.k)
