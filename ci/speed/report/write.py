"""What the speed gate writes: Markdown (stdout and the step summary), the JSON record (schema
``mxfp4-speed-gate/1``: every raw measurement, so ``--replay`` can decide from it again), the PNG.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ci.common.errors import WriteError
from ci.common.files import append_step_summary_or_fallback, write_or_fallback
from ci.speed.decide.codes import Status, Stop
from ci.speed.decide.exclusion import ExclusionRule
from ci.speed.decide.thresholds import Thresholds
from ci.speed.decide.verdict import EXIT_INCONCLUSIVE, GATE_SCHEMA, BenchmarkResult, exit_code
from ci.speed.engine.survey import log
from ci.speed.report.markdown import decision_reason, gate_markdown, plan_text
from harness.paired import SequentialPlan, Verdict
from harness.report import json_text

ALL_UNCHANGED = "PASS: unchanged (identical code), 0 GPU seconds"


@dataclass
class Context:
    """What a record says besides its results: how it was measured and decided."""

    mode: str  # gate | calibrate | replay (ci.speed.options.Mode values)
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
    preface: list[str] = field(default_factory=list)  # Markdown above the verdict (the code changes, the costs)
    changes: dict[str, str] | None = None  # benchmark id -> what differs in its code (a "code" column)


def summary_ids(results: Sequence[BenchmarkResult]) -> dict[str, list[str]]:
    """The JSON record's "summary": benchmark ids by verdict (gated) or by status (the others)."""
    # "not a regression" (version 7) is a key only where a benchmark has it: a record decided before it replays
    # to the same summary.
    out: dict[str, list[str]] = {v.value: [] for v in Verdict if v is not Verdict.NOT_REGRESSION}
    out.update({s.value: [] for s in Status if s is not Status.GATED})
    for r in results:
        key = r.verdict.value if r.status is Status.GATED and r.verdict is not None else r.status.value
        out.setdefault(key, []).append(r.id)
    return out


STATUS_WORDS = {0: "PASS", 1: "FAIL", EXIT_INCONCLUSIVE: "INCONCLUSIVE"}


def inconclusive_policy(plan: Any, fail_on_inconclusive: bool) -> str:
    """What an inconclusive benchmark does to the exit code (ci.speed.decide.verdict.exit_code), in words."""
    if fail_on_inconclusive:
        return "fail: exit 1 (--fail-on-inconclusive)"
    if getattr(plan, "rule", "band") == "zone":
        return "not green: exit 3, re-run (a failed measurement, or the time or round budget ran out)"
    return "pass with a warning"


def record_json(
    context: Context,
    results: Sequence[BenchmarkResult],
    correctness: Sequence[Mapping[str, Any]],
    rounds: Sequence[Mapping[str, Any]],
    code: int,
    fail_on_inconclusive: bool,
    command: Sequence[str],
) -> dict[str, Any]:
    """The verdict record: a gate's, a calibration's or a replay's (docs/SPEED_GATE.md has the schema)."""
    return {
        "schema": GATE_SCHEMA,
        "mode": context.mode,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": ["python", "-m", "ci.speed", *command],
        "verdict": STATUS_WORDS.get(code, "fail").lower(),
        "exit_code": code,
        "inconclusive_policy": inconclusive_policy(context.plan, fail_on_inconclusive),
        "base": context.base,
        "head": context.head,
        "device": context.device,
        "environment": context.environment,
        "plan": context.plan.to_json(),
        "round_limit": context.round_limit,
        "timing_overrides": context.timing,
        "exclusion": context.rule.to_json(),
        "thresholds": context.thresholds.to_json(),
        "calibrations_used": {
            k: {"ratio_sd_upper": v["ratio_sd_upper"], "source": v.get("source")}
            for k, v in context.calibrations.items()
        },
        "wall_s": round(context.wall_s, 1),
        "summary": summary_ids(results),
        "correctness": list(correctness),
        "benchmarks": [_benchmark_json(r) for r in results],
        "rounds": list(rounds),
        **context.extra,
    }


def _benchmark_json(result: BenchmarkResult) -> dict[str, Any]:
    """A result as the record keeps it: the reason in words (the result holds the code, ``stopped_by``)."""
    data = result.to_json()
    if data["decision"] is not None:
        data["decision"]["reason"] = decision_reason(result)
    return data


def header_lines(context: Context, rounds: Sequence[Mapping[str, Any]]) -> list[str]:
    """Base and head; with rounds (else the plan and the rule say nothing), also the device, the plan, the exclusion
    rule and the runner's time."""
    env = context.environment or {}
    base, head = context.base, context.head
    head_text = (
        "the working tree" if head.get("working_tree") else f"`{(head.get('sha') or '?')[:12]}` ({head.get('ref')})"
    )
    lines = [
        f"base `{(base.get('sha') or '?')[:12]}` (merge-base of the head and `{base.get('ref')}`) · head {head_text}"
    ]
    if context.extra.get("replayed_from"):
        lines.insert(0, f"**replayed** from `{context.extra['replayed_from']}` (no GPU)")
    device = f"device: {env.get('gpu') or 'CPU'} ({context.device})" + (
        f" · torch {env['torch']}" if env.get("torch") else ""
    )
    if not rounds:
        return lines + ([device] if env else [])
    floor = (
        f"{context.rule.clock_floor_mhz:g} MHz"
        if context.rule.clock_floor_mhz is not None
        else f"{context.rule.clock_floor_fraction:.0%} of the max SM clock"
    )
    every = (context.extra.get("engine") or {}).get("restart_every")
    engine = "from warm workers" + (f" (new processes every {every} rounds)" if every else "")
    gated = {bench_id for rnd in rounds for proc in rnd.get("processes", []) for bench_id in proc.get("records", {})}
    lines += [
        f"{device} · {len(rounds)} rounds {engine}, order rotating (A B, B A, …) · {context.wall_s:.0f} s",
        f"plan: {plan_text(context.plan, len(gated) or None)} · round budget {context.round_limit} · "
        f"thresholds: `{context.thresholds.source}` (default ±{context.thresholds.default:.2%}, "
        f"{len(context.thresholds.overrides)} override(s))",
        f"a round is excluded when either side is throttled "
        f"({', '.join(sorted(context.rule.slowdown_reasons)) or 'none'}), its SM clock is below {floor}, "
        "its timing never became steady, or the GPU was busy",
    ]
    lines += noise_lines(context.extra.get("noise"))
    cost = context.extra.get("cost")
    if cost:
        # The bold figure is the wall the GPU was held (the slowest GPU's): a sum over processes exceeds it where
        # start-up overlaps measuring (an H100 lease: "100 s" over a wall of 82 s).
        walls = cost["device_wall_s"]
        held = f"**{max(walls.values()):.0f} s** of wall" if walls else "no GPU wall recorded"
        lines.append(
            f"GPU runner: {held} (per GPU: "
            + (", ".join(f"{d}: {w:.0f} s" for d, w in walls.items()) or "none")
            + f"); summed over processes: {cost['measure_s']:.1f} s measuring, {cost['startup_s']:.1f} s starting "
            f"{cost['processes_started']} process(es)"
            + (
                f" ({cost['overlapped_startup_s']:.1f} s more start-up overlapped measuring)"
                if cost.get("overlapped_startup_s")
                else ""
            )
        )
    return lines


def noise_lines(noise: Mapping[str, Any] | None) -> list[str]:
    """The noise model the run decided with (or why none), and what its guard found."""
    if not noise:
        return []
    lines = [f"noise model: {note}" for note in noise.get("notes", [])]
    model = noise.get("model")
    if model is None:
        return lines
    runner = model.get("runner") or {}
    lines.insert(
        0,
        f"noise model: `{model.get('source')}` ({runner.get('gpu')}, driver {runner.get('driver')}, torch "
        f"{runner.get('torch')}; fitted {model.get('fitted')}), "
        f"{len(model.get('benchmarks', {}))} benchmark(s)",
    )
    guard = noise.get("guard") or {}
    fired, final = guard.get("fired"), guard.get("final") or {}
    if fired:
        lines.append(
            f"> ⚠ **the rounds are noisier than the noise model allows** (variance ratio "
            f"{fired['ratio']:.2f} over {fired['df']} df, anytime p {fired['p']:.2g} < the {guard['level']:g} "
            f"level) from round {fired['round_index'] + 1} ({fired['benchmark']}): each benchmark's own "
            "rounds decided from there on"
        )
    elif final:
        lines.append(
            f"the run's guard: rounds as noisy as the model allows (variance ratio {final['ratio']:.2f} over "
            f"{final['df']} df, anytime p {final['p']:.2g}; falls back below {guard.get('level', 0):g})"
        )
    return lines


def finish(
    context: Context,
    results: Sequence[BenchmarkResult],
    correctness: Sequence[Mapping[str, Any]],
    rounds: Sequence[Mapping[str, Any]],
    *,
    fail_on_inconclusive: bool,
    json_path: Path | None,
    plot_path: Path | None,
    command: Sequence[str],
    interrupted: str | None = None,
) -> int:
    """Markdown to stdout and the step summary, the JSON record, the plot; returns the exit code. ``interrupted``:
    the signal that ended the rounds (SIGINT, SIGTERM): the record is still written, its exit code 128 + the
    signal's number (130, 143), undecided benchmarks inconclusive (stopped by the interrupt)."""
    code = exit_code(results, fail_on_inconclusive)
    word = STATUS_WORDS.get(code, "FAIL")
    if interrupted is not None:
        code, word = 128 + int(signal.Signals[interrupted]), f"INTERRUPTED by {interrupted} ({word} so far)"
    ids = summary_ids(results)
    undecided = sum(r.status is Status.GATED and r.stopped_by is Stop.PR_FAILED for r in results)
    inconclusive = len(ids[Verdict.INCONCLUSIVE.value]) - undecided
    # Nothing measured because every selected benchmark has identical code (or is gone at head).
    all_unchanged = (
        not rounds
        and any(r.status is Status.UNCHANGED_IDENTICAL for r in results)
        and all(r.status in (Status.UNCHANGED_IDENTICAL, Status.REMOVED) for r in results)
    )
    # Not decided because a PR failed: this run's failure, or (a replay whose decisions differ) the recorded run's.
    pr_failed = exit_code(results, False) == 1  # a regression or a wrong result (not the flag, not an interrupt)
    whose = "the PR had failed" if pr_failed else "measuring stopped when the recorded run's PR had failed"
    title = (
        word
        + (f" ({inconclusive} inconclusive ⚠)" if inconclusive else "")
        + (f" ({undecided} not decided: {whose})" if undecided else "")
    )
    markdown = gate_markdown(
        title=f"Speed gate: {ALL_UNCHANGED if all_unchanged else title}",
        header_lines=header_lines(context, rounds),
        results=results,
        correctness=correctness,
        rounds=rounds,
        fail_on_inconclusive=fail_on_inconclusive,
        preface=context.preface,
        changes=context.changes,
    )
    # A runner without a profile says so before anything else (issue 46): its thresholds are the default's, and
    # without a model of its own the gate decides on its own rounds.
    first_line = (context.extra.get("runner_profile") or {}).get("first_line")
    if first_line:
        markdown = f"{first_line}\n\n{markdown}"
    print(markdown)
    # The measured rounds must survive an output that became unwritable during the run (disk full, a folder
    # gone read-only): each output falls back to a named file in the temp dir, the others are still written,
    # and the run ends as a WriteError naming each (exit 2).
    refused: list[str] = []
    append_step_summary_or_fallback(markdown, refused.append)
    if json_path is not None:
        record = record_json(context, results, correctness, rounds, code, fail_on_inconclusive, command)
        if interrupted is not None:
            record["interrupted"] = interrupted
        write_or_fallback(json_path, json_text(record).encode("utf-8"), "--json", refused.append)
    if plot_path is not None:
        from ci.speed.report.plot import plot_rounds

        drawn = {
            r.id: ([p.round for p in r.rounds], r.decision) for r in results if r.decision is not None and r.rounds
        }
        try:
            if drawn:
                log(f"speed_gate: plot of {len(drawn)} benchmarks' rounds written to {plot_rounds(drawn, plot_path)}")
            else:
                log(f"speed_gate: no benchmark was timed: no plot written to {plot_path}")
        except (OSError, WriteError) as exc:
            refused.append(str(exc))
    failed = [f"{v} in {', '.join(ids[v])}" for v in (Verdict.REGRESSION.value, Status.WRONG_RESULT.value) if ids[v]]
    if all_unchanged:
        log(f"speed_gate: {ALL_UNCHANGED}")
    else:
        log(
            f"speed_gate: {word + ': ' + '; '.join(failed) if code == 1 and failed else word}"
            + (f" ({inconclusive} inconclusive)" if inconclusive else "")
        )
    if refused:
        raise WriteError("; ".join(refused))
    return code
