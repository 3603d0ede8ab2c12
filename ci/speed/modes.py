"""The speed gate's outputs (Markdown, JSON record, PNG) and its two other modes: --calibrate and --replay.

The JSON record (schema ``mxfp4-speed-gate/1``, docs/SPEED_GATE.md) keeps every
raw measurement; ``--replay`` decides from it again through the same functions
the live gate uses (ci.speed.verdict), and ``--replay --decisions N`` takes N
decisions from it with harness.paired.replay.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ci.speed.exclusion import ExclusionRule, paired_rounds
from ci.speed.report import (calibration_markdown, correctness_lines, excluded_rows, gate_markdown, plan_text,
                             rates_markdown)
from ci.speed.rounds import Side
from ci.speed.run import (GateError, check_outputs, deadline, log, plan_from, rule_from, run_rounds, survey_both,
                          thresholds_for, timing_overrides)
from ci.speed.selection import check_selectors, select
from ci.speed.thresholds import Thresholds, load_thresholds, parse_thresholds
from ci.speed.verdict import (GATE_SCHEMA, BenchmarkResult, RecordError, decide_entry, entries_of, exit_code,
                              load_calibrations, load_record, plan_of)
from harness import paired
from harness.paired.sequential import SequentialPlan
from harness.paired.verdict import Verdict
from harness.report import append_step_summary, markdown_table, write_json_atomic

RATES_SCHEMA = "mxfp4-speed-replay-rates/1"
DEFAULT_CALIBRATION_ROUNDS = 16  # as the simulated calibrations of docs/SPEED_GATE.md


@dataclass
class Context:
    """What a record says besides its results: how it was measured and decided."""

    mode: str  # gate | calibrate | replay
    plan: SequentialPlan
    rule: ExclusionRule
    thresholds: Thresholds
    base: dict[str, Any]
    head: dict[str, Any]
    environment: dict[str, Any]
    device: str
    timing: dict[str, Any] = field(default_factory=dict)
    round_limit: int | None = None
    wall_s: float = 0.0
    calibrations: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


def summary_ids(results: Sequence[BenchmarkResult]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {v.value: [] for v in Verdict}
    for status in ("wrong result", "new", "removed", "n/a"):
        out[status] = []
    for r in results:
        out[r.verdict.value if r.status == "gated" else r.status].append(r.id)
    return out


def record_json(context: Context, results: Sequence[BenchmarkResult], correctness: Sequence[Mapping[str, Any]],
                rounds: Sequence[Mapping[str, Any]], code: int, fail_on_inconclusive: bool) -> dict[str, Any]:
    """The verdict record: a gate's, a calibration's or a replay's (docs/SPEED_GATE.md has the schema)."""
    return {
        "schema": GATE_SCHEMA,
        "mode": context.mode,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": ["python", "-m", "ci.speed.gate", *sys.argv[1:]],
        "verdict": "fail" if code else "pass",
        "exit_code": code,
        "inconclusive_policy": "fail (--fail-on-inconclusive)" if fail_on_inconclusive else "pass with a warning",
        "base": context.base,
        "head": context.head,
        "device": context.device,
        "environment": context.environment,
        "plan": context.plan.to_json(),
        "round_limit": context.round_limit,
        "timing_overrides": context.timing,
        "exclusion": context.rule.to_json(),
        "thresholds": context.thresholds.to_json(),
        "calibrations_used": {k: {"ratio_sd_upper": v["ratio_sd_upper"], "source": v.get("source")} for k, v in context.calibrations.items()},
        "wall_s": round(context.wall_s, 1),
        "summary": summary_ids(results),
        "correctness": list(correctness),
        "benchmarks": [r.to_json() for r in results],
        "rounds": list(rounds),
        **context.extra,
    }


def header_lines(context: Context, rounds: Sequence[Mapping[str, Any]]) -> list[str]:
    env = context.environment or {}
    base, head = context.base, context.head
    lines = [f"base `{(base.get('sha') or '?')[:12]}` (merge-base of the head and `{base.get('ref')}`) · head "
             + ("the working tree" if head.get("working_tree") else f"`{(head.get('sha') or '?')[:12]}` ({head.get('ref')})")]
    floor = (f"{context.rule.clock_floor_mhz:g} MHz" if context.rule.clock_floor_mhz is not None
             else f"{context.rule.clock_floor_fraction:.0%} of the max SM clock")
    lines += [
        f"device: {env.get('gpu') or 'CPU'} ({context.device}) · torch {env.get('torch', '?')} · "
        f"{len(rounds)} rounds of fresh processes, order rotating (A B, B A, …) · {context.wall_s:.0f} s",
        f"plan: {plan_text(context.plan)} · round budget {context.round_limit} · thresholds: `{context.thresholds.source}` "
        f"(default ±{context.thresholds.default:.2%}, {len(context.thresholds.overrides)} override(s))",
        f"a round is excluded when either side is throttled ({', '.join(sorted(context.rule.slowdown_reasons)) or 'none'}), "
        f"its SM clock is below {floor}, its timing never became steady, or the GPU was busy",
    ]
    if context.extra.get("replayed_from"):
        lines.insert(0, f"**replayed** from `{context.extra['replayed_from']}` (no GPU)")
    return lines


def finish(args: argparse.Namespace, context: Context, results: Sequence[BenchmarkResult],
           correctness: Sequence[Mapping[str, Any]], rounds: Sequence[Mapping[str, Any]]) -> int:
    """Markdown to stdout and the step summary, the JSON record, the plot; returns the exit code."""
    code = exit_code(results, args.fail_on_inconclusive)
    ids = summary_ids(results)
    inconclusive = len(ids[Verdict.INCONCLUSIVE.value])
    title = f"Speed gate: {'FAIL' if code else 'PASS'}" + (f" ({inconclusive} inconclusive ⚠)" if inconclusive else "")
    markdown = gate_markdown(title=title, header_lines=header_lines(context, rounds), results=results,
                             correctness=correctness, rounds=rounds, fail_on_inconclusive=args.fail_on_inconclusive)
    print(markdown)
    append_step_summary(markdown)
    if args.json:
        write_json_atomic(args.json, record_json(context, results, correctness, rounds, code, args.fail_on_inconclusive))
    if args.plot:
        _plot(args.plot, results)
    failed = [f"{v} in {', '.join(ids[v])}" for v in (Verdict.REGRESSION.value, "wrong result") if ids[v]]
    log(f"speed_gate: {'FAIL: ' + '; '.join(failed) if code and failed else 'FAIL' if code else 'PASS'}"
        + (f" ({inconclusive} inconclusive)" if inconclusive else ""))
    return code


def _plot(path: str, results: Sequence[BenchmarkResult]) -> None:
    from ci.speed.plot import plot_rounds

    drawn = {r.id: ([p.round for p in r.rounds], r.decision) for r in results if r.decision is not None and r.rounds}
    if drawn:
        plot_rounds(drawn, path)
    else:
        log(f"speed_gate: no benchmark was timed: no plot written to {path}")


def write_error_json(args: argparse.Namespace, message: str) -> None:
    """A harness error still leaves a verdict file, when one was asked for and can be written."""
    if not getattr(args, "json", None):
        return
    try:
        write_json_atomic(args.json, {"schema": GATE_SCHEMA, "mode": "error", "verdict": "error", "exit_code": 2, "error": message})
    except OSError:
        pass


def experiment_record(
    rounds: Sequence[Mapping[str, Any]],
    benchmarks: Sequence[Any],
    *,
    plan: SequentialPlan = paired.DEFAULT_PLAN,
    rule: ExclusionRule | None = None,
    thresholds: Thresholds | None = None,
    device: str = "cuda",
    environment: Mapping[str, Any] | None = None,
    note: str = "",
) -> dict[str, Any]:
    """A replayable record of rounds measured outside the gate (ci.speed.rounds.measure_round, any sides).

    Write it with harness.report.write_json_atomic; then
    ``python -m ci.speed --replay FILE --sides base,head-1% [--decisions 10]`` decides from it.
    """
    thresholds = thresholds or Thresholds(0.01, (), "default")
    return {
        "schema": GATE_SCHEMA, "mode": "experiment", "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "note": note,
        "device": device, "environment": dict(environment or {}), "plan": plan.to_json(),
        "exclusion": (rule or ExclusionRule()).to_json(), "thresholds": thresholds.to_json(),
        "benchmarks": [dict(b.to_json(), status="gated") for b in benchmarks], "correctness": [], "rounds": list(rounds),
    }


# ---------------------------------------------------------------------------
# --calibrate
# ---------------------------------------------------------------------------


def calibrate_results(
    results: Sequence[BenchmarkResult], plan: SequentialPlan, where: str
) -> tuple[dict[str, paired.Calibration], list[dict[str, Any]], list[str]]:
    """Per gated benchmark of an A/A run: its calibration, the override to paste (threshold rounded up), or why not."""
    calibrations, overrides, notes = {}, [], []
    for r in results:
        if r.status != "gated":
            continue
        try:
            cal = paired.calibrate([p.round for p in r.rounds], plan, alpha=plan.alpha)
        except ValueError as exc:
            notes.append(f"{r.id}: no calibration: {exc}")
            continue
        calibrations[r.id] = cal
        if cal.threshold >= 1:
            notes.append(f"{r.id}: too noisy for any threshold below 100% with this plan ({cal.summary()})")
            continue
        overrides.append({"match": r.id, "threshold": math.ceil(cal.threshold * 1e4) / 1e4,
                          "why": f"--calibrate on {where}: {cal.summary()}"})
    return calibrations, overrides, notes


def run_calibrate(args: argparse.Namespace) -> int:
    from ci.common import gitutil

    plan, rule, timing = plan_from(args), rule_from(args), timing_overrides(args.timing)
    n = args.rounds if args.rounds is not None else DEFAULT_CALIBRATION_ROUNDS
    if n < 3:
        raise GateError(f"--calibrate needs >= 3 rounds (got --rounds {n})")
    check_outputs(args)
    started = time.time()
    stop_at = deadline(args, started)
    repo = gitutil.open_repo(args.repo)
    sha = gitutil.resolve_commit(repo, "HEAD" if args.working_tree else args.head)
    with ExitStack() as stack:
        if args.working_tree:
            tree_a = tree_b = Path(repo.working_tree_dir)
        else:  # two worktrees, as the gate has: per-path effects (caches, paths in kernels) land in the noise
            tree_a, tree_b = (stack.enter_context(gitutil.checkout(repo, sha)) for _ in range(2))
        thresholds = thresholds_for(args, tree_b)
        survey = survey_both({"head": Side("head", tree_b)}, args)["head"]
        check_selectors({"head": survey}, args.kernel, args.config)
        selection = select(survey, survey)
        correctness = [c for c in selection.correctness if c["side"] == "head"]
        log(f"speed_gate: calibrating {sha[:12]} against itself: {n} A/A rounds")
        rounds, results = run_rounds([Side("base", tree_a), Side("head", tree_b)], selection, device=survey["device"],
                                     plan=plan, rule=rule, thresholds=thresholds, timing=timing, limit=n, fixed=True,
                                     deadline=stop_at)
    env = survey["environment"]
    where = f"{env.get('gpu') or 'CPU'}, {time.strftime('%Y-%m-%d')}"
    calibrations, overrides, notes = calibrate_results(results, plan, f"{where} at {sha[:12]}")
    markdown = calibration_markdown(calibrations, {k: thresholds.lookup(k)[0] for k in calibrations}, overrides, [
        f"commit `{sha[:12]}` against itself ({'the working tree, one tree' if args.working_tree else 'two worktrees'}) on "
        f"{where} · {len(rounds)} rounds · plan: {plan_text(plan)}",
        "suggested threshold: the smallest at which A/A says 'no change' w.p. "
        f"{1 - plan.alpha:.0%} by the last look; resolvable: the slowdown flagged as regression w.p. {1 - plan.alpha:.0%} at it.",
    ]) + "\n".join(f"- {n}" for n in notes)
    markdown += "\n\n**Correctness before timing** (ci.common.correctness.check_kernel):\n" + "\n".join(correctness_lines(correctness))
    excluded = excluded_rows(results)
    if excluded:
        markdown += f"\n\n**Excluded rounds** ({len(excluded)}): not used in any calibration.\n\n{markdown_table(excluded)}"
    print(markdown)
    append_step_summary(markdown)
    code = 1 if any(r.status == "wrong result" for r in results) else 0
    context = Context(mode="calibrate", plan=plan, rule=rule, thresholds=thresholds, base={"ref": args.head, "sha": sha},
                      head={"ref": args.head, "sha": sha, "working_tree": args.working_tree}, environment=env,
                      device=survey["device"], timing=timing, round_limit=n, wall_s=time.time() - started,
                      extra={"calibrations": {k: dict(c.to_json(), device=env.get("gpu") or "cpu") for k, c in calibrations.items()},
                             "suggested_overrides": overrides})
    if args.json:
        write_json_atomic(args.json, record_json(context, results, correctness, rounds, code, args.fail_on_inconclusive))
    return code


# ---------------------------------------------------------------------------
# --replay
# ---------------------------------------------------------------------------


def run_replay(args: argparse.Namespace) -> int:
    record = load_record(args.replay)
    check_outputs(args)
    sides = tuple((args.sides or "base,head").split(","))
    recorded_sides = {p["side"] for rnd in record["rounds"] for p in rnd["processes"]}
    if len(sides) != 2 or not set(sides) <= recorded_sides:
        raise GateError(f"--sides {args.sides!r}: expected two of the recorded sides {sorted(recorded_sides)}, as BASE,HEAD")
    try:
        plan = plan_from(args, default=plan_of(record["plan"]))
        rule = rule_from(args, default=ExclusionRule.from_json(record["exclusion"]))
    except (KeyError, TypeError) as exc:
        raise RecordError(f"{args.replay}: the recorded plan or exclusion rule lacks {exc}") from None
    if args.thresholds:
        thresholds = load_thresholds(args.thresholds)
    else:
        recorded = {k: v for k, v in record["thresholds"].items() if k != "source"}
        thresholds = parse_thresholds(recorded, f"the thresholds recorded in {args.replay}")
    calibrations = load_calibrations(args.calibration) if args.calibration else record.get("calibrations_used") or {}
    entries = entries_of(record)
    if args.decisions is not None:
        return _replay_rates(args, record, entries, sides, plan, rule, thresholds)
    stopped = {b["id"]: b.get("stopped_by") for b in record["benchmarks"]}
    # An undecided benchmark keeps the recorded reason the measuring ended; otherwise the record is what ran out.
    results = [decide_entry(e, record["rounds"], thresholds, plan, rule, calibrations, sides=sides,  # type: ignore[arg-type]
                            ran_out=stopped.get(e.benchmark.id) if stopped.get(e.benchmark.id) in ("round budget", "time budget", "fixed rounds")
                            else "end of record") for e in entries]
    context = Context(mode="replay", plan=plan, rule=rule, thresholds=thresholds, base=record.get("base") or {},
                      head=record.get("head") or {}, environment=record.get("environment") or {},
                      device=record.get("device", "?"), timing=record.get("timing_overrides") or {},
                      round_limit=record.get("round_limit"), calibrations=calibrations, wall_s=record.get("wall_s") or 0.0,
                      extra={"replayed_from": str(args.replay), "sides": list(sides)})
    return finish(args, context, results, record.get("correctness", []), record["rounds"])


def _replay_rates(args, record, entries, sides, plan, rule, thresholds) -> int:
    if args.decisions < 1:
        raise GateError(f"--decisions must be >= 1 (got {args.decisions})")
    rates = {}
    for e in entries:
        if e.status != "gated":
            continue
        threshold, _ = thresholds.lookup(e.benchmark.id)
        rounds = [p.round for p in paired_rounds(record["rounds"], e.benchmark.id, sides[0], sides[1], rule)]
        rates[e.benchmark.id], _ = paired.replay(rounds, threshold, plan, args.decisions, disjoint=not args.resampled, seed=args.seed)
    how = ("resampled: every decision reshuffles the whole record (decisions share rounds; time order lost)"
           if args.resampled else "disjoint: rounds consumed in time order, no round in two decisions")
    markdown = rates_markdown(rates, [f"record `{args.replay}` · sides {sides[0]} (base) vs {sides[1]} (head) · "
                                      f"{len(record['rounds'])} recorded rounds · {how}", f"plan: {plan_text(plan)}"])
    print(markdown)
    append_step_summary(markdown)
    if args.json:
        write_json_atomic(args.json, {"schema": RATES_SCHEMA, "replayed_from": str(args.replay), "sides": list(sides),
                                      "plan": plan.to_json(), "exclusion": rule.to_json(), "thresholds": thresholds.to_json(),
                                      "disjoint": not args.resampled, "rates": {k: r.to_json() for k, r in rates.items()}})
    return 0
