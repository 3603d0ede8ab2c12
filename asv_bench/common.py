"""What the asv benchmarks share: parameters, the guarded project import, the measuring code.

Reproduce one GEMM benchmark by hand (from the repository root)::

    asv run --quick --show-stderr \
        -b "GemmOnGpu.track_time\\('triton_dot_scaled:m128_n256_k64_w8_s3', 'square_m08192" HEAD^!

asv runs this suite (today's) against old commits, so: parameters are fixed data (:data:`KERNELS`,
:data:`KERNEL_CONFIGS`, :data:`CPU_SHAPES`, harness/shapes.py; append only); the project under test is
the commit's installed ``kernels``, imported in ``setup`` (a missing module or kernel is n/a with the
reason); the measuring code (``harness``) is this checkout's, on ``sys.path`` after the environment's
site-packages. Why: docs/MEASURING.md, "What the suite shares".
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.append(str(REPO_ROOT))

from asv_bench import records  # noqa: E402  (after the path above)
from harness import gpu_state, output_check, timing  # noqa: E402
from harness import shapes as _shapes  # noqa: E402

# Every kernel name the registry has ever had. Append only (a removed kernel
# stays: its history stays readable). tests/test_asv_suite.py fails when the
# registry has a kernel missing here.
KERNELS = (
    "flydsl_gfx950_4wave",
    "torch_dequant",
    "triton_dot_scaled",
    "triton_upcast",
)

# Every "kernel:config" the registry has ever had: the GEMM benchmarks track each
# registered configuration, not only a kernel's default. Append only, like KERNELS
# (tests/test_asv_suite.py fails when a registered configuration is missing here).
KERNEL_CONFIGS = (
    "flydsl_gfx950_4wave:default",
    "flydsl_gfx950_4wave:intrinsic_acc",
    "torch_dequant:bf16",
    "torch_dequant:fp32",
    "triton_dot_scaled:m128_n128_k128_w8_s3",
    "triton_dot_scaled:m128_n256_k64_w8_s3",
    "triton_upcast:m128_n128_k64_w8_s3",
    "triton_upcast:m128_n128_k64_w8_s4",
)

# Architectures a kernel may compile for without a GPU (resource history).
COMPILE_ARCHS = ("gfx950", "sm_90")


class Shape(tuple):
    """(name, m, n, k) -- a plain tuple, so it pickles without the project."""

    name = property(lambda self: self[0])
    m = property(lambda self: self[1])
    n = property(lambda self: self[2])
    k = property(lambda self: self[3])


# Shapes timed on a CPU. The GPU shapes take minutes per GEMM on a 2-core CPU,
# so a CPU-only machine times the torch reference on these instead: small enough
# for a few seconds per benchmark, large enough that the matmul, not Python, dominates.
# Append only.
CPU_SHAPES = (
    Shape(("cpu_m00128_n00128_k02048", 128, 128, 2048)),
    Shape(("cpu_m00256_n00256_k01024", 256, 256, 1024)),
)

# Backends not timed on a CPU, with the reason (skips are data, not scattered ifs).
CPU_EXCLUDED_BACKENDS = {
    "triton": "Triton runs on a CPU only in its interpreter, a correctness tool, not a performance path",
    "flydsl": "FlyDSL kernels need a gfx950 GPU",
}


GPU_SHAPES = tuple(Shape((s.name, s.m, s.n, s.k)) for s in _shapes.BENCHMARK_SHAPES)
SHAPES_BY_NAME = {s.name: s for s in GPU_SHAPES + CPU_SHAPES}


# The measuring method's version; asv compares only results of equal version.
# Bump it when harness/timing/ or harness/operands.py changes how a time is taken.
TIMING_METHOD_VERSION = "1"

# GPU: 0.2-3 s of warm-up until steady, then 0.5 s of timed launches (at least 10).
GPU_BUDGET = timing.TimingBudget()
# CPU: launches of 20-100 ms; at least 12 samples, so asv's Mann-Whitney test can
# reach its p < 0.002 (it needs 1 / C(2n, n) below that: n >= 7 per side).
CPU_BUDGET = timing.TimingBudget(warmup_ms=100.0, max_warmup_ms=1500.0, rep_ms=1500.0, min_reps=12, max_reps=200)


# ---------------------------------------------------------------------------
# the project under test
# ---------------------------------------------------------------------------


_Method = TypeVar("_Method", bound=Callable[..., Any])


def asv_attributes(**values: Any) -> Callable[[_Method], _Method]:
    """Set asv's settings of one benchmark (``unit``, ``timeout``, ...): asv reads them off the function."""

    def mark(method: _Method) -> _Method:
        method.__dict__.update(values)
        return method

    return mark


def import_project(module: str) -> types.ModuleType:
    """``kernels.<module>`` of the installed commit, or n/a when this commit has none."""
    try:
        imported = importlib.import_module(f"kernels.{module}")
    except ModuleNotFoundError as exc:
        if exc.name and (exc.name == "kernels" or exc.name.startswith("kernels.")):
            raise NotImplementedError(f"this commit has no {exc.name}") from None
        raise
    _check_installed_copy(imported)
    return imported


def _check_installed_copy(module: types.ModuleType) -> None:
    """Under asv the project must come from the commit's environment, not from a checkout on sys.path."""
    env_dir = os.environ.get("ASV_ENV_DIR")
    if env_dir and module.__file__ and not Path(module.__file__).resolve().is_relative_to(Path(env_dir).resolve()):
        raise RuntimeError(
            f"{module.__name__} was imported from {module.__file__}, outside the asv environment {env_dir}: "
            f"the benchmark would measure that copy, not commit {os.environ.get('ASV_COMMIT', '?')}"
        )


def registered_kernel(name: str) -> Any:
    registry = import_project("registry")
    names = [k.name for k in registry.all_kernels()]
    if name not in names:
        raise NotImplementedError(f"this commit has no kernel {name!r} (it has {', '.join(names)})")
    return registry.get_kernel(name)


def split_kernel_config(kernel_config: str) -> tuple[str, str]:
    kernel, _, config = kernel_config.partition(":")
    return kernel, config


def kernel_config_of(kernel: Any, config: str) -> str:
    """``config`` when the installed commit's kernel has it; n/a with the reason otherwise."""
    configs = list(getattr(kernel, "configs", {}) or {})
    if config not in configs:
        raise NotImplementedError(f"this commit's {kernel.name} has no config {config!r} (it has {', '.join(configs)})")
    return config


def kernel_prepare(kernel: Any, config: str | None = None):
    """harness.timing's ``prepare(a, b, out)`` for a registered kernel of the installed commit:
    the harness's raw operands wrapped in the commit's own MXFP4 type."""
    mxfp4 = import_project("mxfp4")

    def prepare(a, b, out):
        return kernel.prepare(mxfp4.MXFP4Tensor(a.data, a.scales), mxfp4.MXFP4Tensor(b.data, b.scales), out, config)

    return prepare


def commit_reference(a, b, absolute: bool):
    """harness.output_check's ``reference``: the installed commit's float64 reference GEMM (every commit has one)."""
    reference, mxfp4 = import_project("reference"), import_project("mxfp4")
    return reference.reference_gemm(
        mxfp4.MXFP4Tensor(a.data, a.scales),
        mxfp4.MXFP4Tensor(b.data, b.scales),
        absolute=absolute,
        chunk_bytes=output_check.REFERENCE_CHUNK_BYTES,
    )


def check_timed_output(kept: output_check.KeptOutput) -> output_check.OutputReport:
    """The timed launches' output at the timed shape (harness.output_check); raises WrongResult when it is wrong,
    so asv records the benchmark as failed, never the speed of a wrong kernel."""
    report = kept.check(commit_reference)
    if not report.passed:
        raise output_check.WrongResult(report)
    return report


def _preload_project() -> None:
    """Import the registry and its kernel modules with the suite.

    Under ``--launch-method forkserver`` (ci.history.main_job on CPU-only machines) the
    suite is imported once per commit and every benchmark forks from it, so the
    seconds of importing triton and flydsl are paid once, not per benchmark.
    Nothing here touches a GPU, so forked children still create their own
    device context. Errors are left for ``setup`` to report per benchmark.
    """
    try:
        import_project("registry").all_kernels()
    except Exception:
        pass


def gpu_device() -> Any:
    import torch

    if not torch.cuda.is_available():
        raise NotImplementedError("no GPU on this machine (the GPU shapes run on CUDA/ROCm GPUs; see GemmOnCpu)")
    return torch.device("cuda", torch.cuda.current_device())


def note(message: str) -> None:
    """Why a benchmark is n/a or how a timing went: asv shows it with --show-stderr."""
    print(message, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# the record of each measurement, beside asv's results (asv_bench.records)
# ---------------------------------------------------------------------------


def main_job_id(environ: dict[str, str] | None = None) -> str | None:
    """The id of the ci.history.main_job run this process belongs to ($MXFP4_MAIN_JOB = "<checkout>::<id>")."""
    tag = (os.environ if environ is None else environ).get(records.JOB_ENV, "")
    return tag.rpartition("::")[2] or None


class MeasurementRecorder:
    """Writes one benchmark's record (measured, n/a with the reason, or failed) the moment it is known."""

    def __init__(self, benchmark: str, params: tuple[str, ...]):
        self.key = records.benchmark_key(benchmark, params)
        self.sidecar = records.sidecar_in_this_run()
        self.job = main_job_id()

    def _write(self, record: dict[str, Any]) -> None:
        if self.sidecar is not None:
            records.update(self.sidecar, {self.key: {"job": self.job, **record}})

    def resumable_samples(self) -> list[float] | None:
        """Samples ci.history.main_job marked for reuse: measured by a killed run, never saved by asv."""
        if self.sidecar is None:
            return None
        try:
            record = records.load(self.sidecar).get(self.key)
        except records.CorruptSidecar:
            return None
        if not (record and record.get("resume") and record.get("samples_s")):
            return None
        if record.get("method_version") != TIMING_METHOD_VERSION:
            return None
        self._write({**record, "resume": False, "resumed_by": self.job, "job": record.get("job")})
        note(f"resumed: {self.key} was measured by main job {record.get('job')} (killed before asv saved it)")
        return list(record["samples_s"])

    @contextlib.contextmanager
    def reporting_setup(self) -> Iterator[None]:
        """n/a (NotImplementedError) and failures of ``setup`` go into the record, then on to asv."""
        try:
            yield
        except NotImplementedError as exc:
            note(f"n/a: {exc}")
            self._write({"status": "n/a", "reason": str(exc)})
            raise
        except Exception as exc:
            self._failed(exc)
            raise

    @contextlib.contextmanager
    def reporting_failure(self) -> Iterator[None]:
        try:
            yield
        except Exception as exc:
            self._failed(exc)
            raise

    def _failed(self, exc: BaseException) -> None:
        failure = records.failure_kind(exc)
        self._write({"status": "failed", "failure": failure, "reason": f"{type(exc).__name__}: {str(exc)[:500]}"})

    def measured(self, result: timing.Timing, *, device_is_cpu: bool) -> None:
        self._write(
            records.measured_record(
                result.to_json(),
                device_is_cpu=device_is_cpu,
                method_version=TIMING_METHOD_VERSION,
                job=self.job,
                override_requested=gpu_state.override_requested(),
            )
        )


_preload_project()
