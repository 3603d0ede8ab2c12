"""Which rounds the speed gate may use: a pure function over recorded measurements.

An excluded round (a throttle, a clock below the floor, an unsteady timing, a busy GPU) is counted and reported,
never in an estimate; each reason and why: docs/SPEED_GATE.md, "Notes from the code".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ci.speed.decide.codes import Excluded, Exclusion
from harness.gpu_state import SLOWDOWN_REASONS
from harness.paired.rounds import Round, timing_variance

# nvbench's default --throttle-threshold: a clock under 75% of the GPU's default clock counts as
# throttled. The max SM clock is the reference here, the one clock both NVML and amdsmi report.
DEFAULT_CLOCK_FLOOR_FRACTION = 0.75
# Power capping under the measured kernel's own load is its normal state: counted, its clocks recorded (why, and the
# H200's evidence: docs/SPEED_GATE.md, "Notes from the code"). Records before issue 21 carry their own rule.
OWN_LOAD_REASONS = frozenset({"sw_power_cap"})


@dataclass(frozen=True)
class ExclusionRule:
    clock_floor_mhz: float | None = None  # None: DEFAULT fraction of the state's max SM clock; 0 disables
    clock_floor_fraction: float = DEFAULT_CLOCK_FLOOR_FRACTION
    slowdown_reasons: frozenset[str] = field(default_factory=lambda: frozenset(SLOWDOWN_REASONS - OWN_LOAD_REASONS))
    require_steady: bool = True

    def floor_for(self, state: Mapping[str, Any]) -> tuple[float | None, str]:
        """(floor in MHz or None when unknown/disabled, how it was set) for one GPU state."""
        if self.clock_floor_mhz is not None:
            return (self.clock_floor_mhz or None), f"{self.clock_floor_mhz:g} MHz (--plan clock_floor_mhz)"
        top = state.get("max_sm_clock_mhz")
        if not isinstance(top, (int, float)) or top <= 0:
            return None, "unknown (no max SM clock reported)"
        return self.clock_floor_fraction * top, f"{self.clock_floor_fraction:.0%} of max {top:g} MHz"

    def to_json(self) -> dict[str, Any]:
        return {
            "clock_floor_mhz": self.clock_floor_mhz,
            "clock_floor_fraction": self.clock_floor_fraction if self.clock_floor_mhz is None else None,
            "slowdown_reasons": sorted(self.slowdown_reasons),
            "require_steady": self.require_steady,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ExclusionRule:
        return cls(
            clock_floor_mhz=data.get("clock_floor_mhz"),
            clock_floor_fraction=data.get("clock_floor_fraction") or DEFAULT_CLOCK_FLOOR_FRACTION,
            slowdown_reasons=frozenset(data.get("slowdown_reasons", SLOWDOWN_REASONS)),
            require_steady=data.get("require_steady", True),
        )


def side_problem(side: str, record: Mapping[str, Any] | None, rule: ExclusionRule) -> tuple[Exclusion, str] | None:
    """(reason, detail) when one side's measurement makes the round unusable, else None."""
    if record is None:
        return Exclusion(Excluded.NOT_MEASURED), f"{side}: no measurement"
    if "error" in record:
        code = Excluded.GPU_BUSY if record.get("busy") else Excluded.MEASUREMENT_FAILED
        return Exclusion(code), f"{side}: {record['error']}"
    for when in ("gpu_before", "gpu_after"):
        state = record.get(when)
        if not state:
            continue
        slowing = sorted(set(state.get("throttle_reasons") or ()) & rule.slowdown_reasons)
        if slowing:
            return Exclusion(Excluded.THROTTLED, tuple(slowing)), (
                f"{side} {when}: SM {state.get('sm_clock_mhz')} MHz, {state.get('temperature_c')} C, "
                f"{state.get('power_w')} W, throttle reasons {list(state.get('throttle_reasons') or [])}"
            )
        floor, how = rule.floor_for(state)
        clock = state.get("sm_clock_mhz")
        if floor is not None and isinstance(clock, (int, float)) and clock < floor:
            detail = f"{side} {when}: SM {clock:g} MHz < floor {floor:.0f} MHz ({how})"
            return Exclusion(Excluded.BELOW_CLOCK_FLOOR), detail
    if rule.require_steady and record.get("steady") is False:
        return Exclusion(Excluded.UNSTEADY), (
            f"{side}: warm-up gave up after {record.get('warmup_launches')} launches "
            f"({record.get('warmup_s', 0):.2f} s) without three chunks in tolerance"
        )
    return None


def exclusion(records: Mapping[str, Mapping[str, Any] | None], rule: ExclusionRule) -> tuple[Exclusion | None, str]:
    """(reason or None, detail) for one round of one benchmark (``records``: side -> measurement); pure (replay)."""
    for side, record in records.items():
        problem = side_problem(side, record, rule)
        if problem is not None:
            return problem
    return None, ""


@dataclass(frozen=True)
class PairedRound:
    """One round of one benchmark: where it came from, the pair, and why it was excluded."""

    round_index: int
    round: Round
    detail: str
    order: tuple[str, ...]
    exclusion: Exclusion | None = None  # the code behind ``round.excluded`` (its label)
    generation: int = 0  # the head worker's generation (a record without one: a generation of its own, -1 - index)

    def to_json(self) -> dict[str, Any]:
        return {
            "round_index": self.round_index,
            **self.round.to_json(),
            "detail": self.detail or None,
            "order": list(self.order),
        }


def pair_sampling_var(base: Mapping[str, Any], head: Mapping[str, Any]) -> float | None:
    """The variance of a round's log ratio from both timings' samples (harness.paired.rounds.timing_variance, summed);
    None when either side's samples are not recorded."""
    parts = [timing_variance(side.get("samples_s") or []) for side in (base, head)]
    return None if any(p is None for p in parts) else sum(p for p in parts if p is not None)


def paired_rounds(
    rounds: Sequence[Mapping[str, Any]], bench_id: str, base_side: str, head_side: str, rule: ExclusionRule
) -> list[PairedRound]:
    """The rounds (in time order) in which both sides measured ``bench_id``, each as a paired Round; ``rounds`` are
    round records (ci.speed.engine.rounds), which may hold more sides than the two paired here.
    """
    paired = []
    for rnd in rounds:
        by_side = {p["side"]: p.get("records", {}) for p in rnd["processes"]}
        if base_side not in by_side or head_side not in by_side:
            continue
        if bench_id not in by_side[base_side] and bench_id not in by_side[head_side]:
            continue  # not measured in this round (decided earlier, or not selected)
        records = {base_side: by_side[base_side].get(bench_id), head_side: by_side[head_side].get(bench_id)}
        reason, detail = exclusion(records, rule)
        if reason is None:
            paired_round = Round(
                float(records[base_side]["tflops"]),
                float(records[head_side]["tflops"]),
                sampling_var=pair_sampling_var(records[base_side], records[head_side]),
            )
        else:
            figures = [(r or {}).get("tflops") for r in (records[base_side], records[head_side])]
            base, head = (float(x) if isinstance(x, (int, float)) else float("nan") for x in figures)
            paired_round = Round(base, head, reason.label)
        order = tuple(s for s in rnd.get("order", by_side) if s in (base_side, head_side))
        generation = (records[head_side] or {}).get("worker_generation")
        # unknown: a generation of its own, as ci.speed.decide.generations has it
        generation = int(generation) if isinstance(generation, int) else -1 - int(rnd["index"])
        paired.append(PairedRound(int(rnd["index"]), paired_round, detail, order, reason, generation))
    return paired
