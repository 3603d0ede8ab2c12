"""Random MXFP4 operands: the one generator for timing and for the tests' random data.

Here, not in kernels/, because old commits are timed with today's harness; the layout is packed here again on purpose
(tests/test_harness_boundary.py checks it against kernels.mxfp4). docs/MEASURING.md, "Operands".
"""

from __future__ import annotations

from typing import NamedTuple

import torch

BLOCK_SIZE = 32  # elements per e8m0 scale (OCP MX)
E8M0_BIAS = 127
E8M0_NAN = 255
# Default scale spread for timing: 2**-7 .. 2**6, every e2m1 code; products stay
# far inside fp32 for every kernel, so no kernel takes an overflow path.
TIMING_SCALE_RANGE = (E8M0_BIAS - 7, E8M0_BIAS + 6)


class Operand(NamedTuple):
    """The two tensors of one MXFP4 matrix; the caller wraps them in its own MXFP4 type."""

    data: torch.Tensor  # uint8 [rows, k // 2]
    scales: torch.Tensor  # uint8 [rows, k // 32]


def pack_codes(codes: torch.Tensor) -> torch.Tensor:
    """uint8 e2m1 codes ``[rows, K]`` -> ``[rows, K/2]`` bytes, even element in the low nibble."""
    return (codes[..., 0::2] & 0xF) | ((codes[..., 1::2] & 0xF) << 4)


def random_operand(
    rows: int,
    k: int,
    *,
    generator: torch.Generator,
    scale_range: tuple[int, int] = TIMING_SCALE_RANGE,
    device: torch.device | str | None = None,
) -> Operand:
    """Uniformly random e2m1 codes (all 16, both zeros and +-6) and e8m0 scales in ``scale_range`` (inclusive), drawn on
    the generator's device (a GPU one makes 16384 x 24576 operands in ms), then moved to ``device`` if given."""
    lo, hi = scale_range
    if not 0 <= lo <= hi <= E8M0_NAN - 1:
        raise ValueError(f"scale_range: {scale_range} must satisfy 0 <= lo <= hi <= 254 (255 is NaN)")
    if rows <= 0:
        raise ValueError(f"rows: must be positive, got {rows}")
    if k <= 0 or k % BLOCK_SIZE:
        raise ValueError(f"k: {k} is not a positive multiple of {BLOCK_SIZE}")
    where = generator.device
    codes = torch.randint(0, 16, (rows, k), dtype=torch.uint8, generator=generator, device=where)
    scales = torch.randint(lo, hi + 1, (rows, k // BLOCK_SIZE), dtype=torch.uint8, generator=generator, device=where)
    operand = Operand(pack_codes(codes).contiguous(), scales)
    if device is not None:
        operand = Operand(operand.data.to(device), operand.scales.to(device))
    return operand


def gemm_operands(m: int, n: int, k: int, *, seed: int, device: torch.device | str) -> tuple[Operand, Operand]:
    """A [M, K] and B [N, K] for one timing input set; A is drawn first from one generator seeded ``seed``."""
    generator = torch.Generator(device=device).manual_seed(seed)
    a = random_operand(m, k, generator=generator, device=device)
    return a, random_operand(n, k, generator=generator, device=device)
