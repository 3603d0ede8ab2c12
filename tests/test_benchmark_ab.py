"""A quick local A/B with pytest-benchmark: every kernel and config that runs here, on one shape,
timed by harness.timing -- the same method as the asv suite, whose history this does not repeat.

    pytest tests/test_benchmark_ab.py --benchmark-only --benchmark-save=before
    # ... edit a kernel or a config ...
    pytest tests/test_benchmark_ab.py --benchmark-only --benchmark-compare --benchmark-compare-fail=median:5%

pytest-benchmark groups the results by shape, so one table compares kernels and configs side by
side, and ``--benchmark-compare`` compares with a saved run. The samples it keeps are the ones
harness.timing.measure_gemm took (device events on a GPU): it replays them through its timer.

Shape: ``MXFP4_AB_SHAPE=M,N,K`` (default 8192^3 on a GPU, the first CPU shape of the asv suite on a
CPU). Kernels: ``MXFP4_AB_KERNELS=name,name`` (default: all that run here).
"""

from __future__ import annotations

import os

import pytest
import torch

from asv_bench.common import CPU_BUDGET, CPU_EXCLUDED_BACKENDS, CPU_SHAPES, kernel_prepare
from harness import timing
from kernels import registry

# pytest-benchmark turns itself off under pytest-xdist: the test command runs this file on its own, after the rest.
# On a GPU runner the GPU job runs it (gpu_job): the A/B cases time the kernels on the GPU there.
pytestmark = [pytest.mark.serial, pytest.mark.gpu_job]

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _shape() -> tuple[int, int, int]:
    text = os.environ.get("MXFP4_AB_SHAPE")
    if text:
        try:
            m, n, k = (int(x) for x in text.split(","))
        except ValueError:
            raise ValueError(f"MXFP4_AB_SHAPE={text!r}: expected M,N,K, e.g. 8192,8192,8192") from None
        return m, n, k
    if DEVICE.type == "cuda":
        return 8192, 8192, 8192
    first = CPU_SHAPES[0]
    return first.m, first.n, first.k


def _cases() -> list:
    wanted = {n for n in os.environ.get("MXFP4_AB_KERNELS", "").split(",") if n}
    cases = []
    for kernel in registry.all_kernels():
        if wanted and kernel.name not in wanted:
            continue
        reason = kernel.unavailable_reason(DEVICE)
        if DEVICE.type == "cpu":
            reason = reason or CPU_EXCLUDED_BACKENDS.get(kernel.backend)
        for config in kernel.configs:
            marks = [pytest.mark.skip(reason=reason)] if reason else []
            cases.append(pytest.param(kernel.name, config, id=f"{kernel.name}[{config}]", marks=marks))
    return cases


class SampleReplay:
    """A pytest-benchmark timer that advances by the samples of a Timing, one per round."""

    def __init__(self):
        self.now = 0.0
        self.pending: list[float] = []

    def clock(self) -> float:
        return self.now

    def advance(self) -> None:
        self.now += self.pending.pop(0)


REPLAY = SampleReplay()


@pytest.mark.parametrize("kernel_name, config", _cases())
@pytest.mark.benchmark(timer=REPLAY.clock, disable_gc=False, warmup=False)
def test_ab(benchmark, kernel_name, config):
    m, n, k = _shape()
    budget = CPU_BUDGET if DEVICE.type == "cpu" else timing.TimingBudget()
    if DEVICE.type == "cpu":
        torch.set_num_threads(1)  # as the asv suite times the CPU
    kernel = registry.get_kernel(kernel_name)
    measured = timing.measure_gemm(
        kernel_prepare(kernel, config), m, n, k, device=DEVICE, budget=budget, label=f"{kernel_name}[{config}]"
    )
    benchmark.group = f"{m}x{n}x{k} on {DEVICE.type}"
    benchmark.extra_info.update(
        tflops=measured.tflops,
        timing=measured.summary(),
        gpu_before=measured.gpu_before,
        gpu_after=measured.gpu_after,
        idle=measured.idle,
    )
    if benchmark.disabled:
        pytest.fail("pytest-benchmark is disabled (under pytest-xdist it always is): run this file without -n")
    REPLAY.pending = list(measured.samples_s)
    benchmark.pedantic(REPLAY.advance, rounds=len(measured.samples_s), iterations=1)
    # What pytest-benchmark stored is exactly what harness.timing measured.
    if benchmark.stats is not None:  # None under --benchmark-disable
        assert benchmark.stats.stats.median == pytest.approx(measured.median_s, rel=1e-9)
        assert benchmark.stats.stats.rounds == len(measured.samples_s)
    assert not REPLAY.pending
