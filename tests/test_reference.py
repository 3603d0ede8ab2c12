"""The float64 reference GEMM against an independent exact computation."""

from __future__ import annotations

from fractions import Fraction

import pytest
import torch
from operands import SEED, random_mxfp4

from kernels import mxfp4
from kernels.reference import reference_gemm


def exact_gemm(a: mxfp4.MXFP4Tensor, b: mxfp4.MXFP4Tensor) -> list[list[Fraction]]:
    """Exact rational arithmetic, element by element, straight from the format definition."""

    def values(t):
        codes = mxfp4.unpack_nibbles(t.data).tolist()
        scales = t.scales.tolist()
        return [
            [Fraction(mxfp4.E2M1_VALUES[c]) * Fraction(2) ** (scales[r][i // 32] - 127) for i, c in enumerate(row)]
            for r, row in enumerate(codes)
        ]

    av, bv = values(a), values(b)
    return [[sum(x * y for x, y in zip(ar, br)) for br in bv] for ar in av]


def test_reference_equals_exact_rational_result():
    g = torch.Generator().manual_seed(SEED)
    a = random_mxfp4(5, 128, generator=g, scale_range=(1, 254))
    b = random_mxfp4(3, 128, generator=g, scale_range=(1, 254))
    ref = reference_gemm(a, b)
    exact = exact_gemm(a, b)
    for i in range(5):
        for j in range(3):
            # float64 rounding of the sum only: relative to sum |a_i b_i|
            bound = 128 * 2.0**-53 * float(reference_gemm(a, b, absolute=True)[i, j])
            assert abs(ref[i, j].item() - float(exact[i][j])) <= bound


def test_chunking_does_not_change_the_result():
    g = torch.Generator().manual_seed(SEED)
    a = random_mxfp4(16, 4096, generator=g)
    b = random_mxfp4(8, 4096, generator=g)
    whole = reference_gemm(a, b)
    chunked = reference_gemm(a, b, chunk_bytes=8 * 24 * 96)  # 96 columns per chunk: 43 chunks, ragged end
    torch.testing.assert_close(chunked, whole, rtol=4096 * 2.0**-52, atol=0)


def test_nan_scale_poisons_exactly_its_row():
    g = torch.Generator().manual_seed(SEED)
    a = random_mxfp4(4, 64, generator=g)
    b = random_mxfp4(3, 64, generator=g)
    a.scales[2, 1] = mxfp4.E8M0_NAN
    ref = reference_gemm(a, b)
    assert torch.isnan(ref[2]).all()
    assert torch.isfinite(ref[[0, 1, 3]]).all()


def test_absolute_is_the_sum_of_magnitudes():
    g = torch.Generator().manual_seed(SEED)
    a = random_mxfp4(4, 64, generator=g)
    b = random_mxfp4(3, 64, generator=g)
    expected = mxfp4.dequantize(a, torch.float64).abs() @ mxfp4.dequantize(b, torch.float64).abs().T
    torch.testing.assert_close(reference_gemm(a, b, absolute=True), expected, rtol=1e-14, atol=0)


def test_reference_rejects_mismatched_k():
    g = torch.Generator().manual_seed(SEED)
    with pytest.raises(ValueError, match="K = 64 does not match"):
        reference_gemm(random_mxfp4(2, 32, generator=g), random_mxfp4(2, 64, generator=g))
