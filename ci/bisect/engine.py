"""Bisection for the commit that made a benchmark slower, with a measurer that can say "I cannot tell", and its
Markdown summary; the steps: docs/CHANGE_POINTS.md, "Culprit bisection"."""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

REGRESSION, NO_CHANGE, IMPROVEMENT, INCONCLUSIVE = "regression", "no change", "improvement", "inconclusive"


@dataclass(frozen=True)
class Measurement:
    """One A/B comparison of ``head`` against ``base``: the speed gate's verdict and its ratio head/base."""

    base: str
    head: str
    verdict: str  # REGRESSION, NO_CHANGE, IMPROVEMENT or INCONCLUSIVE
    ratio: float | None  # TFLOPS head / base (the gate's mean ratio)
    low: float | None  # its interval
    high: float | None
    threshold: float | None = None


class Outcome(str, enum.Enum):
    CULPRIT = "culprit"
    INCONCLUSIVE = "inconclusive"
    NO_REGRESSION = "no regression"
    NO_CODE_CHANGE = "no code change"  # every commit has the good end's fingerprint: look outside the code


@dataclass
class Bisection:
    good: str
    bad: str
    commits: list[str]  # good .. bad, oldest first, good excluded
    candidates: list[str]  # those whose fingerprint differs from their parent's
    skipped: dict[str, str]  # commit -> the parent whose fingerprint it shares
    outcome: Outcome = Outcome.INCONCLUSIVE
    culprit: str | None = None
    interval: tuple[str, str] | None = None  # (last known good, first known bad): the culprit is in (a, b]
    measurements: list[Measurement] = field(default_factory=list)

    @property
    def comparison_bound(self) -> int:
        return 1 + math.ceil(math.log2(max(1, len(self.candidates))))

    def remaining(self) -> list[str]:
        """The candidates still in the interval (a, b]."""
        if self.interval is None:
            return []
        low, high = self.interval
        start = 0 if low == self.good else self.candidates.index(low) + 1
        return self.candidates[start : self.candidates.index(high) + 1]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": "mxfp4-bisect/1",
            "good": self.good,
            "bad": self.bad,
            "outcome": self.outcome.value,
            "culprit": self.culprit,
            "interval": list(self.interval) if self.interval else None,
            "remaining": self.remaining(),
            "commits": self.commits,
            "candidates": self.candidates,
            "skipped_identical_code": self.skipped,
            "comparisons": len(self.measurements),
            "comparison_bound": self.comparison_bound,
            "measurements": [vars(m) for m in self.measurements],
        }


def candidates(
    good: str, commits: Sequence[str], key: Callable[[str], Hashable | None]
) -> tuple[list[str], dict[str, str]]:
    """The commits whose fingerprint key differs from their parent's (``good`` is the first one's parent)."""
    kept, skipped = [], {}
    parent, parent_key = good, key(good)
    for commit in commits:
        commit_key = key(commit)
        if commit_key is not None and commit_key == parent_key:
            skipped[commit] = parent
        else:
            kept.append(commit)
        parent, parent_key = commit, commit_key
    return kept, skipped


def bisect(
    good: str,
    commits: Sequence[str],
    key: Callable[[str], Hashable | None],
    measure: Callable[[str, str], Measurement],  # (base, head)
    log: Callable[[str], None] = lambda line: None,
) -> Bisection:
    """The first of ``commits`` (oldest first, ending at the bad one) at which ``measure`` sees the regression."""
    if not commits:
        raise ValueError("no commits between good and bad: is good an ancestor of bad on the first-parent line?")
    kept, skipped = candidates(good, commits, key)
    result = Bisection(good, commits[-1], list(commits), kept, skipped)
    log(f"{len(commits)} commits, {len(kept)} with a changed fingerprint, {len(skipped)} skipped as identical code")
    if not kept:
        result.outcome = Outcome.NO_CODE_CHANGE
        return result

    def compare(head: str) -> Measurement:
        m = measure(good, head)
        result.measurements.append(m)
        log(f"{head[:12]} vs {good[:12]}: {m.verdict}, ratio {_ratio(m)}")
        return m

    # The bad end's fingerprint may equal an earlier candidate's; what is measured is its code, the last candidate's.
    confirm = compare(kept[-1])
    result.interval = (good, kept[-1])
    if confirm.verdict != REGRESSION:
        result.outcome = Outcome.INCONCLUSIVE if confirm.verdict == INCONCLUSIVE else Outcome.NO_REGRESSION
        return result
    low, high = -1, len(kept) - 1  # indices into kept: low known good (-1: good itself), high known bad
    while high - low > 1:
        mid = (low + high) // 2
        m = compare(kept[mid])
        if m.verdict == REGRESSION:
            high = mid
        elif m.verdict == INCONCLUSIVE:
            result.interval = (good if low < 0 else kept[low], kept[high])
            result.outcome = Outcome.INCONCLUSIVE
            return result
        else:
            low = mid
    result.interval = (good if low < 0 else kept[low], kept[high])
    result.culprit = kept[high]
    result.outcome = Outcome.CULPRIT
    return result


def _ratio(m: Measurement) -> str:
    if m.ratio is None:
        return "n/a"
    interval = f" [{m.low:.4f}, {m.high:.4f}]" if m.low is not None and m.high is not None else " (no interval)"
    return f"{m.ratio:.4f}{interval}"


# The step summary, from the same Bisection as the JSON


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
