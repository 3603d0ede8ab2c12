"""The preshuffle transforms of kernels.preshuffle: inverses, and the layout they document."""

from __future__ import annotations

import pytest
import torch

from kernels import preshuffle

# (rows, K): the smallest valid, odd multiples of the granularity, and a mixed one.
WEIGHT_SHAPES = [(16, 32), (48, 96), (80, 544), (256, 1024)]
SCALE_SHAPES = [(32, 256), (96, 768), (160, 1280), (256, 2048)]


def _random_bytes(rows: int, cols: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (rows, cols), dtype=torch.uint8, generator=g)


@pytest.mark.parametrize("rows,k", WEIGHT_SHAPES)
def test_weight_round_trip_and_not_identity(rows: int, k: int) -> None:
    data = _random_bytes(rows, k // 2, seed=rows + k)
    shuffled = preshuffle.shuffle_weight(data)
    assert shuffled.shape == data.shape and shuffled.dtype == torch.uint8
    assert torch.equal(preshuffle.unshuffle_weight(shuffled), data)
    if k // 2 > 16:  # with a single 16-byte block per row the layout is the identity
        assert not torch.equal(shuffled, data)


@pytest.mark.parametrize("rows,k", SCALE_SHAPES)
def test_scales_round_trip_and_not_identity(rows: int, k: int) -> None:
    scales = _random_bytes(rows, k // 32, seed=rows * k)
    shuffled = preshuffle.shuffle_scales(scales)
    assert shuffled.shape == scales.shape and shuffled.dtype == torch.uint8
    assert torch.equal(preshuffle.unshuffle_scales(shuffled), scales)
    assert not torch.equal(shuffled, scales)


def _weight_index(row: int, byte: int, k_bytes: int) -> int:
    """Flat destination of data[row, byte], straight from the module doc's formula."""
    g, r = divmod(row, 16)
    c, b = divmod(byte, 16)
    return ((g * (k_bytes // 16) + c) * 16 + r) * 16 + b


def _scale_index(row: int, block: int, k: int) -> int:
    """Flat destination of scales[row, block] per the doc: [p, t, lane 16q+i, byte 2h+s]."""
    p, within = divmod(row, 32)
    s, i = divmod(within, 16)
    t, in_step = divmod(block, 8)
    h, q = divmod(in_step, 4)
    return ((p * (k // 256) + t) * 64 + 16 * q + i) * 4 + 2 * h + s


@pytest.mark.parametrize("rows,k", [(48, 96), (32, 160)])
def test_weight_matches_element_formula(rows: int, k: int) -> None:
    data = _random_bytes(rows, k // 2, seed=7)
    flat = preshuffle.shuffle_weight(data).reshape(-1)
    expected = torch.empty_like(flat)
    for row in range(rows):
        for byte in range(k // 2):
            expected[_weight_index(row, byte, k // 2)] = data[row, byte]
    assert torch.equal(flat, expected)


@pytest.mark.parametrize("rows,k", [(64, 512), (32, 768)])
def test_scales_match_element_formula(rows: int, k: int) -> None:
    scales = _random_bytes(rows, k // 32, seed=11)
    flat = preshuffle.shuffle_scales(scales).reshape(-1)
    expected = torch.empty_like(flat)
    for row in range(rows):
        for block in range(k // 32):
            expected[_scale_index(row, block, k)] = scales[row, block]
    assert torch.equal(flat, expected)


def test_scale_word_is_what_the_mfma_lane_reads() -> None:
    # Lane 16q+i of the word for (group p, step t) must give, at byte 2h+s, the scale
    # of row 32p+16s+i and 32-block 8t+4h+q: the MFMA's per-lane scale (CDNA4 ISA).
    rows, k = 64, 512
    scales = _random_bytes(rows, k // 32, seed=3)
    words = preshuffle.shuffle_scales(scales).reshape(rows // 32, k // 256, 64, 4)
    for p, t, q, i, h, s in [(0, 0, 0, 0, 0, 0), (1, 1, 3, 15, 1, 1), (0, 1, 2, 5, 0, 1), (1, 0, 1, 9, 1, 0)]:
        assert words[p, t, 16 * q + i, 2 * h + s] == scales[32 * p + 16 * s + i, 8 * t + 4 * h + q]


@pytest.mark.parametrize(
    "fn,shape,needs",
    [
        (preshuffle.shuffle_weight, (24, 16), "multiple of 16"),
        (preshuffle.shuffle_weight, (16, 24), "multiple of 32"),
        (preshuffle.shuffle_scales, (48, 8), "multiple of 32"),
        (preshuffle.shuffle_scales, (32, 12), "multiple of 256"),
        (preshuffle.unshuffle_scales, (32, 12), "multiple of 256"),
    ],
)
def test_bad_shapes_name_the_constraint(fn, shape: tuple[int, int], needs: str) -> None:
    with pytest.raises(ValueError, match=needs):
        fn(torch.zeros(shape, dtype=torch.uint8))


def test_wrong_dtype_is_named() -> None:
    with pytest.raises(ValueError, match="torch.uint8"):
        preshuffle.shuffle_weight(torch.zeros(16, 16, dtype=torch.int32))
