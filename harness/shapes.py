"""The one list of GEMM shapes gated and benchmarked: append only (asv compares each across the whole history), each
saying why it exists; the LLM layers are a prefill of 8192 tokens (docs/MEASURING.md, "Shapes").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GemmShape:
    name: str
    m: int
    n: int
    k: int
    why: str

    @property
    def mnk(self) -> tuple[int, int, int]:
        return self.m, self.n, self.k


SQUARE_8K = GemmShape("square_m08192_n08192_k08192", 8192, 8192, 8192, "the standard large-GEMM headline number")
SQUARE_16K = GemmShape(
    "square_m16384_n16384_k16384", 16384, 16384, 16384, "large enough that launch and tail effects vanish"
)

# Llama-3.1-70B: hidden 8192, intermediate 28672. gate_proj and up_proj fused into one
# [2 x 28672, 8192] weight, as inference engines run them: a very wide N.
LLAMA3_70B_GATE_UP = GemmShape(
    "llama31_70b_mlp_gate_up_m08192_n57344_k08192", 8192, 57344, 8192, "Llama-3.1-70B fused MLP gate+up projection"
)
# Llama-3.1-70B down_proj [8192, 28672]: the long-K layer, beyond the K sweep's 24576.
LLAMA3_70B_DOWN = GemmShape(
    "llama31_70b_mlp_down_m08192_n08192_k28672", 8192, 8192, 28672, "Llama-3.1-70B MLP down projection (long K)"
)
# Llama-3.1-405B: hidden 16384, 128 query heads and 8 KV heads of 128:
# fused QKV weight [16384 + 2 x 1024, 16384].
LLAMA3_405B_QKV = GemmShape(
    "llama31_405b_attn_qkv_m08192_n18432_k16384", 8192, 18432, 16384, "Llama-3.1-405B fused attention QKV projection"
)

SQUARE_SHAPES = (SQUARE_8K, SQUARE_16K)
LLM_SHAPES = (LLAMA3_70B_GATE_UP, LLAMA3_70B_DOWN, LLAMA3_405B_QKV)
# The shapes the asv suite times and the large correctness gates check.
BENCHMARK_SHAPES = SQUARE_SHAPES + LLM_SHAPES

# The correctness K sweep: every multiple of 2048 from 8192 to 24576, at an M, N
# of one 256 x 256 tile (the gfx950 kernel's tile) so every kernel can run it
# and a CPU can check it in seconds.
K_SWEEP_MN = 256
K_SWEEP = tuple(range(8192, 24576 + 1, 2048))
