"""The gates must reject real bugs: deliberately broken kernels, each at the sizes the gates run.

Three families of mutants:

* Triton source mutants: kernels/triton_mxfp4.py with one line changed the way
  a real bug would change it (nibble order, K loop bound, scale pointer, B
  addressing, a dropped block), imported as a separate module and run through
  the same gate (ci.common.correctness.check_kernel). On a GPU the whole K sweep
  runs; in the CPU interpreter the sweep's two ends (time).
* torch mutants: the torch_dequant kernel with the same bugs injected into its
  dequantize, over the whole K sweep on any device; plus the scale-edge bugs
  only edge data can see (b = 0 read as 0, as Triton's Hopper dot_scaled does;
  subnormals flushed, as oneDNN's bf16 matmul does on AVX512-BF16 CPUs; 255 not
  NaN), against the edge_scales data kind and the extreme-scales edge case.
* torch_dequant source mutants: kernels/torch_dequant.py with one line changed
  (oneDNN switched back on for its CPU matmul), caught by the path check of
  tests/test_edge_numerics.py -- the check that proves the issue-7 fix on CPUs
  this run does not have.

A mutant that passes the gate fails this test. Each mutation is also checked to
apply (the source text it edits exists), so a refactor cannot silently turn a
mutant into the original kernel.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch
from operands import DATA_KINDS, DEVICE, SEED, generator, make_operands
from test_correctness import sweep_mn
from test_edge_numerics import extreme_scale_operands, on_emulated_avx512_bf16_cpu, onednn_path_problem

import kernels.torch_dequant as torch_dequant
import kernels.triton_mxfp4 as triton_mxfp4
from ci.common.correctness import check_kernel
from harness.shapes import K_SWEEP
from kernels import registry
from kernels.mxfp4 import BLOCK_SIZE, E8M0_NAN, MXFP4Tensor
from kernels.torch_dequant import TorchDequantGemm

# name -> [(old, new), ...] edits of kernels/triton_mxfp4.py. Each edit must match exactly once.
TRITON_MUTATIONS = {
    "nibble_order_swapped": [
        (
            "        a = tl.load(a_ptrs)\n",
            "        a = tl.load(a_ptrs)\n        a = ((a >> 4) | (a << 4)).to(tl.uint8)\n",
        ),
    ],
    "k_tail_skipped": [
        ("tl.range(0, tl.cdiv(K, BLOCK_K), num_stages", "tl.range(0, tl.cdiv(K, BLOCK_K) - 1, num_stages"),
    ],
    "scale_block_dropped": [
        # The first 32-element block of A in the first K step reads as zeros.
        (
            "        a = tl.load(a_ptrs)\n",
            "        a = tl.load(a_ptrs, mask=(_k_step != 0) | (kb[None, :] >= 16), other=0)\n",
        ),
    ],
    "wrong_scale_row": [
        ("a_scale_ptr + rows_a[:, None] * scale_k", "a_scale_ptr + ((rows_a[:, None] + 1) % M) * scale_k"),
    ],
    "b_not_transposed": [
        # B read as if it were stored [K/2, N] row-major.
        ("b_ptr + rows_b[None, :] * packed_k + kb[:, None]", "b_ptr + kb[:, None] * N + rows_b[None, :]"),
        ("b_ptr + rows_b[:, None] * packed_k + kb[None, :]", "b_ptr + kb[None, :] * N + rows_b[:, None]"),
    ],
}
TRITON_KERNELS = ("triton_dot_scaled", "triton_upcast")
# The Triton mutants are about addressing and the K loop, which randn and wide_scales data already
# expose; in the CPU interpreter the edge_scales kind would add ~20 launches of 5-20 s each.
TRITON_MUTANT_KINDS = DATA_KINDS if DEVICE.type != "cpu" else ("randn", "wide_scales")


def _mutant_module(mutation: str, tmp_dir: Path, original=triton_mxfp4, mutations=TRITON_MUTATIONS):
    source = Path(original.__file__).read_text()
    for old, new in mutations[mutation]:
        count = source.count(old)
        assert count == 1, f"mutation {mutation}: {old!r} occurs {count} times in {original.__name__}"
        source = source.replace(old, new)
    # Unregistered copies: the registry keeps the real kernels.
    source = source.replace("@register\n", "")
    path = tmp_dir / f"mutant_{original.__name__.rsplit('.', 1)[-1]}_{mutation}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # triton.jit looks the source up through the module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def mutants(tmp_path_factory):
    directory = tmp_path_factory.mktemp("triton_mutants")
    return {name: _mutant_module(name, directory) for name in TRITON_MUTATIONS}


def _mutant_kernel(module, kernel_name: str):
    cls = {"triton_dot_scaled": module.TritonDotScaled, "triton_upcast": module.TritonUpcast}[kernel_name]
    return cls()


def _sweep_for(kernel) -> tuple[int, ...]:
    return K_SWEEP if DEVICE.type != "cpu" else (K_SWEEP[0], K_SWEEP[-1])


@pytest.mark.parametrize("kind", TRITON_MUTANT_KINDS)
@pytest.mark.parametrize("mutation", sorted(TRITON_MUTATIONS))
@pytest.mark.parametrize("kernel_name", TRITON_KERNELS)
def test_triton_mutant_is_rejected(kernel_name, mutation, kind, mutants):
    original = registry.get_kernel(kernel_name)
    reason = original.unavailable_reason(DEVICE)
    if reason:
        pytest.skip(reason)
    kernel = _mutant_kernel(mutants[mutation], kernel_name)
    mn = sweep_mn(original, original.default_config)
    for k in _sweep_for(original):
        a, b = make_operands(kind, mn, mn, k, salt=k)
        report = check_kernel(kernel, a, b)
        assert not report.passed, (
            f"{kernel_name} mutant {mutation} passed the gate at K={k} seed={SEED}: {report.summary()}"
        )


# ---------------------------------------------------------------------------
# torch mutants
# ---------------------------------------------------------------------------


def _decode(
    t: MXFP4Tensor,
    *,
    swap_nibbles=False,
    scale_row_shift=0,
    drop_block=None,
    k_keep=None,
    b0_as_zero=False,
    nan_scale_finite=False,
    flush_subnormals=False,
) -> torch.Tensor:
    """A float32 dequantize with one injected bug (the correct one with no arguments)."""
    lut = torch.tensor(
        [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], device=t.device
    )
    low, high = t.data & 0xF, t.data >> 4
    if swap_nibbles:
        low, high = high, low
    values = lut[torch.stack((low, high), dim=-1).long()].view(t.rows, -1, BLOCK_SIZE)
    scales = torch.roll(t.scales, shifts=scale_row_shift, dims=0)
    factor = torch.exp2(scales.float() - 127.0)  # b = 0: 2**-127, an exact float32 subnormal
    # 255 is NaN. exp2 alone gives inf, whose products come out NaN anyway (0 * inf, inf - inf):
    # the bug worth a mutant is a decoder that gives 255 a finite value.
    factor[scales == E8M0_NAN] = 1.0 if nan_scale_finite else float("nan")
    if b0_as_zero:
        factor[scales == 0] = 0.0
    if drop_block is not None:
        factor[:, drop_block] = 0.0
    out = (values * factor[..., None]).view(t.rows, -1)
    if k_keep is not None:
        out[:, k_keep:] = 0.0
    if flush_subnormals:
        # Below bf16's (and fp32's) smallest normal, 2**-126: what a bf16 dot product that treats
        # subnormal inputs as zero (VDPBF16PS, through oneDNN on AVX512-BF16 CPUs) computes with.
        out = torch.where(out.abs() < torch.finfo(torch.bfloat16).tiny, 0.0, out)
    return out


# name -> (bug in A's dequantize, bug in B's dequantize, B transposed?)
TORCH_MUTATIONS = {
    "nibble_order_swapped": (dict(swap_nibbles=True), {}, True),
    "k_tail_skipped": (dict(k_keep=-256), dict(k_keep=-256), True),  # the last 256-wide K step never runs
    "scale_block_dropped": (dict(drop_block=0), {}, True),
    "wrong_scale_row": (dict(scale_row_shift=1), {}, True),
    "b_not_transposed": ({}, {}, False),  # B's [N, K] buffer read as [K, N]
}
NO_BUG = ({}, {}, True)


class _TorchMutant(TorchDequantGemm):
    name = "torch_mutant"

    def __init__(self, bug: tuple[dict, dict, bool]):
        self.bug = bug

    def _prepare(self, a, b, out, config):
        a_bug, b_bug, transpose_b = self.bug

        def launch():
            b_values = _decode(b, **b_bug)
            b_operand = b_values.T if transpose_b else b_values.reshape(b.k, b.rows)
            out.copy_(_decode(a, **a_bug) @ b_operand)

        return launch


@pytest.mark.parametrize("kind", DATA_KINDS)
def test_torch_mutant_harness_without_bug_passes(kind):
    """The mutant harness with no bug injected must pass, or the rejections below prove nothing."""
    a, b = make_operands(kind, 256, 256, K_SWEEP[0], salt=K_SWEEP[0])
    report = check_kernel(_TorchMutant(NO_BUG), a, b)
    assert report.passed, report.summary()


@pytest.mark.parametrize("kind", DATA_KINDS)
@pytest.mark.parametrize("mutation", sorted(TORCH_MUTATIONS))
def test_torch_mutant_is_rejected(mutation, kind):
    kernel = _TorchMutant(TORCH_MUTATIONS[mutation])
    # These bugs do not depend on scale bytes; on a 2-core CPU, edge_scales data checks them at the
    # sweep's two ends only (~70 s less). The scale-edge mutants below take edge_scales over every K.
    sweep = (K_SWEEP[0], K_SWEEP[-1]) if kind == "edge_scales" and DEVICE.type == "cpu" else K_SWEEP
    for k in sweep:
        a, b = make_operands(kind, 256, 256, k, salt=k)
        report = check_kernel(kernel, a, b)
        assert not report.passed, f"torch mutant {mutation} passed the gate at K={k} seed={SEED}: {report.summary()}"


# Bugs in decoding the edge scale bytes: randn and wide_scales data never hold those bytes, so only
# edge data (the edge_scales kind, the extreme-scales edge case) can reject them.
SCALE_EDGE_MUTATIONS = {
    # Triton's Hopper dot_scaled (tests/known_deviations.py) does this.
    "b0_decoded_as_zero": (dict(b0_as_zero=True), dict(b0_as_zero=True), True),
    # The platform bug of issue 7: oneDNN's bf16 matmul on AVX512-BF16 CPUs computes this.
    "subnormals_flushed": (dict(flush_subnormals=True), dict(flush_subnormals=True), True),
    "nan_scale_finite": (dict(nan_scale_finite=True), dict(nan_scale_finite=True), True),
}


@pytest.mark.parametrize("mutation", sorted(SCALE_EDGE_MUTATIONS))
def test_scale_edge_mutant_is_rejected_by_edge_scales_data(mutation):
    kernel = _TorchMutant(SCALE_EDGE_MUTATIONS[mutation])
    for k in K_SWEEP:
        a, b = make_operands("edge_scales", 256, 256, k, salt=k)
        report = check_kernel(kernel, a, b)
        assert not report.passed, f"torch mutant {mutation} passed edge_scales at K={k} seed={SEED}: {report.summary()}"


@pytest.mark.parametrize("mutation", ["b0_decoded_as_zero", "subnormals_flushed"])
def test_scale_edge_mutant_is_rejected_by_extreme_scales(mutation):
    """The extreme-scales edge case rejects the b = 0 bugs, and the fixed torch_dequant passes the same operands."""
    a, b = extreme_scale_operands(256, generator(len(mutation)))
    report = check_kernel(_TorchMutant(SCALE_EDGE_MUTATIONS[mutation]), a, b)
    print(f"mutant {mutation}: {report.summary()}")
    assert not report.passed, f"torch mutant {mutation} passed extreme_scales seed={SEED}: {report.summary()}"
    fixed = registry.get_kernel("torch_dequant")
    for config in fixed.configs:
        control = check_kernel(fixed, a, b, config)
        print(f"torch_dequant[{config}]: {control.summary()}")
        assert control.passed, f"torch_dequant[{config}] on the same operands, seed={SEED}: {control.summary()}"


# name -> [(old, new), ...] edits of kernels/torch_dequant.py. Each edit must match exactly once.
TORCH_SOURCE_MUTATIONS = {
    # The issue-7 fix undone: the CPU matmul runs through oneDNN again. On a CPU without AVX512-BF16
    # its result is still right, so only the path check can see it there.
    "onednn_reenabled": [
        ("    torch.backends.mkldnn.enabled = False  #", "    torch.backends.mkldnn.enabled = True  #"),
    ],
    "onednn_guard_on_gpu_only": [
        (
            'if device.type == "cpu" else contextlib.nullcontext()',
            'if device.type != "cpu" else contextlib.nullcontext()',
        ),
    ],
}


@pytest.mark.parametrize("mutation", sorted(TORCH_SOURCE_MUTATIONS))
def test_torch_dequant_source_mutant_fails_the_path_check(mutation, tmp_path):
    """The path check rejects the mutant on any CPU; on an (emulated) AVX512-BF16 CPU its result is wrong too."""
    module = _mutant_module(mutation, tmp_path, torch_dequant, TORCH_SOURCE_MUTATIONS)
    kernel = module.TorchDequantGemm()
    for config in kernel.configs:
        problem = onednn_path_problem(kernel, config, "cpu")
        print(f"mutant {mutation}[{config}]: {problem}")
        assert problem is not None, f"torch_dequant mutant {mutation}[{config}] passed the oneDNN path check"
        assert onednn_path_problem(registry.get_kernel("torch_dequant"), config, "cpu") is None
    _platform, report = on_emulated_avx512_bf16_cpu(kernel, "bf16")
    print(f"mutant {mutation}[bf16] on an emulated AVX512-BF16 CPU: {report.summary()}")
    assert not report.passed, f"mutant {mutation}[bf16] passed extreme_scales on the emulated CPU seed={SEED}"


def test_every_torch_source_mutation_applies():
    source = Path(torch_dequant.__file__).read_text()
    for mutation, edits in TORCH_SOURCE_MUTATIONS.items():
        for old, _new in edits:
            assert source.count(old) == 1, f"{mutation}: {old!r} no longer matches kernels/torch_dequant.py"


def test_every_triton_mutation_applies_to_a_kernel():
    source = Path(triton_mxfp4.__file__).read_text()
    for mutation, edits in TRITON_MUTATIONS.items():
        for old, _new in edits:
            assert source.count(old) == 1, f"{mutation}: {old!r} no longer matches kernels/triton_mxfp4.py"
