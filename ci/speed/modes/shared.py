"""What the speed gate's modes share: the warm workers (ci.speed.engine.warm_engine) and both surveys, the round
loop that decides each gated benchmark (ci.speed.decide.verdict), the thresholds and calibrations, record parts."""

from __future__ import annotations

import math
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ci.common import interrupts
from ci.common.commit_tree import REPO_ROOT
from ci.common.errors import HarnessError
from ci.speed.decide.codes import Status, Stop
from ci.speed.decide.exclusion import ExclusionRule
from ci.speed.decide.generations import RunNoise, run_noise
from ci.speed.decide.noise_file import ModelChoice, NoiseModel
from ci.speed.decide.selection import Entry, Selection, Selector
from ci.speed.decide.thresholds import THRESHOLDS_PATH, Thresholds, load_thresholds
from ci.speed.decide.verdict import CALIBRATION_PATH, BenchmarkResult, decide_entry, load_calibrations
from ci.speed.engine.devices import visible_gpu_count
from ci.speed.engine.memory import DeviceMemory, memory_skips
from ci.speed.engine.rounds import Side, SurveyFailed, rotating_order, survey_request
from ci.speed.engine.survey import log
from ci.speed.engine.warm_engine import MEASURE_TIMEOUT_S, SETUP_TIMEOUT_S, START_TIMEOUT_S, WarmEngine
from ci.speed.options import SpeedOptions
from harness.paired.sequential import SequentialPlan
from harness.paired.verdict import Verdict


class GateError(HarnessError, RuntimeError):
    """The gate cannot decide; the message says why (exit 2)."""


def survey_both(
    sides: Mapping[str, Side | None],
    selector: Selector,
    engine: WarmEngine,
    pairs: Sequence[tuple[str, str]] | None = None,
) -> dict[str, dict[str, Any] | None]:
    """Both surveys at once, asked of the warm workers that will measure (nothing is timed yet); ``pairs``: only
    these (kernel, config)s. A side without kernels/ is None; a base that cannot survey says why under
    ``BASE_UNMEASURABLE`` (its benchmarks are new); a head that cannot is a harness error."""
    present = {name: side for name, side in sides.items() if side is not None}
    request = survey_request(
        device=engine.device,
        kernels=selector.kernels,
        configs=selector.configs,
        shapes=list(selector.sizes),
        pairs=pairs,
    )
    log(f"speed_gate: surveying {' and '.join(sorted(present))} in the workers that will measure them")
    answers = engine.survey({name: request for name in present}) if present else {}
    surveys = {name: _survey_result(name, answers[name]) if name in present else None for name in sides}
    devices = {s["device"] for s in surveys.values() if s is not None and BASE_UNMEASURABLE not in s}
    if len(devices) > 1:
        raise GateError(f"the sides resolved different devices: {sorted(devices)}")
    return surveys


BASE_UNMEASURABLE = "base_unmeasurable"  # a survey's key: why the base could not be surveyed
SKIPPED = "skipped:"  # the note of a benchmark the calibration took off (it could not run): the reason follows
STOPPED = "stopped after round"  # ... of one that failed after measured rounds: those rounds are kept


def _survey_result(name: str, answer: dict[str, Any] | Exception) -> dict[str, Any] | None:
    """A worker's survey; a base whose worker could not survey is unmeasurable, a head a harness error."""
    if not isinstance(answer, Exception):
        return answer
    if name != "base":
        raise SurveyFailed(f"{name} survey: {answer}")
    log(f"speed_gate: the base could not be surveyed; its benchmarks count as new: {name} survey: {answer}")
    lines = str(answer).strip().splitlines()
    last = (lines[-1] if lines else type(answer).__name__)[:300]
    return {BASE_UNMEASURABLE: f"the base could not be surveyed ({last})"}


def open_measurer(sides: Sequence[Side], options: SpeedOptions, deadline: float | None) -> WarmEngine:
    """The warm workers that survey and measure ``sides`` on the GPUs of ``--device cuda:LIST`` (default every
    visible one); closing the engine ends every process it started."""
    device = options.device
    devices = (
        list(options.gpus) if options.gpus is not None else list(range(visible_gpu_count() if device != "cpu" else 1))
    )
    # Every read from a worker is bounded by what is left until ``deadline`` (--max-minutes; at least the grace,
    # $MXFP4_SPEED_GRACE_S: ci.speed.engine.grace): a hanging kernel cannot hold the runner.
    left = math.inf if deadline is None else max(options.grace_s, deadline - time.time())
    return WarmEngine(
        sides,
        device=device,
        budget=options.timing_overrides,
        log=log,
        restart_every=options.restart_every,
        devices=devices,
        start_timeout_s=min(START_TIMEOUT_S, left),
        setup_timeout_s=min(SETUP_TIMEOUT_S, left),
        measure_timeout_s=min(MEASURE_TIMEOUT_S, left),
    )


def run_rounds(
    sides: Sequence[Side],
    selection: Selection,
    measurer: WarmEngine | None,
    *,
    plan: SequentialPlan,
    rule: ExclusionRule,
    thresholds: Thresholds,
    limit: int,
    fixed: bool,
    calibrations: Mapping[str, Any] | None = None,
    deadline: float | None = None,
    stop_when_failed: bool = False,
    model: NoiseModel | None = None,
    finish_by: float | None = None,
    skip_failed: bool = False,
) -> tuple[list[dict[str, Any]], list[BenchmarkResult], RunNoise | None]:
    """Rounds until every gated benchmark is decided (all ``limit`` of them when ``fixed``); then decide each.

    ``measurer``: None when nothing can be measured. No round starts after ``deadline``, nor one that would end after
    ``finish_by``, nor (``stop_when_failed``) once the PR has failed; with a noise model a regression also ends its
    round. A head that raises is a harness error, unless ``skip_failed`` (the calibration: one benchmark that cannot
    run must not cost the others): then that benchmark is taken off, n/a with a note starting :data:`SKIPPED`, or, when
    it was measured before it failed, stopped: gated on the rounds it has, with a note starting :data:`STOPPED`.
    Returns the rounds, the results and the run's noise view.
    """
    stop_when_failed = stop_when_failed and not fixed
    model = model if plan.variance == "model" else None  # a plan without the model never reads one
    gated_ids = [b.id for b in selection.gated]
    rounds: list[dict[str, Any]] = []
    active = selection.gated
    names = [s.name for s in sides]
    ran_out = Stop.FIXED_ROUNDS if fixed else Stop.ROUND_BUDGET  # unless a break below says otherwise
    base_failed: dict[str, str] = {}  # benchmark id -> why the base could not be measured
    failed: dict[str, str] = {}  # skip_failed: benchmark id -> why it was taken off (nothing measured)
    stopped: dict[str, str] = {}  # skip_failed: failed after measured rounds: measured no more, those rounds kept
    regressed: list[str] = []
    restart = getattr(measurer, "restart_every", 4)

    def noise_view(recorded: Sequence[Mapping[str, Any]]) -> RunNoise | None:
        return None if model is None else run_noise(model, rule, plan.guard_level, gated_ids, recorded)

    def decide(entry: Entry, upto: Sequence[Mapping[str, Any]], view: RunNoise | None, **how: Any) -> BenchmarkResult:
        """``entry`` over the rounds ``upto``; ``how``: decide_entry's own keywords."""
        noise = view.rounds_noise(entry.benchmark.id) if view else None
        return decide_entry(entry, upto, thresholds, plan, rule, noise=noise, restart_every=restart, **how)

    interrupted: KeyboardInterrupt | None = None
    try:  # an interrupt (a cancelled job, its timeout) keeps the complete rounds: they are decided and recorded
        while active and len(rounds) < limit:
            failing = regressed + [e.benchmark.id for e in selection.entries if e.status is Status.WRONG_RESULT]
            if stop_when_failed and failing:
                ran_out = Stop.PR_FAILED
                more = " ..." if len(failing) > 3 else ""
                log(
                    f"speed_gate: the PR fails ({', '.join(failing[:3])}{more}): no more rounds; {len(active)} "
                    "benchmark(s) not decided (--all-verdicts measures them to their verdicts)"
                )
                break
            if deadline is not None and time.time() >= deadline:
                ran_out = Stop.TIME_BUDGET
                log(
                    f"speed_gate: the time budget is spent after {len(rounds)} rounds; {len(active)} benchmark(s) "
                    "undecided"
                )
                break
            longest = max((r.get("wall_s") or 0.0 for r in rounds), default=0.0)
            if finish_by is not None and rounds and time.time() + longest > finish_by:
                ran_out = Stop.TIME_BUDGET
                log(
                    f"speed_gate: a round takes up to {longest:.0f} s: no time for another within the budget after "
                    f"{len(rounds)} rounds"
                )
                break
            i = len(rounds)
            order = rotating_order(names, i)
            log(f"speed_gate: round {i + 1}/{limit} ({' '.join(order)}): {len(active)} benchmark(s)")
            after_pair = (
                _pair_decider(i, order, rounds, active, noise_view(rounds), decide)
                if model is not None and stop_when_failed
                else None
            )
            assert measurer is not None  # a gated benchmark has both sides' workers
            record = measurer.measure_round(order, active, round_index=i, after_pair=after_pair).to_json()
            # A worker that died measuring a benchmark names it: that one is skipped, the device's others only lose
            # this round, and the device starts a new generation (skip_failed: the calibration).
            culprit_known = any(
                rec.get("died_measuring") for proc in record["processes"] for rec in proc["records"].values()
            )
            for proc in record["processes"]:
                for bench_id, rec in proc["records"].items():
                    if "error" in rec and not rec.get("busy") and not rec.get("wrong_result"):
                        if skip_failed:
                            why = _skip_reason(proc["side"], i, rec, culprit_known)
                            if why is None or bench_id in failed or bench_id in stopped:
                                continue
                            if _measured_before(rounds, bench_id):  # its earlier rounds are kept: it is only stopped
                                stopped[bench_id] = f"{STOPPED} {i}: {why[len(SKIPPED) :].strip()}"
                                log(f"speed_gate:   {bench_id}: {stopped[bench_id]} (its earlier rounds are kept)")
                            else:
                                log(f"speed_gate:   {bench_id}: {why}")
                                failed[bench_id] = why
                            continue
                        if proc["side"] != "base":
                            raise GateError(f"{bench_id} failed at {proc['side']} in round {i + 1}: {rec['error']}")
                        # Only the head's own failures fail: a base that raises makes the benchmark new.
                        base_failed.setdefault(bench_id, f"base raised in round {i + 1}: {rec['error']}")
                        log(f"speed_gate:   {bench_id}: {base_failed[bench_id]} -> new (not gated)")
            if skip_failed and culprit_known:
                revived = measurer.revive()
                log(f"speed_gate: device(s) {revived}: a worker died; a new generation starts there next round")
            rounds.append(record)
            wrong = selection.mark_wrong_at_shape(record)  # a wrong output at the timed shape: never a speed
            for bench_id in sorted(wrong):
                note = next(e for e in selection.entries if e.benchmark.id == bench_id).note
                log(f"speed_gate:   {bench_id}: {note}")
            view = noise_view(rounds)
            measured = set(record.get("sequence") or [b for p in record["processes"] for b in p["records"]])
            still = []
            for bench in (b for b in active if b.id not in wrong):
                if bench.id in base_failed or bench.id in failed or bench.id in stopped:
                    continue
                if bench.id not in measured:  # the round stopped before it (the PR had failed): nothing new to decide
                    still.append(bench)
                    continue
                d = decide(Entry(bench, Status.GATED), rounds, view, with_resolvable=False).decision
                assert d is not None  # a gated entry always has a decision
                est = d.estimate
                interval = f"[{est.low:.4f}, {est.high:.4f}]" if est.bounded else "[unbounded]"
                state = f"{d.verdict.value.upper()}" if d.complete else f"next look at {d.next_look} usable rounds"
                log(
                    f"speed_gate:   {bench.id}: head/base {est.point:.4f} {interval}, {d.rounds_used} usable, "
                    f"{d.rounds_excluded} excluded -> {state}"
                )
                if d.complete and d.verdict is Verdict.REGRESSION:
                    regressed.append(bench.id)
                if fixed or not d.complete:
                    still.append(bench)
            if view is not None and view.first_fire is not None and view.first_fire["round_index"] == i:
                fire = view.first_fire
                log(
                    f"speed_gate: the rounds are noisier than the noise model allows (variance ratio "
                    f"{fire['ratio']:.2f} over {fire['df']} df, anytime p {fire['p']:.2g}): each benchmark's own "
                    "rounds decide from here on"
                )
            active = still
    except KeyboardInterrupt as exc:  # ci.common.interrupts.Interrupted too (SIGTERM); its children are stopped
        interrupts.ignore()  # a second signal must not cut the record short
        interrupted, ran_out = exc, Stop.INTERRUPTED
        log(f"speed_gate: interrupted after {len(rounds)} complete round(s): those are decided and recorded")
    entries = [
        Entry(e.benchmark, Status.NOT_APPLICABLE, failed[e.benchmark.id])
        if e.benchmark.id in failed
        else Entry(e.benchmark, Status.NEW, base_failed[e.benchmark.id])
        if e.benchmark.id in base_failed
        else Entry(e.benchmark, e.status, stopped[e.benchmark.id])
        if e.benchmark.id in stopped
        else e
        for e in selection.entries
    ]
    view = noise_view(rounds)
    results = [decide(e, rounds, view, calibrations=calibrations or {}, ran_out=ran_out) for e in entries]
    if interrupted is not None:
        raise RoundsInterrupted(rounds, results, view, getattr(interrupted, "signum", signal.SIGINT)) from interrupted
    return rounds, results, view


class RoundsInterrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM during the rounds: what :func:`run_rounds` would have returned over the complete rounds, so
    that the mode writes its record (undecided benchmarks inconclusive, stopped by the interrupt) before it exits
    128 + ``signum``. ``record_written``: set once it is, so the front does not replace it with an error record."""

    def __init__(self, rounds: list[dict[str, Any]], results: list[BenchmarkResult], view: Any, signum: int):
        super().__init__(f"interrupted by {signal.Signals(signum).name} after {len(rounds)} complete round(s)")
        self.rounds, self.results, self.view, self.signum = rounds, results, view, signum
        self.record_written = False


def _measured_before(rounds: Sequence[Mapping[str, Any]], bench_id: str) -> bool:
    """Whether an earlier round holds a measurement of ``bench_id`` on every side it ran (not an error)."""
    for rnd in rounds:
        recs = [p.get("records", {}).get(bench_id) for p in rnd.get("processes", [])]
        if recs and all(isinstance(r, Mapping) and "error" not in r for r in recs):
            return True
    return False


def _skip_reason(side: str, index: int, rec: Mapping[str, Any], culprit_known: bool) -> str | None:
    """Why a benchmark whose record in round ``index`` is an error is taken off (skip_failed); None: it only loses
    this round (its device's worker died measuring another benchmark, which is taken off instead)."""
    if rec.get("device_failed") and culprit_known and not rec.get("died_measuring"):
        return None
    if rec.get("died_measuring"):
        return f"{SKIPPED} the {side} worker died measuring it in round {index + 1}: {rec['error']}"
    if rec.get("device_failed"):
        return f"{SKIPPED} the {side} worker died starting or setting up in round {index + 1}: {rec['error']}"
    return f"{SKIPPED} {side} failed in round {index + 1}: {rec['error']}"


def _pair_decider(
    index: int,
    order: Sequence[str],
    rounds: Sequence[Mapping[str, Any]],
    active: Sequence[Any],
    view: RunNoise | None,
    decide: Callable[..., BenchmarkResult],
) -> Callable[[str, dict[str, Any]], bool]:
    """The engine's after_pair for round ``index``: decide the benchmark whose pair just completed; True (stop
    the round) when it is a regression: the PR has failed. ``view``: the noise model's view of ``rounds``."""
    partial: dict[str, Any] = {
        "index": index,
        "order": list(order),
        "processes": [{"side": s, "records": {}} for s in order],
        "sequence": [],
    }
    by_id = {b.id: b for b in active}

    def after_pair(bench_id: str, records: dict[str, Any]) -> bool:
        for proc in partial["processes"]:
            proc["records"][bench_id] = records.get(proc["side"])
        partial["sequence"].append(bench_id)
        if view is not None:
            view.add_pair(index, bench_id, records)
        if any("error" in (r or {}) for r in records.values()) or bench_id not in by_id:
            return False  # a failed or wrong timing: the round's end decides what it means
        result = decide(Entry(by_id[bench_id], Status.GATED), [*rounds, partial], view, with_resolvable=False)
        if result.decision is not None and result.decision.complete and result.decision.verdict is Verdict.REGRESSION:
            log(
                f"speed_gate:   {bench_id}: REGRESSION in round {index + 1}: the PR fails; the rest of the round is "
                "not measured"
            )
            return True
        return False

    return after_pair


def leave_out(selection: Selection, reasons: Mapping[str, str]) -> None:
    """The gated entries named in ``reasons`` become n/a with their reason (:data:`SKIPPED` first): never prepared."""
    selection.entries = [
        Entry(e.benchmark, Status.NOT_APPLICABLE, f"{SKIPPED} {reasons[e.benchmark.id]}")
        if e.status is Status.GATED and e.benchmark.id in reasons
        else e
        for e in selection.entries
    ]


def memory_check(selection: Selection, surveys: Mapping[str, Any], devices: Sequence[int]) -> dict[str, str]:
    """The gated benchmarks both sides' workers cannot hold on their device (ci.speed.engine.memory), left out before
    any is prepared: n/a, the bytes needed and free in the note. Returns them with their reasons."""
    memory = DeviceMemory.of_surveys(list(surveys.values()))
    if memory is None:
        return {}
    reasons = memory_skips(selection.gated, memory, devices)
    for bench_id, why in reasons.items():
        log(f"speed_gate:   {bench_id}: skipped before it started: {why}")
    leave_out(selection, reasons)
    return reasons


def thresholds_for(given: Thresholds | None, head_tree: Path, name: str = THRESHOLDS_PATH) -> Thresholds:
    """--thresholds, else the head's file ``name`` (the runner's profile's: ci.speed.profiles; a threshold change is
    reviewed in the PR), else this checkout's."""
    if given is not None:
        return given
    path = head_tree / name
    if path.exists():
        return replace(load_thresholds(path), source=f"{name} of the head")
    return replace(load_thresholds(REPO_ROOT / name), source=f"{name} of this checkout (the head has none)")


def calibrations_for(given: Mapping[str, Any] | None, head_tree: Path) -> Mapping[str, Any]:
    if given is not None:
        return given
    path = head_tree / CALIBRATION_PATH
    return load_calibrations(path) if path.exists() else {}


def noise_record(choice: ModelChoice, view: RunNoise | None, ids: Sequence[str]) -> dict[str, Any]:
    """The record's "noise": the model the run decided with (enough to replay it: the gated ``ids``' entries),
    why (not), and the guard."""
    if choice.model is None:
        return {"noise": {"model": None, "notes": list(choice.notes)}} if choice.notes else {}
    return {
        "noise": {
            "model": choice.model.used_json(ids),
            "notes": list(choice.notes),
            "guard": view.summary() if view is not None else None,
        }
    }


def engine_options(restart_every: int, gpus: Sequence[int] | None) -> dict[str, Any]:
    """How the warm workers measured, as the record keeps it ("engine" is always "warm" since issue 28)."""
    return {"engine": "warm", "restart_every": restart_every, "gpus": list(gpus) if gpus is not None else None}
