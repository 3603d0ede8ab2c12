"""Fresh random operands on the device under test, shared by every test module.

Every run draws fresh random inputs (a correct kernel computes the same function
on any valid input). The seed is printed in pytest's header and in every gate
failure; set MXFP4_TEST_SEED to replay a run.
"""

from __future__ import annotations

import functools
import os
import secrets

import torch

from harness.operands import TIMING_SCALE_RANGE, random_operand
from kernels import devices
from kernels.mxfp4 import BLOCK_SIZE, E8M0_BIAS, E8M0_NAN, MXFP4Tensor, pack_nibbles, randn_mxfp4

SEED = int(os.environ.get("MXFP4_TEST_SEED", secrets.randbits(31)))
DEVICE = devices.default_device()


def generator(salt: int = 0) -> torch.Generator:
    """A generator on the device under test, seeded from this run's SEED."""
    return torch.Generator(device=DEVICE).manual_seed(SEED * 1_000_003 + salt)


def random_mxfp4(
    rows: int,
    k: int,
    *,
    generator: torch.Generator,
    scale_range: tuple[int, int] = TIMING_SCALE_RANGE,
    device: torch.device | str | None = None,
) -> MXFP4Tensor:
    """harness.operands' random operand (the one the timings use) as this commit's MXFP4Tensor."""
    data, scales = random_operand(rows, k, generator=generator, scale_range=scale_range, device=device)
    return MXFP4Tensor(data, scales)


DATA_KINDS = ("randn", "wide_scales", "edge_scales")

# edge_scales: one K block in EDGE_PAIR_EVERY is an edge pair (below); the rest have scales 2**-7..2**0.
EDGE_PAIR_EVERY = 8
EDGE_LOW = (0, 1)  # 2**-127 (b = 0, not zero) and 2**-126
EDGE_HIGH = (E8M0_BIAS + 126, E8M0_BIAS + 127)  # bytes 253, 254: 2**126, 2**127
SMALL_CODES_MASK = 0b1011  # keeps the sign and the low two bits: magnitudes 0, 0.5, 1, 1.5


@functools.lru_cache(maxsize=8)  # tests share operands within a run; nothing writes to them
def make_operands(kind: str, m: int, n: int, k: int, salt: int = 0) -> tuple[MXFP4Tensor, MXFP4Tensor]:
    """``randn``: quantized Gaussian data; ``wide_scales``: every code, scales 2**-7..2**6;
    ``edge_scales``: every code, with the edge scale bytes 0, 1, 253, 254 and 255 mixed in."""
    g = generator(salt)
    if kind == "randn":
        return randn_mxfp4(m, k, generator=g), randn_mxfp4(n, k, generator=g)
    if kind == "wide_scales":
        return random_mxfp4(m, k, generator=g), random_mxfp4(n, k, generator=g)
    if kind == "edge_scales":
        return edge_scale_operands(m, n, k, g)
    raise ValueError(f"kind: unknown data kind {kind!r}; expected one of {DATA_KINDS}")


def edge_scale_operands(m: int, n: int, k: int, g: torch.Generator) -> tuple[MXFP4Tensor, MXFP4Tensor]:
    """Random codes and scales with the edge scale bytes in the places where they matter.

    * Edge pairs: in one K block of every ``EDGE_PAIR_EVERY`` (random blocks), every
      row of one operand gets a low edge byte (0 or 1, per row) and every row of the
      other a high one (253 or 254), alternating which operand is low. The products
      are 2**-1 .. 2**1 times the codes, as large as the largest other blocks
      (2**-7..2**0 each, products up to 2**0), so they carry about half of
      ||C||**2 (dropping them moved C by 67% at K = 8192): a kernel that decodes
      b = 0 as 0 (Triton's Hopper dot_scaled; 30% here) or flushes subnormals
      (oneDNN's bf16 dot products on AVX512-BF16 CPUs; 8%) fails the gate, whose
      bound is 0.4% (tests/test_mutations.py proves both).
      The high side keeps its codes within +-1.5: 1.5 * 2**127 fits fp32 and bf16,
      where 2 * 2**127 would overflow the upcasting kernels (a documented limit,
      kernels/triton_mxfp4.py), not what this data is about. Every product stays
      below 18, so no accumulator comes near overflow.
    * NaN: one block of A and one of B get 255, so exactly one row and one column
      of C are NaN and the gate judges the rest; more would blank C.
    """
    where = g.device
    a_codes = torch.randint(0, 16, (m, k), dtype=torch.uint8, generator=g, device=where)
    b_codes = torch.randint(0, 16, (n, k), dtype=torch.uint8, generator=g, device=where)
    blocks = k // BLOCK_SIZE
    scale_range = (E8M0_BIAS - 7, E8M0_BIAS + 1)  # randint's high is exclusive: 2**-7 .. 2**0
    a_scales = torch.randint(*scale_range, (m, blocks), dtype=torch.uint8, generator=g, device=where)
    b_scales = torch.randint(*scale_range, (n, blocks), dtype=torch.uint8, generator=g, device=where)
    pairs = torch.randperm(blocks, generator=g, device=where)[: max(2, blocks // EDGE_PAIR_EVERY)]
    for i, block in enumerate(pairs.tolist()):
        a_side, b_side = (a_codes, a_scales), (b_codes, b_scales)
        low, high = (a_side, b_side) if i % 2 == 0 else (b_side, a_side)
        _set_column(low[1], block, EDGE_LOW, g)
        _set_column(high[1], block, EDGE_HIGH, g)
        high[0].view(high[0].shape[0], blocks, BLOCK_SIZE)[:, block] &= SMALL_CODES_MASK
    for scales in (a_scales, b_scales):
        row = int(torch.randint(0, scales.shape[0], (1,), generator=g, device=where))
        block = int(torch.randint(0, blocks, (1,), generator=g, device=where))
        scales[row, block] = E8M0_NAN
    return (
        MXFP4Tensor(pack_nibbles(a_codes).contiguous(), a_scales),
        MXFP4Tensor(pack_nibbles(b_codes).contiguous(), b_scales),
    )


def _set_column(scales: torch.Tensor, block: int, choices: tuple[int, int], g: torch.Generator) -> None:
    """Column ``block`` of ``scales`` becomes ``choices[0]`` or ``choices[1]``, per row at random."""
    pick = torch.randint(0, 2, (scales.shape[0],), dtype=torch.uint8, generator=g, device=scales.device)
    scales[:, block] = torch.where(pick == 0, choices[0], choices[1]).to(torch.uint8)
