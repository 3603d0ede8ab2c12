"""Preshuffle transforms for the gfx950 FlyDSL MXFP4 GEMM (kernels.flydsl_gfx950).

Pure torch byte permutations (CPU or GPU), each with its inverse; shapes are kept, so the results
are still :class:`~kernels.mxfp4.MXFP4Tensor` parts. The layouts are the operand layout of
``v_mfma_scale_f32_16x16x128_f8f6f4`` with e2m1 operands. :func:`shuffle_weight`: one MFMA operand
(16 rows x 128 K) 1 KiB contiguous, lane ``l`` at byte ``16 l`` (rows % 16 == 0). :func:`shuffle_scales`:
one 32-bit word per lane per 32 rows and 256-deep K step, its byte picked by op_sel (rows % 32 == 0,
K % 256 == 0). The index formulas: docs/MEASURING.md, "Preshuffle".
"""

from __future__ import annotations

import torch

WEIGHT_ROWS = 16  # rows per preshuffled weight group (MFMA M/N)
WEIGHT_BLOCK_BYTES = 16  # bytes per lane per MFMA operand (32 e2m1)
SCALE_ROWS = 32  # rows per scale word group (two 16-row tiles)
SCALE_K = 256  # K elements per scale word (two 128-deep MFMAs x four 32-blocks)
SCALE_BLOCKS_PER_WORD_ROW = SCALE_K // 32  # 8 e8m0 per row per K step


def _check_uint8_2d(name: str, t: torch.Tensor) -> None:
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dtype != torch.uint8 or t.dim() != 2:
        raise ValueError(f"{name}: must be a 2-D torch.uint8 tensor, got {t.dtype} of shape {tuple(t.shape)}")


def _check_weight(name: str, data: torch.Tensor) -> tuple[int, int]:
    _check_uint8_2d(name, data)
    rows, k_bytes = data.shape
    if rows % WEIGHT_ROWS or k_bytes % WEIGHT_BLOCK_BYTES:
        raise ValueError(
            f"{name}: shape {tuple(data.shape)} must be [rows, K/2] with rows a multiple of {WEIGHT_ROWS} "
            f"and K a multiple of {2 * WEIGHT_BLOCK_BYTES}"
        )
    return rows, k_bytes


def _check_scales(name: str, scales: torch.Tensor) -> tuple[int, int]:
    _check_uint8_2d(name, scales)
    rows, blocks = scales.shape
    if rows % SCALE_ROWS or blocks % SCALE_BLOCKS_PER_WORD_ROW:
        raise ValueError(
            f"{name}: shape {tuple(scales.shape)} must be [rows, K/32] with rows a multiple of {SCALE_ROWS} "
            f"and K a multiple of {SCALE_K}"
        )
    return rows, blocks


def shuffle_weight(data: torch.Tensor) -> torch.Tensor:
    """``[rows, K/2]`` row-major e2m1 bytes -> the 16x32 block layout (module doc)."""
    rows, k_bytes = _check_weight("data", data)
    blocks = data.reshape(rows // WEIGHT_ROWS, WEIGHT_ROWS, k_bytes // WEIGHT_BLOCK_BYTES, WEIGHT_BLOCK_BYTES)
    return blocks.permute(0, 2, 1, 3).contiguous().reshape(rows, k_bytes)


def unshuffle_weight(shuffled: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`shuffle_weight`."""
    rows, k_bytes = _check_weight("shuffled", shuffled)
    blocks = shuffled.reshape(rows // WEIGHT_ROWS, k_bytes // WEIGHT_BLOCK_BYTES, WEIGHT_ROWS, WEIGHT_BLOCK_BYTES)
    return blocks.permute(0, 2, 1, 3).contiguous().reshape(rows, k_bytes)


def shuffle_scales(scales: torch.Tensor) -> torch.Tensor:
    """``[rows, K/32]`` e8m0 -> per-lane scale words (module doc), same shape and bytes."""
    rows, blocks = _check_scales("scales", scales)
    k_steps = blocks // SCALE_BLOCKS_PER_WORD_ROW
    # source index: row = 32 p + 16 s + i, block = 8 t + 4 h + q
    src = scales.reshape(rows // SCALE_ROWS, 2, 16, k_steps, 2, 4)  # p, s, i, t, h, q
    out = src.permute(0, 3, 5, 2, 4, 1)  # p, t, q, i, h, s  == [p, t, lane, byte]
    return out.contiguous().reshape(rows, blocks)


def unshuffle_scales(shuffled: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`shuffle_scales`."""
    rows, blocks = _check_scales("shuffled", shuffled)
    k_steps = blocks // SCALE_BLOCKS_PER_WORD_ROW
    src = shuffled.reshape(rows // SCALE_ROWS, k_steps, 4, 16, 2, 2)  # p, t, q, i, h, s
    out = src.permute(0, 5, 3, 1, 4, 2)  # p, s, i, t, h, q
    return out.contiguous().reshape(rows, blocks)
