"""A timed launch's output, judged at the shape it was timed at: the whole output for NaN/Inf, sampled rows and
columns against the commit's float64 reference. Why it finds a wrong tile, and its cost: docs/MEASURING.md,
"The output at the timed shape".
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch

from harness.accuracy import AccuracyReport, compare, element_ratio, nan_failures
from harness.errors import MeasurementError
from harness.operands import E8M0_NAN, Operand

# One sampled row (column) per band: the kernels' tiles are 128 or 256 wide along M and N.
SAMPLE_BAND = 128
# At most this many sampled rows (and columns): every 128-row band of M = 8192 (the headline shape)
# including the first and the last row. Beyond, the bands widen to keep the count (and the cost).
MAX_SAMPLES = 64
# The reference's float64 K-chunks stay within this: the check runs beside the timed input sets.
REFERENCE_CHUNK_BYTES = 1 << 30

# (A rows, B rows, absolute) -> float64 A.B^T, or |A|.|B|^T with absolute: the commit's reference.
Reference = Callable[[Operand, Operand, bool], torch.Tensor]


def sampled_indices(size: int, *, seed: int, band: int = SAMPLE_BAND, cap: int = MAX_SAMPLES) -> list[int]:
    """Sorted indices in [0, size): one per band (random offset, seeded), the first band's 0, the last's size-1; with
    more than ``cap`` bands the band widens (a multiple of ``band``) until ``cap`` bands cover ``size``."""
    if size <= 0 or band <= 0 or cap < 2:
        raise ValueError(f"sampled_indices: size {size}, band {band} and cap {cap} must be positive (cap >= 2)")
    band *= math.ceil(math.ceil(size / band) / cap)
    bands = math.ceil(size / band)
    draw = random.Random(f"{seed}/{size}")
    picks = {draw.randrange(i * band, min(size, (i + 1) * band)) for i in range(1, bands - 1)}
    picks |= {0, size - 1}
    return sorted(picks)


@dataclass(frozen=True)
class OutputReport:
    """The verdict on one output at its shape: whole-output NaN/Inf scan plus sampled rows and columns."""

    shape: tuple[int, int, int]
    rows: tuple[int, ...]
    columns: tuple[int, ...]
    nonfinite: int  # over the whole output: NaN/Inf where the reference is finite
    missing_nan: int  # over the whole output: finite where the reference is NaN
    sampled_rows: AccuracyReport  # C[rows, :] against the reference
    sampled_columns: AccuracyReport  # C[:, columns] against the reference
    first_bad: tuple[int, int] | None  # the first failing element, row-major

    @property
    def failures(self) -> list[str]:
        problems = nan_failures(self.nonfinite, self.missing_nan)
        problems += [f"sampled rows: {f}" for f in _mapped(self.sampled_rows, self.rows, None)]
        problems += [f"sampled columns: {f}" for f in _mapped(self.sampled_columns, None, self.columns)]
        return problems

    @property
    def passed(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        """ "wrong result at MxNxK: ...; first bad element C[i,j]", or what was checked when it passed."""
        shape = "x".join(map(str, self.shape))
        if self.passed:
            return (
                f"correct at {shape} (whole output finite; {len(self.rows)} rows and "
                f"{len(self.columns)} columns match the reference)"
            )
        where = f"; first bad element C[{self.first_bad[0]},{self.first_bad[1]}]" if self.first_bad else ""
        return f"wrong result at {shape}: {'; '.join(self.failures)}{where}"

    def to_json(self) -> dict[str, Any]:
        return {
            "shape": list(self.shape),
            "passed": self.passed,
            "message": self.summary(),
            "first_bad": list(self.first_bad) if self.first_bad else None,
            "rows_checked": len(self.rows),
            "columns_checked": len(self.columns),
        }


def _mapped(report: AccuracyReport, rows: tuple[int, ...] | None, columns: tuple[int, ...] | None) -> list[str]:
    """A sub-report's value failures, its worst element named by its place in the whole output."""
    i, j = report.worst_element
    whole = f"C[{rows[i] if rows else i},{columns[j] if columns else j}]"
    return [f.replace(f"C[{i},{j}]", whole) for f in report.value_failures]


def check_output(
    out: torch.Tensor,
    a: Any,
    b: Any,
    reference: Reference,
    *,
    seed: int = 0,
    band: int = SAMPLE_BAND,
    cap: int = MAX_SAMPLES,
) -> OutputReport:
    """Judge ``out`` (bf16 [M, N]) = A . B^T for MXFP4 ``a`` [M, K] and ``b`` [N, K] (anything with .data, .scales)."""
    m, n = out.shape
    k = a.data.shape[1] * 2
    if a.data.shape[0] != m or b.data.shape[0] != n or b.data.shape[1] * 2 != k:
        raise ValueError(f"out {tuple(out.shape)} is not A {tuple(a.data.shape)} . B^T {tuple(b.data.shape)} (packed)")
    # Whole output: where must the reference be NaN? Exactly where A's row or B's row has a NaN scale.
    # (The timing operands have none: then the scan is one isfinite over the output.)
    nan_rows = (a.scales == E8M0_NAN).any(dim=1)
    nan_columns = (b.scales == E8M0_NAN).any(dim=1)
    unexpected = ~torch.isfinite(out)
    missing = torch.zeros((1, 1), dtype=torch.bool, device=out.device)
    if bool(nan_rows.any() or nan_columns.any()):
        must_be_nan = nan_rows[:, None] | nan_columns[None, :]
        unexpected &= ~must_be_nan
        missing = must_be_nan & ~torch.isnan(out)
    bad = [_first(unexpected), _first(missing)]

    rows = sampled_indices(m, seed=seed, band=band, cap=cap)
    columns = sampled_indices(n, seed=seed + 1, band=band, cap=cap)
    row_index = torch.tensor(rows, device=out.device)
    column_index = torch.tensor(columns, device=out.device)
    a_rows = Operand(a.data[row_index], a.scales[row_index])
    b_rows = Operand(b.data[column_index], b.scales[column_index])
    whole_a, whole_b = Operand(a.data, a.scales), Operand(b.data, b.scales)
    row_ref, row_abs = reference(a_rows, whole_b, False), reference(a_rows, whole_b, True)
    column_ref, column_abs = reference(whole_a, b_rows, False), reference(whole_a, b_rows, True)
    row_out, column_out = out[row_index], out[:, column_index]
    sampled_rows = compare(row_out, row_ref, row_abs, k)
    sampled_columns = compare(column_out, column_ref, column_abs, k)
    over = _first(element_ratio(row_out, row_ref, row_abs, k) > 1.0)
    bad.append(None if over is None else (rows[over[0]], over[1]))
    over = _first(element_ratio(column_out, column_ref, column_abs, k) > 1.0)
    bad.append(None if over is None else (over[0], columns[over[1]]))
    first_bad = min((x for x in bad if x is not None), default=None)
    report = OutputReport(
        (m, n, k),
        tuple(rows),
        tuple(columns),
        int(unexpected.sum()),
        int(missing.sum()),
        sampled_rows,
        sampled_columns,
        first_bad,
    )
    if first_bad is None and not report.passed:  # only a norm failed: name the worst sampled element
        i, j = sampled_rows.worst_element
        report = replace(report, first_bad=(rows[i], j))
    return report


def _first(mask: torch.Tensor) -> tuple[int, int] | None:
    """The first True of a 2-D mask in row-major order, or None."""
    flat = mask.reshape(-1)
    if not bool(flat.any()):
        return None
    index = int(torch.argmax(flat.to(torch.uint8)))
    return index // mask.shape[1], index % mask.shape[1]


class WrongResult(MeasurementError, RuntimeError):
    """A timed output failed :func:`check_output`; the message is the report's summary ("wrong result at MxNxK: ..")."""

    def __init__(self, report: OutputReport):
        super().__init__(report.summary())
        self.report = report


class KeptOutput:
    """A harness.timing ``prepare`` that keeps the first input set's operands and output for :func:`check_output`,
    the output poisoned with NaN before the kernel's preparation (an element no launch writes shows as NaN)."""

    def __init__(self, prepare: Callable[[Operand, Operand, torch.Tensor], Callable[[], None]]):
        self._prepare = prepare
        self.a: Operand | None = None
        self.b: Operand | None = None
        self.out: torch.Tensor | None = None

    def __call__(self, a: Operand, b: Operand, out: torch.Tensor) -> Callable[[], None]:
        if self.out is None:
            out.fill_(math.nan)
            self.a, self.b, self.out = a, b, out
        return self._prepare(a, b, out)

    def check(self, reference: Reference, *, seed: int = 0) -> OutputReport:
        """The kept output (written by the launches run since) judged at its shape; the device is synchronized first."""
        if self.out is None:
            raise RuntimeError("no input set was prepared: there is no output to check")
        if self.out.is_cuda:
            torch.cuda.synchronize(self.out.device)
        return check_output(self.out, self.a, self.b, reference, seed=seed)
