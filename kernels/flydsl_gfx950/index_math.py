"""Index math of the gfx950 4-wave MXFP4 GEMM: tile sizes and every byte offset.

Shared by the kernel body (kernel_body.py calls these with FlyDSL ``Int32``
values) and by the CPU emulation in tests/test_flydsl_gfx950.py (ints and
torch tensors): only ``+``, ``*``, ``>>`` and ``&`` appear, so both kinds of
value work. All offsets are in bytes.

Geometry (one workgroup = 4 waves = 256 lanes, one 256x256 tile of C):

* A K step is ``BLOCK_K`` = 256 e2m1 elements = 128 bytes of a row, two MFMAs deep.
* An MFMA operand ("chunk") is 16 rows x 128 K = 1 KiB: lane ``l`` holds row
  ``l % 16`` and 16 bytes = 32 elements, the ``l // 16``-th 32-element block.
* Waves form a 2x2 grid; each owns a 128x128 quadrant = 8x8 tiles of 16x16.
"""

# --- hardware and format facts ------------------------------------------------
WAVE_SIZE = 64  # lanes per wavefront on CDNA (wave64)
WAVE_SHIFT = 6  # tid >> WAVE_SHIFT = wave index (log2 WAVE_SIZE)
LANE_BYTES = 16  # bytes one lane moves per LDS DMA / ds_read_b128: 32 packed e2m1
LANE_ROW_MASK = 15  # lane & 15: the row of a 16-row MFMA operand a lane holds
LANE_GROUP_SHIFT = 4  # lane >> 4: which 32-element block (of 4) of the operand's 128 K
SCALE_WORD_BYTES = 4  # one int32 holds the 4 e8m0 scale bytes a lane's op_sel picks from
SCALE_ROWS_PER_WORD = 32  # rows whose scales share one preshuffled int32 word per lane
BF16_BYTES = 2
ACC_PER_LANE = 4  # f32 accumulators per lane of a 16x16 MFMA tile: 4 consecutive rows of D
E2M1_FORMAT_CODE = 4  # cbsz/blgp operand format code of FP4 e2m1 for the f8f6f4 MFMA

# --- the tile -------------------------------------------------------------------
BLOCK_M = 256
BLOCK_N = 256
BLOCK_K = 256  # K elements per main-loop step (= 2 MFMAs deep)
WAVES = 4
THREADS = WAVES * WAVE_SIZE
MFMA_K = 128  # K elements per v_mfma_scale_f32_16x16x128
TILE = 16  # MFMA M/N
CHUNK_BYTES = WAVE_SIZE * LANE_BYTES  # one MFMA operand for 16 rows: 1 KiB
ROW_BYTES_PER_STEP = BLOCK_K // 2  # 128 bytes of packed e2m1 per row per K step
HALF_STEP_BYTES = MFMA_K // 2  # 64 bytes: one MFMA's K range of a row
OPERAND_STAGE_BYTES = BLOCK_M * ROW_BYTES_PER_STEP  # 32 KiB (A) or (B) per stage
STAGE_BYTES = 2 * OPERAND_STAGE_BYTES  # A + B of one K step: 64 KiB
LDS_LIMIT_BYTES = 160 * 1024  # gfx950 LDS per workgroup

TILES_PER_WAVE = 8  # 16-row tiles per wave and operand: 128 rows / 16
HALVES = BLOCK_K // MFMA_K  # 2 MFMAs deep per K step
CHUNKS_PER_OPERAND = (BLOCK_M // TILE) * HALVES  # 32 chunks of 1 KiB per operand per stage
DMA_PER_WAVE = CHUNKS_PER_OPERAND // WAVES  # 8 A + 8 B LDS DMAs per wave per step
SCALE_WORDS_PER_WAVE = TILES_PER_WAVE // 2  # one int32 per lane per 32 rows

# Preshuffled B (kernels.preshuffle.shuffle_weight): per 16-row group, 32-element
# blocks of 16 rows x 16 bytes = 256 bytes each, K-major.
B_BLOCK_BYTES = TILE * LANE_BYTES
B_BLOCKS_PER_HALF = MFMA_K // 32  # 4 blocks of 32 elements per 128-K half
B_BLOCKS_PER_STEP = BLOCK_K // 32  # 8 per K step


def dma_chunk(wave, j):
    """Chunk (= 2 * tile + half) of an operand that DMA ``j`` of ``wave`` fills."""
    return wave * DMA_PER_WAVE + j


def a_copy_offsets(tile_m, chunk, k_step, lane, k_bytes):
    """(uniform, per-lane) global offsets of A (row-major) for one LDS DMA chunk.

    Lane l fetches row ``256 tile_m + 16 tile + l % 16``, bytes ``128 k_step + 64 half
    + 16 (l // 16)`` -- its MFMA operand (module doc of kernels.preshuffle).
    """
    tile, half = chunk >> 1, chunk & 1
    uniform = (
        tile_m * (BLOCK_M * k_bytes) + tile * (TILE * k_bytes) + k_step * ROW_BYTES_PER_STEP + half * HALF_STEP_BYTES
    )
    per_lane = (lane & LANE_ROW_MASK) * k_bytes + (lane >> LANE_GROUP_SHIFT) * LANE_BYTES
    return uniform, per_lane


def b_copy_offsets(tile_n, chunk, k_step, lane, k_bytes):
    """(uniform, per-lane) global offsets of preshuffled B for one LDS DMA chunk.

    16-row group ``g = 16 tile_n + tile`` starts at ``g * 16 * k_bytes``; 32-block
    ``c = 8 k_step + 4 half + l // 16`` at ``256 c`` in it; row ``l % 16`` at ``16 (l % 16)``:
    lane l reads the 16 bytes at ``16 l`` of the half's 1 KiB.
    """
    tile, half = chunk >> 1, chunk & 1
    uniform = (
        tile_n * (BLOCK_N * k_bytes)
        + tile * (TILE * k_bytes)
        + k_step * (B_BLOCKS_PER_STEP * B_BLOCK_BYTES)
        + half * (B_BLOCKS_PER_HALF * B_BLOCK_BYTES)
    )
    per_lane = lane * LANE_BYTES
    return uniform, per_lane


def lds_chunk_offset(stage, operand, chunk):
    """LDS byte offset of ``chunk`` of operand 0 (A) or 1 (B) in ``stage``; lane l adds 16 l."""
    return stage * STAGE_BYTES + operand * OPERAND_STAGE_BYTES + chunk * CHUNK_BYTES


def operand_chunk(wave_mn, tile, half):
    """Chunk holding 16-row tile ``tile`` (0..7) of the wave's 128 rows, 128-K half ``half``."""
    return (wave_mn * TILES_PER_WAVE + tile) * HALVES + half


def scale_offsets(tile_mn, wave_mn, pair, k_step, lane, k_steps):
    """(uniform, per-lane) byte offsets of the scale word for 32-row group ``pair`` (0..3).

    Preshuffled scales (kernels.preshuffle.shuffle_scales): per 32-row group, one
    int32 per lane per K step, K-step-major.
    """
    group = tile_mn * (BLOCK_M // SCALE_ROWS_PER_WORD) + wave_mn * SCALE_WORDS_PER_WAVE + pair
    words = group * (k_steps * WAVE_SIZE) + k_step * WAVE_SIZE
    return words * SCALE_WORD_BYTES, lane * SCALE_WORD_BYTES


def scale_words_per_group(k):
    """int32 scale words of one 32-row group over the whole K (one per lane per K step)."""
    return (k // BLOCK_K) * WAVE_SIZE


def scale_opsel(half, tile):
    """Byte of the scale word for 128-K ``half`` and 16-row ``tile`` (see kernels.preshuffle)."""
    return half * 2 + (tile & 1)


def c_offset(tile_m, tile_n, wave_m, wave_n, mt, nt, lane, n):
    """Byte offset in C of the 4 consecutive bf16 lane ``lane`` holds for tile (mt, nt).

    The MFMA runs with (B, A) operands, so its 16x16 result D is the C^T tile:
    lane l, register r holds ``D[4 (l // 16) + r][l % 16]`` = C[row 16 mt + l % 16,
    col 16 nt + 4 (l // 16) + r].
    """
    row = tile_m * BLOCK_M + wave_m * (TILES_PER_WAVE * TILE) + mt * TILE + (lane & LANE_ROW_MASK)
    col = tile_n * BLOCK_N + wave_n * (TILES_PER_WAVE * TILE) + nt * TILE + (lane >> LANE_GROUP_SHIFT) * ACC_PER_LANE
    return (row * n + col) * BF16_BYTES


def lds_bytes(lds_stages: int) -> int:
    return lds_stages * STAGE_BYTES
