"""Compile a Triton kernel for a GPU this machine does not have.

``triton.compile(ASTSource(...), target=GPUTarget(...))`` for one (kernel, config, arch), returned as a
:class:`kernels.artifact.CompiledArtifact` for :mod:`harness.resources`: on ``sm_XY`` the PTX, with the
cubin read by the wheel's ``cuobjdump`` and the PTX assembled again by its ``ptxas -v`` (spills); on
``gfxNNN`` the AMDGPU ISA with its metadata. ``extra["dynamic_shared_bytes"]`` carries Triton's dynamic
shared memory. Triton 3.6 and 3.9; under ``TRITON_INTERPRET=1`` the request goes to
kernels.compile_child. docs/MEASURING.md, "Triton compile for a GPU this machine lacks".
"""

from __future__ import annotations

import inspect
import re
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kernels.artifact import CompiledArtifact
from kernels.compile_child import call_in_child

# Seconds ptxas / cuobjdump may take on one kernel.
TOOL_TIMEOUT_S = 300


def compile_for_arch(
    fn: Any,
    *,
    kernel: str,
    config_name: str,
    arch: str,
    signature: Mapping[str, str],
    constexprs: Mapping[str, object],
    num_warps: int,
    num_stages: int,
    divisible_by_16: Iterable[str] | None = None,
) -> CompiledArtifact:
    """Compile ``fn`` (a ``triton.jit`` function) for ``arch`` without a GPU.

    ``signature`` maps each runtime argument name to its Triton type
    (``"*bf16"``, ``"i32"``, ...); ``constexprs`` maps each ``tl.constexpr``
    argument to its value (they need no signature entry).

    ``divisible_by_16`` names the arguments a launch would specialize as
    multiples of 16 (pointers 16-byte aligned, integers such as strides and
    sizes that are multiples of 16). Without it Triton cannot vectorize loads
    and the code (and its register count) is not what runs. ``None`` means
    every pointer argument, which holds for whole torch tensors; name the
    integer arguments too when the kernel's shape constraints guarantee them.
    Errors name the argument that is wrong.
    """
    if divisible_by_16 is None:
        divisible_by_16 = [name for name, kind in signature.items() if kind.startswith("*")]
    divisible_by_16 = sorted(divisible_by_16)
    _check_request(fn, kernel, config_name, arch, signature, constexprs, num_warps, num_stages, divisible_by_16)
    request = dict(
        kernel=kernel,
        config_name=config_name,
        arch=arch,
        signature=dict(signature),
        constexprs=dict(constexprs),
        num_warps=num_warps,
        num_stages=num_stages,
        divisible_by_16=divisible_by_16,
    )
    jit_fn = _jit_function(fn)
    if jit_fn is not None:
        return _compile_here(jit_fn, **request)
    python_fn = fn.fn
    module, name = python_fn.__module__, python_fn.__name__
    if module == "__main__" or python_fn.__qualname__ != name:
        raise ValueError(
            f"fn: {python_fn.__qualname__} is an interpreted Triton function (TRITON_INTERPRET=1) defined "
            f"{'in __main__' if module == '__main__' else 'inside another scope'}; only a module-level kernel "
            "can be compiled for a GPU in that mode (it is re-imported without the interpreter)"
        )
    request["constexprs"] = {k: _encode_constexpr(v) for k, v in constexprs.items()}
    return call_in_child(
        "kernels.triton_compile:compile_module_function",
        dict(request, module=module, name=name),
        what=f"{module}.{name} for {arch} ({config_name})",
    )


def compile_module_function(module: str, name: str, **request) -> CompiledArtifact:
    """In kernels.compile_child's child: the module-level kernel ``module.name``, compiled for real."""
    import importlib

    request["constexprs"] = {k: _decode_constexpr(v) for k, v in request["constexprs"].items()}
    return compile_for_arch(getattr(importlib.import_module(module), name), **request)


# The child's request travels as JSON; a Triton dtype constexpr (tl.bfloat16) travels by its name.
def _encode_constexpr(value):
    import triton.language as tl

    return {"triton_dtype": value.name} if isinstance(value, tl.dtype) else value


def _decode_constexpr(value):
    import triton.language as tl

    return tl.dtype(value["triton_dtype"]) if isinstance(value, dict) and "triton_dtype" in value else value


def target_for_arch(arch: str):
    """The ``GPUTarget`` Triton compiles for, from an arch name like ``sm_90`` or ``gfx950``."""
    from triton.backends.compiler import GPUTarget

    cuda = re.fullmatch(r"sm_(\d+)a?", arch)
    if cuda:
        return GPUTarget("cuda", int(cuda.group(1)), 32)
    if re.fullmatch(r"gfx[0-9a-f]+", arch):
        return GPUTarget("hip", arch, 64)  # CDNA runs wave64
    raise ValueError(f"arch: {arch!r} is not a Triton target name (expected 'sm_XY' or 'gfxNNN')")


# ---------------------------------------------------------------------------
# input checks
# ---------------------------------------------------------------------------


def _check_request(
    fn, kernel, config_name, arch, signature, constexprs, num_warps, num_stages, divisible_by_16
) -> None:
    for name, value in (("kernel", kernel), ("config_name", config_name), ("arch", arch)):
        if not isinstance(value, str) or not value:
            raise ValueError(f"{name}: expected a non-empty str, got {value!r}")
    target_for_arch(arch)
    for name, value in (("num_warps", num_warps), ("num_stages", num_stages)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name}: expected a positive int, got {value!r}")
    if num_warps & (num_warps - 1):
        raise ValueError(f"num_warps: must be a power of two, got {num_warps}")
    if not isinstance(signature, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in signature.items()
    ):
        raise ValueError(f"signature: expected a dict of argument name -> Triton type string, got {signature!r}")
    if not isinstance(constexprs, Mapping) or not all(isinstance(k, str) for k in constexprs):
        raise ValueError(f"constexprs: expected a dict of argument name -> value, got {constexprs!r}")
    arg_names = getattr(fn, "arg_names", None)
    if arg_names is None:
        raise ValueError(f"fn: expected a triton.jit function, got {type(fn).__name__}")
    unknown = sorted(set(signature) - set(arg_names)) + sorted(set(constexprs) - set(arg_names))
    if unknown:
        raise ValueError(f"signature/constexprs: {unknown} are not arguments of {fn.__name__}{tuple(arg_names)}")
    missing = [a for a in arg_names if a not in signature and a not in constexprs]
    if missing:
        raise ValueError(f"signature: no type for argument(s) {missing} of {fn.__name__} (or give them in constexprs)")
    clash = sorted(a for a in constexprs if signature.get(a, "constexpr") != "constexpr")
    if clash:
        raise ValueError(f"signature: {clash} are constexprs but have runtime types {[signature[a] for a in clash]}")
    not_runtime = [a for a in divisible_by_16 if a not in signature or a in constexprs]
    if not_runtime:
        raise ValueError(f"divisible_by_16: {not_runtime} are not runtime arguments in the signature")


def _jit_function(fn):
    """``fn`` if it is a compilable ``JITFunction``, None if it is an interpreter wrapper."""
    from triton.runtime.jit import JITFunction

    if isinstance(fn, JITFunction):
        return fn
    if hasattr(fn, "fn") and hasattr(fn, "rewrite"):  # triton.runtime.interpreter.InterpretedFunction
        return None
    raise ValueError(f"fn: expected a triton.jit function, got {type(fn).__name__}")


# ---------------------------------------------------------------------------
# compiling
# ---------------------------------------------------------------------------


def _compile_here(
    jit_fn, *, kernel, config_name, arch, signature, constexprs, num_warps, num_stages, divisible_by_16
) -> CompiledArtifact:
    import triton
    from triton.compiler import ASTSource
    from triton.compiler.compiler import make_backend

    target = target_for_arch(arch)
    full_signature = dict(signature)
    for name in constexprs:
        full_signature.setdefault(name, "constexpr")
    # ASTSource wants the signature in argument order.
    ordered = {name: full_signature[name] for name in jit_fn.arg_names}
    attrs = _specialization_attrs(make_backend(target), jit_fn.arg_names, ordered, divisible_by_16)
    source = ASTSource(jit_fn, signature=ordered, constexprs=dict(constexprs), attrs=attrs)
    start = time.perf_counter()
    compiled = triton.compile(source, target=target, options=dict(num_warps=num_warps, num_stages=num_stages))
    seconds = time.perf_counter() - start

    metadata = compiled.metadata
    extra = {
        "function": str(metadata.name),
        "dynamic_shared_bytes": str(int(metadata.shared)),
        "num_warps": str(num_warps),
        "num_stages": str(num_stages),
        "triton_version": triton.__version__,
        "compiler": "triton",
    }
    if target.backend == "cuda":
        extra.update(_inspect_cuda_binary(compiled.asm["ptx"], compiled.asm["cubin"], target.arch, metadata))
        assembly = compiled.asm["ptx"]
    else:
        assembly = compiled.asm["amdgcn"]
    return CompiledArtifact(
        kernel=kernel, config=config_name, arch=arch, assembly=assembly, compile_seconds=seconds, extra=extra
    )


def _specialization_attrs(backend, arg_names, signature, divisible_by_16) -> dict:
    """The attributes Triton's launcher would attach: "D" = divisible by 16, and on
    AMD "S" = pointer within 2 GiB (buffer loads, on by default in Triton's AMD backend)."""
    attrs = {}
    for index, name in enumerate(arg_names):
        desc = "D" if name in divisible_by_16 else ""
        if signature[name].startswith("*") and backend.target.backend == "hip" and _amd_buffer_ops():
            desc += "S"
        parsed = backend.parse_attr(desc) if desc else []
        if parsed:
            attrs[(index,)] = parsed
    return attrs


def _amd_buffer_ops() -> bool:
    try:
        from triton import knobs

        return bool(knobs.amd.use_buffer_ops)
    except (ImportError, AttributeError):
        return False


# ---------------------------------------------------------------------------
# NVIDIA binary inspection (ptxas -v, cuobjdump)
# ---------------------------------------------------------------------------


def _inspect_cuda_binary(ptx: str, cubin: bytes, capability: int, metadata) -> dict[str, str]:
    ptxas, flags = _ptxas_command(capability, metadata)
    cuobjdump = _tool_path("cuobjdump")
    with tempfile.TemporaryDirectory(prefix="triton_compile_") as tmp:
        ptx_path, cubin_path = Path(tmp, "kernel.ptx"), Path(tmp, "kernel.cubin")
        ptx_path.write_text(ptx)
        cubin_path.write_bytes(cubin)
        ptxas_log = _run([ptxas, *flags, str(ptx_path), "-o", str(Path(tmp, "rerun.cubin"))])
        resource_usage = _run([cuobjdump, "--dump-resource-usage", str(cubin_path)])
        sass = _run([cuobjdump, "--dump-sass", str(cubin_path)])
    return {
        "ptxas_verbose": ptxas_log,
        "ptxas_command": " ".join([Path(ptxas).name, *flags]),
        "cuobjdump_resource_usage": resource_usage,
        "sass": sass,
    }


def _ptxas_command(capability: int, metadata) -> tuple[str, list[str]]:
    """The ptxas Triton uses for ``capability`` and the flags of its ``make_cubin``, plus -v."""
    from triton.backends.nvidia import compiler as nv

    ptxas = nv.get_ptxas(capability).path
    gpu_name = nv.sm_arch_from_capability(capability)
    flags = ["-lineinfo", "-v"]
    if not getattr(metadata, "enable_fp_fusion", True):
        flags.append("--fmad=false")
    # Triton 3.9 added --regAllocOptLevel=2 (a ptxas 13 workaround); 3.6 does
    # not pass it. Mirror whichever Triton is installed so register counts match.
    if "--regAllocOptLevel=2" in inspect.getsource(nv.CUDABackend.make_cubin):
        flags.append("--regAllocOptLevel=2")
    ptx_options = getattr(metadata, "ptx_options", None)
    if ptx_options:
        flags.extend(ptx_options.split(" "))
    flags.append(f"--gpu-name={gpu_name}")
    return ptxas, flags


def _tool_path(name: str) -> str:
    import triton

    try:
        from triton import knobs

        path = getattr(knobs.nvidia, name).path
    except (ImportError, AttributeError):  # older layout: the wheel's bin folder
        path = str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name)
    if not path or not Path(path).exists():
        raise RuntimeError(
            f"{name}: not found (looked for {path!r}); the Triton wheel ships it under backends/nvidia/bin"
        )
    return path


def _run(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(
            f"{Path(command[0]).name} failed (exit {done.returncode}): {(done.stderr or done.stdout).strip()[-2000:]}"
        )
    # ptxas -v reports on stderr, cuobjdump on stdout.
    return (done.stdout + done.stderr).strip()
