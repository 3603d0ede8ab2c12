"""The gate's unit of evidence: one A process and one B process adjacent in time (a round).

Higher TFLOPS is better: a round's ratio ``head / base < 1`` is a slowdown.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


def json_float(x: float) -> float | None:
    """JSON has no inf/nan: an unbounded end or a missing point is null."""
    return float(x) if math.isfinite(x) else None


@dataclass(frozen=True)
class Round:
    """One A process and one B process adjacent in time, for one benchmark.

    ``base`` and ``head`` are TFLOPS (each the median of its process's timed launches). ``excluded`` is the caller's
    reason for keeping the round out of the estimate (``"throttled: HW_SLOWDOWN"``,
    ``"sm clock 1410 < floor 1800 MHz"``); an excluded round may carry non-finite figures (its process failed).
    """

    base: float
    head: float
    excluded: str | None = None
    # The variance of log(head / base) from the two timings' own samples (timing_variance of each side, summed): the
    # least a round's log ratio can vary, whatever the workers do. None: not known (a record without samples).
    sampling_var: float | None = None

    def __post_init__(self) -> None:
        if self.excluded is not None:
            if not str(self.excluded).strip():
                raise ValueError("Round.excluded needs a reason, not an empty string")
            return
        for name in ("base", "head"):
            value = getattr(self, name)
            try:
                ok = math.isfinite(float(value)) and float(value) > 0
            except (TypeError, ValueError):
                ok = False
            if not ok:
                raise ValueError(
                    f"Round.{name} must be a finite TFLOPS figure > 0 (got {value!r}); mark the round excluded instead"
                )

    @property
    def ratio(self) -> float:
        """head / base TFLOPS; < 1 is a slowdown. NaN when an excluded round has no figures."""
        try:
            return float(self.head) / float(self.base)
        except (ZeroDivisionError, TypeError):
            return math.nan

    def to_json(self) -> dict[str, Any]:
        out = {
            "base": json_float(self.base),
            "head": json_float(self.head),
            "ratio": json_float(self.ratio),
            "excluded": self.excluded,
        }
        if self.sampling_var is not None:
            out["sampling_var"] = json_float(self.sampling_var)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Round:
        base = data.get("base")
        head = data.get("head")
        sampling = data.get("sampling_var")
        return cls(
            math.nan if base is None else float(base),
            math.nan if head is None else float(head),
            data.get("excluded"),
            None if sampling is None else float(sampling),
        )


def timing_variance(samples: Sequence[float]) -> float | None:
    """The variance of the log of a timing's median from its own samples: ``(pi / 2) s^2 / n``, the large-sample
    variance of a median, with ``s`` the samples' robust SD on the log scale (1.4826 MAD). None for fewer than 3
    samples or a non-positive one.

    Why: timings are quantized (CUDA events tick in ~0.5 us), so two worker generations can give the same log ratio to
    5e-7 (an H100's recorded rounds: 6 of 20 Triton benchmarks had such a pair among 27 generations), and a variance
    estimated from two generation means then claims a precision no timing had. This is a floor under that estimate.
    """
    if len(samples) < 3 or min(samples) <= 0:
        return None
    logs = sorted(math.log(x) for x in samples)
    n = len(logs)
    mid = logs[n // 2] if n % 2 else 0.5 * (logs[n // 2 - 1] + logs[n // 2])
    mad = sorted(abs(x - mid) for x in logs)
    m = mad[n // 2] if n % 2 else 0.5 * (mad[n // 2 - 1] + mad[n // 2])
    # The timer's tick (the least gap between distinct samples) bounds how well a median is known even where half the
    # samples repeat exactly (MAD 0): a uniform rounding error, tick^2 / 12.
    gaps = [b - a for a, b in zip(logs, logs[1:]) if b > a]
    tick = min(gaps) if gaps else 0.0
    return (math.pi / 2.0) * (1.4826 * m) ** 2 / n + tick * tick / 12.0
