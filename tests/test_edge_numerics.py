"""Edge numerics every kernel must get right, beyond random data.

Shape: one 256 x 256 tile (one tile of the config, at least 128, in Triton's CPU
interpreter) at K = 8192, for every registered config of every kernel: the
torch_dequant bug of issue 7 lived in one config. Each case builds operands
whose exact product is finite (but where a scale is 255), runs the kernel once,
checks the pattern the case is about (exact zeros, where the NaNs are) and then
the same gate as the random sweeps (ci.common.correctness, harness.accuracy). Every gate lands in the
gate summary and the JSON gate report as data kind ``edge:<case>``.

Also here, for issue 7: the platform under torch_dequant on the CPU -- torch's
bf16 matmul through oneDNN, which drops subnormal operands on CPUs with
AVX512-BF16 -- and the path check that proves torch_dequant keeps off it on
every CPU, including the kind this run did not get.
"""

from __future__ import annotations

import zlib

import pytest
import torch
from gate_summary import GateRun
from known_deviations import describe_machine, expect_known_deviation
from operands import DEVICE, SEED, generator
from test_correctness import KERNEL_CONFIGS, kernel_ids, runnable, sweep_mn

from ci.common.correctness import check_kernel
from harness.accuracy import AccuracyReport, compare
from kernels import registry
from kernels.mxfp4 import BLOCK_SIZE, E8M0_NAN, MXFP4Tensor, dequantize, pack_nibbles

# The correctness gates run on the GPU in the GPU job (selected by this marker), on the CPU here.
pytestmark = pytest.mark.gpu_job

K = 8192
ONEDNN_BF16_MATMUL = "torch.matmul[bf16, oneDNN]"  # the platform path, as named in KNOWN_DEVIATIONS


class _KeepOutput:
    """Lets a test read the (NaN-poisoned) output check_kernel judged: the kernel runs once, not twice."""

    def __init__(self, kernel: registry.Kernel):
        self.kernel = kernel
        self.out: torch.Tensor | None = None

    def prepare(self, a, b, out, config=None):
        self.out = out
        return self.kernel.prepare(a, b, out, config)


def _operand(codes: torch.Tensor, scales: torch.Tensor) -> MXFP4Tensor:
    return MXFP4Tensor(pack_nibbles(codes).contiguous(), scales.to(torch.uint8).contiguous())


def _random_codes(
    rows: int, g: torch.Generator, allowed: tuple[int, ...] = tuple(range(16)), k: int = K
) -> torch.Tensor:
    choices = torch.tensor(allowed, dtype=torch.uint8, device=g.device)
    return choices[torch.randint(0, len(allowed), (rows, k), generator=g, device=g.device)]


def _random_scales(rows: int, g: torch.Generator, lo: int = 120, hi: int = 133, k: int = K) -> torch.Tensor:
    return torch.randint(lo, hi + 1, (rows, k // BLOCK_SIZE), generator=g, device=g.device, dtype=torch.uint8)


def extreme_scale_operands(mn: int, g: torch.Generator, k: int = K) -> tuple[MXFP4Tensor, MXFP4Tensor]:
    """A at 2**127 (b = 254) with codes within +-1.5, B at 2**-127 (b = 0) with every code.

    A's codes stay within +-1.5 so that A's dequantized values (<= 1.5 * 2**127)
    fit fp32/bf16: the upcasting kernels would overflow at 2 * 2**127, a documented
    limit of upcasting (kernels/triton_mxfp4.py), not what this case is about.
    B's values 0.5 .. 1.5 * 2**-127 are subnormal in fp32 and bf16.
    """
    small_codes = (0, 1, 2, 3, 8, 9, 10, 11)
    a = _operand(_random_codes(mn, g, small_codes, k), torch.full((mn, k // BLOCK_SIZE), 254, device=g.device))
    b = _operand(_random_codes(mn, g, k=k), torch.full((mn, k // BLOCK_SIZE), 0, device=g.device))
    return a, b


def _setup(kernel_config):
    name, config = kernel_config
    kernel = runnable(name)
    mn = sweep_mn(kernel, config)
    return kernel, config, mn, generator(zlib.crc32(f"{name}[{config}]".encode()))


def _run(kernel, config, a, b, case, gate_log, deviation=None) -> tuple[AccuracyReport, torch.Tensor]:
    """One launch through check_kernel; the report goes to the gate log before any assertion."""
    keep = _KeepOutput(kernel)
    report = check_kernel(keep, a, b, config)
    gate_log.append(GateRun(kernel.name, config, f"edge:{case}", report, deviation))
    assert keep.out is not None, "check_kernel no longer calls kernel.prepare: _KeepOutput sees no output"
    return report, keep.out


def _assert_gate(kernel, config, report) -> None:
    assert report.passed, f"{kernel.name}[{config}] seed={SEED}: {report.summary()}"


def where_wrong(wrong: torch.Tensor, values: torch.Tensor, expected: str, name: str = "C", limit: int = 5) -> str:
    """'<n> of <total> elements of C are not <expected>; first: C[i,j]=value, ...' for an assertion."""
    positions = wrong.nonzero()[:limit].tolist()
    shown = ", ".join(f"{name}[{i},{j}]={values[i, j].item():g}" for i, j in positions)
    return f"{int(wrong.sum())} of {wrong.numel()} elements of {name} are not {expected}; first: {shown}"


@pytest.mark.parametrize("kernel_config", KERNEL_CONFIGS, ids=kernel_ids)
def test_all_zero_blocks(kernel_config, gate_log):
    """Zero blocks (with any scale, including b = 0) contribute exactly nothing; zero rows give exact zeros."""
    kernel, config, mn, g = _setup(kernel_config)
    a_codes, b_codes = _random_codes(mn, g), _random_codes(mn, g)
    a_scales, b_scales = _random_scales(mn, g), _random_scales(mn, g)
    zero_blocks = torch.rand(mn, K // BLOCK_SIZE, generator=g, device=DEVICE) < 0.3
    a_codes.view(mn, -1, BLOCK_SIZE)[zero_blocks] = 0
    a_scales[zero_blocks & (torch.rand(zero_blocks.shape, generator=g, device=DEVICE) < 0.5)] = 0
    a_codes[3] = 0  # one whole row of A is zero: row 3 of C must be exactly 0
    b_codes[5] = 8  # -0 everywhere in row 5 of B: column 5 of C must be exactly 0
    a, b = _operand(a_codes, a_scales), _operand(b_codes, b_scales)
    report, out = _run(kernel, config, a, b, "all_zero_blocks", gate_log)
    c = out.float()
    # NaN != 0 too: an unwritten element of the poisoned output counts as wrong.
    wrong_row = torch.zeros_like(c, dtype=torch.bool)
    wrong_row[3] = c[3] != 0
    assert not wrong_row.any(), f"row 3 of A is all zero: {where_wrong(wrong_row, out, 'exactly 0')}"
    wrong_column = torch.zeros_like(c, dtype=torch.bool)
    wrong_column[:, 5] = c[:, 5] != 0
    assert not wrong_column.any(), f"row 5 of B is all -0: {where_wrong(wrong_column, out, 'exactly 0')}"
    _assert_gate(kernel, config, report)


@pytest.mark.parametrize("kernel_config", KERNEL_CONFIGS, ids=kernel_ids)
def test_max_magnitude_codes(kernel_config, gate_log):
    """Every element +-6 (codes 7 and 15): the largest e2m1 value, near-max accumulator growth."""
    kernel, config, mn, g = _setup(kernel_config)
    a = _operand(_random_codes(mn, g, (7, 15)), _random_scales(mn, g, 125, 129))
    b = _operand(_random_codes(mn, g, (7, 15)), _random_scales(mn, g, 125, 129))
    report, _ = _run(kernel, config, a, b, "max_magnitude_codes", gate_log)
    _assert_gate(kernel, config, report)


@pytest.mark.parametrize("kernel_config", KERNEL_CONFIGS, ids=kernel_ids)
def test_extreme_scales_0_and_254(kernel_config, gate_log, request):
    """A at 2**127 (b = 254), B at 2**-127 (b = 0, not zero): products are O(1) and must come out exactly."""
    deviation = expect_known_deviation(request, kernel_config[0], "extreme_scales")
    kernel, config, mn, g = _setup(kernel_config)
    a, b = extreme_scale_operands(mn, g)
    report, _ = _run(kernel, config, a, b, "extreme_scales", gate_log, deviation)
    _assert_gate(kernel, config, report)
    assert report.rel_err < 2**-8  # also covered by passed; stated for the reader: b = 0 must not flush to zero


@pytest.mark.parametrize("kernel_config", KERNEL_CONFIGS, ids=kernel_ids)
def test_scale_255_is_nan_and_propagates(kernel_config, gate_log):
    """A block scale of 255 is NaN: C is NaN in exactly that row of A / column of B, finite elsewhere."""
    kernel, config, mn, g = _setup(kernel_config)
    a_scales, b_scales = _random_scales(mn, g), _random_scales(mn, g)
    a_scales[7, 11] = E8M0_NAN
    b_scales[2, K // BLOCK_SIZE - 1] = E8M0_NAN  # the last block: a K-tail bug would miss it
    a = _operand(_random_codes(mn, g), a_scales)
    b = _operand(_random_codes(mn, g), b_scales)
    report, out = _run(kernel, config, a, b, "scale_255", gate_log)
    nan = torch.isnan(out.float())
    expected = torch.zeros_like(nan)
    expected[7, :] = True
    expected[:, 2] = True
    missing, extra = expected & ~nan, nan & ~expected
    assert not missing.any(), f"row 7 and column 2 must be NaN: {where_wrong(missing, out, 'NaN')}"
    assert not extra.any(), f"only row 7 and column 2 may be NaN: {where_wrong(extra, out, 'finite')}"
    _assert_gate(kernel, config, report)


# ---------------------------------------------------------------------------
# issue 7: torch's CPU bf16 matmul, and the path torch_dequant takes around it
# ---------------------------------------------------------------------------


def cpu_bf16_matmul_report(m: int = 256, k: int = K) -> AccuracyReport:
    """The issue's repro, on the CPU with torch.backends.mkldnn as the caller set it, judged by the gate.

    A = e2m1-like values times 2**127, B = multiples of 0.5 * 2**-127 (a quarter of
    them bf16 subnormals): exact in bf16, products O(1). A matmul that treats
    subnormal inputs as zero is off by ~0.15 relative; a correct one only by the
    bf16 output rounding.
    """
    g = torch.Generator(device="cpu").manual_seed(SEED)
    a = torch.randint(-3, 4, (m, k), generator=g).double() * 0.5 * 2.0**127
    b = torch.randint(-12, 13, (m, k), generator=g).double() * 0.5 * 2.0**-127
    c = torch.matmul(a.bfloat16(), b.bfloat16().T)  # torch.matmul: what the emulation below replaces
    return compare(c, a @ b.T, a.abs() @ b.abs().T, k)


def onednn_avx512_bf16_emulation(real_matmul):
    """torch.matmul as it behaves on a CPU with AVX512-BF16 (issue 7), for a CPU without it.

    With oneDNN enabled, a CPU bf16 matmul of 64 or more rows reads subnormal
    operands as zero, the way VDPBF16PS does; everything else is left alone.
    """
    tiny = torch.finfo(torch.bfloat16).tiny  # 2**-126, the smallest normal

    def matmul(a, b, *args, **kwargs):
        if torch.backends.mkldnn.enabled and a.device.type == "cpu" and a.dtype == torch.bfloat16 and a.shape[0] >= 64:
            a, b = (torch.where(x.abs() < tiny, 0.0, x) for x in (a, b))
        return real_matmul(a, b, *args, **kwargs)

    return matmul


def on_emulated_avx512_bf16_cpu(kernel, config: str) -> tuple[AccuracyReport, AccuracyReport]:
    """(the issue's repro, ``kernel`` on the extreme-scales case) with torch.matmul flushing like oneDNN there."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch.backends.mkldnn, "enabled", True)
        patch.setattr(torch, "matmul", onednn_avx512_bf16_emulation(torch.matmul))
        platform = cpu_bf16_matmul_report()
        a, b = (t.to("cpu") for t in extreme_scale_operands(256, generator(zlib.crc32(b"emulated"))))
        return platform, check_kernel(kernel, a, b, config)


def test_cpu_bf16_matmul_through_onednn_keeps_subnormals(request, monkeypatch):
    """The platform, raw: bf16 matmul with oneDNN on. A strict xfail where the machine has the deviation."""
    deviation = expect_known_deviation(request, ONEDNN_BF16_MATMUL, "bf16_subnormal_operands", arch="cpu")
    monkeypatch.setattr(torch.backends.mkldnn, "enabled", True)
    report = cpu_bf16_matmul_report()
    unknown = "" if deviation else " -- a CPU kind tests/known_deviations.py does not list; add it there"
    assert report.passed, f"{describe_machine()} seed={SEED}: {report.summary()}{unknown}"


def test_cpu_bf16_matmul_without_onednn_keeps_subnormals(monkeypatch):
    """What torch_dequant relies on, on every CPU: with oneDNN off the same product is exact."""
    monkeypatch.setattr(torch.backends.mkldnn, "enabled", False)
    report = cpu_bf16_matmul_report()
    assert report.passed, f"{describe_machine()} seed={SEED}: {report.summary()}"


TORCH_DEQUANT = registry.get_kernel("torch_dequant")
# torch.backends.mkldnn.enabled when torch_dequant calls torch.matmul, per device type: off on the
# CPU (issue 7: oneDNN's bf16 path drops subnormals there); a GPU never uses oneDNN, so untouched.
ONEDNN_AT_MATMUL = {"cpu": False, "cuda": True}
PATH_DEVICES = ["cpu"] + ([str(DEVICE)] if DEVICE.type != "cpu" else [])


def onednn_path_problem(kernel, config: str, device: str) -> str | None:
    """Why ``kernel``'s matmul on ``device`` does not take the expected library path, or None.

    Spies on torch.matmul and records torch.backends.mkldnn.enabled at the
    moment the kernel calls it, with oneDNN switched on beforehand (torch's
    default): the kernel must switch it off itself. Independent of the CPU this
    runs on, so it proves the path on CPUs with AVX512-BF16 too.
    """
    a, b = (t.to(device) for t in extreme_scale_operands(64, generator(zlib.crc32(b"path")), k=256))
    out = torch.full((64, 64), float("nan"), dtype=torch.bfloat16, device=device)
    launch = kernel.prepare(a, b, out, config)
    states: list[bool] = []
    real_matmul = torch.matmul

    def spy(*args, **kwargs):
        states.append(torch.backends.mkldnn.enabled)
        return real_matmul(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch.backends.mkldnn, "enabled", True)
        patch.setattr(torch, "matmul", spy)
        launch()
        after = torch.backends.mkldnn.enabled
    expected = ONEDNN_AT_MATMUL[torch.device(device).type]
    if not states:
        return f"{kernel.name}[{config}] on {device} made no torch.matmul call: this check no longer sees its matmul"
    if any(state != expected for state in states):
        return (
            f"{kernel.name}[{config}] on {device}: torch.backends.mkldnn.enabled was {states} at its matmul, "
            f"expected {expected}"
        )
    if not after:
        return f"{kernel.name}[{config}] on {device} left oneDNN switched off after its launch"
    return None


@pytest.mark.parametrize("device", PATH_DEVICES)
@pytest.mark.parametrize("config", list(TORCH_DEQUANT.configs))
def test_torch_dequant_matmul_path(config, device):
    """On the CPU, torch_dequant's matmul runs with oneDNN off (every config); on a GPU, as torch set it."""
    problem = onednn_path_problem(TORCH_DEQUANT, config, device)
    assert problem is None, problem


@pytest.mark.parametrize("config", list(TORCH_DEQUANT.configs))
def test_torch_dequant_on_an_emulated_avx512_bf16_cpu(config):
    """End to end on any CPU: where torch.matmul drops subnormals as on AVX512-BF16, torch_dequant stays exact."""
    platform, report = on_emulated_avx512_bf16_cpu(TORCH_DEQUANT, config)
    assert not platform.passed, f"the emulation does not reproduce issue 7 (seed={SEED}): {platform.summary()}"
    assert report.passed, f"torch_dequant[{config}] seed={SEED}: {report.summary()}"


@pytest.mark.parametrize("device", PATH_DEVICES)
@pytest.mark.parametrize("config", list(TORCH_DEQUANT.configs))
def test_torch_dequant_dequantizes_every_scale_byte_exactly(config, device):
    """The other half of torch_dequant on this machine: every code at every scale byte, exact before the matmul.

    Where value x scale exceeds the config's dtype it must overflow to +-inf (the
    documented upcasting limit); 255 must give NaN.
    """
    from kernels.torch_dequant import _DTYPES, dequantize_fast

    dtype = _DTYPES[TORCH_DEQUANT.configs[config]["dtype"]]
    codes = torch.arange(16, dtype=torch.uint8).repeat(256, BLOCK_SIZE // 16)  # row b: every code at scale b
    t = _operand(codes, torch.arange(256).view(256, 1)).to(device)
    exact = dequantize(t, torch.float64)
    got = dequantize_fast(t, dtype).double()
    representable = exact.abs() <= torch.finfo(dtype).max
    want = torch.where(representable | exact.isnan(), exact, exact.sign() * float("inf"))
    wrong = ~((got == want) | (got.isnan() & want.isnan()))
    # Row = scale byte, column = element (its code is column % 16).
    assert not wrong.any(), f"dequantize_fast({dtype}) on {device}: {where_wrong(wrong, got, 'exact', name='values')}"
