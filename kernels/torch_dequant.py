"""MXFP4 GEMM in plain PyTorch: dequantize both operands, then one matmul.

The peer every fp4 kernel must beat ("what you get with no fp4 kernel at all")
and the one kernel that runs on any device, the CPU included. The dequantize
is part of the timed launch: it is work this path really does per GEMM.

Configs: ``bf16`` dequantizes to bf16 (exact: e2m1 times a power of two fits
bf16's 8 bits) and multiplies on the matrix units with fp32 accumulation;
``fp32`` does both in float32 (TF32 off), slower on GPUs but the same on CPUs.

On the CPU the matmul runs with oneDNN switched off (:func:`_matmul_path`): its
bf16 path drops subnormal operands on CPUs with AVX512-BF16.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch

from kernels.mxfp4 import BLOCK_SIZE, E8M0_NAN, MXFP4Tensor, e2m1_table, e8m0_to_float
from kernels.registry import Kernel, register

_DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


def dequantize_fast(t: MXFP4Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``[rows, K]`` in ``dtype`` via two table look-ups; same values as kernels.mxfp4.dequantize."""
    rows = t.rows
    codes_lut = e2m1_table(dtype, t.device)
    # 256-entry e8m0 table, built in float64 so 2**-127 (b = 0) lands as the exact subnormal.
    scale_lut = e8m0_to_float(torch.arange(E8M0_NAN + 1, device=t.device), dtype)
    low = codes_lut[(t.data & 0xF).long()]
    high = codes_lut[(t.data >> 4).long()]
    values = torch.stack((low, high), dim=-1).view(rows, -1, BLOCK_SIZE)
    return (values * scale_lut[t.scales.long()][..., None]).view(rows, -1)


@contextlib.contextmanager
def _onednn_disabled() -> Iterator[None]:
    # Only the one switch: torch.backends.mkldnn.flags() would also reset oneDNN's determinism,
    # TF32 and fp32-precision settings (and warns about TF32 on CPU-only builds).
    enabled = torch.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = False  # type: ignore[assignment]  # torch types the switch as its descriptor
    try:
        yield
    finally:
        torch.backends.mkldnn.enabled = enabled


def _matmul_path(device: torch.device) -> contextlib.AbstractContextManager[None]:
    """The library path this kernel's matmul takes on ``device``: on the CPU, never oneDNN.

    oneDNN's bf16 dot products treat subnormal inputs as zero (a scale byte 0 makes e2m1 values bf16
    subnormals); torch's own CPU GEMM keeps them. Process-wide for the length of the matmul; GPUs never
    use oneDNN. Why, as measured: docs/MEASURING.md, "The torch kernel on the CPU: never oneDNN".
    """
    return _onednn_disabled() if device.type == "cpu" else contextlib.nullcontext()


@register
class TorchDequantGemm(Kernel):
    name = "torch_dequant"
    backend = "torch"
    description = "dequantize A and B with PyTorch ops, then torch.matmul (baseline peer; any device)"
    runs_on = ("cpu", "sm_*", "gfx*")
    configs = {"bf16": {"dtype": "bf16"}, "fp32": {"dtype": "fp32"}}

    def _prepare(
        self, a: MXFP4Tensor, b: MXFP4Tensor, out: torch.Tensor, config: Mapping[str, Any]
    ) -> Callable[[], None]:
        dtype = _DTYPES[config["dtype"]]

        def launch() -> None:
            # PyTorch keeps TF32 off for float32 matmuls unless a caller opts in; this harness never does.
            with _matmul_path(out.device):
                out.copy_(torch.matmul(dequantize_fast(a, dtype), dequantize_fast(b, dtype).T))

        return launch
