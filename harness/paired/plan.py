"""The gate's plan: when it looks, what each look may spend, and where a look's variance comes from.

The plans and why their numbers: docs/SPEED_GATE.md, "Sequential looks", "The noise model" and "Version 6: the zone".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

# The record's plan "method": the t interval is the only one since issue 28. A record whose plan names
# another ("signed_rank", or none: before issue 21) was decided by a retired plan (ci.speed.decide.verdict.plan_of).
METHOD = "t"
VARIANCE_SOURCES = ("rounds", "model")
# "band" (versions 1-5): an interval must clear the band [1 - t, 1 + t] on one side or lie inside it;
# "zone" (version 6, issue 37): regression or not, with an indifference zone (harness.paired.zone).
RULES = ("band", "zone")


@dataclass(frozen=True)
class SequentialPlan:
    """When the gate looks and how much error each look may spend; the defaults are :data:`WARM_PLAN`.

    ``looks`` is either the number of looks, spread evenly from ``min_rounds`` to
    ``max_rounds`` (both included), or the explicit tuple of usable-round counts.
    Round counts are of *usable* rounds: excluded rounds do not advance a look
    (the orchestrator caps the rounds it attempts). ``alpha`` is the family-wise
    error, spent over the looks by ``spending`` (None: equally, ``alpha / K`` each).
    ``miss_alpha`` (None: ``alpha``) bounds a missed regression on its own; it needs
    ``alpha_per_tail`` and is at least ``alpha``. ``variance`` says where a look's
    variance comes from: the benchmark's own rounds, or the runner's noise model.
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
    spending: tuple[float, ...] | None = None  # each look's share of alpha (and miss alpha); None: equal
    variance: str = "rounds"  # "rounds": each benchmark's own; "model": the runner's noise model (issue 29)
    guard_level: float = 0.05  # variance "model": the run's guard (noise_guard) fires in at most this share of runs
    rule: str = "band"  # "zone": version 6's decision (harness.paired.zone); the keys below are its own
    prior_df_cap: float | None = None  # zone: the model's within variance is worth at most this many df in one run
    between_floor: float = 0.0  # zone: the between-worker SD used is at least this times the within SD
    bench_check_level: float | None = None  # zone: a benchmark noisier than the model at this level uses its own rounds
    forced_limit: float = 0.05  # zone: the last look's forced call is made only when its error is at most this
    first_round_level: float | None = None  # zone: a generation's first round that differs at this level is left out
    # Version 7 (issue 46): a look's variance learned from this run's worker generations (cluster-robust), the model
    # only a prior worth at most prior_df_cap df, dropped when the generations disagree with it (two-sided, this level).
    learn: bool = False
    conflict_level: float = 0.01

    def __post_init__(self) -> None:
        if not 1 <= self.min_rounds <= self.max_rounds:
            raise ValueError(f"need 1 <= min_rounds <= max_rounds (got {self.min_rounds}, {self.max_rounds})")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1) (got {self.alpha})")
        points = self.look_points
        if isinstance(self.looks, tuple):
            if list(points) != sorted(set(points)) or points[0] < self.min_rounds or points[-1] != self.max_rounds:
                raise ValueError(
                    f"looks {self.looks} must increase strictly from >= min_rounds to max_rounds "
                    f"({self.min_rounds}..{self.max_rounds})"
                )
        elif self.looks < 1:
            raise ValueError(f"looks must be >= 1 (got {self.looks})")
        if self.spending is not None:
            if len(self.spending) != len(points):
                raise ValueError(f"spending {self.spending} needs one share per look ({len(points)} looks)")
            if not all(math.isfinite(w) and w > 0 for w in self.spending):
                raise ValueError(f"spending {self.spending}: every look's share must be > 0")
        if not max(self._per_look(self.alpha, k) for k in range(len(points))) < 1:
            raise ValueError(
                f"alpha {self.alpha} per tail over {len(points)} look(s) leaves no interval: "
                f"need alpha < {len(points) / 2:g}"
            )
        if self.miss_alpha is not None:
            if not 0 < self.miss_alpha < 1:  # NaN fails this too
                raise ValueError(f"miss_alpha must be in (0, 1) (got {self.miss_alpha})")
            if self.miss_alpha < self.alpha:
                # A miss interval wider than the false-alarm one would make "no change" harder than "regression".
                raise ValueError(f"miss_alpha {self.miss_alpha} is below alpha {self.alpha}: need miss_alpha >= alpha")
            if not self.alpha_per_tail:
                raise ValueError("miss_alpha bounds one tail (a missed regression): it needs alpha_per_tail")
            if not max(self._per_look(self.miss_alpha, k) for k in range(len(points))) < 1:
                raise ValueError(
                    f"miss_alpha {self.miss_alpha} per tail over {len(points)} look(s) leaves no interval: "
                    f"need miss_alpha < {len(points) / 2:g}"
                )
        if self.variance not in VARIANCE_SOURCES:
            raise ValueError(f"variance must be one of {VARIANCE_SOURCES} (got {self.variance!r})")
        if not 0 < self.guard_level < 1:
            raise ValueError(f"guard_level must be in (0, 1) (got {self.guard_level})")
        if self.rule not in RULES:
            raise ValueError(f"rule must be one of {RULES} (got {self.rule!r})")
        if self.rule == "zone":  # its keys' checks
            if self.futility:
                raise ValueError("the zone rule's last look always decides: futility does not apply (futility=False)")
            if self.prior_df_cap is not None and not self.prior_df_cap > 0:
                raise ValueError(f"prior_df_cap must be > 0 (got {self.prior_df_cap})")
            if not (math.isfinite(self.between_floor) and self.between_floor >= 0):
                raise ValueError(f"between_floor must be >= 0 (got {self.between_floor})")
            if self.bench_check_level is not None and not 0 < self.bench_check_level < 1:
                raise ValueError(f"bench_check_level must be in (0, 1) (got {self.bench_check_level})")
            if not 0 < self.forced_limit < 0.5:
                raise ValueError(f"forced_limit must be in (0, 0.5) (got {self.forced_limit})")
            if self.first_round_level is not None and not 0 < self.first_round_level < 1:
                raise ValueError(f"first_round_level must be in (0, 1) (got {self.first_round_level})")
            if not 0 < self.conflict_level < 1:
                raise ValueError(f"conflict_level must be in (0, 1) (got {self.conflict_level})")
            if self.learn and (self.between_floor or self.bench_check_level is not None):
                raise ValueError("a learned variance assumes no between/within ratio: between_floor=0, no bench check")
        elif self.learn:
            raise ValueError("learn (version 7's variance) is a key of the zone rule: rule=zone")
        if points[0] < 2:
            raise ValueError(
                f"the first look at {points[0]} rounds can never decide: a t interval needs >= 2 rounds "
                "(one gives no spread); raise min_rounds"
            )

    @property
    def look_points(self) -> tuple[int, ...]:
        """Usable-round counts at which the gate computes an interval."""
        if isinstance(self.looks, tuple):
            return tuple(int(x) for x in self.looks)
        if self.looks == 1 or self.min_rounds == self.max_rounds:
            return (self.max_rounds,)
        raw = np.linspace(self.min_rounds, self.max_rounds, self.looks)
        return tuple(sorted({int(round(x)) for x in raw}))

    def shares(self) -> tuple[float, ...]:
        """Each look's share of alpha (sums to 1)."""
        k = len(self.look_points)
        if self.spending is None:
            return (1.0 / k,) * k
        total = sum(self.spending)
        return tuple(w / total for w in self.spending)

    def _per_look(self, alpha: float, look: int) -> float:
        """``alpha`` (over all looks) as look ``look``'s (0-based) two-sided miss probability."""
        return (2.0 if self.alpha_per_tail else 1.0) * alpha * self.shares()[look]

    def confidence_at(self, look: int) -> float:
        """The false-alarm interval's confidence at look ``look`` (0-based): it decides "regression"/"improvement"."""
        return 1.0 - self._per_look(self.alpha, look)

    def miss_confidence_at(self, look: int) -> float:
        """The miss interval's confidence at look ``look`` (0-based): "no change" is decided on it."""
        return 1.0 - self._per_look(self.miss_side_alpha, look)

    @property
    def per_look_confidence(self) -> float:
        """The last look's false-alarm confidence (every look's, with equal spending): the planning figures' look."""
        return self.confidence_at(len(self.look_points) - 1)

    @property
    def miss_side_alpha(self) -> float:
        """The bound on a missed regression (of the threshold or more called "no change") over the looks."""
        return self.alpha if self.miss_alpha is None else self.miss_alpha

    @property
    def per_look_miss_confidence(self) -> float:
        """The last look's miss confidence (every look's, with equal spending)."""
        return self.miss_confidence_at(len(self.look_points) - 1)

    def with_alpha(self, alpha: float) -> SequentialPlan:
        """This plan at false-alarm ``alpha``, its miss alpha raised to ``alpha`` where below it.

        A miss interval is never wider than the false-alarm one: a larger per-benchmark
        ``alpha`` (``--plan alpha=0.05``, or a per-PR alpha over few benchmarks) takes the miss alpha with it.
        """
        miss = None if self.miss_alpha is None else max(self.miss_alpha, alpha)
        return replace(self, alpha=alpha, miss_alpha=miss)

    def error_control(self) -> str:
        """How the plan spends its error, in words (the record's ``error_control``)."""
        text = "bonferroni over looks" + (", alpha per tail" if self.alpha_per_tail else "")
        if self.spending is not None:
            text += ", spent " + "/".join(f"{w:.0%}" for w in self.shares())
        if self.miss_alpha is not None:
            text += f", miss alpha {self.miss_alpha:g} (a missed regression, per benchmark; 'no change' decided on it)"
        return text

    def to_json(self) -> dict[str, Any]:
        out = {
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
        if self.spending is not None or self.variance != "rounds":  # version 5's keys; a version 4 record has none
            out.update(
                {
                    "spending": list(self.shares()),
                    "variance": self.variance,
                    "guard_level": self.guard_level,
                    "look_confidences": [self.confidence_at(k) for k in range(len(self.look_points))],
                    "look_miss_confidences": [self.miss_confidence_at(k) for k in range(len(self.look_points))],
                }
            )
        if self.rule == "zone":  # version 6's keys; a record before it has none and replays with the band
            out.update(
                {
                    "rule": self.rule,
                    "prior_df_cap": self.prior_df_cap,
                    "between_floor": self.between_floor,
                    "bench_check_level": self.bench_check_level,
                    "forced_limit": self.forced_limit,
                    "first_round_level": self.first_round_level,
                }
            )
            if self.learn:  # version 7's keys; a version 6 record has none and replays with its own variance
                out.update({"learn": True, "conflict_level": self.conflict_level})
        return out


# Version 4: the rounds' own variance (warm workers make a round cheap); futility gives up early at the band's edge.
WARM_PLAN = SequentialPlan()
# Version 5 (issue 29): the runner's noise model carries the spread, so the first look can be at 2 rounds and take
# most of alpha; 40 rounds confirm the tracked config's 0.15% threshold; no futility (it gave up on ~22% of A/A runs).
MODEL_PLAN = SequentialPlan(
    min_rounds=2,
    max_rounds=40,
    looks=(2, 3, 5, 8, 12, 20, 40),
    spending=(4.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0),
    variance="model",
    futility=False,
)
# Version 7 (issue 46): the zone rule whose variance learns from the run's worker generations. With a noise model and
# without one the looks and their alpha are the same, so the generations' own test is the same at every look and the
# model only adds a candidate: the same rounds never need more looks with a model (harness.paired.zone). The model is
# a prior of at most 12 df, used while the generations agree with it. docs/SPEED_GATE.md, "Version 7".
LEARNED_LOOKS = (2, 3, 4, 6, 8, 10, 12, 16, 20, 30, 40)
LEARNED_SPENDING = (3.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0)
ZONE_PLAN = SequentialPlan(
    min_rounds=2,
    max_rounds=40,
    looks=LEARNED_LOOKS,
    spending=LEARNED_SPENDING,
    variance="model",
    futility=False,
    rule="zone",
    prior_df_cap=12.0,
    learn=True,
    first_round_level=0.001,
)
# Without a noise model (a runner's first day, the CPU): the generations alone (a look at one generation cannot decide).
ZONE_WARM_PLAN = replace(ZONE_PLAN, variance="rounds", prior_df_cap=None)
# Version 6 (issue 37), kept for its records' replays (ci.speed.decide.verdict.plan_of rebuilds a record's own plan).
ZONE_PLAN_V6 = SequentialPlan(
    min_rounds=2,
    max_rounds=40,
    looks=(2, 3, 5, 8, 12, 16, 20, 30, 40),
    spending=(3.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0),
    variance="model",
    futility=False,
    rule="zone",
    prior_df_cap=8.0,
    between_floor=0.5,
    bench_check_level=0.01,
    first_round_level=0.001,
)
ZONE_WARM_PLAN_V6 = SequentialPlan(
    min_rounds=3,
    max_rounds=40,
    looks=(3, 5, 8, 12, 16, 20, 30, 40),
    spending=(2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0),
    variance="rounds",
    futility=False,
    rule="zone",
    between_floor=0.5,
    first_round_level=0.001,
)
