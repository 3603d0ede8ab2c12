"""The warm engine's bookkeeping (ci.speed.engine.warm_engine): each device's state over the run, its part of a round,
and what a part records when the round ends. No process is started or asked anything here."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ci.speed.engine.rounds import Benchmark
from ci.speed.engine.spares import Spare
from ci.speed.engine.worker_handle import WorkerFailed, WorkerProcess


@dataclass
class Device:
    """One GPU's workers, spares and history over the run."""

    index: int
    workers: dict[str, WorkerProcess] = field(default_factory=dict)
    spares: dict[str, Spare] = field(default_factory=dict)  # side -> the next generation's process, preloading
    prespawned: dict[str, bool] = field(default_factory=dict)  # side -> this generation's worker was a spare
    generation: int = -1
    started_round: int | None = None
    rounds_served: int = 0
    last_work_end: float = 0.0  # when our last work on the device ended: preparing or a timing
    last_timing: tuple[str, float] = ("", 0.0)  # the benchmark of our last timing on the device, and when it ended
    failure: str | None = None
    budget: dict[str, Any] | None = None  # the timing budget the workers resolved at their start
    carried: DevicePart | None = None  # the survey's start-up, counted in the first round (see WarmEngine.survey)


@dataclass
class DevicePart:
    """One device's part of a round."""

    order: list[str]
    benches: list[Benchmark]
    began: float = field(default_factory=time.time)
    records: dict[str, dict[str, Any]] = field(default_factory=dict)  # side -> benchmark id -> record
    workers: dict[str, dict[str, Any]] = field(default_factory=dict)  # side -> the worker that measured, its seconds
    summary: dict[str, Any] = field(default_factory=dict)
    budget: dict[str, Any] | None = None
    startup: dict[str, float] = field(default_factory=dict)  # side -> seconds of start-up that held the device
    overlapped: dict[str, float] = field(default_factory=dict)  # side -> seconds of a spare's start-up during measuring
    spare_failed: dict[str, str] = field(default_factory=dict)  # side -> why its spare could not be promoted
    phases: dict[str, dict[str, float]] = field(default_factory=dict)  # side -> when its new worker passed each step
    prepared_s: dict[str, dict[str, Any]] = field(default_factory=dict)  # side -> benchmark id -> its set-up seconds
    prepared_parts_s: dict[str, dict[str, Any]] = field(default_factory=dict)  # ... -> where those seconds went
    start_failed: dict[str, WorkerFailed] = field(default_factory=dict)  # side -> why it did not start (the survey's)
    carried_wall_s: float = 0.0  # the survey's wall time on this device, before this round began
    measure: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    measuring: str | None = None  # the benchmark being measured now: when the worker dies, the one that killed it

    def __post_init__(self) -> None:
        for side in self.order:
            self.records[side] = {}
            self.startup[side] = self.overlapped[side] = self.measure[side] = 0.0


def carry_in(dev: Device, part: DevicePart, round_index: int) -> None:
    """The survey's start of this device's workers becomes part of the first round (its seconds held the runner)."""
    scratch, dev.carried = dev.carried, None
    assert scratch is not None
    if dev.workers:
        dev.started_round = round_index
        part.budget = dev.budget
    for side in scratch.order:
        part.startup[side] = part.startup.get(side, 0.0) + scratch.startup[side]
        part.overlapped[side] = part.overlapped.get(side, 0.0) + scratch.overlapped[side]
    part.phases.update(scratch.phases)
    part.spare_failed.update(scratch.spare_failed)
    part.carried_wall_s = scratch.carried_wall_s


def summarize(dev: Device, part: DevicePart) -> None:
    """The part's records, its workers' seconds and the device's summary, once its round has ended."""
    if part.error:
        for bench in part.benches:
            for side in part.order:
                part.records[side].setdefault(
                    bench.id,
                    {
                        "error": f"WorkerFailed: {part.error}",
                        "error_type": "WorkerFailed",
                        "busy": False,
                        "device_index": dev.index,
                        "device_failed": True,
                        # The benchmark whose measuring the worker died in (None: it died starting or preparing).
                        **({"died_measuring": True} if bench.id == part.measuring else {}),
                    },
                )
    for side in part.order:
        worker = dev.workers.get(side)
        part.workers[side] = {
            "device": dev.index,
            "pid": worker.pid if worker else None,
            "generation": dev.generation,
            "started_round": dev.started_round,
            "prespawned": dev.prespawned.get(side, False),
            "spawned_at": worker.spawned_at if worker else None,
            "startup_s": round(part.startup[side], 3),
            "overlapped_startup_s": round(part.overlapped[side], 3),
            "measure_s": round(part.measure[side], 3),
            "benchmarks": [b.id for b in part.benches],
            **({"phases": part.phases[side]} if side in part.phases else {}),
            # The generation's set-up seconds per benchmark, in the round it started (a later round's prepare answers
            # the same seconds again: not repeated).
            **({"prepare_s": part.prepared_s[side]} if side in part.prepared_s and side in part.phases else {}),
            **(
                {"prepare_parts_s": part.prepared_parts_s[side]}
                if side in part.prepared_parts_s and side in part.phases
                else {}
            ),
            **({"spare_failed": part.spare_failed[side]} if side in part.spare_failed else {}),
        }
    part.summary = {
        "device": dev.index,
        "benchmarks": [b.id for b in part.benches],
        "generation": dev.generation,
        "wall_s": round(time.time() - part.began + part.carried_wall_s, 3),
        "error": part.error or None,
        **({"survey_wall_s": round(part.carried_wall_s, 3)} if part.carried_wall_s else {}),
    }


def each(keys: list[Any], action: Callable[[Any], Any]) -> dict[Any, Any]:
    """``action`` for every key (side, device) at once; the first failure is raised after all have ended."""
    with ThreadPoolExecutor(max_workers=max(1, len(keys))) as pool:
        futures = {key: pool.submit(action, key) for key in keys}
    errors = [e for e in (f.exception() for f in futures.values()) if e is not None]
    if errors:
        raise errors[0]
    return {side: f.result() for side, f in futures.items()}
