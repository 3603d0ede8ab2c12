"""Compiled resource usage of every kernel that compiles without a GPU, per commit.

Guards: register pressure, spills and scratch, LDS/shared memory and occupancy of
the FlyDSL gfx950 kernel and the Triton kernels for sm_90, read by
harness.resources (this checkout's parser) from the compiler's own output. No GPU is needed, so a
CPU-only machine publishes a real history of these.

Each (kernel, arch) is compiled once per commit (``setup_cache``), in the
kernel's default config at that commit; every metric reads that one result. A
metric the arch does not have (AGPRs on sm_90, spill bytes on gfx950) is n/a.
Lower is better for every one of them: asv knows no other direction. Occupancy
(higher is better, and a function of the registers and LDS tracked here) is not
an asv benchmark, so ``asv compare`` and the benchmark list never show a gain in
it as a regression; ``python -m ci.budget.resources`` prints it.
"""

from __future__ import annotations

import traceback

from asv_runner.benchmarks.mark import SkipNotImplemented

from asv_bench import common
from harness.resources import usage_from_artifact


def _usage_or_reason(kernel_name: str, arch: str) -> dict:
    """The ResourceUsage of (kernel, arch) as a dict, {"n/a": reason}, or {"error": traceback}."""
    try:
        kernel = common.registered_kernel(kernel_name)
        if arch not in kernel.compile_archs:
            archs = ", ".join(kernel.compile_archs) or "no arch"
            return {"n/a": f"{kernel_name} compiles without a GPU for {archs}, not {arch}"}
        config = kernel.default_config
        common.note(f"compiling {kernel_name} for {arch} ({config})")
        # The commit's kernel compiles itself; this checkout's parser reads the result.
        return usage_from_artifact(kernel.compile_only(arch, config)).to_dict()
    except NotImplementedError as exc:
        return {"n/a": str(exc)}
    except Exception:
        return {"error": traceback.format_exc()}


class CompiledResources:
    params = (common.KERNELS, common.COMPILE_ARCHS)
    param_names = ("kernel", "arch")
    version = "1"
    timeout = 60

    # Compiles every (kernel, arch) once per commit: a few to ~30 s each on 2 cores.
    @common.asv_attributes(timeout=900)
    def setup_cache(self) -> dict:
        return {(k, a): _usage_or_reason(k, a) for k in common.KERNELS for a in common.COMPILE_ARCHS}

    def setup(self, usages: dict, kernel: str, arch: str) -> None:
        usage = usages[(kernel, arch)]
        if "n/a" in usage:
            common.note(f"n/a: {usage['n/a']}")
            raise NotImplementedError(usage["n/a"])
        if "error" in usage:
            raise RuntimeError(f"inspecting {kernel} for {arch} failed:\n{usage['error']}")

    @staticmethod
    def _field(usages: dict, kernel: str, arch: str, *names: str) -> int:
        usage = usages[(kernel, arch)]
        values = [usage.get(name) for name in names]
        if any(v is None for v in values):
            raise SkipNotImplemented(f"{'/'.join(names)} is not defined for {arch}")
        return sum(int(v) for v in values)

    @common.asv_attributes(unit="registers")
    def track_registers(self, usages, kernel, arch):
        """Unified VGPRs per lane (gfx950: arch VGPRs + AGPRs) or registers per thread (sm_90)."""
        return self._field(usages, kernel, arch, "registers")

    @common.asv_attributes(unit="VGPRs")
    def track_arch_vgprs(self, usages, kernel, arch):
        return self._field(usages, kernel, arch, "arch_vgpr")

    @common.asv_attributes(unit="AGPRs")
    def track_agprs(self, usages, kernel, arch):
        return self._field(usages, kernel, arch, "agpr")

    @common.asv_attributes(unit="SGPRs")
    def track_sgprs(self, usages, kernel, arch):
        return self._field(usages, kernel, arch, "sgpr")

    @common.asv_attributes(unit="registers")
    def track_spilled_registers(self, usages, kernel, arch):
        """gfx950: VGPRs + SGPRs spilled."""
        return self._field(usages, kernel, arch, "vgpr_spills", "sgpr_spills")

    @common.asv_attributes(unit="bytes")
    def track_spill_bytes(self, usages, kernel, arch):
        """sm_90: spill stores + loads, bytes per thread (ptxas -v)."""
        return self._field(usages, kernel, arch, "spill_store_bytes", "spill_load_bytes")

    @common.asv_attributes(unit="bytes")
    def track_scratch_bytes(self, usages, kernel, arch):
        return self._field(usages, kernel, arch, "scratch_bytes")

    @common.asv_attributes(unit="bytes")
    def track_shared_memory_bytes(self, usages, kernel, arch):
        """LDS (gfx950) or shared memory (sm_90) per workgroup, static + dynamic."""
        return self._field(usages, kernel, arch, "shared_bytes")
