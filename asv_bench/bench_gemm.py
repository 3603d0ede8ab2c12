"""GEMM time of every registered kernel configuration, per commit: one measurement, time and TFLOPS.

``track_time(kernel_config, shape)`` times one GEMM in a fresh process with harness.timing.measure_gemm
and returns every sample (seconds, lower-is-better: asv's one direction); the timed output is then
checked at the timed shape, and a wrong one raises (the history never holds a wrong kernel's speed).
TFLOPS from the same measurement go to the records sidecar (asv_bench.records), not to asv.
``kernel_config`` is ``kernel:config`` of asv_bench.common.KERNEL_CONFIGS (append only). GemmOnGpu:
harness/shapes.py's BENCHMARK_SHAPES; GemmOnCpu: small CPU shapes (off the regressions page).
Why TFLOPS are not an asv benchmark: docs/MEASURING.md, "GEMM time".
"""

from __future__ import annotations

from asv_bench import common


class _GemmBenchmark:
    param_names = ("kernel_config", "shape")
    # TIMING_METHOD_VERSION: bumped when harness/timing/ changes what a time means. "/kc" marks the
    # (kernel_config, shape) parameters: results of the old (kernel, shape) ones do not line up with them.
    version = f"{common.TIMING_METHOD_VERSION}/kc"
    budget: common.timing.TimingBudget

    def _device(self):
        raise NotImplementedError

    def _excluded(self, kernel) -> str | None:
        return None

    def setup(self, kernel_config: str, shape: str) -> None:
        benchmark = f"{__name__.rpartition('.')[2]}.{type(self).__name__}.track_time"  # asv's name for it
        self.record = common.MeasurementRecorder(benchmark, (kernel_config, shape))
        self.resumed = self.record.resumable_samples()
        if self.resumed is not None:
            return  # measured by a run that was killed before asv saved it: nothing to set up
        with self.record.reporting_setup():
            kernel_name, config = common.split_kernel_config(kernel_config)
            self.device = self._device()
            self.kernel = common.registered_kernel(kernel_name)
            self.config = common.kernel_config_of(self.kernel, config)
            self.shape = common.SHAPES_BY_NAME[shape]
            reason = self._excluded(self.kernel) or self.kernel.unavailable_reason(self.device)
            if reason is None:
                try:
                    self.kernel.check_shape(self.shape.m, self.shape.n, self.shape.k, self.config)
                except ValueError as exc:  # the registry's UnsupportedShape
                    reason = str(exc)
            if reason:
                raise NotImplementedError(reason)

    @common.asv_attributes(unit="seconds")
    def track_time(self, kernel_config: str, shape: str):
        if self.resumed is not None:
            return {"samples": self.resumed, "number": 1}
        with self.record.reporting_failure():
            kept = common.output_check.KeptOutput(common.kernel_prepare(self.kernel, self.config))
            result = common.timing.measure_gemm(
                kept,
                self.shape.m,
                self.shape.n,
                self.shape.k,
                device=self.device,
                label=f"{kernel_config} {shape} on {self.device}",
                budget=self.budget,
                log=common.note,
            )
            # A wrong output at the timed shape raises (WrongResult): asv records a failure, not a speed.
            checked = common.check_timed_output(kept)
        common.note(result.summary())
        common.note(checked.summary())
        self.record.measured(result, device_is_cpu=str(self.device) == "cpu")
        return result.asv_samples()


class GemmOnGpu(_GemmBenchmark):
    params = (common.KERNEL_CONFIGS, [s.name for s in common.GPU_SHAPES])
    # One fresh process per benchmark: CUDA/HIP context, JIT compilation of the
    # kernel, operand generation (several GiB at 16384^3), warm-up, timing.
    timeout = 600
    budget = common.GPU_BUDGET

    def _device(self):
        return common.gpu_device()


class GemmOnCpu(_GemmBenchmark):
    params = (common.KERNEL_CONFIGS, [s.name for s in common.CPU_SHAPES])
    timeout = 300
    budget = common.CPU_BUDGET

    def _device(self):
        # One thread: on a shared 2-core runner a second thread times the neighbours, not the kernel.
        # Not pinned to a core: measured on the shared runner, pinning widened the spread between
        # runs of one commit from 19% to 45% (a neighbour landing on the pinned core); see README.
        import torch

        torch.set_num_threads(1)
        return "cpu"

    def _excluded(self, kernel) -> str | None:
        return common.CPU_EXCLUDED_BACKENDS.get(kernel.backend)
