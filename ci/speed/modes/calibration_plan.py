"""The calibration's report of the rounds each benchmark needs (issue 46, deliver 2): by which look the zone plan
decides any effect at its policy threshold under the runner's model, at each restart cadence, and in GPU seconds from
the calibration's own timings. docs/SPEED_GATE.md, "Calibrating a new runner".
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ci.speed.decide.noise_file import NoiseModel
from ci.speed.decide.thresholds import Thresholds
from harness.paired.noise import LookNoise
from harness.paired.sequential import SequentialPlan
from harness.paired.zone import planned_rounds

# A new worker generation on the H200: a spare's promotion (~3.5 s) and both sides' first warm-up (2 s each).
RESTART_S = 7.5


@dataclass(frozen=True)
class Planned:
    """One benchmark under the noise model and the zone plan: its policy threshold and the rounds it needs."""

    threshold: float  # the thresholds file's (policy; the calibration never writes one)
    rounds: dict[int, int | None]  # restart every R rounds -> the look by which any effect is decided (None: none)
    seconds: dict[int, float | None]  # the same in GPU seconds of this benchmark (both sides), from this run's timings
    restart_every: int  # the gate's cadence

    @property
    def decidable(self) -> bool:
        return self.rounds.get(self.restart_every) is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "restart_every": self.restart_every,
            "decidable": self.decidable,
            "rounds_to_decide": {str(k): v for k, v in self.rounds.items()},
            "seconds_to_decide": {str(k): v for k, v in self.seconds.items()},
        }


CADENCES = (1, 2, 4)  # restart every R rounds: the between-worker variance averages over generations, each start costs


def timing_costs(rounds: Sequence[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """Per benchmark the median seconds of one timing: a generation's first, and a repeat (this run's records)."""
    first: dict[str, list[float]] = {}
    repeat: dict[str, list[float]] = {}
    seen: set[tuple[str, str, Any]] = set()
    for rnd in rounds:
        for proc in rnd.get("processes", []):
            for bench_id, rec in proc.get("records", {}).items():
                if not isinstance(rec, dict) or not isinstance(rec.get("measure_s"), (int, float)):
                    continue
                key = (bench_id, proc.get("side"), rec.get("worker_generation"))
                (repeat if key in seen else first).setdefault(bench_id, []).append(float(rec["measure_s"]))
                seen.add(key)
    return {b: (statistics.median(v), statistics.median(repeat.get(b, v))) for b, v in first.items()}


def _seconds(n: int | None, every: int, cost: tuple[float, float] | None) -> float | None:
    if n is None or cost is None:
        return None
    generations = -(-n // every)
    return round(2 * (generations * cost[0] + (n - generations) * cost[1]) + (generations - 1) * RESTART_S, 1)


def plan_rounds(
    model: NoiseModel,
    bench_ids: Sequence[str],
    plan: SequentialPlan,
    thresholds: Thresholds,
    gated: int,
    restart_every: int,
    costs: dict[str, tuple[float, float]],
) -> dict[str, Planned]:
    """Per benchmark: the rounds (and GPU seconds) by which the zone plan decides any effect at its policy threshold,
    the per-PR alpha (1%) shared by the ``gated``."""
    shared = plan.with_alpha(0.01 / max(1, gated))
    out = {}
    for bench_id in bench_ids:
        entry = model.entry(bench_id)
        if entry is None:
            continue
        look = LookNoise(entry, model.spread, cadence=model.restart_every)  # its generation means' cadence
        threshold = thresholds.lookup(bench_id)[0]
        rounds = {r: planned_rounds(look, threshold, shared, r) for r in sorted({*CADENCES, restart_every})}
        seconds = {r: _seconds(n, r, costs.get(bench_id)) for r, n in rounds.items()}
        out[bench_id] = Planned(threshold, rounds, seconds, restart_every)
    return out
