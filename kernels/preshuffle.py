"""Preshuffle transforms for the gfx950 FlyDSL MXFP4 GEMM (kernels.flydsl_gfx950).

Pure torch permutations of bytes (CPU or GPU), each with its inverse. Shapes are
kept (``[rows, K/2]`` data, ``[rows, K/32]`` scales) so the shuffled tensors are
still valid :class:`~kernels.mxfp4.MXFP4Tensor` parts; only the byte order changes.

The layouts follow the operand layout of ``v_mfma_scale_f32_16x16x128_f8f6f4`` with
e2m1 operands (CDNA4): lane ``l`` of a wave supplies 16 bytes = 32 e2m1 values of
row ``l % 16``, K elements ``32 (l // 16) .. 32 (l // 16) + 31`` of the 128-deep
step (even element in the low nibble), and one 32-bit scale word whose byte
``op_sel`` is the e8m0 scale of exactly that row and 32-block.

Weights (:func:`shuffle_weight`)
    ``data [rows, K/2]`` viewed as ``[rows/16, K/32, 16, 16]``:
    ``out[g, c, r, b] = data[16 g + r, 16 c + b]`` -- for each 16-row group ``g``
    and 32-element K block ``c``, the 16 rows' 16 bytes back to back (256 bytes).
    One MFMA operand (16 rows x 128 K) is then 1 KiB contiguous, lane ``l`` at byte
    ``16 l``. Needs rows % 16 == 0.

Scales (:func:`shuffle_scales`)
    ``scales [rows, K/32]`` as bytes ``[rows/32, K/256, 64, 4]``:
    ``out[p, t, 16 q + i, 2 h + s] = scales[32 p + 16 s + i, 8 t + 4 h + q]`` --
    for 32-row group ``p`` and 256-deep K step ``t``, one 32-bit word per lane
    ``16 q + i`` whose byte ``2 h + s`` is the scale of row ``16 s + i`` of the group
    (16-row tile ``s``) and 32-block ``q`` of 128-K half ``h``. A wave reads one
    K step of 32 rows with one coalesced dword per lane; the MFMA's op_sel
    (``2 h + s``) picks the byte. Needs rows % 32 == 0 and K % 256 == 0.
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
