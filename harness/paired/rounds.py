"""The gate's unit of evidence: one A process and one B process adjacent in time (a round).

Higher TFLOPS is better: a round's ratio ``head / base < 1`` is a slowdown.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
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
        return {
            "base": json_float(self.base),
            "head": json_float(self.head),
            "ratio": json_float(self.ratio),
            "excluded": self.excluded,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Round:
        base = data.get("base")
        head = data.get("head")
        return cls(
            math.nan if base is None else float(base), math.nan if head is None else float(head), data.get("excluded")
        )
