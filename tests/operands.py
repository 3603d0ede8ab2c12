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
from kernels.mxfp4 import MXFP4Tensor, randn_mxfp4

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


DATA_KINDS = ("randn", "wide_scales")


@functools.lru_cache(maxsize=8)  # tests share operands within a run; nothing writes to them
def make_operands(kind: str, m: int, n: int, k: int, salt: int = 0) -> tuple[MXFP4Tensor, MXFP4Tensor]:
    """``randn``: quantized Gaussian data; ``wide_scales``: every code, scales 2**-7..2**6."""
    g = generator(salt)
    if kind == "randn":
        return randn_mxfp4(m, k, generator=g), randn_mxfp4(n, k, generator=g)
    if kind == "wide_scales":
        return random_mxfp4(m, k, generator=g), random_mxfp4(n, k, generator=g)
    raise ValueError(f"kind: unknown data kind {kind!r}; expected one of {DATA_KINDS}")
