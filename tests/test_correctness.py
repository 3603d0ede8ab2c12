"""Correctness gates: every registered kernel that can run here, against the float64 reference.

Thresholds and their derivation live in harness/accuracy.py. Fresh random
operands every run (tests/operands.py); the output is poisoned with NaN before
each launch, so an unwritten element fails. A kernel's known deviation on a kind
of data (tests/known_deviations.py) runs as a strict xfail.
"""

from __future__ import annotations

import pytest
from gate_summary import GateRun
from known_deviations import expect_known_deviation
from operands import DATA_KINDS, DEVICE, SEED, make_operands

from ci.common.correctness import check_kernel
from harness.shapes import BENCHMARK_SHAPES, K_SWEEP, K_SWEEP_MN
from kernels import registry

# The correctness gates run on the GPU in the GPU job (selected by this marker), on the CPU here.
pytestmark = pytest.mark.gpu_job

# Every registered config of every kernel: a bug can live in a config that is not the default.
KERNEL_CONFIGS = [(k.name, config) for k in registry.all_kernels() for config in k.configs]


def kernel_ids(param):
    return f"{param[0]}[{param[1]}]"


def runnable(name: str) -> registry.Kernel:
    kernel = registry.get_kernel(name)
    reason = kernel.unavailable_reason(DEVICE)
    if reason:
        pytest.skip(reason)
    return kernel


def interpreted(kernel: registry.Kernel) -> bool:
    return kernel.backend == "triton" and DEVICE.type == "cpu"


def sweep_mn(kernel: registry.Kernel, config: str) -> int:
    """M = N of the K sweep: 256, or in Triton's CPU interpreter one tile of the config, >= 128 (time)."""
    if not interpreted(kernel):
        return K_SWEEP_MN
    constraints = kernel.shape_constraints(config)
    return max(128, constraints.m_multiple, constraints.n_multiple)


def assert_passes(kernel, config, a, b, kind, gate_log, request):
    # A known deviation of this kernel on this kind of data (tests/known_deviations.py) runs as a strict xfail.
    deviation = expect_known_deviation(request, kernel.name, kind)
    report = check_kernel(kernel, a, b, config)
    gate_log.append(GateRun(kernel.name, config, kind, report, deviation))
    assert report.passed, f"{kernel.name}[{config}] {kind} seed={SEED}: {report.summary()}"


@pytest.mark.parametrize("kind", DATA_KINDS)
@pytest.mark.parametrize("k", K_SWEEP, ids=lambda k: f"k{k:05d}")
@pytest.mark.parametrize("kernel_config", KERNEL_CONFIGS, ids=kernel_ids)
def test_k_sweep(kernel_config, k, kind, gate_log, request):
    name, config = kernel_config
    kernel = runnable(name)
    if interpreted(kernel) and config != kernel.default_config and k != K_SWEEP[0]:
        pytest.skip(f"Triton interpreter on CPU: non-default configs are gated at K={K_SWEEP[0]} only (time)")
    if interpreted(kernel) and kind == "edge_scales" and k not in (K_SWEEP[0], K_SWEEP[-1]):
        # The edge data is about scale decoding, not the K loop, which randn and wide_scales gate at every K.
        pytest.skip(
            f"Triton interpreter on CPU: edge_scales data is gated at K={K_SWEEP[0]}, {K_SWEEP[-1]} only (time)"
        )
    mn = sweep_mn(kernel, config)
    a, b = make_operands(kind, mn, mn, k, salt=k)
    assert_passes(kernel, config, a, b, kind, gate_log, request)


@pytest.mark.large
@pytest.mark.parametrize("kind", DATA_KINDS)
@pytest.mark.parametrize("shape", BENCHMARK_SHAPES, ids=lambda s: s.name)
@pytest.mark.parametrize("kernel_config", KERNEL_CONFIGS, ids=kernel_ids)
def test_large_shapes(kernel_config, shape, kind, gate_log, request):
    name, config = kernel_config
    kernel = runnable(name)
    if DEVICE.type == "cpu":
        pytest.skip("large shapes are gated on a GPU: one 8192^3 GEMM and its float64 reference take minutes on a CPU")
    kernel.check_shape(*shape.mnk, config)
    a, b = make_operands(kind, *shape.mnk, salt=shape.m ^ shape.n ^ shape.k)
    assert_passes(kernel, config, a, b, kind, gate_log, request)


def test_operands_are_on_the_device_under_test():
    a, b = make_operands("randn", 128, 128, 256)
    assert a.device.type == b.device.type == DEVICE.type
