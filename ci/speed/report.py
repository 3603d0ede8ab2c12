"""The speed gate's Markdown: one table row per benchmark, correctness lines, excluded rounds, GPU state.

Rendered from the same BenchmarkResult objects the exit code and the JSON come
from, through harness.report (the one table writer).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from ci.speed.verdict import RESOLVE_POWER, BenchmarkResult
from harness.paired.calibration import Calibration
from harness.paired.rates import Rates
from harness.paired.sequential import SequentialPlan
from harness.paired.verdict import Verdict
from harness.report import markdown_table

VERDICT_TEXT = {
    Verdict.REGRESSION: "**REGRESSION**",
    Verdict.IMPROVEMENT: "improvement",
    Verdict.NO_CHANGE: "no change",
    Verdict.INCONCLUSIVE: "inconclusive ⚠",
}


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


def verdict_text(result: BenchmarkResult) -> str:
    if result.status == "wrong result":
        return "**WRONG RESULT**"
    if result.status != "gated":
        return result.status
    text = VERDICT_TEXT[result.verdict]
    ended = {"round budget": "round budget spent", "time budget": "time budget spent", "fixed rounds": "--rounds reached",
             "end of record": "record ran out"}
    return text + (f" ({ended[result.stopped_by]})" if result.stopped_by in ended else "")


def benchmark_rows(results: Sequence[BenchmarkResult]) -> list[dict[str, str]]:
    rows = []
    for r in results:
        if r.status not in ("gated", "wrong result"):
            continue
        d = r.decision
        rows.append({
            "benchmark": r.id,
            "base TFLOPS": _tflops(r.median_tflops("base")),
            "head TFLOPS": _tflops(r.median_tflops("head")),
            "head/base [interval]": ratio_text(r),
            "threshold": "-" if r.threshold is None else f"±{r.threshold:.2%}",
            "resolvable": "-" if r.resolvable is None else f"{r.resolvable:.2%}",
            "verdict": verdict_text(r),
            "rounds used/excluded": "-" if d is None else f"{d.rounds_used}/{d.rounds_excluded}",
        })
    return rows


def excluded_rows(results: Sequence[BenchmarkResult]) -> list[dict[str, str]]:
    return [
        {"round": str(p.round_index + 1), "benchmark": r.id, "reason": p.round.excluded, "detail": p.detail}
        for r in results for p in r.rounds if p.round.excluded is not None
    ]


def other_rows(results: Sequence[BenchmarkResult]) -> list[dict[str, str]]:
    return [{"benchmark": r.id, "status": r.status, "why": r.note} for r in results if r.status not in ("gated", "wrong result")]


def correctness_lines(correctness: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = []
    for c in sorted(correctness, key=lambda c: (c["side"] != "head", c["kernel"], c["config"])):
        shape = "x".join(map(str, c["shape"]))
        status = {"pass": "pass", "fail": "**WRONG RESULT**", "error": "**RAISED**", "n/a": "n/a"}[c["status"]]
        lines.append(f"- {c['side']} `{c['kernel']}[{c['config']}]` at {shape}: {status}: {c['message']}")
    return lines


def gpu_state_rows(rounds: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Per round and side: the lowest SM clock, highest temperature and power, every throttle reason seen."""
    rows = []
    for rnd in rounds:
        for proc in rnd["processes"]:
            states = [rec[w] for rec in proc["records"].values() for w in ("gpu_before", "gpu_after") if isinstance(rec, dict) and rec.get(w)]
            if not states:
                continue

            def values(key: str) -> list[float]:
                return [s[key] for s in states if isinstance(s.get(key), (int, float))]

            clocks, temps, power = values("sm_clock_mhz"), values("temperature_c"), values("power_w")
            reasons = sorted({r for s in states for r in s.get("throttle_reasons") or ()})
            rows.append({
                "round": str(rnd["index"] + 1),
                "side": proc["side"],
                "SM MHz (min-max)": f"{min(clocks):g}-{max(clocks):g}" if clocks else "-",
                "max °C": f"{max(temps):g}" if temps else "-",
                "max W": f"{max(power):.0f}" if power else "-",
                "throttle reasons": ", ".join(reasons) or "none",
            })
    return rows


def idle_overrides(rounds: Sequence[Mapping[str, Any]]) -> list[str]:
    """Processes that timed although the idle check found the GPU busy, and what it found."""
    found = []
    for rnd in rounds:
        for proc in rnd["processes"]:
            problems = sorted({p for rec in proc["records"].values() if isinstance(rec, dict)
                               and (rec.get("idle") or {}).get("status") == "overridden" for p in rec["idle"].get("problems", [])})
            if problems:
                found.append(f"round {rnd['index'] + 1} {proc['side']}: {', '.join(problems)}")
    return found


def plan_text(plan: SequentialPlan) -> str:
    return (f"looks at {'/'.join(map(str, plan.look_points))} usable rounds, family-wise alpha {plan.alpha:g} "
            f"(each look {plan.per_look_confidence:.2%})")


def gate_markdown(
    *,
    title: str,
    header_lines: Sequence[str],
    results: Sequence[BenchmarkResult],
    correctness: Sequence[Mapping[str, Any]],
    rounds: Sequence[Mapping[str, Any]],
    fail_on_inconclusive: bool,
) -> str:
    parts = [f"### {title}", "", *header_lines, ""]
    inconclusive = [r.id for r in results if r.status == "gated" and r.verdict is Verdict.INCONCLUSIVE]
    if inconclusive:
        effect = "fails the gate (--fail-on-inconclusive)" if fail_on_inconclusive else "does not fail the gate (exit 0)"
        parts += [f"> ⚠ **{len(inconclusive)} inconclusive**: no look's interval cleared the band, so the change could not be "
                  f"told from the threshold with this noise in these rounds; this {effect}. {', '.join(inconclusive[:8])}", ""]
    wrong = [r for r in results if r.status == "wrong result"]
    for r in wrong:
        parts += [f"> ❌ **{r.id}: wrong result at head, not timed.** {r.note}", ""]
    overridden = idle_overrides(rounds)
    if overridden:
        parts += [f"> ⚠ the idle check was overridden (MXFP4_ALLOW_BUSY_GPU) in {len(overridden)} process(es): "
                  f"{'; '.join(overridden[:4])}", ""]
    parts += [markdown_table(benchmark_rows(results), empty="_(no benchmark was gated)_"), ""]
    parts += [f"_resolvable_: the smallest slowdown flagged as a regression with probability {RESOLVE_POWER:.0%} by the last "
              "look at this threshold (noise from the calibration file where it has the benchmark, else from this run's rounds). "
              "Higher TFLOPS is better; head/base < 1 is a slowdown.", ""]
    notes = [f"- {r.id}: {r.note}" for r in results if r.status == "gated" and r.note]
    if notes:
        parts += ["**Notes**", *notes, ""]
    if correctness:
        parts += ["**Correctness before timing** (ci.common.correctness.check_kernel):", *correctness_lines(correctness), ""]
    excluded = excluded_rows(results)
    if excluded:
        parts += [f"**Excluded rounds** ({len(excluded)}): not used in any estimate.", "", markdown_table(excluded), ""]
    others = other_rows(results)
    if others:
        parts += ["**Not gated**", "", markdown_table(others), ""]
    states = gpu_state_rows(rounds)
    if states:
        parts += ["<details><summary>GPU state per round (before/after each timed run)</summary>", "",
                  markdown_table(states), "", "</details>", ""]
    return "\n".join(parts).rstrip() + "\n"


def calibration_markdown(
    calibrations: Mapping[str, Calibration], thresholds: Mapping[str, float], overrides: Sequence[Mapping[str, Any]], header: Sequence[str]
) -> str:
    rows = [{
        "benchmark": bench_id,
        "rounds (excl)": f"{c.n_rounds} ({c.n_excluded})",
        "process CV": _pct(c.noise_cv),
        "round ratio SD (95% upper)": f"{_pct(c.ratio_sd)} ({_pct(c.ratio_sd_upper)})",
        "A/A ratio": f"{c.aa_estimate.point:.4f}",
        "suggested threshold": _pct(c.threshold),
        "resolvable at it": _pct(c.min_resolvable_effect),
        "current threshold": _pct(thresholds[bench_id]),
    } for bench_id, c in calibrations.items()]
    import json

    snippet = ",\n".join("    " + json.dumps(o) for o in overrides)
    parts = ["### Speed gate calibration (A/A: one commit against itself)", "", *header, "", markdown_table(rows), ""]
    if overrides:
        parts += ["Overrides to paste into `ci/speed_thresholds.json` \"overrides\" (first match wins):", "", "```json", snippet, "```", ""]
    return "\n".join(parts)


def rates_markdown(rates: Mapping[str, Rates], header: Sequence[str]) -> str:
    rows = []
    for bench_id, r in rates.items():
        rows.append({
            "benchmark": bench_id,
            "decisions": str(r.decisions),
            **{v.value: _pct(r.rate(v)) if r.decisions else "-" for v in Verdict},
            "mean rounds": f"{r.mean_rounds:.1f}" if r.decisions else "-",
            "stopped early": str(r.stopped_early),
            "incomplete (record too short)": str(r.incomplete),
        })
    return "\n".join(["### Speed gate replay: decisions from recorded rounds", "", *header, "", markdown_table(rows), ""])
