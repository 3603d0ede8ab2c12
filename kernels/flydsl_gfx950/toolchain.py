"""The compile-only toolchain of the FlyDSL gfx950 kernel: the linker, and the driver that dumps the ISA.

:func:`compile_isa` compiles the kernel for gfx950 without a GPU and returns the
final ISA text. FlyDSL's compile-only switches are environment variables read
once per process, so it runs in a fresh process: the registry entry asks for
one (``_compile_needs_clean_process``) and kernels.compile_child provides it.

FlyDSL's ROCm backend links the assembled kernel with ``$ROCM_PATH/llvm/bin/ld.lld``
(``/opt/rocm`` when ``ROCM_PATH`` is unset). A CPU-only CI machine has no ROCm, but
Debian's ``lld-19`` links AMDGPU code objects just as well; this module points
``ROCM_PATH`` at a private folder whose ``llvm/bin/ld.lld`` is that binary.

Only the compile (``COMPILE_ONLY=1``) path needs this. Running a kernel needs a real
ROCm install (libamdhip64), which :func:`hip_runtime_missing_reason` checks.
"""

from __future__ import annotations

import ctypes.util
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from kernels.errors import KernelError

DEFAULT_ROCM_PATH = "/opt/rocm"
DEBIAN_LLD = Path("/usr/lib/llvm-19/bin/ld.lld")
DEBIAN_LLD_ON_PATH = "ld.lld-19"
SHIM_ROOT = Path.home() / ".cache" / "mxfp4-harness" / "rocm-shim"
INSTALL_HINT = "install Debian's lld-19 (apt-get install lld-19) or ROCm (which ships $ROCM_PATH/llvm/bin/ld.lld)"


class ToolchainMissing(KernelError, RuntimeError):
    """No ld.lld that FlyDSL can use; the message says what to install."""


def rocm_linker(rocm_path: str | os.PathLike[str]) -> Path:
    return Path(rocm_path) / "llvm" / "bin" / "ld.lld"


def _debian_lld() -> Path | None:
    if DEBIAN_LLD.is_file():
        return DEBIAN_LLD
    found = shutil.which(DEBIAN_LLD_ON_PATH)
    return Path(found) if found else None


def _make_shim(lld: Path, root: Path) -> Path:
    """``root/llvm/bin/ld.lld`` -> ``lld``, created atomically (safe if two processes race)."""
    link = rocm_linker(root)
    if link.is_symlink() and Path(os.readlink(link)) == lld:
        return root
    link.parent.mkdir(parents=True, exist_ok=True)
    tmp = link.with_name(f"ld.lld.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(lld)
    os.replace(tmp, link)
    return root


def rocm_path_for_compile(environ: Mapping[str, str] | None = None, *, shim_root: Path = SHIM_ROOT) -> str:
    """The ``ROCM_PATH`` value under which FlyDSL finds an ``ld.lld``.

    Order: ``$ROCM_PATH`` (or /opt/rocm) when its ``llvm/bin/ld.lld`` exists; else a
    private shim folder linking Debian's lld-19; else :class:`ToolchainMissing`.
    """
    environ = os.environ if environ is None else environ
    configured = environ.get("ROCM_PATH") or DEFAULT_ROCM_PATH
    if rocm_linker(configured).is_file():
        return configured
    lld = _debian_lld()
    if lld is None:
        raise ToolchainMissing(
            f"FlyDSL needs ld.lld to link a gfx950 code object: none at {rocm_linker(configured)} "
            f"and no {DEBIAN_LLD} or {DEBIAN_LLD_ON_PATH} on PATH; {INSTALL_HINT}"
        )
    return str(_make_shim(lld, shim_root))


def hip_runtime_missing_reason() -> str | None:
    """Why FlyDSL could not launch kernels here (no libamdhip64), or None when it can."""
    if ctypes.util.find_library("amdhip64"):
        return None
    for root in (os.environ.get("ROCM_PATH"), DEFAULT_ROCM_PATH):
        if root and any((Path(root) / "lib").glob("libamdhip64.so*")):
            return None
    return "the FlyDSL runtime needs the HIP runtime (libamdhip64.so) from a ROCm install; none was found"


def compile_isa(*, arch: str, config: dict, k: int) -> tuple[str, float]:
    """(final ISA text, compile seconds) of the kernel for ``arch`` with ``config`` and K = ``k``.

    Sets FlyDSL's switches before FlyDSL is first imported: call it in a fresh process.
    """
    import torch

    from kernels.flydsl_gfx950.index_math import BLOCK_M

    dump_dir = Path(tempfile.mkdtemp(prefix="flydsl-dump-"))
    try:
        os.environ.update(
            {
                "COMPILE_ONLY": "1",
                "FLYDSL_GPU_ARCH": arch,  # without it FlyDSL silently targets gfx942
                "FLYDSL_DEBUG_DUMP_ASM": "1",
                "FLYDSL_DUMP_DIR": str(dump_dir),
                "FLYDSL_RUNTIME_ENABLE_CACHE": "0",  # a cached binary would skip the ISA dump
                "ROCM_PATH": rocm_path_for_compile(),
            }
        )
        import flydsl.compiler as flyc

        from kernels.flydsl_gfx950.kernel_body import build_launcher

        m = n = 2 * BLOCK_M  # runtime values; any multiple of the tile gives the same code
        placeholders = (
            torch.empty(m * k // 2, dtype=torch.uint8),
            torch.empty(n * k // 2, dtype=torch.uint8),
            torch.empty(m * n, dtype=torch.bfloat16),
            torch.empty(m * k // 32, dtype=torch.uint8),
            torch.empty(n * k // 32, dtype=torch.uint8),
            m,
            n,
        )
        started = time.perf_counter()
        flyc.compile(build_launcher(k=k, **config), *placeholders)
        seconds = time.perf_counter() - started
        isa_files = sorted(dump_dir.glob("*/22_final_isa.s"))
        if len(isa_files) != 1:
            raise RuntimeError(f"expected one final ISA dump under {dump_dir}, found {[str(p) for p in isa_files]}")
        return isa_files[0].read_text(), seconds
    finally:
        shutil.rmtree(dump_dir, ignore_errors=True)
