"""The MXFP4 format (OCP Microscaling Formats v1.0, section 5.3 / 6.3).

Layout used throughout this project:

* ``data``   -- uint8 ``[rows, K // 2]``: e2m1 codes, two per byte, element
  ``2i`` of a row in the low nibble of byte ``i`` and ``2i + 1`` in the high
  nibble (packed along K).
* ``scales`` -- uint8 ``[rows, K // 32]``: one e8m0 exponent per 1x32 block
  along K; value ``2**(b - 127)``; ``b = 0`` is ``2**-127`` (not zero) and
  ``b = 255`` is NaN.

An e2m1 code is ``s e e m``: sign in bit 3, then a 2-bit exponent (bias 1) and
a 1-bit mantissa, giving magnitudes {0, 0.5, 1, 1.5, 2, 3, 4, 6}.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

BLOCK_SIZE = 32  # elements per shared e8m0 scale (OCP MX: k = 32)
E8M0_BIAS = 127
E8M0_NAN = 255
E2M1_EMAX = 2  # exponent of the largest normal e2m1 value (6 = 1.5 * 2**2)

# Magnitude of each 3-bit code; bit 3 of a nibble is the sign.
E2M1_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
E2M1_VALUES = E2M1_MAGNITUDES + tuple(-v for v in E2M1_MAGNITUDES)


@dataclass(frozen=True)
class MXFP4Tensor:
    """A row-major MXFP4 matrix of logical shape ``[rows, k]`` (see module doc)."""

    data: torch.Tensor
    scales: torch.Tensor

    @property
    def rows(self) -> int:
        return self.data.shape[0]

    @property
    def k(self) -> int:
        return self.data.shape[1] * 2

    @property
    def device(self) -> torch.device:
        return self.data.device

    def to(self, device: torch.device | str) -> MXFP4Tensor:
        return MXFP4Tensor(self.data.to(device), self.scales.to(device))

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return dequantize(self, dtype)


def check_mxfp4(name: str, t: MXFP4Tensor) -> None:
    """Raise ``ValueError`` naming ``name`` unless ``t`` is a well-formed MXFP4Tensor."""
    if not isinstance(t, MXFP4Tensor):
        raise ValueError(f"{name}: expected an MXFP4Tensor, got {type(t).__name__}")
    for part, tensor in (("data", t.data), ("scales", t.scales)):
        if not isinstance(tensor, torch.Tensor):
            raise ValueError(f"{name}.{part}: expected a torch.Tensor, got {type(tensor).__name__}")
        if tensor.dtype != torch.uint8:
            raise ValueError(f"{name}.{part}: dtype must be torch.uint8, got {tensor.dtype}")
        if tensor.dim() != 2:
            raise ValueError(f"{name}.{part}: must be 2-D, got shape {tuple(tensor.shape)}")
        if not tensor.is_contiguous():
            raise ValueError(f"{name}.{part}: must be contiguous (row-major), got strides {tensor.stride()}")
    if t.data.device != t.scales.device:
        raise ValueError(f"{name}: data is on {t.data.device} but scales are on {t.scales.device}")
    rows, k = t.rows, t.k
    if t.scales.shape[0] != rows:
        raise ValueError(f"{name}.scales: has {t.scales.shape[0]} rows but {name}.data has {rows}")
    if k % BLOCK_SIZE:
        raise ValueError(f"{name}: K = {k} (2 x {t.data.shape[1]} packed bytes) is not a multiple of {BLOCK_SIZE}")
    if t.scales.shape[1] != k // BLOCK_SIZE:
        raise ValueError(
            f"{name}.scales: shape {tuple(t.scales.shape)} does not match K = {k}: "
            f"expected [{rows}, {k // BLOCK_SIZE}] (one e8m0 per 1x{BLOCK_SIZE} block)"
        )


# ---------------------------------------------------------------------------
# e2m1 codes and nibble packing
# ---------------------------------------------------------------------------


def e2m1_table(dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu") -> torch.Tensor:
    return torch.tensor(E2M1_VALUES, dtype=dtype, device=device)


def pack_nibbles(codes: torch.Tensor) -> torch.Tensor:
    """``[rows, K]`` uint8 codes in 0..15 -> ``[rows, K // 2]`` bytes, even element low."""
    if codes.shape[-1] % 2:
        raise ValueError(f"codes: last dimension {codes.shape[-1]} must be even to pack two per byte")
    codes = codes.to(torch.uint8)
    return (codes[..., 0::2] & 0xF) | ((codes[..., 1::2] & 0xF) << 4)


def unpack_nibbles(packed: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`pack_nibbles`."""
    low = packed & 0xF
    high = packed >> 4
    return torch.stack((low, high), dim=-1).reshape(*packed.shape[:-1], packed.shape[-1] * 2)


def e2m1_to_float(codes: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return e2m1_table(dtype, codes.device)[codes.long()]


# Midpoints between neighbouring e2m1 magnitudes, with the side a tie goes to:
# ties round to the code whose mantissa bit (bit 0) is even, so a tie above an
# even code stays down (strictly greater needed) and above an odd code goes up.
_E2M1_MIDPOINTS = ((0.25, False), (0.75, True), (1.25, False), (1.75, True), (2.5, False), (3.5, True), (5.0, False))


def float_to_e2m1(x: torch.Tensor) -> torch.Tensor:
    """Round ``x`` (already divided by its block scale) to the nearest e2m1 code.

    Round-to-nearest, ties to the even mantissa, saturating at +-6 (OCP MX
    conversion rule for FP4 with saturation). NaN has no e2m1 encoding; callers
    keep NaN out (quantize() marks the whole block NaN through its scale).
    """
    magnitude = x.abs()
    code = torch.zeros(x.shape, dtype=torch.uint8, device=x.device)
    for midpoint, tie_goes_up in _E2M1_MIDPOINTS:
        code += (magnitude >= midpoint) if tie_goes_up else (magnitude > midpoint)
    negative = (x < 0) & (code != 0)  # -0 becomes +0
    return code | (negative.to(torch.uint8) << 3)


# ---------------------------------------------------------------------------
# e8m0 scales
# ---------------------------------------------------------------------------


def exp2_float64(exponent: torch.Tensor) -> torch.Tensor:
    """``2.0**exponent`` in float64 for integer exponents in [-1022, 1023], exact on every device.

    Written as the float64 bit pattern (biased exponent, zero mantissa), not with
    ``torch.pow``: CUDA's double-precision pow is not exact for every integer
    exponent (on an H200, 2**-113 came out one ulp off), and the reference must be.
    """
    bits = (exponent.to(torch.int64) + 1023) << 52
    return bits.view(torch.float64)


def e8m0_to_float(biased: torch.Tensor, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """``2**(b - 127)``; 255 is NaN. Exact in float64 (2**-127 is a normal double)."""
    value = exp2_float64(biased.to(torch.int64) - E8M0_BIAS)
    value = torch.where(biased == E8M0_NAN, torch.full_like(value, math.nan), value)
    return value.to(dtype)


def dequantize(t: MXFP4Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``[rows, K]`` values of ``t``. Use float64 for an exact result at every scale."""
    check_mxfp4("t", t)
    values = e2m1_to_float(unpack_nibbles(t.data), torch.float64)
    scales = e8m0_to_float(t.scales, torch.float64).repeat_interleave(BLOCK_SIZE, dim=1)
    return (values * scales).to(dtype)


# ---------------------------------------------------------------------------
# quantize
# ---------------------------------------------------------------------------


def quantize(x: torch.Tensor) -> MXFP4Tensor:
    """Quantize ``[rows, K]`` floats to MXFP4 with the OCP MX scale rule.

    Per 1x32 block: shared exponent ``floor(log2(amax)) - emax_elem`` (emax_elem = 2
    for e2m1), clamped to the e8m0 range [-127, 127]; elements are divided by the
    scale, rounded to nearest-even and saturated at +-6. An all-zero block gets
    ``b = 0`` (its elements are zero whatever the scale); a block holding NaN gets
    ``b = 255``; +-inf counts as NaN (the format has no infinities).
    """
    if x.dim() != 2:
        raise ValueError(f"x: must be 2-D [rows, K], got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise ValueError(f"x: must be a floating-point tensor, got {x.dtype}")
    rows, k = x.shape
    if k % BLOCK_SIZE:
        raise ValueError(f"x: K = {k} is not a multiple of {BLOCK_SIZE}")
    blocks = x.to(torch.float64).reshape(rows, k // BLOCK_SIZE, BLOCK_SIZE)
    bad = ~torch.isfinite(blocks).all(dim=-1)
    amax = blocks.abs().nan_to_num(0.0, 0.0, 0.0).amax(dim=-1)
    # frexp gives amax = m * 2**e with m in [0.5, 1): floor(log2(amax)) = e - 1, exactly.
    _, exponent = torch.frexp(amax)
    shared = (exponent.to(torch.int64) - 1 - E2M1_EMAX).clamp(-E8M0_BIAS, E8M0_BIAS)
    biased = torch.where(amax == 0, torch.zeros_like(shared), shared + E8M0_BIAS)
    biased = torch.where(bad, torch.full_like(biased, E8M0_NAN), biased).to(torch.uint8)
    scale = exp2_float64(biased.to(torch.int64) - E8M0_BIAS)
    scaled = torch.where(bad[..., None], torch.zeros_like(blocks), blocks / scale[..., None])
    codes = float_to_e2m1(scaled).reshape(rows, k)
    return MXFP4Tensor(pack_nibbles(codes).contiguous(), biased.contiguous())


# ---------------------------------------------------------------------------
# quantized Gaussian operands (uniformly random ones: harness.operands)
# ---------------------------------------------------------------------------


def randn_mxfp4(
    rows: int, k: int, *, generator: torch.Generator, device: torch.device | str | None = None
) -> MXFP4Tensor:
    """Gaussian data quantized with :func:`quantize` -- the distribution real activations resemble."""
    x = torch.randn(rows, k, generator=generator, dtype=torch.float32, device=generator.device)
    result = quantize(x)
    return result if device is None else result.to(device)
