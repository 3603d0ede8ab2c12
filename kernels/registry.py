"""The one registry of MXFP4 GEMM kernels.

A kernel is one module of this package with a :class:`Kernel` subclass decorated with :func:`register`;
consumers find kernels only through :func:`all_kernels` / :func:`get_kernel`, so a new kernel is measured
and gated everywhere at once. Contract (C[M,N] = A[M,K] . B[N,K]^T, bf16 out, kernels.mxfp4):
``prepare(a, b, out, config)`` does the untimed work and returns a zero-argument ``launch`` that writes
C into ``out``; ``compile_only(arch, config)`` compiles without a GPU (or raises
``NotImplementedError``; ``_compile_needs_clean_process``: through kernels.compile_child); anything
unsupported raises :class:`UnsupportedShape` or :class:`UnsupportedDevice` naming the constraint.
"""

from __future__ import annotations

import abc
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from kernels import devices
from kernels.artifact import CompiledArtifact
from kernels.compile_child import call_in_child
from kernels.errors import KernelError
from kernels.mxfp4 import MXFP4Tensor, check_mxfp4

# CompiledArtifact is defined in kernels.artifact (kernels.compile_child sends it back without
# knowing the registry); kernel modules import it from here with the rest of the kernel contract.

BACKENDS = ("torch", "triton", "flydsl")

# Kernel modules, imported on first use of the registry. Append only: the asv
# suite runs today's benchmarks against old commits, which look names up here.
KERNEL_MODULES = (
    "kernels.torch_dequant",
    "kernels.triton_mxfp4",
    "kernels.flydsl_gfx950",
)


class UnsupportedShape(KernelError, ValueError):
    """The kernel cannot compute this (M, N, K); the message names the constraint."""


class UnsupportedDevice(KernelError, RuntimeError):
    """The kernel cannot run on this device; the message names what it needs."""


@dataclass(frozen=True)
class ShapeConstraints:
    """Divisibility a kernel needs of M, N and K (its tile sizes)."""

    m_multiple: int = 1
    n_multiple: int = 1
    k_multiple: int = 32
    why: str = ""

    def check(self, kernel: str, m: int, n: int, k: int) -> None:
        for dim, value, multiple in (("M", m, self.m_multiple), ("N", n, self.n_multiple), ("K", k, self.k_multiple)):
            if value <= 0 or value % multiple:
                reason = f" ({self.why})" if self.why else ""
                raise UnsupportedShape(f"{kernel}: {dim} = {value} must be a positive multiple of {multiple}{reason}")


class Kernel(abc.ABC):
    name: ClassVar[str]
    backend: ClassVar[str]
    description: ClassVar[str]
    # fnmatch patterns over kernels.devices.device_arch(): "cpu", "sm_9?", "gfx950", ...
    runs_on: ClassVar[tuple[str, ...]]
    # Architectures compile_only() can target on a machine without that GPU.
    compile_archs: ClassVar[tuple[str, ...]] = ()
    constraints: ClassVar[ShapeConstraints] = ShapeConstraints()
    # Named launch configurations (tile sizes, ...). The first is the default.
    configs: ClassVar[Mapping[str, Mapping[str, Any]]] = {"default": {}}

    # -- what the consumers call -------------------------------------------------

    def unavailable_reason(self, device: torch.device | str) -> str | None:
        """Why this kernel cannot run on ``device``, or None when it can."""
        arch = devices.device_arch(device)
        if not devices.arch_matches(arch, self.runs_on):
            return f"{self.name} runs on {', '.join(self.runs_on)}; this device is {arch}"
        return self._runtime_unavailable_reason(torch.device(device))

    def shape_constraints(self, config: str | None = None) -> ShapeConstraints:
        """What (M, N, K) must satisfy under ``config``; tile-size configs override this."""
        self.config(config)  # rejects an unknown config name
        return self.constraints

    def check_shape(self, m: int, n: int, k: int, config: str | None = None) -> None:
        self.shape_constraints(config).check(self.name, m, n, k)

    def prepare(
        self, a: MXFP4Tensor, b: MXFP4Tensor, out: torch.Tensor, config: str | None = None
    ) -> Callable[[], None]:
        m, n, k = validate_operands(a, b, out)
        self.check_shape(m, n, k, config)
        reason = self.unavailable_reason(out.device)
        if reason:
            raise UnsupportedDevice(reason)
        return self._prepare(a, b, out, self.config(config))

    def compile_only(self, arch: str, config: str | None = None) -> CompiledArtifact:
        if arch not in self.compile_archs:
            raise NotImplementedError(
                f"{self.name} compiles without a GPU for {self.compile_archs or 'no arch'}, not {arch}"
            )
        name = config or self.default_config
        self.config(name)  # rejects an unknown config name here, not in a child process
        if self._compile_needs_clean_process():
            return call_in_child(
                "kernels.registry:compile_registered",
                dict(kernel=self.name, arch=arch, config=name, module=type(self).__module__),
                what=f"{self.name} ({arch}, {name})",
            )
        return self.compile_only_here(arch, name)

    def compile_only_here(self, arch: str, config: str) -> CompiledArtifact:
        """Compile in this process (what :func:`compile_registered` calls in the child)."""
        return self._compile_only(arch, config, self.config(config))

    def config(self, name: str | None) -> Mapping[str, Any]:
        name = name or self.default_config
        if name not in self.configs:
            raise ValueError(f"config: {self.name} has no config {name!r}; it has {sorted(self.configs)}")
        return self.configs[name]

    @property
    def default_config(self) -> str:
        return next(iter(self.configs))

    # -- what a kernel implements ------------------------------------------------

    def _runtime_unavailable_reason(self, device: torch.device) -> str | None:
        """Missing runtime pieces beyond the arch (a library, an env var). None when ready."""
        return None

    @abc.abstractmethod
    def _prepare(
        self, a: MXFP4Tensor, b: MXFP4Tensor, out: torch.Tensor, config: Mapping[str, Any]
    ) -> Callable[[], None]: ...

    def _compile_only(self, arch: str, config_name: str, config: Mapping[str, Any]) -> CompiledArtifact:
        raise NotImplementedError(f"{self.name} has no compile-only path")

    def _compile_needs_clean_process(self) -> bool:
        """True when this process cannot compile for another arch (compiler switches read once
        per process); compile_only then runs in kernels.compile_child."""
        return False


def validate_operands(a: MXFP4Tensor, b: MXFP4Tensor, out: torch.Tensor) -> tuple[int, int, int]:
    """Check A, B and C agree; return (M, N, K). Every error names the argument."""
    check_mxfp4("a", a)
    check_mxfp4("b", b)
    if a.k != b.k:
        raise ValueError(f"b: K = {b.k} does not match a's K = {a.k} (C = A[M,K] . B[N,K]^T)")
    if not isinstance(out, torch.Tensor):
        raise ValueError(f"out: expected a torch.Tensor, got {type(out).__name__}")
    if out.dtype != torch.bfloat16:
        raise ValueError(f"out: dtype must be torch.bfloat16, got {out.dtype}")
    if tuple(out.shape) != (a.rows, b.rows):
        raise ValueError(f"out: shape {tuple(out.shape)} must be [M, N] = [{a.rows}, {b.rows}]")
    if not out.is_contiguous():
        raise ValueError(f"out: must be contiguous, got strides {out.stride()}")
    if not (a.device == b.device == out.device):
        raise ValueError(f"a, b, out: must be on one device, got a on {a.device}, b on {b.device}, out on {out.device}")
    return a.rows, b.rows, a.k


# ---------------------------------------------------------------------------
# registration and lookup
# ---------------------------------------------------------------------------

_REGISTRY: dict[str, Kernel] = {}
_loaded = False


def register(cls: type[Kernel]) -> type[Kernel]:
    if cls.backend not in BACKENDS:
        raise ValueError(f"{cls.__name__}: backend {cls.backend!r} is not one of {BACKENDS}")
    if cls.name in _REGISTRY and type(_REGISTRY[cls.name]) is not cls:
        raise ValueError(
            f"kernel name {cls.name!r} is registered twice ({type(_REGISTRY[cls.name]).__name__}, {cls.__name__})"
        )
    _REGISTRY[cls.name] = cls()
    return cls


def _load() -> None:
    global _loaded
    if not _loaded:
        for module in KERNEL_MODULES:
            before = dict(_REGISTRY)
            try:
                importlib.import_module(module)
            except BaseException:
                # A module that registered and then failed is gone from sys.modules, not from the
                # registry: undo its registrations, so the next try raises this error again rather
                # than "registered twice" for a class it is about to define anew.
                _REGISTRY.clear()
                _REGISTRY.update(before)
                raise
        _loaded = True


def all_kernels() -> list[Kernel]:
    _load()
    return [_REGISTRY[name] for name in sorted(_REGISTRY)]


def get_kernel(name: str) -> Kernel:
    _load()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"kernel: no kernel named {name!r}; registered: {sorted(_REGISTRY)}") from None


def compile_registered(kernel: str, arch: str, config: str, module: str) -> CompiledArtifact:
    """In kernels.compile_child's child: the registered kernel's in-process compile (``module`` registers it)."""
    importlib.import_module(module)
    return get_kernel(kernel).compile_only_here(arch, config)
