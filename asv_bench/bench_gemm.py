"""GEMM speed of every registered kernel, per commit.

Two metrics per (kernel, shape), each measured in its own fresh process by
harness.timing.measure_gemm (idle check, rotated inputs, warm-up until steady,
device events, median):

* ``track_time`` -- seconds per GEMM, with every sample. asv keeps the samples
  and applies its statistics: ``asv compare``/``continuous`` (Mann-Whitney U plus
  the factor) and the regressions page of ``asv publish`` flag a slowdown. This
  is the metric to gate on: asv treats lower as better for every benchmark.
* ``track_tflops`` -- 2*M*N*K / median time, for reading. Higher is better, so
  asv would call a drop an improvement: it is excluded from regression detection
  (asv.conf.json ``regressions_first_commits``; ``asv continuous`` is run with
  ci.main_job.GATE_BENCHMARKS).

Guards: GemmOnGpu -- the shapes of harness/shapes.py BENCHMARK_SHAPES (8192^3,
16384^3, three LLM layers) on the GPU; GemmOnCpu -- small CPU shapes, the timing
history a CPU-only machine records (the torch reference's CPU path).
"""

from __future__ import annotations

from asv_bench import common


class _GemmBenchmark:
    param_names = ("kernel", "shape")
    # Bump when the timing method (harness/timing.py) changes: asv then stops
    # comparing new results with ones taken the old way.
    version = common.TIMING_METHOD_VERSION

    def _device(self):
        raise NotImplementedError

    def _excluded(self, kernel) -> str | None:
        return None

    def setup(self, kernel: str, shape: str) -> None:
        self.device = self._device()
        self.kernel = common.registered_kernel(kernel)
        self.shape = common.SHAPES_BY_NAME[shape]
        reason = self._excluded(self.kernel) or self.kernel.unavailable_reason(self.device)
        if reason is None:
            try:
                self.kernel.check_shape(self.shape.m, self.shape.n, self.shape.k)
            except ValueError as exc:  # the registry's UnsupportedShape
                reason = str(exc)
        if reason:
            common.note(f"n/a: {reason}")
            raise NotImplementedError(reason)

    def _measure(self, metric: str, kernel: str, shape: str):
        result = common.timing.measure_gemm(
            common.kernel_prepare(self.kernel),
            self.shape.m,
            self.shape.n,
            self.shape.k,
            device=self.device,
            label=f"{kernel}[{self.kernel.default_config}] {shape} on {self.device}",
            budget=self.budget,
            log=common.note,
        )
        common.note(result.summary())
        common.save_timing_record(f"{type(self).__name__}.{metric}", (kernel, shape), result.to_json())
        return result

    def track_time(self, kernel: str, shape: str):
        return self._measure("track_time", kernel, shape).asv_samples()

    track_time.unit = "seconds"

    def track_tflops(self, kernel: str, shape: str) -> float:
        return self._measure("track_tflops", kernel, shape).tflops

    track_tflops.unit = "TFLOPS"


class GemmOnGpu(_GemmBenchmark):
    params = (common.KERNELS, [s.name for s in common.GPU_SHAPES])
    # One fresh process per benchmark: CUDA/HIP context, JIT compilation of the
    # kernel, operand generation (several GiB at 16384^3), warm-up, timing.
    timeout = 600
    budget = common.GPU_BUDGET

    def _device(self):
        return common.gpu_device()


class GemmOnCpu(_GemmBenchmark):
    params = (common.KERNELS, [s.name for s in common.CPU_SHAPES])
    timeout = 300
    budget = common.CPU_BUDGET

    def _device(self):
        # One thread: on a shared 2-core runner a second thread times the neighbours, not the
        # kernel (a busy core stalls every multi-threaded op). The history is single-threaded.
        import torch

        torch.set_num_threads(1)
        return "cpu"

    def _excluded(self, kernel) -> str | None:
        return common.CPU_EXCLUDED_BACKENDS.get(kernel.backend)
