"""How a kernel's bf16 output is judged against the float64 reference: pure, tensors in, a verdict out.

Thresholds from bf16 output rounding and fp32 accumulation; derivation and measured figures: docs/MEASURING.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

U_BF16 = 2.0**-8  # unit roundoff of bf16 (8 significant bits, round to nearest)
U_FP32 = 2.0**-24
ACC_SIGMAS = 8.0
MAX_REL_ERR = U_BF16
MAX_ONE_MINUS_COS = 2.0**-16


@dataclass(frozen=True)
class AccuracyReport:
    shape: tuple[int, int, int]
    rel_err: float
    cosine: float
    worst_element_ratio: float  # max over elements of |C - R| / allowed; <= 1 passes
    worst_element: tuple[int, int]
    nonfinite: int  # elements NaN/Inf in C where the reference is finite
    missing_nan: int  # elements finite in C where the reference is NaN

    @property
    def failures(self) -> list[str]:
        return nan_failures(self.nonfinite, self.missing_nan) + self.value_failures

    @property
    def value_failures(self) -> list[str]:
        """The failures of the finite elements' values (error norm, cosine, worst element)."""
        problems = []
        if not self.rel_err <= MAX_REL_ERR:
            problems.append(f"relative error {self.rel_err:.3e} > {MAX_REL_ERR:.3e} (bf16 rounding bound)")
        if not 1.0 - self.cosine <= MAX_ONE_MINUS_COS:
            problems.append(f"cosine similarity {self.cosine:.9f} < {1 - MAX_ONE_MINUS_COS:.9f}")
        if not self.worst_element_ratio <= 1.0:
            i, j = self.worst_element
            problems.append(
                f"element C[{i},{j}] is off by {self.worst_element_ratio:.3g}x the allowed bf16+fp32-accumulation error"
            )
        return problems

    @property
    def passed(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        m, n, k = self.shape
        verdict = "PASS" if self.passed else "FAIL: " + "; ".join(self.failures)
        return (
            f"M={m} N={n} K={k}: rel_err={self.rel_err:.3e} cos={self.cosine:.9f} "
            f"worst_elem={self.worst_element_ratio:.3f} -> {verdict}"
        )


def compare(out: torch.Tensor, reference: torch.Tensor, abs_reference: torch.Tensor, k: int) -> AccuracyReport:
    """Judge ``out`` (bf16 [M,N]) against ``reference`` (float64) and ``abs_reference`` = |A|.|B|^T."""
    if out.shape != reference.shape or reference.shape != abs_reference.shape:
        raise ValueError(f"out {tuple(out.shape)}, reference {tuple(reference.shape)} and abs_reference must match")
    c = out.to(torch.float64)
    ref_nan = torch.isnan(reference)
    c_bad = ~torch.isfinite(c)
    nonfinite = int((c_bad & ~ref_nan).sum())
    missing_nan = int((ref_nan & ~torch.isnan(c)).sum())
    valid = ~ref_nan & ~c_bad
    cv, rv = c[valid], reference[valid]
    ref_norm = float(torch.linalg.vector_norm(rv))
    diff_norm = float(torch.linalg.vector_norm(cv - rv))
    rel_err = diff_norm / ref_norm if ref_norm > 0 else (0.0 if diff_norm == 0 else math.inf)
    c_norm = float(torch.linalg.vector_norm(cv))
    cosine = float(torch.dot(cv, rv)) / (c_norm * ref_norm) if c_norm > 0 and ref_norm > 0 else float(diff_norm == 0)
    ratio = element_ratio(c, reference, abs_reference, k, valid)
    worst = int(torch.argmax(ratio))
    n = out.shape[1]
    return AccuracyReport(
        shape=(out.shape[0], n, k),
        rel_err=rel_err,
        cosine=cosine,
        worst_element_ratio=float(ratio.view(-1)[worst]),
        worst_element=(worst // n, worst % n),
        nonfinite=nonfinite,
        missing_nan=missing_nan,
    )


def nan_failures(nonfinite: int, missing_nan: int) -> list[str]:
    problems = []
    if nonfinite:
        problems.append(f"{nonfinite} elements are NaN/Inf where the reference is finite (unwritten or overflowed)")
    if missing_nan:
        problems.append(f"{missing_nan} elements are finite where the reference is NaN (scale 255 not propagated)")
    return problems


def element_ratio(
    out: torch.Tensor, reference: torch.Tensor, abs_reference: torch.Tensor, k: int, valid: torch.Tensor | None = None
) -> torch.Tensor:
    """:func:`compare`'s element-wise judgement, |C - R| / allowed: > 1 fails; 0 where not ``valid`` (default: where
    C or the reference is not finite)."""
    c = out.to(torch.float64)
    if valid is None:
        valid = ~torch.isnan(reference) & torch.isfinite(c)
    allowed = U_BF16 * reference.abs() + ACC_SIGMAS * math.sqrt(k) * U_FP32 * abs_reference
    return torch.where(valid, (c - reference).abs() / allowed.clamp_min(torch.finfo(torch.float64).tiny), 0.0)
