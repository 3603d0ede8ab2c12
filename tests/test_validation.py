"""Bad input gets a ValueError naming the argument, from every kernel, before anything launches."""

from __future__ import annotations

import pytest
import torch

from kernels import registry
from kernels.mxfp4 import MXFP4Tensor
from kernels.registry import UnsupportedDevice, UnsupportedShape

KERNELS = [k.name for k in registry.all_kernels()]
M, N, K = 256, 256, 512


def good():
    a = MXFP4Tensor(torch.zeros(M, K // 2, dtype=torch.uint8), torch.full((M, K // 32), 127, dtype=torch.uint8))
    b = MXFP4Tensor(torch.zeros(N, K // 2, dtype=torch.uint8), torch.full((N, K // 32), 127, dtype=torch.uint8))
    return a, b, torch.empty(M, N, dtype=torch.bfloat16)


def _bad_cases():
    a, b, out = good()
    yield "a.data dtype", MXFP4Tensor(a.data.to(torch.int8), a.scales), b, out, r"a\.data: dtype must be torch\.uint8"
    yield "b.scales dtype", a, MXFP4Tensor(b.data, b.scales.float()), out, r"b\.scales: dtype must be torch\.uint8"
    yield (
        "packed K mismatch",
        a,
        MXFP4Tensor(b.data[:, :128].contiguous(), b.scales[:, :8].contiguous()),
        out,
        r"b: K = 256 does not match a's K = 512",
    )
    yield (
        "scale shape",
        MXFP4Tensor(a.data, a.scales[:, :-1].contiguous()),
        b,
        out,
        r"a\.scales: shape \(256, 15\) does not match K = 512",
    )
    yield "scale rows", a, MXFP4Tensor(b.data, b.scales[:-1].contiguous()), out, r"b\.scales: has 255 rows"
    yield (
        "K not multiple of 32",
        MXFP4Tensor(torch.zeros(M, 24, dtype=torch.uint8), torch.zeros(M, 1, dtype=torch.uint8)),
        b,
        out,
        r"a: K = 48 .* not a multiple of 32",
    )
    yield (
        "non-contiguous data",
        MXFP4Tensor(torch.zeros(K // 2, M, dtype=torch.uint8).T, a.scales),
        b,
        out,
        r"a\.data: must be contiguous",
    )
    yield "out dtype", a, b, out.float(), r"out: dtype must be torch\.bfloat16"
    yield "out shape", a, b, out[:, :128].contiguous(), r"out: shape \(256, 128\) must be \[M, N\] = \[256, 256\]"
    yield "out non-contiguous", a, b, torch.empty(N, M, dtype=torch.bfloat16).T, r"out: must be contiguous"
    yield (
        "devices differ",
        a,
        MXFP4Tensor(b.data.to("meta"), b.scales.to("meta")),
        out,
        r"a, b, out: must be on one device",
    )
    yield (
        "data/scales devices differ",
        MXFP4Tensor(a.data, a.scales.to("meta")),
        b,
        out,
        r"a: data is on cpu but scales are on meta",
    )
    yield "not an MXFP4Tensor", a.data, b, out, r"a: expected an MXFP4Tensor"


BAD = list(_bad_cases())


@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_input_is_a_value_error_naming_the_argument(name, case):
    _, a, b, out, message = case
    with pytest.raises(ValueError, match=message):
        registry.get_kernel(name).prepare(a, b, out)


@pytest.mark.parametrize("name", KERNELS)
def test_unsupported_shape_names_the_constraint(name):
    kernel = registry.get_kernel(name)
    c = kernel.shape_constraints()
    if c.m_multiple == 1:
        pytest.skip(f"{name} accepts every M")
    m = c.m_multiple + c.m_multiple // 2
    a = MXFP4Tensor(torch.zeros(m, K // 2, dtype=torch.uint8), torch.zeros(m, K // 32, dtype=torch.uint8))
    _, b, _ = good()
    with pytest.raises(UnsupportedShape, match=rf"{name}: M = {m} must be a positive multiple of {c.m_multiple}"):
        kernel.prepare(a, b, torch.empty(m, N, dtype=torch.bfloat16))


def test_unsupported_device_names_what_is_needed():
    kernel = registry.get_kernel("flydsl_gfx950_4wave")
    a, b, out = good()
    if kernel.unavailable_reason("cpu") is None:
        pytest.fail("the gfx950 kernel claims to run on a CPU")
    with pytest.raises(UnsupportedDevice, match="gfx950"):
        kernel.prepare(a, b, out)


def test_unknown_kernel_and_config_are_named():
    with pytest.raises(ValueError, match="no kernel named 'nope'"):
        registry.get_kernel("nope")
    with pytest.raises(ValueError, match="has no config 'nope'"):
        registry.get_kernel("torch_dequant").config("nope")


def test_registry_refuses_a_second_kernel_with_the_same_name():
    class Impostor(registry.Kernel):
        name = "torch_dequant"
        backend = "torch"
        description = "duplicate"
        runs_on = ("cpu",)

        def _prepare(self, a, b, out, config):
            raise AssertionError("never called")

    registry.all_kernels()
    with pytest.raises(ValueError, match="registered twice"):
        registry.register(Impostor)


def test_every_backend_is_registered():
    """A kernel module that silently stopped registering would drop out of every gate and benchmark."""
    assert {k.backend for k in registry.all_kernels()} == set(registry.BACKENDS)
    assert len(registry.all_kernels()) >= 4


def test_a_kernel_module_that_fails_after_registering_raises_its_own_error_on_every_try(tmp_path, monkeypatch):
    """The registry undoes a failed module's registrations: a second lookup names the real error,
    not "registered twice" (what a gate's survey reported for a base whose kernel did not import)."""
    import sys

    from kernels import registry

    (tmp_path / "fails_after_registering.py").write_text(
        "from kernels.registry import Kernel, register\n\n\n"
        "@register\nclass Half(Kernel):\n    name = 'half_registered'\n    backend = 'torch'\n\n"
        "    def _prepare(self, a, b, out, config):\n        raise NotImplementedError\n\n\n"
        "raise RuntimeError('injected: fails after registering')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "KERNEL_MODULES", (*registry.KERNEL_MODULES, "fails_after_registering"))
    monkeypatch.setattr(registry, "_loaded", False)
    before = sorted(registry._REGISTRY)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="injected: fails after registering"):
            registry.all_kernels()
        assert sorted(registry._REGISTRY) == before and "fails_after_registering" not in sys.modules
