"""One interval against the threshold band ``[1 - t, 1 + t]``: the gate's answer for a benchmark.

Interval entirely below ``1 - t`` -> regression, entirely above ``1 + t`` -> improvement, entirely inside -> no change,
otherwise (an unbounded interval included) inconclusive. Higher TFLOPS is better.
"""

from __future__ import annotations

import enum

from harness.paired.interval import Estimate


class Verdict(str, enum.Enum):
    """The gate's answer for one benchmark. Higher TFLOPS is better."""

    REGRESSION = "regression"  # head slower than base by more than the threshold, with confidence
    IMPROVEMENT = "improvement"  # head faster than base by more than the threshold, with confidence
    NO_CHANGE = "no change"  # any change is inside the threshold band (version 7: within +-t/2), with confidence
    # Version 7 (the zone rule): not slower by t with confidence, but not shown to be within +-t/2 either.
    NOT_REGRESSION = "not a regression"
    INCONCLUSIVE = "inconclusive"  # the interval straddles a band edge (or does not exist yet)

    def __str__(self) -> str:
        return self.value


def check_threshold(threshold: float) -> None:
    if not 0 < threshold < 1:
        raise ValueError(f"threshold is a fraction in (0, 1), e.g. 0.01 for 1% (got {threshold})")


def decide(est: Estimate, threshold: float) -> Verdict:
    """Verdict of one interval against the band ``[1 - threshold, 1 + threshold]`` (the module's table)."""
    check_threshold(threshold)
    if not est.bounded:
        return Verdict.INCONCLUSIVE
    lo_band, hi_band = 1.0 - threshold, 1.0 + threshold
    if est.high < lo_band:
        return Verdict.REGRESSION
    if est.low > hi_band:
        return Verdict.IMPROVEMENT
    if est.low >= lo_band and est.high <= hi_band:
        return Verdict.NO_CHANGE
    return Verdict.INCONCLUSIVE
