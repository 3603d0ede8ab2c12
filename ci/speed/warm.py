"""Rounds from warm workers: each side's process started once, timed many times, on one or more devices.

A fresh process per side per round (ci.speed.rounds.measure_round) spends ~5-7 s
starting (torch, the device context, compilation, operands) to time ~0.7 s; on an
H200, one process alternating A and B timings showed a per-round SD of the log
ratio of 0.055% and no in-process bias (A/A' +0.004%). So :class:`WarmEngine`
keeps one worker (ci.speed.worker) per side and device alive and asks it for
one timing per benchmark and round:

* within a round, benchmark by benchmark, the sides in the round's order
  (A B, then B A next round: ci.speed.rounds.rotating_order), so each pair is
  adjacent in time and a drift lands on both sides alike;
* every ``restart_every`` rounds the workers are replaced by fresh ones, so the
  variation between processes (allocation placement, code layout) is sampled
  too; each record names its worker (``worker_pid``, ``worker_generation``), so
  the statistics can treat processes as a level of variation;
* benchmarks are spread over ``devices`` (ci.speed.devices.assign_devices) once
  and stay there: base and head of one benchmark on one device, never compared
  across devices; each record carries its ``device_index``;
* a worker that dies or hangs fails its device: every benchmark of that device
  gets an error record naming the side, the benchmark and the cause (the gate
  stops on it as on any failed measurement); the other devices go on.

The round record is ci.speed.rounds.RoundRecord, as the fresh engine's: one
ProcessRecord per side, its records keyed by benchmark id (what
ci.speed.exclusion and ci.speed.verdict read), with fields added: per record
``device_index``, ``worker_pid``, ``worker_generation``, ``measure_s``,
``measured_at``; per side ``startup_s``, ``measure_s``, ``workers``; per round
``engine``, ``devices``, ``wall_s``.

    with open_engine("warm", sides, device="cuda", devices=[0, 1], restart_every=4) as engine:
        for i in range(rounds):
            record = engine.measure_round(rotating_order(names, i), benchmarks, round_index=i).to_json()
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any, Callable, Mapping, Sequence

from ci.speed.devices import assign_devices, estimated_seconds, pinned_environment
from ci.speed.rounds import Benchmark, FreshEngine, ProcessRecord, RoundRecord, Side
from ci.speed.worker_process import WorkerFailed, WorkerProcess

DEFAULT_RESTART_EVERY = 4
# NVML averages utilization over at most a second: within this long after our own work, a
# utilization above the idle bound is ours (ci.speed.worker's idle check then ignores it).
AFTER_OWN_WORK_S = 2.0
START_TIMEOUT_S = 300.0  # imports and the device context
SETUP_TIMEOUT_S = 1800.0  # operands and compilation of one device's benchmarks (a cold Triton cache)
MEASURE_TIMEOUT_S = 600.0  # the idle wait (120 s by default), warm-up and the timed launches


@dataclass
class _Device:
    index: int
    workers: dict[str, WorkerProcess] = field(default_factory=dict)
    generation: int = -1
    started_round: int | None = None
    rounds_served: int = 0
    last_work_end: float = 0.0
    failure: str | None = None


@dataclass
class _DeviceRound:
    """One device's part of a round."""

    records: dict[str, dict[str, Any]]  # side -> benchmark id -> record
    workers: dict[str, dict[str, Any]]  # side -> the worker that measured, and its seconds
    summary: dict[str, Any]
    budget: dict[str, Any] | None = None


class WarmEngine:
    kind = "warm"

    def __init__(
        self,
        sides: Sequence[Side],
        *,
        device: str = "auto",
        budget: Any = None,
        seed: int = 0,
        devices: Sequence[int] = (0,),
        restart_every: int = DEFAULT_RESTART_EVERY,
        cost: Callable[[Benchmark], float] = estimated_seconds,
        start_timeout_s: float = START_TIMEOUT_S,
        setup_timeout_s: float = SETUP_TIMEOUT_S,
        measure_timeout_s: float = MEASURE_TIMEOUT_S,
        environ: Mapping[str, str] | None = None,
        log: Callable[[str], None] | None = None,
    ):
        if restart_every < 1:
            raise ValueError(f"restart_every must be >= 1 (got {restart_every})")
        if not devices or len(set(devices)) != len(devices):
            raise ValueError(f"devices: expected distinct device indices, got {list(devices)}")
        self.sides = {s.name: s for s in sides}
        self.device, self.seed, self.restart_every, self.cost = device, seed, restart_every, cost
        self.budget = asdict(budget) if is_dataclass(budget) else dict(budget or {})
        self.timeouts = {"start": start_timeout_s, "setup": setup_timeout_s, "measure": measure_timeout_s}
        self.environ, self.log = environ, log
        self.devices = {d: _Device(d) for d in devices}
        self.assigned: dict[str, int] = {}  # benchmark id -> device, for the whole run
        self._known_cost: dict[str, float] = {}

    # -- the round --------------------------------------------------------------

    def measure_round(self, order: Sequence[str], benchmarks: Sequence[Benchmark], *, round_index: int) -> RoundRecord:
        """Every benchmark once per side, the sides in ``order``, each benchmark on its device."""
        if sorted(order) != sorted(set(order)) or any(name not in self.sides for name in order):
            raise ValueError(f"order {list(order)} must name each of the sides {sorted(self.sides)} at most once")
        plan = self._assign(benchmarks)
        began = time.time()
        busy = {d: benches for d, benches in plan.items() if benches}
        with ThreadPoolExecutor(max_workers=max(1, len(busy))) as pool:
            futures = {d: pool.submit(self._device_round, self.devices[d], list(order), benches, round_index)
                       for d, benches in busy.items()}
            parts = {d: f.result() for d, f in futures.items()}
        record = RoundRecord(round_index, list(order), engine=self.kind,
                             devices=[parts[d].summary for d in sorted(parts)], wall_s=round(time.time() - began, 3))
        for side in order:
            workers = [parts[d].workers[side] for d in sorted(parts) if side in parts[d].workers]
            records = {bid: rec for d in sorted(parts) for bid, rec in parts[d].records[side].items()}
            startup = round(sum(w["startup_s"] for w in workers), 3)
            measure = round(sum(w["measure_s"] for w in workers), 3)
            budget = next((parts[d].budget for d in sorted(parts) if parts[d].budget), None)
            record.processes.append(ProcessRecord(
                side, workers[0]["pid"] if len(workers) == 1 else None, round(startup + measure, 3), records, budget,
                began, startup_s=startup, measure_s=measure, workers=workers))
        return record

    def _assign(self, benchmarks: Sequence[Benchmark]) -> dict[int, list[Benchmark]]:
        """This round's benchmarks by device; a benchmark seen before keeps its device."""
        new = [b for b in benchmarks if b.id not in self.assigned]
        if new:
            load = {d: 0.0 for d in self.devices}
            for bench_id, d in self.assigned.items():
                load[d] += self._known_cost.get(bench_id, 0.0)
            for d, benches in assign_devices(new, list(self.devices), self.cost, load=load).items():
                for bench in benches:
                    self.assigned[bench.id] = d
                    self._known_cost[bench.id] = self.cost(bench)
        plan: dict[int, list[Benchmark]] = {d: [] for d in self.devices}
        for bench in benchmarks:
            plan[self.assigned[bench.id]].append(bench)
        return plan

    def _device_round(self, dev: _Device, order: list[str], benches: list[Benchmark], round_index: int) -> _DeviceRound:
        began = time.time()
        part = _DeviceRound({side: {} for side in order}, {}, {})
        startup = {side: 0.0 for side in order}
        measure = {side: 0.0 for side in order}
        error = dev.failure and f"device {dev.index} failed earlier: {dev.failure}"
        if not error:
            try:
                if dev.workers and dev.rounds_served >= self.restart_every:
                    self._stop(dev)
                if not dev.workers:
                    part.budget = self._start(dev, order, round_index, startup)
                self._prepare(dev, benches, startup)
                for bench in benches:
                    for side in order:
                        part.records[side][bench.id] = self._measure(dev, side, bench, round_index, measure)
                dev.rounds_served += 1
            except WorkerFailed as exc:
                error = dev.failure = str(exc)
                self._stop(dev)
                if self.log:
                    self.log(f"speed_gate: device {dev.index} failed in round {round_index + 1}: {exc}")
        if error:
            for bench in benches:
                for side in order:
                    part.records[side].setdefault(bench.id, {
                        "error": f"WorkerFailed: {error}", "error_type": "WorkerFailed", "busy": False,
                        "device_index": dev.index, "device_failed": True})
        for side in order:
            worker = dev.workers.get(side)
            part.workers[side] = {"device": dev.index, "pid": worker.pid if worker else None,
                                  "generation": dev.generation, "started_round": dev.started_round,
                                  "startup_s": round(startup[side], 3), "measure_s": round(measure[side], 3),
                                  "benchmarks": [b.id for b in benches]}
        part.summary = {"device": dev.index, "benchmarks": [b.id for b in benches], "generation": dev.generation,
                        "wall_s": round(time.time() - began, 3), "error": error or None}
        return part

    # -- the workers ------------------------------------------------------------

    def _start(self, dev: _Device, order: list[str], round_index: int, startup: dict[str, float]) -> dict[str, Any] | None:
        """A new generation of workers on ``dev``, one per side, started side by side."""
        dev.generation += 1
        dev.started_round, dev.rounds_served = round_index, 0
        env = pinned_environment(dev.index, self.environ)
        request = {"op": "start", "device": self.device, "budget": self.budget, "seed": self.seed}

        def start(side: str) -> dict[str, Any]:
            worker = WorkerProcess(self.sides[side].tree, side=side, device_index=dev.index, generation=dev.generation,
                                   extra_env=env, log=self.log)
            dev.workers[side] = worker
            answer = worker.request({**request, "side": side}, timeout_s=self.timeouts["start"], what="start")
            startup[side] += time.time() - worker.spawned_at
            return answer

        answers = _each_side(order, start)
        resolved = {a["device"] for a in answers.values()}
        if len(resolved) > 1:
            raise WorkerFailed(f"the sides' workers on device {dev.index} resolved different devices: {sorted(resolved)}")
        dev.last_work_end = 0.0
        return answers[order[0]].get("budget")

    def _prepare(self, dev: _Device, benches: list[Benchmark], startup: dict[str, float]) -> None:
        """Each worker holds exactly ``benches`` prepared (operands, compiled launches)."""
        request = {"op": "prepare", "benchmarks": [b.to_json() for b in benches]}

        def prepare(side: str) -> None:
            began = time.time()
            dev.workers[side].request(request, timeout_s=self.timeouts["setup"], what=f"preparing {[b.id for b in benches]}")
            startup[side] += time.time() - began

        _each_side(list(dev.workers), prepare)
        dev.last_work_end = time.time()  # preparing ran every launch once

    def _measure(self, dev: _Device, side: str, bench: Benchmark, round_index: int, measure: dict[str, float]) -> dict[str, Any]:
        worker = dev.workers[side]
        answer = worker.request(
            {"op": "measure", "benchmark": bench.id, "own_pids": [w.pid for w in dev.workers.values()],
             "after_own_work": time.time() - dev.last_work_end < AFTER_OWN_WORK_S},
            timeout_s=self.timeouts["measure"], what=f"measuring {bench.id} in round {round_index + 1}")
        dev.last_work_end = time.time()
        measure[side] += answer["measure_s"]
        return {**answer["record"], "device_index": dev.index, "worker_pid": worker.pid,
                "worker_generation": dev.generation, "measure_s": answer["measure_s"]}

    def _stop(self, dev: _Device) -> None:
        _each_side(list(dev.workers), lambda side: dev.workers[side].quit())
        dev.workers.clear()

    def close(self) -> None:
        """End every worker (asked to quit, killed when it does not)."""
        for dev in self.devices.values():
            self._stop(dev)

    def __enter__(self) -> "WarmEngine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _each_side(sides: list[str], action: Callable[[str], Any]) -> dict[str, Any]:
    """``action`` for every side at once; the first failure is raised after all have ended."""
    with ThreadPoolExecutor(max_workers=max(1, len(sides))) as pool:
        futures = {side: pool.submit(action, side) for side in sides}
    errors = [f.exception() for f in futures.values() if f.exception() is not None]
    if errors:
        raise errors[0]
    return {side: f.result() for side, f in futures.items()}


def open_engine(kind: str, sides: Sequence[Side], **options: Any) -> WarmEngine | FreshEngine:
    """``"warm"`` (:class:`WarmEngine`, every option) or ``"fresh"`` (ci.speed.rounds.FreshEngine: device, budget, seed, log)."""
    if kind == "warm":
        return WarmEngine(sides, **options)
    if kind == "fresh":
        unknown = sorted(set(options) - {"device", "budget", "seed", "log"})
        if unknown:
            raise ValueError(f"the fresh engine has no option(s) {unknown}")
        return FreshEngine(sides, **options)
    raise ValueError(f"engine: expected 'warm' or 'fresh', got {kind!r}")


def cost_summary(rounds: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Seconds spent starting processes vs measuring, over round records (either engine).

    ``startup_s`` and ``measure_s`` sum every process's own seconds (two workers starting side
    by side count twice: each holds the device); ``device_wall_s`` is each device's wall time.
    """
    startup = measure = 0.0
    processes: set[tuple[Any, ...]] = set()
    device_wall: dict[str, float] = {}
    for rnd in rounds:
        for proc in rnd["processes"]:
            startup += proc.get("startup_s") or 0.0
            measure += proc.get("measure_s") or 0.0
            for worker in proc.get("workers") or [{"pid": proc.get("pid"), "round": rnd["index"]}]:
                processes.add((worker.get("pid"), worker.get("round")))
        for dev in rnd.get("devices") or [{"device": "default", "wall_s": rnd.get("wall_s") or 0.0}]:
            key = str(dev["device"])
            device_wall[key] = round(device_wall.get(key, 0.0) + (dev.get("wall_s") or 0.0), 3)
    return {"startup_s": round(startup, 3), "measure_s": round(measure, 3), "processes_started": len(processes),
            "device_wall_s": device_wall}
