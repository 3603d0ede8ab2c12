"""The device's peak for the math a kernel actually runs, each figure with where it comes from.

Why: docs/HISTORY.md, "site/device_peaks.py".
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Peak:
    device: str
    math: str
    tflops: float
    source: str  # a sentence naming the figure's origin and how it was checked


# (device-name fragment as the GPU reports it, math) -> Peak
_PEAKS: dict[tuple[str, str], Peak] = {
    ("H200", "bf16"): Peak(
        "NVIDIA H200 (SXM)",
        "dense BF16 tensor core (the FP4 operands upcast to BF16)",
        989.0,
        "NVIDIA H200 datasheet (nvidia.com/en-us/data-center/h200): BF16 Tensor Core 1,979 TFLOPS with sparsity, "
        "989 dense; the dense 989.4 TFLOPS at 1,980 MHz boost is also in hmc-tech.com's H200 SXM table "
        "(checked 2026-12-02 against secondary copies of the datasheet, not the PDF itself)",
    ),
    ("H200", "fp32"): Peak(
        "NVIDIA H200 (SXM)",
        "FP32 (CUDA cores, no tensor core)",
        67.0,
        "NVIDIA H200 datasheet: FP32 67 TFLOPS (66.9 in hmc-tech.com's table; unverified against the PDF itself)",
    ),
    ("MI355", "mxfp4"): Peak(
        "AMD Instinct MI355X",
        "dense MXFP4 matrix core",
        10_066.0,
        "AMD Instinct MI355X datasheet (amd.com): MXFP4 about 10 PFLOPS dense, 20.1 PFLOPS with sparsity "
        "(Tom's Hardware, ISC 2025: 'maximum FP4/FP6 performance 20.1 PFLOPS'); unverified against AMD's "
        "own datasheet, the dense figure is half of the quoted maximum",
    ),
}


def math_of(kernel_config: str, device_name: str) -> str | None:
    """What the kernel's inner loop multiplies in, on this device: "mxfp4", "bf16" or "fp32"; None on a CPU."""
    if not device_name or device_name.lower() == "cpu":
        return None
    kernel, _, config = kernel_config.partition(":")
    if kernel == "torch_dequant":
        return "fp32" if config == "fp32" else "bf16"
    if kernel.startswith("flydsl_gfx950"):
        return "mxfp4"
    return "bf16"  # the Triton kernels on sm_90: tl.dot_scaled and the explicit upcast both multiply in BF16


def peak_for(kernel_config: str, device_name: str | None) -> Peak | None:
    """The peak this kernel's TFLOPS are a fraction of, on the device named as the GPU reports it; None if unknown."""
    math = math_of(kernel_config, device_name or "")
    if math is None:
        return None
    for (fragment, peak_math), peak in _PEAKS.items():
        if fragment.lower() in (device_name or "").lower() and peak_math == math:
            return peak
    return None
