"""The MXFP4 format module against the OCP MX v1.0 rules, checked by an independent scalar model."""

from __future__ import annotations

import math

import pytest
import torch
from operands import DEVICE, SEED, random_mxfp4

from kernels import mxfp4

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def scalar_e2m1_round(v: float) -> int:
    """Nearest e2m1 code by exhaustive search; ties to the even mantissa bit; saturating."""
    mag = min(abs(v), 6.0)
    best = min(range(8), key=lambda c: (abs(E2M1[c] - mag), c % 2))  # distance, then even mantissa
    return best | (8 if v < 0 and best != 0 else 0)


def scalar_quantize_block(block: list[float]) -> tuple[int, list[int]]:
    """OCP MX section 6.3: X = 2**(floor(log2(max|V|)) - emax_elem), then round V/X."""
    if any(not math.isfinite(v) for v in block):
        return 255, [0] * len(block)
    amax = max(abs(v) for v in block)
    if amax == 0:
        return 0, [0] * len(block)
    shared = max(-127, min(127, math.floor(math.log2(amax)) - 2))
    return shared + 127, [scalar_e2m1_round(v / 2.0**shared) for v in block]


def test_e2m1_table_is_the_spec():
    assert mxfp4.E2M1_VALUES[:8] == tuple(E2M1)
    assert mxfp4.E2M1_VALUES[8:] == tuple(-v for v in E2M1)
    # bit layout s e e m: exponent bias 1, subnormal at exponent 0
    for code in range(16):
        sign, exponent, mantissa = code >> 3, (code >> 1) & 3, code & 1
        magnitude = mantissa * 0.5 if exponent == 0 else (1 + mantissa / 2) * 2.0 ** (exponent - 1)
        assert mxfp4.E2M1_VALUES[code] == (-magnitude if sign else magnitude)


def test_packing_puts_element_2i_in_the_low_nibble():
    codes = torch.tensor([[1, 2, 3, 4, 15, 0]], dtype=torch.uint8)
    packed = mxfp4.pack_nibbles(codes)
    assert packed.tolist() == [[0x21, 0x43, 0x0F]]
    assert torch.equal(mxfp4.unpack_nibbles(packed), codes)


def test_pack_rejects_odd_k():
    with pytest.raises(ValueError, match="even"):
        mxfp4.pack_nibbles(torch.zeros(2, 3, dtype=torch.uint8))


def test_e8m0_values():
    b = torch.tensor([0, 1, 126, 127, 128, 254, 255], dtype=torch.uint8)
    value = mxfp4.e8m0_to_float(b)
    assert value[:6].tolist() == [2.0**-127, 2.0**-126, 0.5, 1.0, 2.0, 2.0**127]
    assert value[0] != 0, "b = 0 is 2**-127, not zero"
    assert math.isnan(value[6])
    assert mxfp4.e8m0_to_float(b, torch.float32)[0].item() == 2.0**-127  # a float32 subnormal, exact


@pytest.mark.parametrize(
    "value, expected",
    [
        (0.25, 0.0),
        (0.75, 1.0),
        (1.25, 1.0),
        (1.75, 2.0),
        (2.5, 2.0),
        (3.5, 4.0),
        (5.0, 4.0),
        (5.1, 6.0),
        (0.26, 0.5),
        (-0.75, -1.0),
        (7.0, 6.0),
        (-1e9, -6.0),
        (-0.1, 0.0),
    ],
)
def test_round_to_nearest_even_and_saturate(value, expected):
    code = mxfp4.float_to_e2m1(torch.tensor([value], dtype=torch.float64))
    assert mxfp4.e2m1_to_float(code, torch.float64).item() == expected
    assert int(code) == scalar_e2m1_round(value)


def test_quantize_matches_the_scalar_model_of_the_spec():
    g = torch.Generator().manual_seed(SEED)
    x = torch.randn(6, 32 * 12, generator=g, dtype=torch.float64) * torch.exp2(
        torch.randint(-40, 40, (6, 1), generator=g).double()
    )
    x[0, :32] = 0.0  # zero block
    x[1, 32:64] = 1e-45  # below 2**-127 * 0.5: clamps to b = 0, rounds to zero
    x[2, 64:96] = 3e38  # near the top of the range
    x[3, 5] = math.nan  # NaN block -> scale 255
    x[4, 40] = math.inf  # inf has no encoding either
    q = mxfp4.quantize(x)
    codes = mxfp4.unpack_nibbles(q.data)
    for row in range(x.shape[0]):
        for block in range(x.shape[1] // 32):
            scale, expected_codes = scalar_quantize_block(x[row, block * 32 : (block + 1) * 32].tolist())
            assert q.scales[row, block].item() == scale, (row, block)
            assert codes[row, block * 32 : (block + 1) * 32].tolist() == expected_codes, (row, block)


def test_dequantize_of_quantize_is_exact_for_representable_values():
    g = torch.Generator().manual_seed(SEED)
    t = random_mxfp4(8, 256, generator=g, scale_range=(1, 254))
    values = mxfp4.dequantize(t, torch.float64)
    again = mxfp4.quantize(values)
    assert torch.equal(mxfp4.dequantize(again, torch.float64), values)


def test_quantize_rejects_bad_input():
    with pytest.raises(ValueError, match="multiple of 32"):
        mxfp4.quantize(torch.zeros(2, 48))
    with pytest.raises(ValueError, match="2-D"):
        mxfp4.quantize(torch.zeros(64))
    with pytest.raises(ValueError, match="floating-point"):
        mxfp4.quantize(torch.zeros(2, 64, dtype=torch.int32))


def test_random_mxfp4_rejects_nan_scale_range():
    with pytest.raises(ValueError, match="scale_range"):
        random_mxfp4(2, 64, generator=torch.Generator(), scale_range=(0, 255))


def test_random_operands_stay_on_the_generators_device():
    """A GPU gate that silently ran on CPU operands would test the wrong device (it happened once)."""
    for make in (random_mxfp4, mxfp4.randn_mxfp4):
        t = make(4, 64, generator=torch.Generator(device="cpu"))
        assert t.device == torch.device("cpu")
        assert make(4, 64, generator=torch.Generator(), device="meta").device == torch.device("meta")


def test_every_e8m0_scale_is_an_exact_power_of_two_on_the_device_under_test():
    """The reference's scales must be exact wherever it runs: CUDA's double pow was one ulp off at 2**-113."""
    biased = torch.arange(255, dtype=torch.uint8, device=DEVICE)
    got = mxfp4.e8m0_to_float(biased, torch.float64).cpu()
    expected = torch.tensor([math.ldexp(1.0, b - 127) for b in range(255)], dtype=torch.float64)
    assert torch.equal(got, expected), (got - expected).abs().max()
    assert torch.isnan(mxfp4.e8m0_to_float(torch.tensor([255], dtype=torch.uint8, device=DEVICE))).all()
