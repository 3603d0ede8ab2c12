"""Rounds from warm workers: each side's process started once, timed many times, on one or more devices.

:class:`WarmEngine` keeps one worker (ci.speed.engine.worker) per side and device, replaced every ``restart_every``
rounds; a dead or hung worker fails its device only. Why, and every field of the round record: docs/SPEED_GATE.md,
"Warm workers" and "ci/speed/engine/warm_engine.py".
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ci.speed.engine.device_state import Device, DevicePart, carry_in, each, summarize
from ci.speed.engine.devices import assign_devices, estimated_seconds, pinned_environment
from ci.speed.engine.rounds import Benchmark, ProcessRecord, RoundRecord, Side
from ci.speed.engine.spares import Spare, preload_request
from ci.speed.engine.worker_handle import WorkerFailed, WorkerProcess

# New workers every 2 rounds (4 before issue 37): the zone rule decides a benchmark whose worker generations differ
# (the H200's n256 configs: between-worker SD 0.19-0.25%) by its second generation, at round 3 instead of 5 or more.
DEFAULT_RESTART_EVERY = 2  # the engine's cadence as started (the surveys' workers measure the first rounds)
# The gate's cadence once it measures (issue 46, version 7): each worker generation is a degree of freedom of a look's
# variance (harness.paired.zone), with a noise model or without one, so a model never runs at a slower cadence (a
# model that kept 2 rounds a generation on an H200 left its A/A PRs undecided at 4 rounds; docs/SPEED_GATE.md).
GATE_RESTART_EVERY = 1
# NVML averages utilization over at most a second: within this long after our own work, a
# utilization above the idle bound is ours (ci.speed.engine.worker's idle check then ignores it).
AFTER_OWN_WORK_S = 2.0
# A GPU that ended a timing of ours this recently has not idled: the next timing needs no long warm-up, and none at all
# when it times the same launches (the pair's other side; ci.speed.engine.worker.warmup_for).
WARM_DEVICE_S = 2.0
START_TIMEOUT_S = 300.0  # imports and the device context
SETUP_TIMEOUT_S = 1800.0  # operands and compilation of one device's benchmarks (a cold Triton cache)
RETIRE_EXIT_S = 1.0  # a replaced worker that answered "quit" and has not exited yet is killed after this long
MEASURE_TIMEOUT_S = 600.0  # the idle wait (120 s by default), warm-up and the timed launches


class WarmEngine:
    def __init__(
        self,
        sides: Sequence[Side],
        *,
        device: str = "auto",
        budget: Mapping[str, Any] | None = None,
        seed: int = 0,
        devices: Sequence[int] = (0,),
        restart_every: int = DEFAULT_RESTART_EVERY,
        cost: Callable[[Benchmark], float] = estimated_seconds,
        start_timeout_s: float = START_TIMEOUT_S,
        setup_timeout_s: float = SETUP_TIMEOUT_S,
        measure_timeout_s: float = MEASURE_TIMEOUT_S,
        spares: bool | None = None,
        environ: Mapping[str, str] | None = None,
        log: Callable[[str], None] | None = None,
    ):
        if restart_every < 1:
            raise ValueError(f"restart_every must be >= 1 (got {restart_every})")
        if not devices or len(set(devices)) != len(devices):
            raise ValueError(f"devices: expected distinct device indices, got {list(devices)}")
        self.sides = {s.name: s for s in sides}
        self.device, self.seed, self.restart_every, self.cost = device, seed, restart_every, cost
        self.budget = dict(budget or {})  # overrides of the TimingBudget fields
        self.timeouts = {"start": start_timeout_s, "setup": setup_timeout_s, "measure": measure_timeout_s}
        # A spare's imports run beside the timing: harmless to a GPU's, not to a CPU's (the same cores).
        self.spares_asked = spares
        self.use_spares = spares if spares is not None else device != "cpu"
        self.environ = environ
        self.log: Callable[[str], None] = log or (lambda message: None)
        self.devices = {d: Device(d) for d in devices}
        self.assigned: dict[str, int] = {}  # benchmark id -> device, for the whole run
        self._load = {d: 0.0 for d in devices}  # the estimated seconds of the benchmarks assigned to each device
        self._spawned: list[WorkerProcess] = []  # every process this engine started: none outlives close()
        self._closed = False  # close() has run: a worker spawned after it is ended at once
        self._lock = threading.Lock()
        self._pair_lock = threading.Lock()  # after_pair calls, one at a time across devices
        self._after_pair: Callable[[str, dict[str, Any]], bool] | None = None
        self._sequence: list[str] = []
        self._stop_round = threading.Event()

    # -- the survey -------------------------------------------------------------

    def survey(self, requests: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any] | WorkerFailed]:
        """Each side's survey, asked of that side's worker on the first device (the generation that then measures;
        its seconds count in the first round's ``startup_s``); a side that cannot start or survey: its WorkerFailed."""
        dev = self.devices[min(self.devices)]
        scratch = DevicePart(list(requests), [])

        def one(side: str) -> dict[str, Any] | WorkerFailed:
            began = time.time()
            try:
                request = {"op": "survey", "request": dict(requests[side])}
                return dev.workers[side].request(request, timeout_s=self.timeouts["setup"], what="the survey")["survey"]
            except WorkerFailed as exc:
                return exc
            finally:
                scratch.startup[side] += time.time() - began

        try:
            dev.budget = self._start(dev, scratch, round_index=None, sides_may_fail=True)
        finally:
            dev.carried = scratch
        answers: dict[str, dict[str, Any] | WorkerFailed] = dict(scratch.start_failed)  # a side that did not start
        answers.update(each([side for side in requests if side in dev.workers], one))
        for side, answer in answers.items():  # a side that could not survey is not measured: its worker ends
            if isinstance(answer, WorkerFailed) and side in dev.workers:
                dev.workers.pop(side).quit()
        scratch.carried_wall_s = time.time() - scratch.began
        resolved = {a["device"] for a in answers.values() if isinstance(a, dict)}
        if resolved == {"cpu"}:  # "auto" found no GPU: one device, and no spares importing beside the timing
            self.use_spares = self.spares_asked if self.spares_asked is not None else False
        return answers

    # -- the round --------------------------------------------------------------

    def measure_round(
        self,
        order: Sequence[str],
        benchmarks: Sequence[Benchmark],
        *,
        round_index: int,
        after_pair: Callable[[str, dict[str, Any]], bool] | None = None,
    ) -> RoundRecord:
        """Every benchmark once per side, the sides in ``order``, each benchmark on its device. ``after_pair(bench_id,
        {side: record})`` is called, one call at a time, as each pair completes; True stops the round on every device.
        """
        if sorted(order) != sorted(set(order)) or any(name not in self.sides for name in order):
            raise ValueError(f"order {list(order)} must name each of the sides {sorted(self.sides)} at most once")
        plan = self._assign(benchmarks)
        self._after_pair, self._sequence, self._stop_round = after_pair, [], threading.Event()
        began = time.time()
        # A device whose workers surveyed joins its first round even without benchmarks: its start-up is counted.
        parts = {
            d: DevicePart(list(order), benches, began)
            for d, benches in plan.items()
            if benches or self.devices[d].carried is not None
        }
        # Every device is ready before any measures: one device's start-up (its context, its
        # compilation, a CPU-heavy Triton build) never runs beside another device's timing.
        each(list(parts), lambda d: self._ready(self.devices[d], parts[d], round_index))
        each(list(parts), lambda d: self._measure_all(self.devices[d], parts[d], round_index))
        for d, part in parts.items():
            summarize(self.devices[d], part)
        record = RoundRecord(
            round_index,
            list(order),
            devices=[parts[d].summary for d in sorted(parts)],
            wall_s=round(time.time() - began, 3),
        )
        measured = [bid for d in sorted(parts) for bid in parts[d].records[order[-1]]] if order else []
        record.sequence = self._sequence + [bid for bid in measured if bid not in self._sequence]
        for side in order:
            workers = [parts[d].workers[side] for d in sorted(parts) if side in parts[d].workers]
            records = {bid: rec for d in sorted(parts) for bid, rec in parts[d].records[side].items()}
            startup = round(sum(w["startup_s"] for w in workers), 3)
            measure = round(sum(w["measure_s"] for w in workers), 3)
            budget = next((parts[d].budget for d in sorted(parts) if parts[d].budget), None)
            record.processes.append(
                ProcessRecord(
                    side,
                    workers[0]["pid"] if len(workers) == 1 else None,
                    round(startup + measure, 3),
                    records,
                    budget,
                    began,
                    startup_s=startup,
                    measure_s=measure,
                    workers=workers,
                )
            )
        return record

    def _assign(self, benchmarks: Sequence[Benchmark]) -> dict[int, list[Benchmark]]:
        """This round's benchmarks by device; a benchmark seen before keeps its device."""
        new = [b for b in benchmarks if b.id not in self.assigned]
        for d, benches in assign_devices(new, list(self.devices), self.cost, load=self._load).items():
            for bench in benches:
                self.assigned[bench.id] = d
                self._load[d] += self.cost(bench)
        plan: dict[int, list[Benchmark]] = {d: [] for d in self.devices}
        for bench in benchmarks:
            plan[self.assigned[bench.id]].append(bench)
        return plan

    def _ready(self, dev: Device, part: DevicePart, round_index: int) -> None:
        """Phase one: the device's workers started (a restart when due) and holding ``part.benches``."""
        if dev.failure:
            part.error = f"device {dev.index} failed earlier: {dev.failure}"
            return
        retiring: dict[str, threading.Thread] = {}
        try:
            if dev.workers and dev.rounds_served >= self.restart_every:
                # The old generation ends (quit, exit) while the new one starts: its teardown costs no wait of its own.
                retiring = {
                    side: threading.Thread(target=worker.quit, args=(RETIRE_EXIT_S,), daemon=True)
                    for side, worker in dev.workers.items()
                }
                for ending in retiring.values():
                    ending.start()
                dev.workers.clear()
            if dev.carried is not None:
                carry_in(dev, part, round_index)
            if not dev.workers:
                part.budget = self._start(dev, part, round_index)
            # The old generation is gone before the new one allocates its operands: both holding every benchmark's
            # inputs at once does not fit an 80 GB card (an H100's calibration ran out of memory at its first restart).
            self._retired(retiring, part)
            self._prepare(dev, part)
        except WorkerFailed as exc:
            self._fail(dev, part, exc, round_index)
        finally:
            self._retired(retiring, part)  # gone before anything is timed: no stranger on the device

    @staticmethod
    def _retired(retiring: dict[str, threading.Thread], part: DevicePart) -> None:
        """Wait for the old generation's workers to exit (their wait counts as the side's start-up); once only."""
        for side, ending in list(retiring.items()):
            began = time.time()
            ending.join()
            part.startup[side] = part.startup.get(side, 0.0) + time.time() - began
            del retiring[side]

    def _measure_all(self, dev: Device, part: DevicePart, round_index: int) -> None:
        """Phase two: benchmark by benchmark, the sides in order; the next generation's spares start meanwhile."""
        if part.error or not part.benches:
            return
        try:
            if self.use_spares and not dev.spares:  # the next generation, preloading (CPU only) while this one measures
                kernels = [b.kernel for b in part.benches]
                for side in part.order:
                    worker = self._spawn(dev, side, dev.generation + 1)
                    dev.spares[side] = Spare(worker, kernels=kernels, timeout_s=self.timeouts["start"])
            for bench in part.benches:
                if self._stop_round.is_set():  # the gate has its answer (the PR failed): the rest of the round waits
                    break
                part.measuring = bench.id
                for side in part.order:
                    part.records[side][bench.id] = self._measure(dev, side, bench, round_index, part.measure)
                part.measuring = None
                with self._pair_lock:  # both sides measured: note the order, ask the gate whether the round may stop
                    self._sequence.append(bench.id)
                    pair = {side: part.records[side][bench.id] for side in part.order}
                    if self._after_pair is not None and self._after_pair(bench.id, pair):
                        self._stop_round.set()
            dev.rounds_served += 1
        except WorkerFailed as exc:
            self._fail(dev, part, exc, round_index)

    def revive(self) -> list[int]:
        """Failed devices made usable again (their workers already ended): the next round starts a new generation
        there. For a caller that has taken off what killed them (the calibration); returns their indices."""
        failed = [d.index for d in self.devices.values() if d.failure]
        for index in failed:
            self.devices[index].failure = None
        return failed

    def _fail(self, dev: Device, part: DevicePart, exc: WorkerFailed, round_index: int) -> None:
        part.error = dev.failure = str(exc)
        self._end(dev)
        self.log(f"speed_gate: device {dev.index} failed in round {round_index + 1}: {exc}")

    # -- the workers ------------------------------------------------------------

    def _spawn(self, dev: Device, side: str, generation: int) -> WorkerProcess:
        worker = WorkerProcess(
            self.sides[side].tree,
            side=side,
            device_index=dev.index,
            generation=generation,
            extra_env=pinned_environment(dev.index, self.environ),
            log=self.log,
        )
        with self._lock:
            closed = self._closed
            if not closed:
                self._spawned.append(worker)
        if closed:  # a thread an interrupt left running spawned it after close(): ended here, its folder removed
            worker.kill()
            raise WorkerFailed(f"{worker.name}: the engine had closed")
        return worker

    def _start(
        self, dev: Device, part: DevicePart, round_index: int | None, sides_may_fail: bool = False
    ) -> dict[str, Any] | None:
        """A new generation of workers on ``dev``, one per side, side by side: its spares promoted, or fresh ones.
        ``round_index`` None: for the survey. ``sides_may_fail``: a side failing leaves the others started."""
        dev.generation += 1
        dev.started_round, dev.rounds_served = round_index, 0
        spares, dev.spares = dev.spares, {}
        request = {"op": "start", "device": self.device, "budget": self.budget, "seed": self.seed}
        kernels = [b.kernel for b in part.benches]

        def start(side: str) -> dict[str, Any] | None:
            go_at = time.time()
            worker, spare = None, spares.pop(side, None)
            try:
                if spare is not None:
                    try:
                        worker, part.overlapped[side] = spare.promote(self.timeouts["start"])
                    except WorkerFailed as exc:
                        part.spare_failed[side] = str(exc)
                        self.log(
                            f"speed_gate: device {dev.index}: the {side} spare could not be promoted "
                            f"(starting a fresh worker instead): {exc}"
                        )
                dev.prespawned[side] = worker is not None
                if worker is None:
                    worker = dev.workers[side] = self._spawn(dev, side, dev.generation)
                    worker.request(preload_request(kernels), timeout_s=self.timeouts["start"], what="preload")
                    preloaded_at = time.time()
                else:
                    assert spare is not None and spare.preloaded_at is not None
                    preloaded_at = spare.preloaded_at
                dev.workers[side] = worker
                answer = worker.request({**request, "side": side}, timeout_s=self.timeouts["start"], what="start")
            except WorkerFailed as exc:
                if not sides_may_fail:
                    raise
                failed = dev.workers.pop(side, None)
                if failed is not None:
                    failed.kill()
                part.start_failed[side] = exc
                return None
            part.phases[side] = {
                "spawned_at": worker.spawned_at,
                "preloaded_at": preloaded_at,
                "go_at": go_at,
                "started_at": time.time(),
            }
            part.startup[side] += time.time() - go_at
            return answer

        try:
            answers = each(list(part.order), start)
        finally:
            for spare in spares.values():  # a side not in this round's order: its spare is not needed
                spare.kill()
        started = [a for a in answers.values() if a is not None]
        resolved = {a["device"] for a in started}
        if len(resolved) > 1:
            raise WorkerFailed(
                f"the sides' workers on device {dev.index} resolved different devices: {sorted(resolved)}"
            )
        dev.last_work_end = 0.0
        return started[0].get("budget") if started else None

    def _prepare(self, dev: Device, part: DevicePart) -> None:
        """Each worker holds exactly ``part.benches`` prepared (operands, compiled launches)."""
        benches = part.benches
        request = {"op": "prepare", "benchmarks": [b.to_json() for b in benches]}

        def prepare(side: str) -> None:
            began = time.time()
            answer = dev.workers[side].request(
                request, timeout_s=self.timeouts["setup"], what=f"preparing {[b.id for b in benches]}"
            )
            part.startup[side] += time.time() - began
            # Where a generation's start-up goes (its share of a round is the cadence's cost): kept for the record.
            prepared = (answer.get("prepared") or {}).items()
            part.prepared_s[side] = {i: p.get("prepare_s") for i, p in prepared}
            part.prepared_parts_s[side] = {i: p.get("parts_s") for i, p in prepared if p.get("parts_s")}

        each(list(dev.workers), prepare)
        dev.last_work_end = time.time()  # preparing ran every launch once

    def _measure(
        self, dev: Device, side: str, bench: Benchmark, round_index: int, measure: dict[str, float]
    ) -> dict[str, Any]:
        worker = dev.workers[side]
        last_bench, last_end = dev.last_timing
        now = time.time()
        device_warm = now - last_end < WARM_DEVICE_S
        answer = worker.request(
            {
                "op": "measure",
                "benchmark": bench.id,
                "own_pids": [w.pid for w in dev.workers.values()],
                "after_own_work": now - dev.last_work_end < AFTER_OWN_WORK_S,
                "device_warm": device_warm,
                "follows_itself": device_warm and last_bench == bench.id,
            },
            timeout_s=self.timeouts["measure"],
            what=f"measuring {bench.id} in round {round_index + 1}",
        )
        dev.last_work_end = time.time()
        # Only a timing that ran its launches warms the device for the next (an error or a busy GPU did not).
        dev.last_timing = (bench.id, dev.last_work_end) if "samples_s" in answer["record"] else ("", 0.0)
        measure[side] += answer["measure_s"]
        return {
            **answer["record"],
            "device_index": dev.index,
            "worker_pid": worker.pid,
            "worker_generation": dev.generation,
            "measure_s": answer["measure_s"],
        }

    def _end(self, dev: Device) -> None:
        # Taken off the device first: close() (a signal) and a measuring thread whose worker it killed may both end it.
        workers, spares = dict(dev.workers), list(dev.spares.values())
        dev.workers.clear()
        dev.spares.clear()
        for spare in spares:
            spare.kill()
        each(list(workers), lambda side: workers[side].quit())

    def process_ids(self) -> list[int]:
        """Every process this engine has started (workers and spares), ended or not."""
        with self._lock:
            return [worker.pid for worker in self._spawned]

    def close(self) -> None:
        """End every worker (asked to quit, killed when it does not) and every spare; then anything still alive."""
        with self._lock:  # from now on a worker spawned by a thread still running is ended at once (_spawn)
            self._closed = True
        unused = [spare.pid for dev in self.devices.values() for spare in dev.spares.values()]
        for dev in self.devices.values():
            self._end(dev)
        with self._lock:
            spawned = list(self._spawned)
        for worker in spawned:  # one that an exception left behind
            worker.kill()
        if unused:
            self.log(f"speed_gate: {len(unused)} spare worker(s) not needed, ended: pids {unused}")

    def __enter__(self) -> WarmEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
