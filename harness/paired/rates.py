"""Verdict rates over many gate decisions, and replaying the gate over a recorded run of rounds."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import replace as _replace
from typing import Any

import numpy as np

from harness.paired.rounds import Round
from harness.paired.sequential import WARM_PLAN, Decision, RoundsNoise, SequentialPlan, sequential_decision
from harness.paired.verdict import Verdict, check_threshold


@dataclass(frozen=True)
class Rates:
    """Verdict counts over many decisions, and what it took to reach them."""

    counts: tuple[tuple[str, int], ...]
    decisions: int
    mean_rounds: float
    stopped_early: int
    params: tuple[tuple[str, Any], ...] = ()
    incomplete: int = 0  # replay only: decisions the record ran out of rounds for

    def rate(self, verdict: Verdict | str) -> float:
        return dict(self.counts).get(Verdict(verdict).value, 0) / self.decisions if self.decisions else math.nan

    def to_json(self) -> dict[str, Any]:
        return {
            "decisions": self.decisions,
            "counts": dict(self.counts),
            "rates": {v.value: self.rate(v) for v in Verdict},
            "mean_rounds": self.mean_rounds,
            "stopped_early": self.stopped_early,
            "incomplete": self.incomplete,
            "params": dict(self.params),
        }


def rates_of(decisions: Sequence[Decision], params: dict[str, Any], incomplete: int = 0) -> Rates:
    """Count the verdicts of ``decisions``; ``params`` records what produced them."""
    counts = {v.value: sum(d.verdict is v for d in decisions) for v in Verdict}
    mean_rounds = float(np.mean([d.rounds_used for d in decisions])) if decisions else math.nan
    return Rates(
        tuple(counts.items()),
        len(decisions),
        mean_rounds,
        sum(d.stopped_early for d in decisions),
        tuple(params.items()),
        incomplete,
    )


def replay(
    recorded_rounds: Sequence[Round],
    threshold: float,
    plan: SequentialPlan = WARM_PLAN,
    decisions: int = 10,
    noise: RoundsNoise | None = None,
) -> tuple[Rates, list[Decision]]:
    """Take ``decisions`` gate decisions from recorded rounds, through the gate's own statistics.

    The rounds are consumed in time order, each decision taking the rounds its sequential plan needs (as repeated live
    gate runs would), so no round serves two decisions. When the record runs out first, the shortfall is reported in
    ``Rates.incomplete`` (and those decisions are not counted): a short record is never padded or reshuffled.
    """
    check_threshold(threshold)
    if decisions < 1:
        raise ValueError(f"decisions must be >= 1 (got {decisions})")
    done: list[Decision] = []
    incomplete = 0
    start = 0
    for _ in range(decisions):
        part = None
        if noise is not None:
            fallback = None if noise.fallback_from is None else max(0, noise.fallback_from - start)
            part = _replace(noise, generations=noise.generations[start:], fallback_from=fallback)
        dec = sequential_decision(recorded_rounds[start:], threshold, plan, part)
        if not dec.complete:
            incomplete = decisions - len(done)
            break
        done.append(dec)
        start += dec.rounds_seen
    params = {
        "threshold": threshold,
        "plan": plan.look_points,
        "alpha": plan.alpha,
        "disjoint": True,
        "recorded_rounds": len(recorded_rounds),
    }
    return rates_of(done, params, incomplete), done
