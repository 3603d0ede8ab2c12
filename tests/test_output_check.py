"""harness.output_check and its users: a timed output is judged at its own shape, with its operands.

Kernels here are torch_dequant with an injected fault that appears only at one shape (row 0
zeroed when M == 384; one NaN in a middle tile; a 5% wrong band of 128 columns): the small-shape
correctness check passes them, the check at the timed shape must not. The history side (the asv
GEMM benchmark) is called as asv calls it, setup then track_time, with the sidecar it writes.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from asv_bench import bench_gemm, common
from asv_bench import records as asv_records
from ci.common.correctness import check_kernel, check_output
from harness.operands import E8M0_NAN, gemm_operands
from harness.output_check import MAX_SAMPLES, KeptOutput, WrongResult, sampled_indices
from harness.timing import TimingBudget
from kernels import registry
from kernels.mxfp4 import MXFP4Tensor
from kernels.torch_dequant import TorchDequantGemm

TINY_BUDGET = TimingBudget(
    warmup_ms=5.0, max_warmup_ms=500.0, rep_ms=20.0, min_reps=3, max_reps=10, steady_tolerance=1000.0
)


def mxfp4(operand) -> MXFP4Tensor:
    return MXFP4Tensor(operand.data, operand.scales)


def run(kernel, m: int, n: int, k: int, config: str, seed: int = 0):
    """(out, a, b): one launch into a NaN-poisoned output, through KeptOutput as the timing paths do."""
    a, b = gemm_operands(m, n, k, seed=seed, device="cpu")
    kept = KeptOutput(lambda a, b, out: kernel.prepare(mxfp4(a), mxfp4(b), out, config))
    kept(a, b, torch.empty((m, n), dtype=torch.bfloat16))()
    return kept.out, a, b


def faulty(fault):
    """torch_dequant with ``fault(out)`` applied after every launch."""
    prepare = TorchDequantGemm._prepare

    def _prepare(self, a, b, out, config):
        launch = prepare(self, a, b, out, config)

        def faulty_launch():
            launch()
            fault(out)

        return faulty_launch

    return _prepare


def zero_row_0_at_m384(out):
    if out.shape[0] == 384:
        out[0].zero_()


def nan_in_a_middle_tile(out):
    out[200, 300] = math.nan


def wrong_column_band(out):
    out[:, 128:256] *= 1.05


# ---------------------------------------------------------------------------
# sampling
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 2, 100, 128, 129, 384, 1000, 8192, 16384, 57344])
def test_every_band_is_sampled_with_the_first_and_last_index_within_the_cap(size):
    picks = sampled_indices(size, seed=3)
    assert picks == sorted(set(picks)) and picks[0] == 0 and picks[-1] == size - 1
    assert len(picks) <= MAX_SAMPLES and all(0 <= p < size for p in picks)
    band = 128 * math.ceil(math.ceil(size / 128) / MAX_SAMPLES)
    assert {p // band for p in picks} == set(range(math.ceil(size / band)))  # no band without a sample
    if size == 8192:
        assert band == 128 and len(picks) == 64  # every 128-row tile row of the headline shape
    assert sampled_indices(size, seed=3) == picks  # seeded
    if size >= 1000:
        assert sampled_indices(size, seed=4) != picks  # and random within the bands


# ---------------------------------------------------------------------------
# the check at the timed shape
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fault, bad",
    [(zero_row_0_at_m384, (0, 0)), (nan_in_a_middle_tile, (200, 300)), (wrong_column_band, (0, 128))],
    ids=lambda f: getattr(f, "__name__", ""),
)
def test_a_kernel_wrong_at_one_shape_passes_the_small_check_and_fails_at_its_shape(monkeypatch, fault, bad):
    monkeypatch.setattr(TorchDequantGemm, "_prepare", faulty(fault))
    kernel = registry.get_kernel("torch_dequant")
    if fault is zero_row_0_at_m384:  # wrong only at M == 384: the small-shape check cannot see it
        a, b = gemm_operands(256, 256, 1024, seed=0, device="cpu")
        assert check_kernel(kernel, mxfp4(a), mxfp4(b), "bf16").passed
    out, a, b = run(kernel, 384, 512, 1024, "bf16")
    report = check_output(out, a, b)
    assert not report.passed and report.first_bad == bad
    assert report.summary().startswith("wrong result at 384x512x1024: ")
    assert f"first bad element C[{bad[0]},{bad[1]}]" in report.summary()
    if fault is nan_in_a_middle_tile:  # the whole-output scan, not the sampling, found it
        assert report.nonfinite == 1 and report.sampled_rows.passed and report.sampled_columns.passed
        assert 200 not in report.rows and 300 not in report.columns
        assert "1 elements are NaN/Inf where the reference is finite" in report.summary()


def test_an_element_no_launch_writes_shows_as_nan():
    def leaves_the_last_element(self, a, b, out, config):
        def launch():
            result = torch.zeros_like(out)
            out[:-1] = result[:-1]
            out[-1, :-1] = result[-1, :-1]

        return launch

    kernel = registry.get_kernel("torch_dequant")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(TorchDequantGemm, "_prepare", leaves_the_last_element)
        out, a, b = run(kernel, 256, 256, 1024, "bf16")
    report = check_output(out, a, b)
    assert report.nonfinite == 1 and not report.passed


def test_nan_where_the_reference_is_nan_passes_and_a_swallowed_nan_fails():
    kernel = registry.get_kernel("torch_dequant")
    a, b = gemm_operands(256, 256, 1024, seed=1, device="cpu")
    a.scales[7, 3] = E8M0_NAN  # row 7 of C is NaN in the reference
    out = torch.full((256, 256), math.nan, dtype=torch.bfloat16)
    kernel.prepare(mxfp4(a), mxfp4(b), out, "bf16")()
    assert torch.isnan(out[7]).all()
    assert check_output(out, a, b).passed
    out[7, 9] = 1.0
    report = check_output(out, a, b)
    assert report.missing_nan == 1 and report.first_bad == (7, 9) and not report.passed


def _cpu_kernels():
    cpu = torch.device("cpu")
    return [(k.name, c) for k in registry.all_kernels() if k.unavailable_reason(cpu) is None for c in k.configs]


@pytest.mark.parametrize("kernel_config", _cpu_kernels(), ids=lambda kc: f"{kc[0]}[{kc[1]}]")
def test_the_correct_kernels_pass(kernel_config):
    name, config = kernel_config
    kernel = registry.get_kernel(name)
    constraints = kernel.shape_constraints(config)
    # Several tiles each way (one 128-tile more than a power of two), K of a few blocks: seconds in Triton's
    # interpreter.
    m, n = 3 * max(128, constraints.m_multiple), 2 * max(128, constraints.n_multiple)
    k = max(256, constraints.k_multiple)
    kernel.check_shape(m, n, k, config)
    out, a, b = run(kernel, m, n, k, config, seed=5)
    report = check_output(out, a, b, seed=5)
    assert report.passed, report.summary()
    assert report.summary().startswith(f"correct at {m}x{n}x{k}")


# ---------------------------------------------------------------------------
# the history: the asv GEMM benchmark records a failure, never the speed of a wrong output
# ---------------------------------------------------------------------------


@pytest.fixture
def asv_sidecar(monkeypatch, tmp_path):
    """The environment an asv benchmark process has under ci.history.main_job; returns its records sidecar."""
    for name, value in {
        "ASV_CONF_DIR": str(tmp_path),
        "ASV_COMMIT": "0123456789abcdef",
        "ASV_ENV_NAME": "env",
        asv_records.MACHINE_ENV: "machine",
        asv_records.RESULTS_DIR_ENV: str(tmp_path / "results"),
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("ASV_ENV_DIR", raising=False)
    sidecar = asv_records.sidecar_in_this_run()
    assert sidecar is not None
    return sidecar


def _track(shape: str):
    benchmark = bench_gemm.GemmOnCpu()
    benchmark.budget = TINY_BUDGET
    benchmark.setup("torch_dequant:bf16", shape)
    return benchmark, benchmark.track_time("torch_dequant:bf16", shape)


def test_the_asv_benchmark_fails_on_a_wrong_output_at_its_shape_and_records_wrong_result(monkeypatch, asv_sidecar):
    shape = "cpu_m00128_n00128_k02048"
    m = common.SHAPES_BY_NAME[shape].m

    def zero_row_0_at_the_timed_m(out):
        if out.shape[0] == m:
            out[0].zero_()

    monkeypatch.setattr(TorchDequantGemm, "_prepare", faulty(zero_row_0_at_the_timed_m))
    with pytest.raises(WrongResult, match=r"^wrong result at 128x128x2048: .*first bad element C\[0,0\]"):
        _track(shape)
    key = asv_records.benchmark_key("bench_gemm.GemmOnCpu.track_time", ("torch_dequant:bf16", shape))
    record = asv_records.load(asv_sidecar)[key]
    assert record["status"] == "failed" and record["failure"] == "wrong result"
    assert record["reason"].startswith("WrongResult: wrong result at 128x128x2048")
    assert "median_s" not in record and "tflops" not in record
    assert asv_records.describe(record).startswith("failed (wrong result): ")
    json.dumps(record)


def test_the_asv_benchmark_records_a_correct_kernel_as_measured(asv_sidecar):
    shape = "cpu_m00128_n00128_k02048"
    _, samples = _track(shape)
    assert samples["samples"] and all(s > 0 for s in samples["samples"])
    key = asv_records.benchmark_key("bench_gemm.GemmOnCpu.track_time", ("torch_dequant:bf16", shape))
    assert asv_records.load(asv_sidecar)[key]["status"] == "measured"
