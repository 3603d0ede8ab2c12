"""What a timing is asked for (:class:`TimingBudget`) and what it returns (:class:`Timing`, with its statistics)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class TimingBudget:
    warmup_ms: float = 200.0  # minimum warm-up
    max_warmup_ms: float = 3000.0  # give up waiting for steady timings (recorded as steady=False)
    steady_tolerance: float = 0.03  # three warm-up chunks within 3% of each other = steady
    rep_ms: float = 500.0  # target total time of the timed launches
    min_reps: int = 10
    max_reps: int = 2000
    chunk_ms: float = 5.0  # warm-up chunks last at least this long (amortizes the sync)


@dataclass(frozen=True)
class Timing:
    samples_s: tuple[float, ...]  # one per timed launch
    flops: int  # of one launch
    device: str
    clock: str  # "device events" | "perf_counter"
    input_sets: int
    inputs_cold: bool  # rotation covers more bytes than the last-level cache
    warmup_launches: int
    warmup_s: float
    steady: bool
    label: str = ""
    gpu_before: dict[str, Any] | None = None
    gpu_after: dict[str, Any] | None = None
    idle: dict[str, Any] | None = None

    @property
    def median_s(self) -> float:
        return _quantile(sorted(self.samples_s), 0.5)

    @property
    def q25_s(self) -> float:
        return _quantile(sorted(self.samples_s), 0.25)

    @property
    def q75_s(self) -> float:
        return _quantile(sorted(self.samples_s), 0.75)

    @property
    def mad_s(self) -> float:
        median = self.median_s
        return _quantile(sorted(abs(s - median) for s in self.samples_s), 0.5)

    @property
    def relative_iqr(self) -> float:
        return (self.q75_s - self.q25_s) / self.median_s

    @property
    def tflops(self) -> float:
        return self.flops / self.median_s / 1e12

    def asv_samples(self) -> dict[str, Any]:
        """The samples in asv's result format: asv then keeps them and computes its statistics."""
        return {"samples": list(self.samples_s), "number": 1}

    def summary(self) -> str:
        text = (
            f"{self.label or 'timing'}: median {self.median_s * 1e3:.4g} ms "
            f"(IQR {self.relative_iqr * 100:.1f}%, n={len(self.samples_s)}), {self.tflops:.4g} TFLOPS, "
            f"{self.input_sets} input sets{'' if self.inputs_cold else ' (may be cache resident)'}, "
            f"warm-up {self.warmup_launches} launches{'' if self.steady else ' NOT STEADY'}"
        )
        for when, state in (("before", self.gpu_before), ("after", self.gpu_after)):
            if state:
                text += (
                    f"; {when}: SM {state.get('sm_clock_mhz')} MHz, {state.get('temperature_c')} C, "
                    f"{state.get('power_w')} W"
                )
        if self.idle and self.idle.get("status") == "overridden":
            text += f"; IDLE CHECK OVERRIDDEN: {'; '.join(self.idle.get('problems', []))}"
        return text

    def to_json(self) -> dict[str, Any]:
        stats = dict(median_s=self.median_s, q25_s=self.q25_s, q75_s=self.q75_s, mad_s=self.mad_s, tflops=self.tflops)
        return asdict(self) | {"samples_s": list(self.samples_s)} | stats


def _quantile(ordered: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile of sorted data (numpy's default method)."""
    if not ordered:
        raise ValueError("no samples")
    position = q * (len(ordered) - 1)
    lo = math.floor(position)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (position - lo)
