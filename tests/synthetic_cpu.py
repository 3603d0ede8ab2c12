"""The CPU machine of a synthetic history (tests/synthetic_history.py, ``Spec.cpu_machine``): asv's results and
records of ``bench_gemm.GemmOnCpu`` on a machine without a GPU, as the main job's timing track writes them there.

Imports numpy, the standard library and asv_bench.records.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from asv_bench import records

CPU_BENCHMARK = "bench_gemm.GemmOnCpu.track_time"


def _dumps(data: Any) -> bytes:
    return json.dumps(data, separators=(",", ":"), allow_nan=True).encode()


class CpuFiles:
    """A machine without a GPU timing bench_gemm.GemmOnCpu (``Spec.cpu_machine``): torch_dequant's configs at the CPU
    shapes at ~0.005-0.02 TFLOPS, with a CPU's spread and its heavy tail (a neighbour's work slows a few samples a
    lot); the other kernels need a GPU and are n/a, as a real CPU run records them. Drawn from a stream of its own:
    a seed's GPU lines are the same with or without it."""

    def __init__(
        self,
        spec: Any,
        benchmarks: dict[str, Any],
        template: dict[str, Any],
        columns: list[str],
        drift: Callable[[np.random.Generator, Any], np.ndarray],
    ):
        """``spec``: a synthetic.Spec; ``template``/``columns``: the GPU machine's results document and asv's columns
        (the same env and layout); ``drift``: synthetic's AR(1) wander, drawn here for this machine."""
        assert spec.cpu_machine is not None
        self.spec, self.rng = spec, np.random.default_rng([spec.seed, 2])
        self.version = benchmarks[CPU_BENCHMARK]["version"]
        self.params = benchmarks[CPU_BENCHMARK]["params"]
        combos = [(a, b) for a in self.params[0] for b in self.params[1]]
        self.keys = [f"{CPU_BENCHMARK}({a}, {b})" for a, b in combos]
        self.measured = [i for i, (config, _) in enumerate(combos) if config.startswith("'torch_dequant:")]
        self.flops = {}
        for i, (_, shape) in enumerate(combos):
            m, n, k = (int(part[1:]) for part in shape.strip("'").split("_")[1:])
            self.flops[i] = 2 * m * n * k
        speed = {i: self.rng.uniform(0.005, 0.02) for i in self.measured}  # TFLOPS
        self.base_s = {i: self.flops[i] / (speed[i] * 1e12) for i in self.measured}
        self.drift = drift(self.rng, spec)  # its own machine's wander
        self.template = template
        self.columns = columns

    def machine_json(self) -> bytes:
        return _dumps(
            {
                "machine": self.spec.cpu_machine,
                "arch": "x86_64",
                "cpu": "synthetic (shared, 2 cores)",
                "gpu": "none",
                "gpu_driver": "none",
                "gpu_runtime": "none",
                "num_cpu": "2",
                "os": "Linux",
                "ram": "24 GiB",
                "version": 1,
            }
        )

    def files(self, index: int, commit: str, date_ms: int, measured_ms: int) -> dict[str, bytes]:
        size = len(self.keys)
        row: dict[str, Any] = {
            c: [None] * size
            for c in (
                "result",
                "stats_ci_99_a",
                "stats_ci_99_b",
                "stats_q_25",
                "stats_q_75",
                "stats_number",
                "stats_repeat",
                "samples",
            )
        }
        row["result"] = [math.nan] * size
        recs: dict[str, dict[str, Any]] = {}
        for i, key in enumerate(self.keys):
            if i not in self.measured:
                kernel = key.split("('", 1)[1].split(":", 1)[0]
                recs[key] = {
                    "job": "synthetic",
                    "status": "n/a",
                    "reason": f"{kernel} runs on a GPU; this device is cpu",
                    "resume": False,
                    "samples_s": None,
                }
                continue
            repeats = int(self.rng.integers(10, 30))
            median = (
                self.base_s[i] * (1 + self.drift[index]) * (1 + self.rng.standard_t(4) * self.spec.commit_noise * 3)
            )
            drawn = median * (1 + self.rng.normal(0, self.spec.cpu_sample_noise, repeats))
            slow = self.rng.random(repeats) < self.spec.cpu_slow_share
            drawn[slow] *= 1 + self.rng.exponential(0.15, int(slow.sum()))
            middle = float(np.median(drawn))
            q25, q75 = (float(f"{v:.5g}") for v in np.quantile(drawn, (0.25, 0.75)))
            row["result"][i], row["samples"][i] = middle, [float(f"{s:.6g}") for s in drawn]
            row["stats_q_25"][i], row["stats_q_75"][i], row["stats_ci_99_a"][i], row["stats_ci_99_b"][i] = (
                q25,
                q75,
                q25,
                q75,
            )
            row["stats_number"][i], row["stats_repeat"][i] = 1, repeats
            recs[key] = {
                "job": "synthetic",
                "status": "measured",
                "method_version": "1",
                "median_s": middle,
                "tflops": self.flops[i] / middle / 1e12,
                "flops": self.flops[i],
                "n": repeats,
                "samples_s": None,
                "relative_iqr": (q75 - q25) / middle,
                "flags": [],
                "idle": {"status": "no GPU idle check on a CPU"},
                "override_requested": False,
                "steady": True,
                "warmup_launches": 3,
                "inputs_cold": False,
                "input_sets": 1,
                "clock": "perf_counter",
                "gpu_before": None,
                "gpu_after": None,
                "label": f"{key} on cpu",
                "resume": False,
                "fingerprint": {"launch path": commit, "device code": "none (torch ops)", "environment": "synthetic"},
            }
        row |= {
            "params": self.params,
            "version": self.version,
            "started_at": measured_ms,
            "duration": 20.0,
            "profile": None,
        }
        document = {
            **self.template,
            "commit_hash": commit,
            "date": date_ms,
            "durations": {},
            "params": {**self.template["params"], "machine": self.spec.cpu_machine, "gpu": "none", "num_cpu": "2"},
            "results": {CPU_BENCHMARK: [row.get(c) for c in self.columns]},
        }
        stem = records.results_file_stem(commit, document["env_name"])
        folder = f"results/{self.spec.cpu_machine}"
        return {
            f"{folder}/{stem}.json": _dumps(document),
            f"{folder}/{stem}{records.SUFFIX}": _dumps({"format": 1, "records": recs}),
        }
