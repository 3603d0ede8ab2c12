"""``--replay``: decide again from a recorded JSON through the gate's own functions (ci.speed.decide.verdict).

:func:`run_replay` under the record's plan (``--decisions N``: N disjoint decisions); :func:`run_judge`
(``--replay --judge``): the raw rounds decided by this checkout's plan, rule, thresholds and noise model only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ci.common.commit_tree import REPO_ROOT
from ci.common.files import append_step_summary_or_fallback, write_json_atomic
from ci.common.options import OptionsError
from ci.speed.decide.codes import Status, Stop
from ci.speed.decide.exclusion import ExclusionRule, paired_rounds
from ci.speed.decide.generations import SIDES, RunNoise, run_noise
from ci.speed.decide.noise_file import (
    ModelChoice,
    NoiseModelError,
    identity_check,
    load_noise_model,
    parse_noise_model,
    runner_identity,
)
from ci.speed.decide.selection import Entry
from ci.speed.decide.thresholds import Thresholds, ThresholdsError, load_thresholds, parse_thresholds
from ci.speed.decide.verdict import (
    BenchmarkResult,
    RecordError,
    decide_entry,
    entries_of,
    load_record,
    plan_of,
)
from ci.speed.modes.shared import GateError, calibrations_for, log, noise_record
from ci.speed.options import SpeedOptions
from ci.speed.profiles import runner_profile
from ci.speed.report.markdown import plan_text, rates_markdown
from ci.speed.report.write import Context, finish
from harness import paired
from harness.paired.sequential import SequentialPlan
from harness.paired.verdict import Verdict

RATES_SCHEMA = "mxfp4-speed-replay-rates/1"


def run_replay(options: SpeedOptions) -> int:
    assert options.replay is not None  # the mode is REPLAY only with a record (ci.speed.options)
    record = load_record(options.replay)
    try:
        return run_judge(options, record) if options.judge else _replay(options, record)
    except (RecordError, ThresholdsError, GateError, OptionsError):
        raise
    except (KeyError, TypeError, AttributeError, IndexError, ValueError) as exc:
        # A record edited by hand or cut short: name the file and what was wrong in it, not "internal error".
        what = f"lacks {exc}" if isinstance(exc, KeyError) else f"{type(exc).__name__}: {exc}"
        raise RecordError(f"{options.replay}: malformed record ({what})") from None


def replayed_model(options: SpeedOptions, record: Mapping[str, Any], plan: SequentialPlan):
    """The noise model a replay decides with: --noise, else the one the record kept; None for a plan without one."""
    if plan.variance != "model":
        return None
    if options.noise is not None:
        return load_noise_model(options.noise)
    kept = (record.get("noise") or {}).get("model")
    if not isinstance(kept, dict):
        raise RecordError(
            f'{options.replay}: its plan decides with a noise model, but the record keeps none ("noise"."model")'
        )
    try:
        return parse_noise_model(kept, f"the noise model recorded in {options.replay}", runs_required=False)
    except NoiseModelError as exc:
        raise RecordError(str(exc)) from None


def replay_plan(options: SpeedOptions, recorded: SequentialPlan) -> SequentialPlan:
    """The recorded plan with the keys given; ``--noise`` on a record decided without a model: the model plan at the
    recorded alpha (what the noise model would have decided from the same rounds)."""
    to_model = options.noise is not None and options.use_noise and recorded.variance != "model"
    if not to_model and options.plan_given.get("rule", recorded.rule) == recorded.rule:
        return options.the_plan(recorded)
    # --noise, or --plan rule=...: today's plan of that rule (with a model if the record or --noise has one)
    plan = options.the_plan(model=to_model or recorded.variance == "model" or options.noise is not None)
    return plan if "alpha" in options.plan_given else plan.with_alpha(recorded.alpha)


def _replay(options: SpeedOptions, record: dict[str, Any]) -> int:
    plan = replay_plan(options, plan_of(record["plan"], str(options.replay)))
    rule = options.exclusion_rule(ExclusionRule.from_json(record["exclusion"]))
    recorded_sides = {p["side"] for rnd in record["rounds"] for p in rnd["processes"]}
    if record["rounds"] and not set(SIDES) <= recorded_sides:
        raise RecordError(f"{options.replay}: its rounds hold the sides {sorted(recorded_sides)}, not base and head")
    recorded = {k: v for k, v in record["thresholds"].items() if k != "source"}
    thresholds = options.thresholds or parse_thresholds(recorded, f"the thresholds recorded in {options.replay}")
    calibrations = (
        dict(options.calibrations) if options.calibrations is not None else record.get("calibrations_used") or {}
    )
    entries = entries_of(record)
    model = replayed_model(options, record, plan)
    gated = [e.benchmark.id for e in entries if e.status is Status.GATED]
    view = run_noise(model, rule, plan.guard_level, gated, record["rounds"]) if model is not None else None
    if options.decisions is not None:
        return _replay_rates(options, record, entries, plan, rule, thresholds, view)
    # An undecided benchmark keeps the recorded reason the measuring ended; otherwise the record is what ran out.
    measuring_ended = {Stop.ROUND_BUDGET, Stop.TIME_BUDGET, Stop.FIXED_ROUNDS, Stop.PR_FAILED, Stop.INTERRUPTED}
    stopped = {b["id"]: Stop(b["stopped_by"]) for b in record["benchmarks"] if b.get("stopped_by")}
    ran_out = {i: stop if stop in measuring_ended else Stop.END_OF_RECORD for i, stop in stopped.items()}
    results = _decide(entries, record, thresholds, plan, rule, calibrations, view, ran_out, Stop.END_OF_RECORD)
    extra = noise_record(ModelChoice(model), view, gated)
    return _finish_replay(options, record, results, plan, rule, thresholds, calibrations, extra)


def _decide(
    entries: Sequence[Entry],
    record: Mapping[str, Any],
    thresholds: Thresholds,
    plan: SequentialPlan,
    rule: ExclusionRule,
    calibrations: Mapping[str, Any],
    view: RunNoise | None,
    ran_out: Mapping[str, Stop],
    otherwise: Stop,
) -> list[BenchmarkResult]:
    """Each entry decided over the record's rounds; ``ran_out``: why its measuring ended (else ``otherwise``)."""
    restart = (record.get("engine") or {}).get("restart_every") or 4
    return [
        decide_entry(
            e,
            record["rounds"],
            thresholds,
            plan,
            rule,
            calibrations,
            ran_out=ran_out.get(e.benchmark.id, otherwise),
            noise=view.rounds_noise(e.benchmark.id) if view else None,
            restart_every=restart,
        )
        for e in entries
    ]


def judge_files(environment: Mapping[str, Any]) -> tuple[Path, Path | None]:
    """This checkout's thresholds file and noise model for the runner a record names (its profile:
    ci.speed.profiles); the model None when that runner has none."""
    profile = runner_profile(runner_identity(environment).get("gpu"))
    noise = REPO_ROOT / profile.noise
    return REPO_ROOT / profile.thresholds, noise if noise.is_file() else None


def run_judge(options: SpeedOptions, record: Mapping[str, Any]) -> int:
    """The record's raw rounds decided as this checkout's gate would decide them; nothing the record decided is used
    (docs/SPEED_GATE.md, "A judge the PR cannot edit": what is taken from the record, why undecided fails)."""
    environment = record.get("environment") or {}
    thresholds_file, noise_file = judge_files(environment)
    where = lambda path: f"{path.relative_to(REPO_ROOT)} of this checkout (--judge)"  # noqa: E731
    thresholds = options.thresholds or replace(load_thresholds(thresholds_file), source=where(thresholds_file))
    choice = ModelChoice(
        None, ["--plan noise=off: each benchmark's own rounds decide"] if not options.use_noise else []
    )
    noise_path = options.noise or noise_file
    if options.use_noise and noise_path is not None:
        model = replace(load_noise_model(noise_path), source=str(options.noise) if options.noise else where(noise_path))
        usable, notes = identity_check(model, environment)
        choice = ModelChoice(model if usable else None, notes)
    rule = options.exclusion_rule()  # this checkout's rule over the raw states the rounds carry
    entries = entries_of(record)
    gated = [e.benchmark.id for e in entries if e.status is Status.GATED]
    plan = options.plan_for(len(gated), model=choice.model is not None)
    view = (
        run_noise(choice.model, rule, plan.guard_level, gated, record["rounds"]) if choice.model is not None else None
    )
    calibrations = dict(calibrations_for(options.calibrations, REPO_ROOT))  # this checkout's, like the thresholds
    results = _decide(entries, record, thresholds, plan, rule, calibrations, view, {}, Stop.END_OF_RECORD)
    # Failed by this judge's own decisions (a regression, a wrong result): those left undecided were not needed.
    if any(r.status is Status.WRONG_RESULT or r.verdict is Verdict.REGRESSION for r in results):
        results = _decide(entries, record, thresholds, plan, rule, calibrations, view, {}, Stop.PR_FAILED)
    for note in choice.notes:
        log(f"speed_gate: {note}")
    judged = {
        "by": "this checkout's gate (--judge)",
        "thresholds": thresholds.source,
        "noise_model": None if choice.model is None else choice.model.source,
        "recorded": {
            "verdict": record.get("verdict"),
            "exit_code": record.get("exit_code"),
            "thresholds": (record.get("thresholds") or {}).get("source"),
        },
    }
    extra = {"judged": judged, **noise_record(choice, view, gated)}
    return _finish_replay(options, record, results, plan, rule, thresholds, calibrations, extra)


def _replay_rates(options: SpeedOptions, record, entries, plan, rule, thresholds, view: RunNoise | None = None) -> int:
    assert options.decisions is not None  # the caller's condition
    rates = {}
    for e in entries:
        if e.status is not Status.GATED:
            continue
        threshold, _ = thresholds.lookup(e.benchmark.id)
        rounds = [p.round for p in paired_rounds(record["rounds"], e.benchmark.id, *SIDES, rule)]
        rates[e.benchmark.id], _ = paired.replay(
            rounds, threshold, plan, options.decisions, view.rounds_noise(e.benchmark.id) if view else None
        )
    markdown = rates_markdown(
        rates,
        [
            f"record `{options.replay}` · {len(record['rounds'])} recorded rounds · disjoint: "
            "rounds consumed in time order, no round in two decisions",
            f"plan: {plan_text(plan)}",
        ],
    )
    print(markdown)
    append_step_summary_or_fallback(markdown, log)
    if options.json is not None:
        write_json_atomic(
            options.json,
            {
                "schema": RATES_SCHEMA,
                "replayed_from": str(options.replay),
                "sides": list(SIDES),
                "plan": plan.to_json(),
                "exclusion": rule.to_json(),
                "thresholds": thresholds.to_json(),
                "disjoint": True,
                "rates": {k: r.to_json() for k, r in rates.items()},
            },
        )
    return 0


def _finish_replay(
    options: SpeedOptions,
    record: Mapping[str, Any],
    results: list[BenchmarkResult],
    plan: SequentialPlan,
    rule: ExclusionRule,
    thresholds: Thresholds,
    calibrations: dict[str, Any],
    extra: Mapping[str, Any],
) -> int:
    """The report of a replayed record (--replay; --judge fails an undecided benchmark), with the record's sides."""
    context = Context(
        mode="replay",
        plan=plan,
        rule=rule,
        thresholds=thresholds,
        base=record.get("base") or {},
        head=record.get("head") or {},
        environment=record.get("environment") or {},
        device=record.get("device", "?"),
        timing=record.get("timing_overrides") or {},
        round_limit=record.get("round_limit"),
        calibrations=calibrations,
        wall_s=record.get("wall_s") or 0.0,
        extra={"replayed_from": str(options.replay), "sides": list(SIDES), "engine": record.get("engine"), **extra},
    )
    return finish(
        context,
        results,
        record.get("correctness", []),
        record["rounds"],
        fail_on_inconclusive=options.fail_on_inconclusive or options.judge,
        json_path=options.json,
        plot_path=options.plot,
        command=options.command,
    )
