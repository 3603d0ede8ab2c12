"""The noise model applied to one run: each benchmark's worker generations, and the run's guard, in time order.

The gate feeds it pairs as they complete, a replay the record's in the same order, so a record replays to the same
decisions (docs/SPEED_GATE.md, "Notes from the code").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ci.speed.decide.exclusion import ExclusionRule, exclusion
from ci.speed.decide.noise_file import NoiseModel
from harness.paired.noise_guard import GuardState, PairEvent
from harness.paired.sequential import RoundsNoise

SIDES = ("base", "head")  # the two sides every gate and calibration record holds


class RunNoise:
    """Per benchmark: its rounds' generations (one per round it was measured in) and the guard's state after each."""

    def __init__(self, model: NoiseModel, rule: ExclusionRule, level: float, gated: Sequence[str]):
        self.model, self.rule, self.level = model, rule, level
        self.gated = set(gated)
        self.generations: dict[str, list[int]] = {}
        self.fired_at: dict[str, list[bool]] = {}  # per benchmark round: had the guard fired once this pair was in
        self.state = GuardState(model.benchmarks, model.spread, level)
        self.first_fire: dict[str, Any] | None = None  # where the guard fired: round, benchmark, its result

    def add_pair(self, round_index: int, bench_id: str, records: Mapping[str, Mapping[str, Any] | None]) -> None:
        """One benchmark's pair of one round, as it completed."""
        if bench_id not in self.gated:
            return
        reason, _ = exclusion({side: records.get(side) for side in SIDES}, self.rule)
        head = records.get("head") or {}
        generation = head.get("worker_generation")
        generation = int(generation) if isinstance(generation, int) else -1 - round_index  # unknown: one of its own
        base = records.get("base") or {}
        ratio = math.log(float(head["tflops"]) / float(base["tflops"])) if reason is None else None  # None: excluded
        result = self.state.add(PairEvent(bench_id, ratio, generation))
        if self.state.fired and self.first_fire is None:
            self.first_fire = {"round_index": round_index, "benchmark": bench_id, **result.to_json()}
        self.generations.setdefault(bench_id, []).append(generation)
        self.fired_at.setdefault(bench_id, []).append(self.state.fired)

    def rounds_noise(self, bench_id: str) -> RoundsNoise | None:
        """What sequential_decision needs for ``bench_id`` (its rounds as exclusion.paired_rounds lists them)."""
        entry = self.model.entry(bench_id)
        if entry is None or bench_id not in self.generations:
            return None
        start = next((i for i, fired in enumerate(self.fired_at[bench_id]) if fired), None)
        return RoundsNoise(entry, self.model.spread, tuple(self.generations[bench_id]), start, self.model.restart_every)

    def summary(self) -> dict[str, Any]:
        """The guard as the record and the report keep it."""
        return {"level": self.level, "final": self.state.last.to_json(), "fired": self.first_fire}


def run_noise(
    model: NoiseModel, rule: ExclusionRule, level: float, gated: Sequence[str], rounds: Sequence[Mapping[str, Any]]
) -> RunNoise:
    """A RunNoise over recorded rounds (a replay, or the gate's rounds so far), each round's pairs in time order."""
    state = RunNoise(model, rule, level, gated)
    for rnd in sorted(rounds, key=lambda r: int(r["index"])):
        by_side = {p["side"]: p.get("records", {}) for p in rnd.get("processes", [])}
        sequence = rnd.get("sequence")  # the order the pairs completed; a record without one: the head's, the base's
        order = sequence if isinstance(sequence, list) else {**by_side.get("head", {}), **by_side.get("base", {})}
        for bench_id in map(str, order):
            recs = {side: by_side.get(side, {}).get(bench_id) for side in SIDES}
            if recs["base"] is not None or recs["head"] is not None:
                state.add_pair(int(rnd["index"]), bench_id, recs)
    return state
