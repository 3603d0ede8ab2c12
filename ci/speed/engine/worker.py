"""A warm worker, ``python -m ci.speed.engine.worker`` (started by ci.speed.engine.worker_handle): one side's
kernels, set up once, timed on request. One JSON request a line on stdin (OPS, or "quit"), one answer a line on
stdout; anything else written to stdout goes to stderr. The protocol: docs/SPEED_GATE.md, "ci/speed/engine/worker.py".
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, TextIO

from ci.speed.engine.survey import device_environment, log, resolve_device, setup_device

PROTOCOL = "mxfp4-speed-worker/1"
OPS = ("measure", "preload", "prepare", "quit", "start", "survey")  # the requests, each a method of Worker
# How a timing on a GPU warms up depends on what the device just ran, not on the worker's history (issue 46, H100
# records: a one-launch warm-up right after a *different* benchmark left the first side of a pair 0.11-0.54% slower
# than its partner, which inflated the tracked config's within SD to 0.23%; docs/SPEED_GATE.md, "Warm-up by the
# device's state"):
# - the device just timed these very launches (the pair's other side): one launch, the samples checked for steadiness;
# - it just timed something else of ours: the suite's full warm-up;
# - it idled (a round's start, after preparing, between rounds): at least FIRST_GPU_WARMUP_MS (the H200 runs that set
#   it: docs/SPEED_GATE.md, "Warm workers", "Repeat timings").
FIRST_GPU_WARMUP_MS = 2000.0
WAIT_COOLS_S = 1.0  # a wait for the GPU to be idle this long or longer: the device is taken to have cooled


@dataclass(frozen=True)
class Warmup:
    """How one timing warms up: its budget, and whether it is ``settled`` (harness.timing.benchmark)."""

    budget: Any
    settled: bool
    why: str  # for the record: "follows itself", "after our timing", "after idle" or "cpu"


def warmup_for(budget: Any, device: str, *, device_warm: bool, follows_itself: bool) -> Warmup:
    """The warm-up of a timing on ``device``: ``device_warm``, a timing of ours ended on it moments ago;
    ``follows_itself``, that timing was of this same benchmark. A CPU keeps its own rule (a full warm-up, retried
    until steady: its timed cores are shared with whatever else runs)."""
    if device == "cpu":
        return Warmup(budget, False, "cpu")
    if device_warm and follows_itself:
        return Warmup(budget, True, "follows itself")
    if device_warm:
        return Warmup(budget, False, "after our timing")
    if budget.warmup_ms >= FIRST_GPU_WARMUP_MS:
        return Warmup(budget, False, "after idle")
    longer = replace(
        budget, warmup_ms=FIRST_GPU_WARMUP_MS, max_warmup_ms=max(budget.max_warmup_ms, FIRST_GPU_WARMUP_MS + 1000.0)
    )
    return Warmup(longer, False, "after idle")


def timing_budget(device: str, overrides: dict[str, Any] | None) -> Any:
    """The asv suite's budget for ``device`` (asv_bench.common), with ``overrides`` of TimingBudget fields."""
    from asv_bench import common

    budget = common.CPU_BUDGET if device == "cpu" else common.GPU_BUDGET
    known = {f.name for f in fields(budget)}
    unknown = sorted(set(overrides or {}) - known)
    if unknown:
        raise ValueError(f"timing budget: unknown field(s) {unknown}; TimingBudget has {sorted(known)}")
    return replace(budget, **(overrides or {}))


def wrong_result_record(report: Any) -> dict[str, Any]:
    """The measurement record of a benchmark whose output is wrong at its shape (a harness.output_check.OutputReport):
    an error record the gate turns into a wrong result (ci.speed.decide.selection: mark_wrong_at_shape), never a
    speed."""
    return {"error": report.summary(), "error_type": "WrongResult", "busy": False, "wrong_result": report.to_json()}


@dataclass
class Prepared:
    """One benchmark, ready to time: its launches (one per input set) hold their operands."""

    bench: dict[str, Any]
    launches: list[Callable[[], None]] = field(default_factory=list)
    inputs_cold: bool = True
    prepare_s: float = 0.0
    # Where the set-up seconds went (kernel, inputs, first launches, output check): a new generation pays them every
    # round at the gate's cadence, and which part dominates decides what could be moved off the critical path.
    parts_s: dict[str, float] = field(default_factory=dict)
    error: dict[str, Any] | None = None  # the measurement record to answer when set-up failed or the output is wrong
    output_check: str = ""  # harness.output_check's summary of the first launch's output


@dataclass
class Worker:
    """The state of one worker process: its device, budget and prepared benchmarks."""

    device: str = "cpu"
    side: str = "?"
    seed: int = 0
    budget: Any = None
    prepared: dict[str, Prepared] = field(default_factory=dict)
    monitor: Any = None
    monitor_problem: str | None = None

    # -- requests -----------------------------------------------------------

    def preload(self, request: dict[str, Any]) -> dict[str, Any]:
        began = time.perf_counter()
        import torch  # noqa: F401  (imported, not initialized: no device call here)

        from asv_bench import common

        preloaded = []
        for name in request.get("kernels", ()):
            try:  # a kernel this commit lacks is reported by prepare, as without a preload
                common.registered_kernel(name)
                preloaded.append(name)
            except Exception as exc:
                log(f"preload of kernel {name!r} [{self.side}]: {type(exc).__name__}: {exc}")
        return {"pid": os.getpid(), "preload_s": round(time.perf_counter() - began, 4), "preloaded": preloaded}

    def start(self, request: dict[str, Any]) -> dict[str, Any]:
        self.device = resolve_device(request.get("device", "auto"))
        setup_device(self.device)
        self.side = request.get("side", "?")
        self.seed = int(request.get("seed", 0))
        self.budget = timing_budget(self.device, request.get("budget"))
        if self.device == "cuda":
            import torch

            torch.empty(1, device="cuda")  # create the context now: it is part of starting, not of measuring
        return {
            "pid": os.getpid(),
            "device": self.device,
            "environment": device_environment(self.device),
            "budget": asdict(self.budget),
            "ready_at": time.time(),
        }

    def survey(self, request: dict[str, Any]) -> dict[str, Any]:
        from ci.speed.engine.survey import survey

        return {"survey": survey(dict(request["request"], device=self.device))}

    def prepare(self, request: dict[str, Any]) -> dict[str, Any]:
        wanted = {b["id"]: b for b in request["benchmarks"]}
        released = [i for i in self.prepared if i not in wanted]
        for bench_id in released:
            del self.prepared[bench_id]
        if released:
            import gc

            gc.collect()
            if self.device == "cuda":
                import torch

                torch.cuda.empty_cache()
        for bench_id, bench in wanted.items():
            if bench_id not in self.prepared:
                self.prepared[bench_id] = self._prepare_one(bench)
        return {
            "prepared": {
                i: {
                    "prepare_s": round(p.prepare_s, 4),
                    "parts_s": {part: round(v, 4) for part, v in p.parts_s.items()},
                    **({"error": p.error["error"]} if p.error else {}),
                }
                for i, p in self.prepared.items()
            }
        }

    def measure(self, request: dict[str, Any]) -> dict[str, Any]:
        from harness import gpu_state, timing

        bench_id = request["benchmark"]
        prepared = self.prepared.get(bench_id)
        if prepared is None:
            raise KeyError(f"benchmark {bench_id!r} is not prepared in this worker (prepare it first)")
        began, measured_at = time.perf_counter(), time.time()
        if prepared.error is not None:
            return {"record": {**prepared.error, "measured_at": measured_at}, "measure_s": 0.0}
        bench = prepared.bench
        label = f"{bench_id} [{self.side}]"
        try:
            idle = self._wait_idle(frozenset(request.get("own_pids", ())), bool(request.get("after_own_work")))
            warmup = warmup_for(
                self.budget,
                self.device,
                # An idle wait of its own (another process on the GPU) lets the device cool like any gap.
                device_warm=bool(request.get("device_warm")) and idle.waited_s < WAIT_COOLS_S,
                follows_itself=bool(request.get("follows_itself")),
            )
            result = timing.benchmark(
                prepared.launches,
                flops=timing.gemm_flops(bench["m"], bench["n"], bench["k"]),
                device=self.device,
                budget=warmup.budget,
                monitor=self.monitor,
                inputs_cold=prepared.inputs_cold,
                label=label,
                primed=True,  # preparing ran every launch once (compilation, first-touch allocations)
                settled=warmup.settled,
            )
        except gpu_state.GpuBusyError as exc:  # the parent excludes the round: the GPU was not ours
            record = {"error": str(exc), "error_type": type(exc).__name__, "busy": True}
            log(f"{label}: GPU busy: {exc}")
        except Exception as exc:
            record = _error_record(exc)
            log(f"{label}: FAILED: {record['error']}")
        else:
            result = replace(result, idle=idle.to_json())
            record = {**result.to_json(), "output_check": prepared.output_check, "warmup_rule": warmup.why}
            log(result.summary())
        record["measured_at"] = measured_at
        return {"record": record, "measure_s": round(time.perf_counter() - began, 4)}

    def quit(self, request: dict[str, Any] | None = None) -> dict[str, Any]:
        if self.monitor is not None:
            self.monitor.close()
            self.monitor = None
        return {}

    # -- helpers ------------------------------------------------------------

    def _prepare_one(self, bench: dict[str, Any]) -> Prepared:
        import torch

        from asv_bench import common
        from ci.common.correctness import check_kept_output
        from harness import timing
        from harness.output_check import KeptOutput

        began = time.perf_counter()
        prepared = Prepared(bench)
        mark = began

        def part_done(name: str) -> None:
            nonlocal mark
            now = time.perf_counter()
            prepared.parts_s[name] = now - mark
            mark = now

        try:
            kernel = common.registered_kernel(bench["kernel"])
            kept = KeptOutput(common.kernel_prepare(kernel, bench["config"]))
            part_done("kernel")
            inputs = timing.gemm_inputs(bench["m"], bench["n"], bench["k"], device=self.device, seed=self.seed)
            prepared.launches = [kept(a, b, out) for a, b, out in inputs.sets]
            prepared.inputs_cold = inputs.cold
            if self.device == "cuda":
                torch.cuda.synchronize()
            part_done("inputs")
            for launch in prepared.launches:  # compile now: start-up, not measuring
                launch()
            if self.device == "cuda":
                torch.cuda.synchronize()
            part_done("first_launches")
            # What is timed must be right at this shape: the first set's output, written by the launch just run.
            report = check_kept_output(kept, seed=self.seed)
            part_done("output_check")
            prepared.output_check = report.summary()
            if not report.passed:
                prepared.error = wrong_result_record(report)
                prepared.launches = []
                log(f"{bench['id']} [{self.side}]: {report.summary()}")
        except Exception as exc:
            prepared.error = _error_record(exc)
            prepared.launches = []
            log(f"{bench['id']} [{self.side}]: set-up FAILED: {prepared.error['error']}")
        prepared.prepare_s = time.perf_counter() - began
        return prepared

    def _wait_idle(self, partner_pids: frozenset[int], after_own_work: bool) -> Any:
        """harness.timing's idle check, knowing that the other workers of this device are ours (docs/SPEED_GATE.md,
        "ci/speed/engine/worker.py": the partner's pid, the utilization right after our own work)."""
        from harness import gpu_state

        if self.monitor is None and self.monitor_problem is None and self.device != "cpu":
            try:
                self.monitor = gpu_state.open_monitor(self.device)
            except gpu_state.MonitorUnavailable as exc:
                if not gpu_state.override_requested():
                    raise gpu_state.MonitorUnavailable(
                        f"{exc}. Cannot check that the GPU is idle, so not timing; set {gpu_state.ALLOW_BUSY_ENV}=1 "
                        "to time anyway."
                    ) from None
                self.monitor_problem = f"not monitored: {exc}"
        if self.monitor is None:
            if self.monitor_problem:
                return gpu_state.IdleReport("overridden", 0.0, (self.monitor_problem,), None)
            return gpu_state.IdleReport("no gpu", 0.0, (), None)
        policy = gpu_state.IdlePolicy.from_environment()
        if after_own_work:
            policy = replace(policy, max_utilization_pct=float("inf"), poll_s=min(policy.poll_s, 0.05))
        ours = frozenset({os.getpid()}) | partner_pids
        began = time.monotonic()
        while True:
            state = self.monitor.snapshot()
            # The management library lists our pids, or in a container host pids, none of ours: then as many listed
            # processes as we have workers on the device are taken to be ours.
            problems = gpu_state.idle_problems(
                state,
                policy,
                own_pids=ours if ours & set(state.process_ids) else ours | frozenset(state.process_ids[: len(ours)]),
                own_context=False,
            )
            waited = time.monotonic() - began
            if not problems:
                return gpu_state.IdleReport("idle", waited, (), state)
            if gpu_state.override_requested():
                return gpu_state.IdleReport("overridden", waited, tuple(problems), state)
            if waited >= policy.wait_s:
                raise gpu_state.GpuBusyError(
                    f"GPU {state.index} ({state.name}) is not idle after waiting {waited:.0f} s: "
                    f"{'; '.join(problems)}. Not recording a benchmark on a busy GPU "
                    f"(set {gpu_state.ALLOW_BUSY_ENV}=1 for a local experiment)."
                )
            time.sleep(min(policy.poll_s, max(policy.wait_s - waited, 0.0)))


def _error_record(exc: BaseException) -> dict[str, Any]:
    return {
        "error": f"{type(exc).__name__}: {exc}",
        "error_type": type(exc).__name__,
        "busy": False,
        "traceback": "".join(traceback.format_exception(exc))[-4000:],
    }


def serve(requests: TextIO, answers: TextIO) -> int:
    """Answer ``requests`` line by line until "quit" or end of input."""
    worker = Worker()
    for line in filter(str.strip, requests):
        op = None
        try:
            request = json.loads(line)
            op = request.get("op")
            if op not in OPS:
                raise ValueError(f"unknown op {op!r}; expected one of {list(OPS)}")
            answer = {"ok": True, "protocol": PROTOCOL, **getattr(worker, op)(request)}
        except Exception as exc:
            answer = {"ok": False, "protocol": PROTOCOL, **_error_record(exc)}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
        if op == "quit":
            return 0
    worker.quit()
    return 0


def main() -> int:
    # The answers get a private copy of stdout; file descriptor 1 becomes stderr, so a stray print
    # (a kernel's, a library's, even from C) cannot corrupt the protocol.
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return serve(sys.stdin, answers)


if __name__ == "__main__":
    sys.exit(main())
