"""The ``--plan KEY=VALUE`` keys of the speed gate and the calibration: each key's check, and a plan built from them.

:data:`PLAN_KEYS` is the one list (the ``--help`` text and docs/SPEED_GATE.md's "The plan" table come from it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from ci.common.options import OptionsError, key_values
from ci.speed.decide.exclusion import DEFAULT_CLOCK_FLOOR_FRACTION
from ci.speed.engine.warm_engine import DEFAULT_RESTART_EVERY, GATE_RESTART_EVERY
from harness.gpu_state import SLOWDOWN_REASONS
from harness.paired.plan import MODEL_PLAN, WARM_PLAN, ZONE_PLAN, ZONE_WARM_PLAN, SequentialPlan

DEFAULT_PR_ALPHA = 0.01  # the per-PR false-alarm bound, shared by the gated benchmarks (SpeedOptions.plan_for)
# The defaults the help states, read from the plans themselves (ci.speed.options.PLANS: the zone rule's, with and
# without a noise model, have the same looks; --plan rule=band's are version 5's).
assert ZONE_PLAN.look_points == ZONE_WARM_PLAN.look_points and ZONE_PLAN.spending == ZONE_WARM_PLAN.spending


def _csv(values: tuple[float, ...] | None) -> str:
    return ",".join(f"{v:g}" for v in values or ())


# A spending --plan accepts with the default looks: one share per look, most at the first two.
SPENDING_EXAMPLE = _csv((4.0, 2.0) + (1.0,) * (len(ZONE_PLAN.look_points) - 2))


def _number(key: str, text: str, kind: type, ok: Callable[[float], bool], want: str) -> Any:
    try:
        value = kind(text)
    except ValueError:
        raise OptionsError(f"--plan {key}={text}: expected {'a whole number' if kind is int else 'a number'}") from None
    if not (math.isfinite(value) and ok(value)):
        raise OptionsError(f"--plan {key}={text}: must be {want}")
    return value


_positive_int = partial(_number, kind=int, ok=lambda v: v >= 1, want=">= 1")
_probability = partial(_number, kind=float, ok=lambda v: 0 < v < 1, want="a number in (0, 1)")
_clock_floor = partial(_number, kind=float, ok=lambda v: v >= 0, want="a finite number >= 0 (MHz; 0: no floor)")


def _looks(key: str, text: str) -> int | tuple[int, ...]:
    parts = tuple(_positive_int(key, t.strip()) for t in text.split(","))
    return parts if "," in text else parts[0]


def _on_off(key: str, text: str) -> bool:
    if text not in ("on", "off"):
        raise OptionsError(f"--plan {key}={text}: expected on or off")
    return text == "on"


def _shares(key: str, text: str) -> tuple[float, ...]:
    try:
        shares = tuple(float(t) for t in text.split(","))
    except ValueError:
        shares = ()
    if not shares or not all(math.isfinite(v) and v > 0 for v in shares):
        raise OptionsError(f"--plan {key}={text}: must be a list of numbers > 0 (each look's share)")
    return shares


def _throttle_reasons(key: str, text: str) -> frozenset[str]:
    names = frozenset(t.strip() for t in text.split(",") if t.strip())
    for name in sorted(names - SLOWDOWN_REASONS):
        raise OptionsError(
            f"--plan {key}={text}: {name!r} is not a slowdown reason; known: {', '.join(sorted(SLOWDOWN_REASONS))}"
        )
    return names


@dataclass(frozen=True)
class PlanKey:
    check: Callable[[str, str], Any]
    means: str
    measuring: bool = False  # about how rounds are measured: a replay refuses it


def _rule(key: str, text: str) -> str:
    if text not in ("zone", "band"):
        raise OptionsError(f"--plan {key}={text}: expected zone (version 6, the default) or band (version 5's rule)")
    return text


PLAN_KEYS: dict[str, PlanKey] = {
    "rule": PlanKey(
        _rule,
        "zone: regression or not, with the zone [1 - t, 1 - t/2] and a last look that decides (version 6); "
        "band: version 5's interval against the band [1 - t, 1 + t], for a before/after",
    ),
    "looks": PlanKey(
        _looks,
        f"usable-round counts of the looks ({_csv(ZONE_PLAN.look_points)}; rule=band: {_csv(WARM_PLAN.look_points)}, "
        f"with a noise model {_csv(MODEL_PLAN.look_points)}), or their number, spread from min to max rounds",
    ),
    "min_rounds": PlanKey(_positive_int, f"usable rounds at the first look ({ZONE_PLAN.min_rounds})"),
    "max_rounds": PlanKey(_positive_int, f"usable rounds at the last look ({ZONE_PLAN.max_rounds})"),
    "pr_alpha": PlanKey(
        _probability,
        f"chance that an unchanged head fails anywhere in the PR, shared by the gated benchmarks ({DEFAULT_PR_ALPHA})",
    ),
    "alpha": PlanKey(
        _probability,
        "a per-benchmark false-alarm alpha instead of pr_alpha's share (the PR bound is then gated x alpha)",
    ),
    "miss_alpha": PlanKey(
        _probability,
        "chance that a benchmark slower by its threshold or more is called 'no change', "
        f"per benchmark ({ZONE_PLAN.miss_alpha}; raised to alpha where below it)",
    ),
    "rounds": PlanKey(
        _positive_int,
        "exactly N rounds of every benchmark, no early stop (a record to replay; python -m ci.speed.calibrate: "
        "its rounds, by default up to 16 within --max-minutes)",
        True,
    ),
    "round_budget": PlanKey(_positive_int, "most rounds attempted, excluded ones included (1.5 x max_rounds)", True),
    "restart_every": PlanKey(
        _positive_int,
        f"new worker processes every N rounds (the gate: {GATE_RESTART_EVERY}, each generation a degree of freedom; "
        f"the calibration: {DEFAULT_RESTART_EVERY}, within-generation pairs for the model's within SD)",
        True,
    ),
    "clock_floor_mhz": PlanKey(
        _clock_floor,
        f"exclude rounds with an SM clock below this ({DEFAULT_CLOCK_FLOOR_FRACTION:.0%} of the card's max SM clock; "
        "0: none)",
    ),
    "allow_throttle": PlanKey(_throttle_reasons, "do not exclude rounds for these throttle reasons (comma-separated)"),
    "noise": PlanKey(
        _on_off,
        "on: decide with the runner's noise model when there is one (--noise; rule=zone: the same looks); "
        "off: each benchmark's own rounds only (the plan before issue 29)",
    ),
    "spending": PlanKey(
        _shares,
        f"each look's share of alpha, one per look, e.g. {SPENDING_EXAMPLE} (default {_csv(ZONE_PLAN.spending)}; "
        "rule=band: equal without a noise model)",
    ),
    "guard_level": PlanKey(
        _probability,
        "with the noise model: the run's guard falls back to each benchmark's "
        f"own rounds in at most this share of runs that follow the model ({ZONE_PLAN.guard_level})",
    ),
}
SEQUENTIAL_KEYS = ("looks", "min_rounds", "max_rounds", "alpha", "miss_alpha", "spending", "guard_level")  # its fields


def plan_value(items: list[str] | None) -> dict[str, Any]:
    """``--plan KEY=VALUE`` items, each checked by its :data:`PLAN_KEYS` entry."""
    given = key_values(items or [], "--plan", list(PLAN_KEYS))
    return {key: PLAN_KEYS[key].check(key, text) for key, text in given.items()}


def build_plan(start: SequentialPlan, given: Mapping[str, Any]) -> SequentialPlan:
    """``start`` (the gate's plan, or a replayed record's) with the sequential keys given; OptionsError if it cannot be.
    Rounds without looks keep ``start``'s number of looks; an alpha without a miss alpha raises the miss alpha with it.
    """
    chosen = {k: given[k] for k in SEQUENTIAL_KEYS if k in given}
    if not chosen:
        return start
    fields: dict[str, Any] = {}  # what the keys given change besides themselves
    if {"min_rounds", "max_rounds"} & set(chosen) and "looks" not in chosen:
        fields["looks"] = len(start.look_points)
    if "max_rounds" in chosen and "min_rounds" not in chosen:
        fields["min_rounds"] = min(start.min_rounds, chosen["max_rounds"])
    if isinstance(chosen.get("looks"), tuple):  # looks given as round counts: they set the first and last look
        fields["min_rounds"], fields["max_rounds"] = chosen["looks"][0], chosen["looks"][-1]
    if "alpha" in chosen and "miss_alpha" not in chosen and start.miss_alpha is not None:
        fields["miss_alpha"] = max(start.miss_alpha, chosen["alpha"])
    if {"looks", "min_rounds", "max_rounds"} & set(chosen) and "spending" not in chosen:
        fields["spending"] = None  # other looks: the plan's shares no longer fit them; spent equally
    try:
        return replace(start, **{**fields, **chosen})
    except ValueError as exc:
        raise OptionsError(f"plan: {exc}") from None
