"""A round and its record: every benchmark timed once per side, the sides' order rotating; what the rounds cost.
The record is plain JSON (``RoundRecord.to_json``); why and its fields: docs/SPEED_GATE.md, "ci/speed/engine/rounds.py".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ci.common.errors import HarnessError


class SurveyFailed(HarnessError, RuntimeError):
    """A side's worker could not survey its commit; the message names the side and why."""


@dataclass(frozen=True)
class Side:
    """A named tree whose ``kernels`` package is measured (a git worktree, or the working tree)."""

    name: str
    tree: Path


@dataclass(frozen=True)
class Benchmark:
    kernel: str
    config: str
    shape: str  # a harness.shapes name, an asv CPU shape name, or "MxNxK"
    m: int
    n: int
    k: int

    @property
    def id(self) -> str:
        return f"{self.kernel}[{self.config}]/{self.shape}"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, **asdict(self)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Benchmark:
        """From a survey's or a record's benchmark entry (extra keys ignored)."""
        return cls(data["kernel"], data["config"], data["shape"], int(data["m"]), int(data["n"]), int(data["k"]))


@dataclass
class ProcessRecord:
    """One side's measurements in one round: that side's warm workers (ci.speed.engine.warm_engine)."""

    side: str
    pid: int | None  # None when several workers (devices) measured this side
    wall_s: float
    records: dict[str, Any]  # benchmark id -> Timing.to_json() or {"error", "error_type", "busy"}
    budget: dict[str, Any] | None = None
    started: float | None = None
    # Cost accounting: seconds of starting (process start to ready: imports, device, and for warm
    # workers operands and compilation) and of measuring, summed over this side's processes.
    startup_s: float | None = None
    measure_s: float | None = None
    workers: list[dict[str, Any]] | None = None  # warm: per worker {device, pid, generation, started_round, ...}


@dataclass
class RoundRecord:
    index: int
    order: list[str]
    processes: list[ProcessRecord] = field(default_factory=list)
    engine: str = "warm"  # the record's "engine": the warm workers (records before issue 28 may say "fresh")
    wall_s: float | None = None
    devices: list[dict[str, Any]] | None = None  # warm: per device its benchmarks, wall seconds, failure
    # The benchmark ids in the order their pairs (both sides) completed: the time order the noise model's guard
    # reads (ci.speed.decide.generations); a round the gate stopped early (the PR had failed) lists only what was
    # measured.
    sequence: list[str] | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None or k not in ("devices", "sequence")}


def rotating_order(sides: Sequence[str], round_index: int) -> list[str]:
    """Round ``i`` runs the sides rotated by ``i``: A B, B A, ... (A B C, B C A, C A B): over ``len(sides)`` rounds
    each side runs once in each position, so a drift linear in time adds the same to every side."""
    if not sides:
        raise ValueError("rotating_order: no sides")
    shift = round_index % len(sides)
    return list(sides[shift:]) + list(sides[:shift])


def survey_request(
    *,
    device: str,
    kernels: Sequence[str] = (),
    configs: Sequence[str] = (),
    shapes: Sequence[str] = (),
    pairs: Sequence[Sequence[str]] | None = None,
) -> dict[str, Any]:
    """What a warm worker's "survey" is asked (ci.speed.engine.survey.survey)."""
    return {
        "device": device,
        "kernels": list(kernels),
        "configs": list(configs),
        "shapes": list(shapes),
        "pairs": None if pairs is None else [list(p) for p in pairs],
    }


def cost_summary(rounds: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What a run cost the GPU runner, from its round records: ``startup_s`` and ``measure_s`` sum every process's own
    seconds that held the runner (two starting side by side count twice), ``overlapped_startup_s`` the spares' start-up
    while others measured (no runner time), ``device_wall_s`` each device's wall time."""
    startup = overlapped = measure = 0.0
    processes: set[tuple[Any, ...]] = set()
    device_wall: dict[str, float] = {}
    for rnd in rounds:
        for proc in rnd["processes"]:
            startup += proc.get("startup_s") or 0.0
            measure += proc.get("measure_s") or 0.0
            for worker in proc.get("workers") or [{"pid": proc.get("pid"), "round": rnd["index"]}]:
                processes.add((worker.get("pid"), worker.get("round")))
                overlapped += worker.get("overlapped_startup_s") or 0.0
        for dev in rnd.get("devices") or [{"device": "default", "wall_s": rnd.get("wall_s") or 0.0}]:
            key = str(dev["device"])
            device_wall[key] = round(device_wall.get(key, 0.0) + (dev.get("wall_s") or 0.0), 3)
    return {
        "startup_s": round(startup, 3),
        "overlapped_startup_s": round(overlapped, 3),
        "measure_s": round(measure, 3),
        "processes_started": len(processes),
        "device_wall_s": device_wall,
    }
