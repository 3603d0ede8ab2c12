"""The one reference GEMM every correctness check compares against.

``reference_gemm(a, b)`` returns C = A . B^T in float64 for MXFP4 A[M,K] and B[N,K], on the operands'
device. Exact enough to be called exact: every product is exact in float64, and the K-term sum's
rounding is nine orders of magnitude below bf16's; scale 255 gives NaN. Operands are dequantized a
K-chunk at a time within ``chunk_bytes`` (default 4 GiB). Why, and its memory: docs/MEASURING.md,
"The reference".
"""

from __future__ import annotations

import torch

from kernels.mxfp4 import BLOCK_SIZE, MXFP4Tensor, check_mxfp4, dequantize

DEFAULT_CHUNK_BYTES = 4 << 30


def _dequantize_columns(t: MXFP4Tensor, start: int, stop: int, absolute: bool) -> torch.Tensor:
    """float64 values of columns [start, stop) of ``t``; block aligned."""
    columns = MXFP4Tensor(
        t.data[:, start // 2 : stop // 2].contiguous(),
        t.scales[:, start // BLOCK_SIZE : stop // BLOCK_SIZE].contiguous(),
    )
    values = dequantize(columns, torch.float64)
    return values.abs() if absolute else values  # |v * s| = |v| * s: scales are positive (or NaN)


def reference_gemm(
    a: MXFP4Tensor, b: MXFP4Tensor, *, absolute: bool = False, chunk_bytes: int = DEFAULT_CHUNK_BYTES
) -> torch.Tensor:
    """float64 ``A . B^T`` (or ``|A| . |B|^T`` with ``absolute``: the scale of rounding errors)."""
    check_mxfp4("a", a)
    check_mxfp4("b", b)
    if a.k != b.k:
        raise ValueError(f"b: K = {b.k} does not match a's K = {a.k}")
    if a.device != b.device:
        raise ValueError(f"a, b: must be on one device, got {a.device} and {b.device}")
    m, n, k = a.rows, b.rows, a.k
    chunk = max(BLOCK_SIZE, (chunk_bytes // (8 * (m + n))) // BLOCK_SIZE * BLOCK_SIZE)
    out = torch.zeros(m, n, dtype=torch.float64, device=a.device)
    for start in range(0, k, chunk):
        stop = min(k, start + chunk)
        a_chunk = _dequantize_columns(a, start, stop, absolute)
        b_chunk = _dequantize_columns(b, start, stop, absolute)
        out.addmm_(a_chunk, b_chunk.T)
    return out
