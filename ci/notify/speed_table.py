"""The speed record's benchmarks as the comment's tables (pure): base and head TFLOPS, the change in words (never a bare
percentage), the interval and threshold, at most :data:`ROWS_SHOWN` rows a table."""

from __future__ import annotations

from ci.notify.markdown import code, table
from ci.notify.records import SpeedBenchmark, SpeedRecord

ROWS_SHOWN = 25  # per table; the rest is counted


def undecided_benchmarks(speed: SpeedRecord) -> list[SpeedBenchmark]:
    """Gated benchmarks left undecided for a reason of their own (not those a failed PR no longer needed)."""
    return [
        b
        for b in speed.benchmarks
        if b.status == "gated" and b.verdict in ("inconclusive", None) and b.stopped_by != "pr failed"
    ]


def tflops(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:.1f}" if value >= 100 else f"{value:.2f}" if value >= 1 else f"{value:.3g}"


def change_words(ratio: float | None) -> str:
    """head/base TFLOPS as a change in words: "−66.6% slower", "+2.1% faster" (never a bare percentage)."""
    if ratio is None:
        return "?"
    pct = (ratio - 1) * 100
    if round(pct, 1) == 0:
        return "**±0.0%** same"
    return f"**{'+' if pct > 0 else '−'}{abs(pct):.1f}%** {'faster' if pct > 0 else 'slower'}"


def threshold_text(threshold: float | None) -> str:
    if threshold is None:
        return "?"
    return f"±{threshold * 100:.2f}%" if threshold < 0.01 else f"±{threshold:.1%}"


def benchmark_cell(bench_id: str) -> str:
    """``kernel[config]/`` and the shape on two lines: a table of long ids stays on one screen."""
    head, slash, shape = bench_id.rpartition("/")
    if not head or not shape:
        return code(bench_id, in_table=True)
    return f"{code(head + slash, in_table=True)}<br>{code(shape, in_table=True)}"


def _ratio_cells(b: SpeedBenchmark) -> dict[str, str]:
    interval = f"{b.low:.3f} – {b.high:.3f}" if b.low is not None and b.high is not None else "unbounded"
    return {
        "benchmark": benchmark_cell(b.id),
        "base TFLOPS": tflops(b.base_tflops),
        "head TFLOPS": tflops(b.head_tflops),
        "head vs base (interval of head/base)": f"{change_words(b.ratio)}<br>{interval}",
        "threshold": threshold_text(b.threshold),
        "rounds": "?" if b.rounds_used is None else str(b.rounds_used),
    }


def table_of(title: str, rows: list[dict[str, str]]) -> str:
    shown = rows[:ROWS_SHOWN]
    more = f"\n\n…and {len(rows) - ROWS_SHOWN} more (the step summary has all)." if len(rows) > ROWS_SHOWN else ""
    return f"**{title}**\n\n{table(shown)}{more}"


_KNOWN_ROWS = {"regression", "improvement", "no change", "not a regression", "inconclusive", None}


def speed_blocks(speed: SpeedRecord) -> tuple[list[str], list[str]]:
    """(blocks for what went wrong, blocks for the rest) of a speed record."""
    gated = [b for b in speed.benchmarks if b.status == "gated"]
    regressions = [b for b in gated if b.verdict == "regression"]
    improvements = [b for b in gated if b.verdict == "improvement"]
    undecided = undecided_benchmarks(speed)
    others = [b for b in gated if b.verdict not in _KNOWN_ROWS]  # a later gate's verdict: shown as it says
    bad, rest = [], []
    if regressions:
        bad.append(table_of(f"Regressions ({len(regressions)})", [_ratio_cells(b) for b in regressions]))
    # A benchmark wrong at its timed shape or in the survey's check; the survey's line only when no benchmark says it.
    wrong = [f"- {code(b.id)}: {code(b.reason, 600)}" for b in speed.benchmarks if b.status == "wrong result"]
    wrong = wrong or [f"- {code(w.where)}: {code(w.message, 600)}" for w in speed.wrong_at_head]
    if wrong:
        bad.append("**Wrong result at head** (not timed)\n\n" + "\n".join(wrong[:ROWS_SHOWN]))
    if undecided:
        rows = [dict(_ratio_cells(b), why=code(b.reason, 300, in_table=True)) for b in undecided]
        title = f"Inconclusive ({len(rows)}): not decided, so the status is not green; a re-run is the remedy"
        bad.append(table_of(title, rows))
    if others:
        rows = [dict(_ratio_cells(b), verdict=code(b.verdict, 40, in_table=True)) for b in others]
        rest.append(table_of(f"Other verdicts ({len(rows)})", rows))
    if improvements:
        rest.append(table_of(f"Improvements ({len(improvements)})", [_ratio_cells(b) for b in improvements]))
    return bad, rest
