"""The one correctness check: :func:`check_kernel` (every correctness gate, mutation test and the speed gate's
pre-check) and :func:`check_output` (a timed launch's output at its shape, before a benchmark's speed counts)."""

from __future__ import annotations

import math

import torch

from harness import output_check
from harness.accuracy import AccuracyReport, compare
from harness.operands import Operand
from kernels.mxfp4 import MXFP4Tensor
from kernels.reference import reference_gemm


def check_kernel(kernel, a: MXFP4Tensor, b: MXFP4Tensor, config: str | None = None) -> AccuracyReport:
    """Run ``kernel`` once on (a, b) into a NaN-poisoned bf16 output and judge it against the float64 reference."""
    out = torch.full((a.rows, b.rows), math.nan, dtype=torch.bfloat16, device=a.device)
    kernel.prepare(a, b, out, config)()
    if out.is_cuda:
        torch.cuda.synchronize(out.device)
    return compare(out, reference_gemm(a, b), reference_gemm(a, b, absolute=True), a.k)


def commit_reference(a: Operand, b: Operand, absolute: bool) -> torch.Tensor:
    """harness.output_check's ``reference``: this process's kernels.reference (the commit's, in a gate's child)."""
    return reference_gemm(
        MXFP4Tensor(a.data, a.scales),
        MXFP4Tensor(b.data, b.scales),
        absolute=absolute,
        chunk_bytes=output_check.REFERENCE_CHUNK_BYTES,
    )


def check_output(out: torch.Tensor, a, b, *, seed: int = 0) -> output_check.OutputReport:
    """Judge ``out`` = A . B^T at its shape (``a``, ``b``: MXFP4 operands with .data and .scales)."""
    if out.is_cuda:
        torch.cuda.synchronize(out.device)
    return output_check.check_output(out, a, b, commit_reference, seed=seed)


def check_kept_output(kept: output_check.KeptOutput, *, seed: int = 0) -> output_check.OutputReport:
    """Judge the output a harness.output_check.KeptOutput kept (the timed launches' first input set)."""
    return kept.check(commit_reference, seed=seed)
