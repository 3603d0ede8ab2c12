"""The bisection's Markdown step summary, from the same :class:`ci.bisect.engine.Bisection` as the JSON."""

from __future__ import annotations

from ci.bisect.engine import Bisection, Outcome


def _cell(value: float | None, digits: int = 4) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def markdown(result: Bisection, bench: str) -> str:
    lines = [f"## Bisection of `{bench}`: {result.good[:12]} (good) .. {result.bad[:12]} (bad)", ""]
    low, high = result.interval or (result.good, result.bad)  # None: not narrowed yet, the whole range
    if result.outcome is Outcome.CULPRIT:
        lines.append(f"**Culprit: `{result.culprit}`** (the slowdown appears between {low[:12]} and it).")
    elif result.outcome is Outcome.INCONCLUSIVE:
        rest = result.remaining()
        lines.append(
            f"**Inconclusive**: the step is below the gate's resolution here; the culprit is one of "
            f"{len(rest)} commit(s) in {low[:12]}..{high[:12]}: " + ", ".join(c[:12] for c in rest) + "."
        )
    elif result.outcome is Outcome.NO_REGRESSION:
        lines.append("**No regression**: the gate measured no slowdown of the bad commit against the good one.")
    else:
        lines.append(
            "**No code change**: every commit has the good commit's speed fingerprint; look at the "
            "environment (compiler, torch, driver, firmware), not at a commit."
        )
    lines += [
        "",
        f"{len(result.commits)} first-parent commits, {len(result.candidates)} with a changed speed fingerprint, "
        f"{len(result.skipped)} skipped as identical code; {len(result.measurements)} comparison(s) "
        f"(bound 1 + ceil(log2 {len(result.candidates)}) = {result.comparison_bound}).",
        "",
    ]
    if result.measurements:
        lines += ["| # | head | vs base | verdict | ratio head/base | interval |", "|---|---|---|---|---|---|"]
        for i, m in enumerate(result.measurements, 1):
            interval = f"[{_cell(m.low)}, {_cell(m.high)}]" if m.low is not None else "none"
            lines.append(f"| {i} | `{m.head[:12]}` | `{m.base[:12]}` | {m.verdict} | {_cell(m.ratio)} | {interval} |")
    if result.skipped:
        lines += ["", "Skipped (identical code to their parent): " + ", ".join(f"`{c[:12]}`" for c in result.skipped)]
    return "\n".join(lines) + "\n"
