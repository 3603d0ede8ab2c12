"""The decision over the plan's looks (harness.paired.plan): it stops at the first look whose interval clears the band.

Bonferroni over the looks, the rules (``alpha_per_tail``, ``futility``, ``miss_alpha``) and the model's intervals:
docs/SPEED_GATE.md, "Sequential looks"; a plan recorded before a rule replays without it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from harness.paired.interval import Estimate, log_ratios, look_interval, model_interval, t_quantile
from harness.paired.noise import BenchmarkNoise, LookNoise, Spread, generation_sizes, within_ss
from harness.paired.plan import METHOD as METHOD  # the record's plan method (ci.speed.decide.verdict)
from harness.paired.plan import WARM_PLAN, SequentialPlan
from harness.paired.rounds import Round
from harness.paired.verdict import Verdict, check_threshold, decide
from harness.paired.zone import ZoneEdges, improved, zone_look


@dataclass(frozen=True)
class RoundsNoise:
    """The noise model's view of one benchmark's rounds: what interval.model_interval needs at each look.

    ``generations`` has one worker generation per round of the rounds decided on (excluded ones
    included, so the two align). ``fallback_from``: the index of the first round at whose end the
    run's guard had fired (harness.paired.noise_guard; it stays fired), None when it never did.
    """

    noise: BenchmarkNoise | None  # None: no model entry (the zone rule still needs the generations)
    spread: Spread
    generations: tuple[int, ...]
    fallback_from: int | None = None
    cadence: int = 4  # the model's calibration cadence (rounds per worker generation; a model file's restart_every)

    def look(self, last_round: int) -> LookNoise | None:
        """The model for a look whose last round is ``last_round`` (an index into the rounds); None without an entry."""
        if self.noise is None:
            return None
        fallback = self.fallback_from is not None and last_round >= self.fallback_from
        return LookNoise(self.noise, self.spread, fallback, self.cadence)


def _interval(
    ratios: Sequence[float], confidence: float, look: LookNoise | None, generations: Sequence[int]
) -> Estimate:
    return look_interval(ratios, confidence) if look is None else model_interval(ratios, generations, confidence, look)


def look_verdict(
    ratios: Sequence[float],
    threshold: float,
    plan: SequentialPlan,
    look_no: int = 0,
    look: LookNoise | None = None,
    generations: Sequence[int] = (),
) -> tuple[Verdict, Estimate, Estimate]:
    """One look's verdict, the interval it was decided on, and the false-alarm interval (futility's).

    ``look_no`` is the look's index (0-based: its share of alpha). "Regression" and "improvement"
    need the false-alarm interval; "no change" needs the miss interval (the same interval when the
    plan has no ``miss_alpha``). ``look``: the noise model's view (None: the rounds' own t interval).
    """
    false_alarm = _interval(ratios, plan.confidence_at(look_no), look, generations)
    verdict = decide(false_alarm, threshold)
    if verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT) or plan.miss_alpha is None:
        return verdict, false_alarm, false_alarm
    miss = _interval(ratios, plan.miss_confidence_at(look_no), look, generations)
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
    variance: str = "rounds"  # where the interval's variance came from (sequential.variance_source)
    rule: str = "band"  # the plan's rule; "zone": version 6 (harness.paired.zone)
    forced_error: float | None = None  # zone: the last look's forced call, its error at the zone's edges
    too_noisy: bool = False  # zone: the last look could not decide (inconclusive: the measurement failed)

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
            "variance": self.variance,
            **(
                {
                    "rule": self.rule,
                    "zone": [1.0 - self.threshold, 1.0 - self.threshold / 2.0],
                    "forced_error": self.forced_error,
                    "too_noisy": self.too_noisy,
                }
                if self.rule == "zone"
                else {}
            ),
        }


def next_look(rounds_so_far: int, plan: SequentialPlan) -> int | None:
    """The first planned look after ``rounds_so_far`` usable rounds, or None past the last.

    Pure schedule; :func:`sequential_decision` says whether a look already decided
    (its ``complete`` / ``next_look`` fields are what an orchestrator loops on).
    """
    return next((point for point in plan.look_points if point > rounds_so_far), None)


def futile_edge(
    ratios: Sequence[float],
    now: Estimate,
    threshold: float,
    plan: SequentialPlan,
    look: LookNoise | None = None,
    generations: Sequence[int] = (),
) -> float | None:
    """The band edge (as a ratio) that the last look could not tell the effect from, or None.

    ``now`` is this look's interval over ``ratios``.
    The last look's half-width is predicted from a low (10%) confidence bound of
    the spread so far: if the real spread is larger the last look is wider still,
    so the prediction errs towards going on. With the noise model (``look``), the spread is
    the look's moderated within variance (its low bound at its df) and the between-worker
    share shrinks as the generations grow in number. Only an interval that straddles one
    edge (not both) can be futile: one wider than the band has not seen enough.
    """
    d = log_ratios(ratios)
    n, last = int(d.size), plan.look_points[-1]
    if n < 3 or n >= last:
        return None
    mean = float(np.mean(d))
    if look is None:
        sd = float(np.std(d, ddof=1))
        sd_low = sd * math.sqrt(float(stats.chi2.ppf(0.10, n - 1)) / (n - 1))
        half_last = t_quantile(plan.per_look_confidence, last - 1) * (sd_low / math.sqrt(last))
    else:
        within, df = look.within(*within_ss(d, generations))
        if not math.isfinite(within):
            return None
        low = within * float(stats.chi2.ppf(0.10, df)) / df
        size = n / len(generation_sizes(generations))  # rounds per worker generation so far, assumed to go on
        clustered = look.noise.between_sd**2 * min(1.0, size / last)
        half_last = t_quantile(plan.per_look_confidence, df) * math.sqrt(low / last + clustered)
    edges = [e for e in (1.0 - threshold, 1.0 + threshold) if now.low < e < now.high]
    if len(edges) != 1:
        return None
    edge = edges[0]
    return edge if abs(mean - math.log(edge)) < half_last else None


def _fmt_interval(est: Estimate) -> str:
    if not est.bounded:
        return f"mean {est.point:.4f}, interval unbounded at {est.n} rounds"
    return f"mean {est.point:.4f}, {est.confidence:.2%} interval [{est.low:.4f}, {est.high:.4f}]"


def variance_source(plan: SequentialPlan, noise: RoundsNoise | None, look: LookNoise | None) -> str:
    """Where the decision's variance came from, in the record's words (Decision.variance)."""
    if plan.variance != "model":
        return "rounds"
    if noise is None:
        return "rounds (no model entry)"
    return "rounds (the run is noisier than the model)" if look is not None and look.fallback else "model"


def sequential_decision(
    rounds: Sequence[Round], threshold: float, plan: SequentialPlan = WARM_PLAN, noise: RoundsNoise | None = None
) -> Decision:
    """Replay the gate's planned looks over ``rounds`` (in time order) and decide.

    At each look point ``m`` the interval of the first ``m`` usable rounds decides (:func:`look_verdict`); the
    first look that gives regression / improvement / no change stops the gate. Usable rounds beyond the stopping
    look (or beyond ``max_rounds``) are ignored, so the whole record and a growing prefix give the same decision.
    With ``plan.variance == "model"`` and ``noise``, each look's interval is the noise model's (RoundsNoise).
    """
    check_threshold(threshold)
    if noise is not None and len(noise.generations) != len(rounds):
        raise ValueError(f"{len(rounds)} rounds but {len(noise.generations)} worker generations")
    if plan.rule == "zone":
        return zone_decision(rounds, threshold, plan, noise)
    model = noise if plan.variance == "model" else None
    positions = [pos for pos, rnd in enumerate(rounds) if rnd.excluded is None]  # index in `rounds` of each usable
    ratios = [rounds[pos].ratio for pos in positions]
    gens = [model.generations[p] for p in positions] if model is not None else []
    points = plan.look_points
    for look_no, m in enumerate(points):
        if m > len(ratios):
            break
        look = model.look(positions[m - 1]) if model is not None else None
        verdict, est, false_alarm = look_verdict(ratios[:m], threshold, plan, look_no, look, gens[:m])
        last = look_no == len(points) - 1
        source = variance_source(plan, noise, look)
        at = f"look {look_no + 1}/{len(points)} ({m} rounds)"
        if verdict is not Verdict.INCONCLUSIVE or last:
            band = f"band [{1 - threshold:.4f}, {1 + threshold:.4f}]"
            if verdict is Verdict.INCONCLUSIVE:
                why = f"{_fmt_interval(est)} straddles an edge of the {band} after all {m} planned rounds"
            else:
                where = {Verdict.REGRESSION: "below", Verdict.IMPROVEMENT: "above", Verdict.NO_CHANGE: "inside"}
                why = f"{_fmt_interval(est)} lies {where[verdict]} the {band} at {at}"
            return _decided(rounds, positions[m - 1] + 1, threshold, verdict, est, m, not last, why, variance=source)
        # Futility asks of the false-alarm interval, as before the miss alpha: giving up on the narrower
        # miss interval too would need its own prediction, and stopping as inconclusive adds no wrong verdict.
        edge = futile_edge(ratios[:m], false_alarm, threshold, plan, look, gens[:m]) if plan.futility else None
        if edge is not None:
            why = (
                f"{_fmt_interval(est)} straddles the band edge {edge:.4f} at {at}, and {points[-1]} rounds could "
                "not tell the effect from that edge: stopped, inconclusive (at the threshold edge)"
            )
            end = positions[m - 1] + 1
            return _decided(rounds, end, threshold, verdict, est, m, True, why, at_threshold_edge=True, variance=source)
    seen = min(len(ratios), plan.max_rounds)
    look = model.look(positions[seen - 1]) if model is not None and seen else None
    progress = _interval(ratios[:seen], plan.per_look_confidence, look, gens[:seen])
    return _waiting(rounds, len(ratios), threshold, plan, progress, variance=variance_source(plan, noise, look))


def _decided(
    rounds: Sequence[Round],
    end: int,
    threshold: float,
    verdict: Verdict,
    est: Estimate,
    used: int,
    stopped_early: bool,
    why: str,
    pending: int | None = None,
    **extra: Any,
) -> Decision:
    """The decision on ``used`` usable rounds of ``rounds[:end]``; complete unless a look is ``pending``."""
    reasons = Counter(rnd.excluded for rnd in rounds[:end] if rnd.excluded is not None)
    excluded = tuple(sorted(reasons.items()))
    complete = pending is None
    return Decision(
        verdict, est, used, sum(reasons.values()), stopped_early, why, threshold, complete, pending, excluded, **extra
    )


def _waiting(
    rounds: Sequence[Round], usable: int, threshold: float, plan: SequentialPlan, progress: Estimate, **extra: Any
) -> Decision:
    """Not enough usable rounds for the next look: report progress (``progress``), keep going."""
    pending = next_look(usable, plan)
    assert pending is not None
    why = f"{usable} usable rounds; next look at {pending}"
    return _decided(
        rounds, len(rounds), threshold, Verdict.INCONCLUSIVE, progress, usable, False, why, pending, **extra
    )


def zone_decision(
    rounds: Sequence[Round], threshold: float, plan: SequentialPlan, noise: RoundsNoise | None
) -> Decision:
    """Version 6's decision over ``rounds`` (harness.paired.zone): regression or not, the last look deciding.

    ``noise`` carries the rounds' worker generations (and the model's entry when there is one; the
    plan's variance "rounds" ignores an entry). Without it each round is a generation of its own.
    "Improvement" and "no change" are the report's reading of a "not a regression".
    """
    usable = [(pos, rnd) for pos, rnd in enumerate(rounds) if rnd.excluded is None]
    gens_all = noise.generations if noise is not None else tuple(-1 - i for i in range(len(rounds)))
    model = noise if plan.variance == "model" and noise is not None and noise.noise is not None else None
    edges = ZoneEdges(threshold)
    points = plan.look_points
    zl = None
    for look_no, m in enumerate(points):
        if m > len(usable):
            break
        taken = usable[:m]
        d = log_ratios([rnd.ratio for _, rnd in taken])
        gens = [gens_all[pos] for pos, _ in taken]
        sampling = [rnd.sampling_var for _, rnd in taken]
        look = model.look(taken[-1][0]) if model is not None else None
        last = look_no == len(points) - 1
        zl = zone_look(d, gens, look, edges, plan, look_no, last, sampling=sampling)
        if zl.answer is None and not last:
            continue
        end = taken[-1][0] + 1
        est = zl.estimate(plan.confidence_at(look_no), m)
        where = f"look {look_no + 1}/{len(points)} ({m} rounds)"
        zone = f"zone [{1 - threshold:.4f}, {1 - threshold / 2:.4f}]"
        extra: dict[str, Any] = {"variance": zl.source, "rule": "zone", "forced_error": zl.forced_error}
        if zl.too_noisy:
            err = (
                ""
                if zl.forced_error is None
                else f" (a forced call would be wrong w.p. {zl.forced_error:.1%} at the zone's edges)"
            )
            why = (
                f"{_fmt_interval(est)}: too noisy to decide at the threshold in {m} rounds{err}: inconclusive, "
                "the measurement failed; re-run"
            )
            return _decided(rounds, end, threshold, Verdict.INCONCLUSIVE, est, m, False, why, too_noisy=True, **extra)
        if zl.answer == "regression":
            verdict = Verdict.REGRESSION
        elif improved(zl, edges, plan, look_no):
            verdict = Verdict.IMPROVEMENT
        elif plan.learn and not (est.bounded and 1 - threshold / 2 <= est.low and est.high <= 1 + threshold / 2):
            verdict = Verdict.NOT_REGRESSION  # version 7: "no change" only where the interval shown is within +-t/2
        else:
            verdict = Verdict.NO_CHANGE
        if zl.forced_error is not None:
            side = "below" if verdict is Verdict.REGRESSION else "above"
            why = (
                f"{_fmt_interval(est)}: the mean lies {side} the {zone}'s midpoint at the last look, {where}; "
                f"this forced call is wrong w.p. <= {zl.forced_error:.2%} at the zone's edges"
            )
        elif verdict is Verdict.REGRESSION:
            why = (
                f"{_fmt_interval(est)}: slower than {1 - threshold / 2:.4f} with confidence at {where}: "
                f"a regression (the {zone})"
            )
        else:
            why = (
                f"{_fmt_interval(est)}: not slower than {1 - threshold:.4f} with confidence at {where}: "
                f"not a regression (the {zone})"
            )
        return _decided(rounds, end, threshold, verdict, est, m, not last, why, **extra)
    seen = min(len(usable), plan.max_rounds)
    if zl is not None:
        progress = zl.estimate(plan.per_look_confidence, seen)
        source = zl.source
    else:
        progress = look_interval([rnd.ratio for _, rnd in usable[:seen]], plan.per_look_confidence)
        source = "model" if model is not None else "rounds"
    return _waiting(rounds, len(usable), threshold, plan, progress, variance=source, rule="zone")
