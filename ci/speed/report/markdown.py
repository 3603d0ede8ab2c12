"""The speed gate's words: Markdown tables, correctness lines, excluded rounds, GPU state, from the same
BenchmarkResult objects as the exit code and the JSON. Outcomes arrive as codes (ci.speed.decide.codes,
harness.paired.Verdict) and become words only here; the deciding modules never import it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ci.speed.decide.codes import PR_FAILED_WHY, Check, Excluded, Exclusion, Status, Stop
from ci.speed.decide.verdict import RESOLVE_POWER, BenchmarkResult
from harness.paired.calibration import Calibration
from harness.paired.rates import Rates
from harness.paired.sequential import SequentialPlan
from harness.paired.verdict import Verdict
from harness.paired.zone import SOURCE_CONFLICT, SOURCE_GENERATIONS, SOURCE_GUARD, SOURCE_POOLED, SOURCE_PRIOR
from harness.report import markdown_table

VERDICT_TEXT = {
    Verdict.REGRESSION: "**REGRESSION**",
    Verdict.IMPROVEMENT: "improvement",
    Verdict.NO_CHANGE: "no change",
    Verdict.NOT_REGRESSION: "not a regression",
    Verdict.INCONCLUSIVE: "inconclusive ⚠",
}
STATUS_TEXT = {
    Status.GATED: "gated",
    Status.WRONG_RESULT: "**WRONG RESULT**",
    Status.NEW: "new",
    Status.REMOVED: "removed",
    Status.NOT_APPLICABLE: "n/a",
    Status.UNCHANGED_IDENTICAL: "unchanged (identical code)",
}
CHECK_TEXT = {
    Check.PASS: "pass",
    Check.FAIL: "**WRONG RESULT**",
    Check.ERROR: "**RAISED**",
    Check.NOT_APPLICABLE: "n/a",
}
# Why a benchmark's measuring ended before a look decided: in a verdict cell, and in the decision's reason.
STOP_TEXT = {
    Stop.PR_FAILED: "not decided: the PR had already failed",
    Stop.ROUND_BUDGET: "round budget spent",
    Stop.TIME_BUDGET: "time budget spent",
    Stop.FIXED_ROUNDS: "--plan rounds reached",
    Stop.END_OF_RECORD: "record ran out",
    Stop.INTERRUPTED: "interrupted",
}
# The PR's status was known (it fails): the rest of the runner's time would only have refined the report.
PR_FAILED_TEXT = "not decided: measuring stopped once the PR had failed"
RAN_OUT_TEXT = {
    Stop.ROUND_BUDGET: "the round budget",
    Stop.TIME_BUDGET: "the time budget (--max-minutes)",
    Stop.FIXED_ROUNDS: "the fixed number of rounds (--plan rounds)",
    Stop.END_OF_RECORD: "the recorded rounds",
    Stop.INTERRUPTED: "an interrupt (SIGINT or SIGTERM)",
}
EXCLUDED_TEXT = {
    Excluded.NOT_MEASURED: "not measured",
    Excluded.GPU_BUSY: "GPU busy",
    Excluded.MEASUREMENT_FAILED: "measurement failed",
    Excluded.THROTTLED: "throttled",
    Excluded.BELOW_CLOCK_FLOOR: "SM clock below the floor",
    Excluded.UNSTEADY: "timing not steady",
}


def exclusion_text(exclusion: Exclusion) -> str:
    words = EXCLUDED_TEXT[exclusion.code]
    return f"{words}: {', '.join(exclusion.throttle)}" if exclusion.throttle else words


def decision_reason(result: BenchmarkResult) -> str:
    """Why a result stands where it does: what ran out before its next look (``stopped_by``), else the plan's reason."""
    decision, stop = result.decision, result.stopped_by
    if decision is None:
        return result.note
    if stop is None or stop is Stop.DECISION:
        return decision.reason
    before = (
        f"before the look at {decision.next_look} usable rounds "
        f"({decision.rounds_used} usable, {decision.rounds_excluded} excluded)"
    )
    if stop is Stop.PR_FAILED:
        return f"{PR_FAILED_TEXT} on another benchmark, {before}; --all-verdicts measures it to its verdict"
    return f"{RAN_OUT_TEXT[stop]} ran out {before}: inconclusive"


def _pct(x: float | None, signed: bool = False) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:+.2%}" if signed else f"{x:.2%}"


def _tflops(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def ratio_text(result: BenchmarkResult) -> str:
    if result.decision is None or not math.isfinite(result.decision.estimate.point):
        return "-"
    est = result.decision.estimate
    text = f"{est.point:.4f} ({_pct(est.point - 1, True)})"
    interval = f"[{est.low:.4f}, {est.high:.4f}]" if est.bounded else "[unbounded]"
    return f"{text} {interval}"


def threshold_text(result: BenchmarkResult) -> str:
    """The threshold as the rule uses it: the zone's two edges (a regression at -t or worse, none above -t/2), the
    band's one width (versions 1-5)."""
    t = result.threshold
    if t is None:
        return "-"
    if result.decision is not None and result.decision.rule == "zone":
        return f"{-t:+.2%} / {-t / 2:+.2%}"
    return f"±{t:.2%}"


def verdict_text(result: BenchmarkResult) -> str:
    if result.status is not Status.GATED:
        return STATUS_TEXT[result.status]
    if result.verdict is None:  # gated but never decided: no rounds were read
        return VERDICT_TEXT[Verdict.INCONCLUSIVE]
    text = VERDICT_TEXT[result.verdict]
    if result.decision is not None and result.decision.at_threshold_edge:
        return text + " (at the threshold edge)"
    return text + (f" ({STOP_TEXT[result.stopped_by]})" if result.stopped_by in STOP_TEXT else "")


def benchmark_rows(
    results: Sequence[BenchmarkResult], changes: Mapping[str, str] | None = None
) -> list[dict[str, str]]:
    """One row per gated or wrong benchmark; with ``changes`` ({benchmark id: what differs}) a "code" column."""
    rows = []
    model_used = any(x.decision is not None and x.decision.variance != "rounds" for x in results)
    for r in results:
        if r.status not in (Status.GATED, Status.WRONG_RESULT):
            continue
        d = r.decision
        rows.append(
            {
                "benchmark": r.id,
                "base TFLOPS": _tflops(r.median_tflops("base")),
                "head TFLOPS": _tflops(r.median_tflops("head")),
                "head/base [interval]": ratio_text(r),
                "threshold": threshold_text(r),
                "resolvable": "-" if r.resolvable is None else f"{r.resolvable:.2%}",
                "verdict": verdict_text(r),
                "rounds used/excluded": "-" if d is None else f"{d.rounds_used}/{d.rounds_excluded}",
            }
        )
        if changes is not None:
            rows[-1]["code"] = changes.get(r.id, "-")
        if model_used:
            rows[-1]["variance from"] = variance_text(d.variance) if d is not None else "-"
    return rows


VARIANCE_TEXT = {
    "model": "noise model + rounds",
    "rounds": "own rounds",
    "rounds (no model entry)": "own rounds (not in the model)",
    "rounds (the run is noisier than the model)": "own rounds (**guard**: noisier than the model)",
    # Version 7 (harness.paired.zone.learned_variances), matched by prefix: a source may carry a note after it.
    SOURCE_GUARD: "own generations (**guard**: noisier than the model)",
    SOURCE_CONFLICT: "own generations (**they disagree with the model**)",
    SOURCE_POOLED: "noise model + own generations",
    SOURCE_PRIOR: "noise model (one generation so far)",
    SOURCE_GENERATIONS: "own generations",
}


def variance_text(source: str) -> str:
    """Where a decision's variance came from, in a table cell's words."""
    if source in VARIANCE_TEXT:
        return VARIANCE_TEXT[source]
    return next((words for key, words in VARIANCE_TEXT.items() if source.startswith(key)), source)


def excluded_rows(results: Sequence[BenchmarkResult]) -> list[dict[str, str]]:
    return [
        {"round": str(p.round_index + 1), "benchmark": r.id, "reason": exclusion_text(p.exclusion), "detail": p.detail}
        for r in results
        for p in r.rounds
        if p.exclusion is not None
    ]


def correctness_lines(correctness: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = []
    for c in sorted(correctness, key=lambda c: (c["side"] != "head", c["kernel"], c["config"])):
        shape = "x".join(map(str, c["shape"]))
        status = CHECK_TEXT[Check.of(c)]
        lines.append(f"- {c['side']} `{c['kernel']}[{c['config']}]` at {shape}: {status}: {c['message']}")
    return lines


def gpu_state_rows(rounds: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Per round and side: the lowest SM clock, highest temperature and power, every throttle reason seen."""
    rows = []
    for rnd in rounds:
        for proc in rnd["processes"]:
            states = [
                rec[w]
                for rec in proc["records"].values()
                for w in ("gpu_before", "gpu_after")
                if isinstance(rec, dict) and rec.get(w)
            ]
            if not states:
                continue
            clocks, temps, power = (
                [s[key] for s in states if isinstance(s.get(key), (int, float))]
                for key in ("sm_clock_mhz", "temperature_c", "power_w")
            )
            reasons = sorted({r for s in states for r in s.get("throttle_reasons") or ()})
            rows.append(
                {
                    "round": str(rnd["index"] + 1),
                    "side": proc["side"],
                    "SM MHz (min-max)": f"{min(clocks):g}-{max(clocks):g}" if clocks else "-",
                    "max °C": f"{max(temps):g}" if temps else "-",
                    "max W": f"{max(power):.0f}" if power else "-",
                    "throttle reasons": ", ".join(reasons) or "none",
                }
            )
    return rows


def idle_overrides(rounds: Sequence[Mapping[str, Any]]) -> list[str]:
    """Processes that timed although the idle check found the GPU busy, and what it found."""
    found = []
    for rnd in rounds:
        for proc in rnd["processes"]:
            problems = sorted(
                {
                    p
                    for rec in proc["records"].values()
                    if isinstance(rec, dict) and (rec.get("idle") or {}).get("status") == "overridden"
                    for p in rec["idle"].get("problems", [])
                }
            )
            if problems:
                found.append(f"round {rnd['index'] + 1} {proc['side']}: {', '.join(problems)}")
    return found


ZONE_LEGEND = (
    "_threshold_ `-t / -t/2`: a slowdown of `t` or more is a regression, one of less than `t/2` is not (between them "
    "either answer is allowed). _head/base [interval]_: the bounds the verdict was decided on (the lower at the "
    "look's miss alpha, the upper at its false-alarm alpha). _no change_: that interval lies within ±`t/2`; _not a "
    "regression_: not slower by `t`, but not shown to be within ±`t/2`; _improvement_: faster by `t/2` or more."
)


def plan_text(plan: SequentialPlan, gated: int | None = None) -> str:
    """The plan in words; with ``gated``, the bound on a false alarm anywhere in the PR (Bonferroni: gated x alpha)
    and on a missed regression of one benchmark (per benchmark, not shared)."""
    # Which interval each look computes, at what confidence, and what error each verdict spends.
    each_look = (
        f"each look {plan.per_look_confidence:.3%} two-sided"
        if plan.spending is None
        else f"looks {'/'.join(f'{plan.confidence_at(k):.3%}' for k in range(len(plan.look_points)))} two-sided"
    )
    if plan.miss_alpha is not None:
        errors = (
            f"alpha {plan.alpha:.3g} a false regression and miss alpha {plan.miss_alpha:.3g} a missed one over its "
            f"looks ({each_look}; 'no change' on a {plan.per_look_miss_confidence:.3%} interval"
            + (" at the last look" if plan.spending is not None else "")
            + ")"
        )
    else:
        per = "a false regression and a missed one each" if plan.alpha_per_tail else "per benchmark"
        errors = f"alpha {plan.alpha:.3g} {per} over its looks ({each_look})"
    if plan.learn:
        return _learned_plan_text(plan, gated)
    text = f"looks at {'/'.join(map(str, plan.look_points))} usable rounds, t interval, {errors}"
    if plan.spending is not None:
        text += f"; alpha spent {'/'.join(f'{w:.0%}' for w in plan.shares())} over the looks"
    if plan.variance == "model":
        text += (
            f"; variance from the runner's noise model moderated by the rounds (the run's guard at "
            f"{plan.guard_level:g}: noisier rounds fall back to each benchmark's own)"
        )
    if plan.futility:
        text += "; stops early when the effect cannot be told from the band's edge"
    if gated:
        text += (
            f" · a false alarm anywhere in this PR ({gated} gated): <= {min(1.0, gated * plan.alpha):.3g}"
            f" · a benchmark slower by the threshold or more is called 'no change' with probability"
            f" <= {plan.miss_side_alpha:.3g}"
        )
    return text


def _learned_plan_text(plan: SequentialPlan, gated: int | None) -> str:
    """Version 7's plan in words: the zone, the looks, where the variance comes from, what each verdict may cost."""
    text = (
        f"zone rule, looks at {'/'.join(map(str, plan.look_points))} usable rounds (alpha spent "
        f"{'/'.join(f'{w:.0%}' for w in plan.shares())}); the variance of each look's mean from this run's worker "
        "generations (cluster-robust, generations - 1 df)"
    )
    if plan.variance == "model":
        text += (
            f", pooled with the runner's noise model as a prior of at most {plan.prior_df_cap:g} df while the "
            f"generations agree with it (two-sided F test at {plan.conflict_level:g}; the run's guard at "
            f"{plan.guard_level:g}); a look decides when either variance's bounds do"
        )
    text += f"; the last look decides at the zone's midpoint when that call errs w.p. <= {plan.forced_limit:g}"
    if gated:
        text += (
            f" · a false regression anywhere in this PR ({gated} gated): <= {min(1.0, gated * plan.alpha):.3g}"
            f" · a regression of t or more missed per benchmark: <= {plan.miss_side_alpha:.3g} (before a forced "
            "call; docs/SPEED_GATE.md states the measured rates)"
        )
    return text


def gate_markdown(
    *,
    title: str,
    header_lines: Sequence[str],
    results: Sequence[BenchmarkResult],
    correctness: Sequence[Mapping[str, Any]],
    rounds: Sequence[Mapping[str, Any]],
    fail_on_inconclusive: bool,
    preface: Sequence[str] = (),
    changes: Mapping[str, str] | None = None,
) -> str:
    """The verdict; ``preface`` (the code changes, what was skipped) goes above it, ``changes`` into a "code" column."""
    parts = [f"### {title}", "", *header_lines, "", *preface]
    undecided = [r.id for r in results if r.status is Status.GATED and r.stopped_by is Stop.PR_FAILED]
    inconclusive = [
        r.id
        for r in results
        if r.status is Status.GATED and r.verdict is Verdict.INCONCLUSIVE and r.stopped_by is not Stop.PR_FAILED
    ]
    if undecided:  # this run's failure, or (a replay deciding otherwise) the recorded run's
        failed = any(r.status is Status.WRONG_RESULT or r.verdict is Verdict.REGRESSION for r in results)
        parts += [
            f"> **{len(undecided)} not decided**: {PR_FAILED_WHY[failed]}. `--all-verdicts` measures every "
            f"benchmark to its verdict. {', '.join(undecided[:8])}",
            "",
        ]
    zone = [r for r in results if r.decision is not None and r.decision.rule == "zone"]
    if inconclusive and zone:
        code = "exit 1: --fail-on-inconclusive" if fail_on_inconclusive else "exit 3"
        parts += [
            f"> ⚠ **{len(inconclusive)} inconclusive: undecided, not green ({code}); re-run.** "
            + "; ".join(f"{r.id}: {decision_reason(r)}" for r in results if r.id in inconclusive[:8]),
            "",
        ]
    elif inconclusive:
        effect = (
            "fails the gate (--fail-on-inconclusive)" if fail_on_inconclusive else "does not fail the gate (exit 0)"
        )
        parts += [
            f"> ⚠ **{len(inconclusive)} inconclusive**: no look's interval cleared the band, so the change could "
            f"not be told from the threshold with this noise in these rounds; this {effect}. "
            f"{', '.join(inconclusive[:8])}",
            "",
        ]
    wrong = [r for r in results if r.status is Status.WRONG_RESULT]
    for r in wrong:
        parts += [f"> ❌ **{r.id}: wrong result at head, not timed.** {r.note}", ""]
    overridden = idle_overrides(rounds)
    if overridden:
        parts += [
            f"> ⚠ the idle check was overridden (MXFP4_ALLOW_BUSY_GPU) in {len(overridden)} process(es): "
            f"{'; '.join(overridden[:4])}",
            "",
        ]
    rows = benchmark_rows(results, changes)
    if rows:
        parts += [markdown_table(rows), ""]
        if zone:
            parts += [ZONE_LEGEND, ""]
        parts += [
            f"_resolvable_: the smallest slowdown flagged as a regression with probability {RESOLVE_POWER:.0%} "
            "by the last look at this threshold (noise from the calibration file where it has the benchmark, "
            "else from this run's rounds). Higher TFLOPS is better; head/base < 1 is a slowdown.",
            "",
        ]
    elif rounds:  # measured, yet nothing gated: say so; with no round at all the preface says why
        parts += ["_(no benchmark was gated)_", ""]
    notes = [f"- {r.id}: {r.note}" for r in results if r.status is Status.GATED and r.note]
    if notes:
        parts += ["**Notes**", *notes, ""]
    if correctness:
        parts += [
            "**Correctness before timing** (ci.common.correctness.check_kernel):",
            *correctness_lines(correctness),
            "",
        ]
    excluded = excluded_rows(results)
    if excluded:
        parts += [f"**Excluded rounds** ({len(excluded)}): not used in any estimate.", "", markdown_table(excluded), ""]
    others = [
        {"benchmark": r.id, "status": STATUS_TEXT[r.status], "why": r.note}
        for r in results
        if r.status not in (Status.GATED, Status.WRONG_RESULT)
    ]
    if others:
        parts += ["**Not gated**", "", markdown_table(others), ""]
    states = gpu_state_rows(rounds)
    if states:
        summary = "<summary>GPU state per round (before/after each timed run)</summary>"
        parts += [f"<details>{summary}", "", markdown_table(states), "", "</details>", ""]
    return "\n".join(parts).rstrip() + "\n"


def calibration_markdown(
    calibrations: Mapping[str, Calibration],
    thresholds: Mapping[str, float],
    header: Sequence[str],
) -> str:
    rows = [
        {
            "benchmark": bench_id,
            "rounds (excl)": f"{c.n_rounds} ({c.n_excluded})",
            "process CV": _pct(c.noise_cv),
            "round ratio SD (95% upper)": f"{_pct(c.ratio_sd)} ({_pct(c.ratio_sd_upper)})",
            "A/A ratio": f"{c.aa_estimate.point:.4f}",
            "suggested threshold": _pct(c.threshold),
            "resolvable at it": _pct(c.min_resolvable_effect),
            "current threshold": _pct(thresholds[bench_id]),
        }
        for bench_id, c in calibrations.items()
    ]
    parts = ["### Speed gate calibration (A/A: one commit against itself)", "", *header, "", markdown_table(rows), ""]
    return "\n".join(parts)


def rates_markdown(rates: Mapping[str, Rates], header: Sequence[str]) -> str:
    rows = [
        {
            "benchmark": bench_id,
            "decisions": str(r.decisions),
            **{v.value: _pct(r.rate(v)) if r.decisions else "-" for v in Verdict},
            "mean rounds": f"{r.mean_rounds:.1f}" if r.decisions else "-",
            "stopped early": str(r.stopped_early),
            "incomplete (record too short)": str(r.incomplete),
        }
        for bench_id, r in rates.items()
    ]
    return "\n".join(
        ["### Speed gate replay: decisions from recorded rounds", "", *header, "", markdown_table(rows), ""]
    )


def noise_markdown(model: Any, planned: Mapping[str, Any], header: Sequence[str], notes: Sequence[str]) -> str:
    """The calibration's noise model: per benchmark its noise, policy threshold, the rounds and seconds to decide."""
    rows = []
    for bench_id, noise in sorted(model.benchmarks.items()):
        p = planned.get(bench_id)
        row = {
            "benchmark": bench_id,
            "rounds (runs)": f"{noise.rounds} ({noise.runs})",
            "within-worker SD (df)": f"{_pct(noise.within_sd)} ({noise.within_df})",
            "between-worker SD (df)": f"{_pct(noise.between_sd)} ({noise.between_df})",
            "threshold (policy)": _pct(p.threshold) if p else "-",
        }
        rounds, seconds = (p.rounds, p.seconds) if p else ({}, {})
        for every in sorted(rounds):
            n, sec = rounds[every], seconds[every]
            row[f"decided by, restart every {every}"] = (
                "cannot" if n is None else f"{n} rounds" + ("" if sec is None else f", {sec:.0f} s")
            )
        rows.append(row)
    spread = model.spread
    differ = (
        "runs differ from the model by no more than its own estimation error"
        if min(spread.run_df, spread.bench_df) >= 1e5
        else f"runs differ by prior df {spread.run_df:.3g} (the whole run) and {spread.bench_df:.3g} (one benchmark)"
    )
    parts = [
        "### Speed gate calibration: the runner's noise model",
        "",
        *header,
        "",
        f"runner: {', '.join(f'{k} {v}' for k, v in model.runner.items() if v)} · fitted {model.fitted} from "
        f"{len(model.runs)} run(s) · {differ}" + ("" if spread.estimated else " (assumed: the runs could not show it)"),
        "",
        markdown_table(rows) if rows else "_(no benchmark could be fitted)_",
        "",
    ]
    if notes:
        parts += ["**Notes**", *[f"- {n}" for n in notes], ""]
    return "\n".join(parts)
