"""The sequential plan: when the gate looks, what each look may spend, and the decision over the looks.

The gate looks at planned usable-round counts and stops at the first look whose
interval (harness.paired.interval) clears the band. Each of the ``K`` looks spends
``alpha / K`` (Bonferroni), so every interval the gate computes covers the true
ratio together with probability ``>= 1 - alpha``, whichever look it stops at.
Three rules (issue 21; a plan recorded before a rule replays without it;
docs/SPEED_GATE.md "Sequential looks" has the derivations and the rates):

- ``alpha_per_tail``: a false "regression" needs the interval wholly below the
  truth, a missed one wholly above: at ``1 - 2 alpha / K`` two-sided each has
  ``alpha / K`` per look, so an unchanged head fails with probability ``<= alpha``.
- ``futility``: stop early as "inconclusive (at the threshold edge)" when the last
  look, centred at today's mean with a *low* (10%) bound of today's spread, could
  still not tell the effect from the band's edge. It never adds a false regression.
- ``miss_alpha``: "no change" is decided on its own (narrower) interval at
  ``1 - 2 miss_alpha / K``, per benchmark, while "regression" and "improvement" keep
  the false-alarm interval of the per-PR alpha: a real regression of the threshold or
  more is called "no change" (or "improvement", a subset) w.p. ``<= miss_alpha``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

import math

import numpy as np
from scipy import stats

from harness.paired.interval import Estimate, half_width, log_ratios, look_interval
from harness.paired.rounds import Round
from harness.paired.verdict import Verdict, check_threshold, decide

# The record's plan "method": the t interval is the only one since issue 28. A record whose plan names
# another ("signed_rank", or none: before issue 21) was decided by a retired plan (ci.speed.verdict.plan_of).
METHOD = "t"


@dataclass(frozen=True)
class SequentialPlan:
    """When the gate looks and how much error each look may spend; the defaults are the gate's plan (:data:`WARM_PLAN`).

    ``looks`` is either the number of looks, spread evenly from ``min_rounds`` to
    ``max_rounds`` (both included), or the explicit tuple of usable-round counts.
    Round counts are of *usable* rounds: excluded rounds do not advance a look
    (the orchestrator caps the rounds it attempts). ``alpha`` is the family-wise
    error: each look's interval has confidence ``1 - alpha / K`` for ``K`` looks
    (``1 - 2 alpha / K`` with ``alpha_per_tail``: Bonferroni), so all intervals cover
    the true ratio together with probability ``>= 1 - alpha``. Bonferroni is
    conservative here (the looks share rounds) but needs no assumption about how
    the looks' intervals are correlated. ``miss_alpha`` (None: ``alpha``) bounds a
    missed regression on its own; it needs ``alpha_per_tail`` and is at least
    ``alpha`` (see the module doc).
    """

    min_rounds: int = 5
    max_rounds: int = 20
    # Five looks (version 4): a benchmark that just misses a look does not wait twice as long for the next one.
    looks: int | tuple[int, ...] = (5, 7, 10, 14, 20)
    alpha: float = 0.01  # ci.speed.options shares the per-PR alpha over the gated benchmarks (with_alpha)
    alpha_per_tail: bool = True  # alpha bounds a false regression and a missed one each (see the module doc)
    futility: bool = True  # stop early when the last look could not tell the effect from the band's edge
    # "No change" decided on a miss interval at 1% per benchmark, not split over the gated benchmarks (version 4).
    miss_alpha: float | None = 0.01

    def __post_init__(self) -> None:
        if not 1 <= self.min_rounds <= self.max_rounds:
            raise ValueError(f"need 1 <= min_rounds <= max_rounds (got {self.min_rounds}, {self.max_rounds})")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1) (got {self.alpha})")
        points = self.look_points
        if isinstance(self.looks, tuple):
            if list(points) != sorted(set(points)) or points[0] < self.min_rounds or points[-1] != self.max_rounds:
                raise ValueError(f"looks {self.looks} must increase strictly from >= min_rounds to max_rounds ({self.min_rounds}..{self.max_rounds})")
        elif self.looks < 1:
            raise ValueError(f"looks must be >= 1 (got {self.looks})")
        if not self.per_look_alpha < 1:
            raise ValueError(f"alpha {self.alpha} per tail over {len(points)} look(s) leaves no interval: need alpha < {len(points) / 2:g}")
        self._check_miss_alpha()
        if points[0] < 2:
            raise ValueError(f"the first look at {points[0]} rounds can never decide: a t interval needs >= 2 rounds "
                             "(one gives no spread); raise min_rounds")

    def _check_miss_alpha(self) -> None:
        if self.miss_alpha is None:
            return
        if not 0 < self.miss_alpha < 1:  # NaN fails this too
            raise ValueError(f"miss_alpha must be in (0, 1) (got {self.miss_alpha})")
        if self.miss_alpha < self.alpha:
            # A miss interval wider than the false-alarm one would make "no change" harder than "regression" to reach.
            raise ValueError(f"miss_alpha {self.miss_alpha} is below alpha {self.alpha}: need miss_alpha >= alpha")
        if not self.alpha_per_tail:
            raise ValueError("miss_alpha bounds one tail (a missed regression): it needs alpha_per_tail")
        if not self.per_look_miss_alpha < 1:
            raise ValueError(f"miss_alpha {self.miss_alpha} per tail over {len(self.look_points)} look(s) leaves no interval: "
                             f"need miss_alpha < {len(self.look_points) / 2:g}")

    @property
    def look_points(self) -> tuple[int, ...]:
        """Usable-round counts at which the gate computes an interval."""
        if isinstance(self.looks, tuple):
            return tuple(int(x) for x in self.looks)
        if self.looks == 1 or self.min_rounds == self.max_rounds:
            return (self.max_rounds,)
        raw = np.linspace(self.min_rounds, self.max_rounds, self.looks)
        return tuple(sorted({int(round(x)) for x in raw}))

    @property
    def per_look_alpha(self) -> float:
        """The two-sided miss probability of each look's interval."""
        return self._per_look(self.alpha)

    def _per_look(self, alpha: float) -> float:
        """``alpha`` (over all looks) as each look's two-sided miss probability: Bonferroni, per tail or not."""
        return (2.0 if self.alpha_per_tail else 1.0) * alpha / len(self.look_points)

    @property
    def per_look_confidence(self) -> float:
        """The false-alarm interval's confidence: "regression" and "improvement" are decided on it."""
        return 1.0 - self.per_look_alpha

    @property
    def miss_side_alpha(self) -> float:
        """The bound on a missed regression (of the threshold or more called "no change") over the looks."""
        return self.alpha if self.miss_alpha is None else self.miss_alpha

    @property
    def per_look_miss_alpha(self) -> float:
        """The two-sided miss probability of each look's miss interval (the one "no change" is decided on)."""
        return self._per_look(self.miss_side_alpha)

    @property
    def per_look_miss_confidence(self) -> float:
        return 1.0 - self.per_look_miss_alpha

    def with_alpha(self, alpha: float) -> "SequentialPlan":
        """This plan at false-alarm ``alpha``, its miss alpha raised to ``alpha`` where below it.

        A miss interval is never wider than the false-alarm one: a larger per-benchmark
        ``alpha`` (``--plan alpha=0.05``, or a per-PR alpha over few benchmarks) takes the miss alpha with it.
        """
        miss = None if self.miss_alpha is None else max(self.miss_alpha, alpha)
        return replace(self, alpha=alpha, miss_alpha=miss)

    def error_control(self) -> str:
        """How the plan spends its error, in words (the record's ``error_control``)."""
        text = "bonferroni over looks" + (", alpha per tail" if self.alpha_per_tail else "")
        if self.miss_alpha is not None:
            text += f", miss alpha {self.miss_alpha:g} (a missed regression, per benchmark; 'no change' decided on it)"
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "min_rounds": self.min_rounds,
            "max_rounds": self.max_rounds,
            "look_points": list(self.look_points),
            "alpha": self.alpha,
            "per_look_confidence": self.per_look_confidence,
            "error_control": self.error_control(),
            "method": METHOD,
            "alpha_per_tail": self.alpha_per_tail,
            "futility": self.futility,
            "miss_alpha": self.miss_alpha,
            "per_look_miss_confidence": self.per_look_miss_confidence,
        }


# The gate's plan (version 4 of the warm plan): warm workers make a round cheap (two timings, no process
# start), so it decides as soon as the t interval can and gives up early on an effect at the band's edge
# (docs/SPEED_GATE.md: its simulated and measured rates; docs/PERF_NOTES.md: versions 1-3).
WARM_PLAN = SequentialPlan()


def look_verdict(ratios: Sequence[float], threshold: float, plan: SequentialPlan) -> tuple[Verdict, Estimate, Estimate]:
    """One look's verdict, the interval it was decided on, and the false-alarm interval (futility's).

    "Regression" and "improvement" need the false-alarm interval; "no change" needs
    the miss interval (the same interval when the plan has no ``miss_alpha``).
    """
    false_alarm = look_interval(ratios, plan.per_look_confidence)
    verdict = decide(false_alarm, threshold)
    if verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT) or plan.miss_alpha is None:
        return verdict, false_alarm, false_alarm
    miss = look_interval(ratios, plan.per_look_miss_confidence)
    if decide(miss, threshold) is Verdict.NO_CHANGE:  # a narrower miss interval may say "regression": not its call
        return Verdict.NO_CHANGE, miss, false_alarm
    return Verdict.INCONCLUSIVE, false_alarm, false_alarm


@dataclass(frozen=True)
class Decision:
    """The gate's decision for one benchmark.

    ``complete`` is True when the gate may stop for this benchmark: a look cleared
    the band (``stopped_early`` when before the last look) or the last look was
    taken (inconclusive if it did not clear). While not complete, ``next_look`` is
    the usable-round count to reach before asking again, and ``estimate`` covers
    the usable rounds so far (for progress reports; not a look).
    ``rounds_used`` usable rounds and ``rounds_excluded`` excluded rounds make up
    the ``rounds_seen`` leading rounds the decision consumed.
    """

    verdict: Verdict
    estimate: Estimate
    rounds_used: int
    rounds_excluded: int
    stopped_early: bool
    reason: str
    threshold: float
    complete: bool
    next_look: int | None
    excluded_reasons: tuple[tuple[str, int], ...] = ()
    at_threshold_edge: bool = False  # stopped early by the plan's futility rule

    @property
    def rounds_seen(self) -> int:
        return self.rounds_used + self.rounds_excluded

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.value,
            "estimate": self.estimate.to_json(),
            "threshold": self.threshold,
            "band": [1.0 - self.threshold, 1.0 + self.threshold],
            "higher_is_better": True,
            "rounds_used": self.rounds_used,
            "rounds_excluded": self.rounds_excluded,
            "excluded_reasons": dict(self.excluded_reasons),
            "stopped_early": self.stopped_early,
            "complete": self.complete,
            "next_look": self.next_look,
            "reason": self.reason,
            "at_threshold_edge": self.at_threshold_edge,
        }


def next_look(rounds_so_far: int, plan: SequentialPlan) -> int | None:
    """The first planned look after ``rounds_so_far`` usable rounds, or None past the last.

    Pure schedule; :func:`sequential_decision` says whether a look already decided
    (its ``complete`` / ``next_look`` fields are what an orchestrator loops on).
    """
    for point in plan.look_points:
        if point > rounds_so_far:
            return point
    return None


def futile_edge(ratios: Sequence[float], now: Estimate, threshold: float, plan: SequentialPlan) -> float | None:
    """The band edge (as a ratio) that the last look could not tell the effect from, or None.

    ``now`` is this look's interval over ``ratios``.
    The last look's half-width is predicted from a low (10%) confidence bound of
    the spread so far: if the real spread is larger the last look is wider still,
    so the prediction errs towards going on. Only an interval that straddles one
    edge (not both) can be futile: one wider than the band has not seen enough.
    """
    d = log_ratios(ratios)
    n, last = int(d.size), plan.look_points[-1]
    if n < 3 or n >= last:
        return None
    mean, sd = float(np.mean(d)), float(np.std(d, ddof=1))
    sd_low = sd * math.sqrt(float(stats.chi2.ppf(0.10, n - 1)) / (n - 1))
    half_last = half_width(sd_low, last, plan.per_look_confidence)
    edges = [e for e in (1.0 - threshold, 1.0 + threshold) if now.low < e < now.high]
    if len(edges) != 1:
        return None
    edge = edges[0]
    return edge if abs(mean - math.log(edge)) < half_last else None


def _fmt_interval(est: Estimate) -> str:
    if not est.bounded:
        return f"mean {est.point:.4f}, interval unbounded at {est.n} rounds"
    return f"mean {est.point:.4f}, {est.confidence:.2%} interval [{est.low:.4f}, {est.high:.4f}]"


def sequential_decision(rounds: Sequence[Round], threshold: float, plan: SequentialPlan = WARM_PLAN) -> Decision:
    """Replay the gate's planned looks over ``rounds`` (in time order) and decide.

    At each look point ``m`` the interval of the first ``m`` usable rounds is
    computed at ``plan.per_look_confidence`` (and, for "no change", at
    ``plan.per_look_miss_confidence``: :func:`look_verdict`); the first look that gives
    regression / improvement / no change stops the gate. Usable rounds beyond
    the stopping look (or beyond ``max_rounds``) are ignored, so handing this the
    whole record or a growing prefix gives the same decision.
    """
    check_threshold(threshold)
    ratios: list[float] = []
    positions: list[int] = []  # index in `rounds` of each usable round
    for pos, rnd in enumerate(rounds):
        if rnd.excluded is None:
            ratios.append(rnd.ratio)
            positions.append(pos)

    def excluded_before(end: int) -> tuple[int, tuple[tuple[str, int], ...]]:
        reasons: dict[str, int] = {}
        for rnd in rounds[:end]:
            if rnd.excluded is not None:
                reasons[rnd.excluded] = reasons.get(rnd.excluded, 0) + 1
        return sum(reasons.values()), tuple(sorted(reasons.items()))

    usable = len(ratios)
    points = plan.look_points
    est: Estimate | None = None
    for look_no, m in enumerate(points, start=1):
        if m > usable:
            break
        verdict, est, false_alarm = look_verdict(ratios[:m], threshold, plan)
        last = look_no == len(points)
        if verdict is not Verdict.INCONCLUSIVE or last:
            n_excl, reasons = excluded_before(positions[m - 1] + 1)
            band = f"band [{1 - threshold:.4f}, {1 + threshold:.4f}]"
            if verdict is Verdict.INCONCLUSIVE:
                why = f"{_fmt_interval(est)} straddles an edge of the {band} after all {m} planned rounds"
            else:
                where = "below" if verdict is Verdict.REGRESSION else "above" if verdict is Verdict.IMPROVEMENT else "inside"
                why = f"{_fmt_interval(est)} lies {where} the {band} at look {look_no}/{len(points)} ({m} rounds)"
            return Decision(verdict, est, m, n_excl, not last, why, threshold, True, None, reasons)
        # Futility asks of the false-alarm interval, as before the miss alpha: giving up on the narrower
        # miss interval too would need its own prediction, and stopping as inconclusive adds no wrong verdict.
        edge = futile_edge(ratios[:m], false_alarm, threshold, plan) if plan.futility else None
        if edge is not None:
            n_excl, reasons = excluded_before(positions[m - 1] + 1)
            why = (f"{_fmt_interval(est)} straddles the band edge {edge:.4f} at look {look_no}/{len(points)} ({m} rounds), "
                   f"and {points[-1]} rounds could not tell the effect from that edge: stopped, inconclusive (at the threshold edge)")
            return Decision(verdict, est, m, n_excl, True, why, threshold, True, None, reasons, at_threshold_edge=True)
    # Not enough usable rounds for the next look: report progress, keep going.
    pending = next_look(usable, plan)
    assert pending is not None
    progress = look_interval(ratios[: plan.max_rounds], plan.per_look_confidence)
    n_excl, reasons = excluded_before(len(rounds))
    why = f"{usable} usable rounds; next look at {pending}"
    return Decision(Verdict.INCONCLUSIVE, progress, usable, n_excl, False, why, threshold, False, pending, reasons)

