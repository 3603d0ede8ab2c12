"""The noise model applied to one run: each benchmark's worker generations, and the run's guard, in time order.

The gate feeds it each pair as it completes; a replay feeds the record's rounds in the same order (the round
record's "sequence"), so a record replays to the same decisions. The guard is harness.paired.noise_guard.guard;
once it fires it stays fired for the rest of the run. Why: docs/SPEED_GATE.md, "Inside the code".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ci.speed.decide.exclusion import ExclusionRule, exclusion
from ci.speed.decide.noise_file import NoiseModel
from harness.paired.noise_guard import GuardState, PairEvent
from harness.paired.sequential import RoundsNoise

SIDES = ("base", "head")


def pair_order(round_record: Mapping[str, Any]) -> list[str]:
    """The benchmark ids of a round in the order their pairs completed."""
    sequence = round_record.get("sequence")
    if isinstance(sequence, list):
        return [str(b) for b in sequence]
    by_side = {p.get("side"): list(p.get("records", {})) for p in round_record.get("processes", [])}
    head = by_side.get("head", [])
    return head + [b for b in by_side.get("base", []) if b not in head]


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
        ratio = None
        if reason is None:
            ratio = math.log(float(head["tflops"]) / float((records.get("base") or {})["tflops"]))
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
        fired = self.fired_at[bench_id]
        start = next((i for i, f in enumerate(fired) if f), None)
        return RoundsNoise(entry, self.model.spread, tuple(self.generations[bench_id]), start)

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
        for bench_id in pair_order(rnd):
            recs = {side: by_side.get(side, {}).get(bench_id) for side in SIDES}
            if recs["base"] is not None or recs["head"] is not None:
                state.add_pair(int(rnd["index"]), bench_id, recs)
    return state
