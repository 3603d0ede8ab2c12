"""The budget gate's outputs (table, entries to paste, Markdown, JSON verdict), all from the checks that decided."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ci.budget.budget_file import BUDGET_PATH
from ci.budget.metrics import METRIC_BY_FIELD, SPILL_FIELDS
from harness.report import markdown_table

if TYPE_CHECKING:
    from ci.budget.compare import TargetCheck

GATE_SCHEMA = "mxfp4-budget-gate/2"
DIRTY_FILES_SHOWN = 10


# Side by side, one unit per column: the merge-base's value, the head's and the budget's limit.
SIDE_BY_SIDE = (("regs", "registers"), ("LDS bytes", "shared_bytes"), ("occupancy", "occupancy"))
OTHER_COUNTS = (
    ("arch_vgpr", "arch_vgpr"),
    ("agpr", "agpr"),
    ("sgpr", "sgpr"),
    ("acc_copies", "accvgpr_copies"),
    ("in_loop", "accvgpr_copies_in_loop"),
)


def _value(record: Mapping | None, name: str) -> str:
    value = None if record is None else record.get(name)
    return "-" if value is None else str(value)


def _limit(budget: Mapping | None, name: str) -> str:
    metric = METRIC_BY_FIELD[name]
    value = None if budget is None or metric.budget_key is None else budget.get(metric.budget_key)
    return "-" if value is None else f"{'<=' if metric.higher_is_worse else '>='} {value}"


def _others(base: Mapping | None, head: Mapping | None, budget: Mapping | None) -> str:
    """The gfx-only register counts, where any is known: ``name base/head/budget`` (register counts, one unit)."""
    parts = []
    for label, name in OTHER_COUNTS:
        if (head or {}).get(name) is None and (base or {}).get(name) is None:
            continue
        parts.append(f"{label} {_value(base, name)}/{_value(head, name)}/{_limit(budget, name).removeprefix('<= ')}")
    return ", ".join(parts) or "-"


def table_rows(checks: Iterable[TargetCheck]) -> list[dict[str, str]]:
    rows = []
    for c in checks:
        head, base = c.head, c.base
        spills = ", ".join(f"{f}={head[f]}" for f in SPILL_FIELDS if head and head.get(f)) or ("0" if head else "-")
        row = {"target": c.target, "status": c.status.upper()}
        for label, name in SIDE_BY_SIDE:
            row |= {
                f"{label} base": _value(base, name),
                f"{label} head": _value(head, name),
                f"{label} budget": _limit(c.budget, name),
            }
        unit = (head or base or {}).get("occupancy_unit")
        row["occupancy unit"] = unit or "-"
        row["regs limit"] = _value(head, "register_limit")
        row["other regs (base/head/budget)"] = _others(base, head, c.budget)
        row["spills"] = spills
        row["why"] = "; ".join(t if len(t) <= 240 else t[:237] + "..." for t in c.reasons + c.notes)
        rows.append(row)
    return rows


def suggested_edits(checks: Iterable[TargetCheck]) -> dict[str, dict[str, Any]]:
    return {c.target: c.suggested_budget for c in checks if c.status == "fail" and c.suggested_budget}


def tightened_edits(checks: Iterable[TargetCheck]) -> dict[str, dict[str, Any]]:
    return {c.target: c.tightened_budget for c in checks if c.status == "pass" and c.tightened_budget}


def _entries_text(edits: Mapping[str, Mapping[str, Any]]) -> str:
    return ",\n".join(f"    {json.dumps(t)}: {json.dumps(e)}" for t, e in sorted(edits.items()))


def render_suggestion(edits: Mapping[str, Mapping[str, Any]]) -> str:
    if not edits:
        return ""
    return (
        f'To accept these numbers on purpose, edit {BUDGET_PATH} -- under "targets", set:\n{_entries_text(edits)}\n'
        "(spills, scratch, LDS over the hardware limit and compile failures cannot be accepted by a budget edit)"
    )


def render_ratchet(edits: Mapping[str, Mapping[str, Any]]) -> str:
    if not edits:
        return ""
    return (
        f"Ratchet: these targets now use less than their budget. Tighten {BUDGET_PATH} so the next change cannot "
        f'spend the room silently -- under "targets", set (or rerun with --update-budget):\n{_entries_text(edits)}'
    )


def dirty_warning(files: Sequence[str], head_sha: str) -> str:
    if not files:
        return ""
    shown = ", ".join(files[:DIRTY_FILES_SHOWN]) + (
        f" and {len(files) - DIRTY_FILES_SHOWN} more" if len(files) > DIRTY_FILES_SHOWN else ""
    )
    return (
        f"budget_gate: WARNING: {len(files)} uncommitted file(s) NOT measured (this run checks commit "
        f"{head_sha[:12]}; add --working-tree to include them): {shown}"
    )


def update_line(updated: Mapping[str, Mapping[str, int]], path) -> str:
    return "budget_gate: --update-budget: " + (
        f"tightened {', '.join(f'{t} ({json.dumps(c)})' for t, c in sorted(updated.items()))} in {path}"
        if updated
        else f"nothing to tighten in {path}"
    )


def verdict_line(checks: Sequence[TargetCheck]) -> str:
    failed = [c.target for c in checks if c.status == "fail"]
    if failed:
        return f"budget_gate: FAIL: {len(failed)} target(s) failed: {', '.join(failed)}"
    return f"budget_gate: PASS: {len(checks)} target(s) checked"


@dataclass(frozen=True)
class GateReport:
    """Everything one run shows, made once from its checks (stdout, the step summary and --json read it)."""

    verdict: str  # "pass" | "fail"
    base_note: str
    rows: list[dict[str, str]]
    suggestion: str
    ratchet: str
    dirty: str


def gate_report(checks: Sequence[TargetCheck], base_note: str, dirty: str) -> GateReport:
    verdict = "fail" if any(c.status == "fail" for c in checks) else "pass"
    return GateReport(
        verdict,
        base_note,
        table_rows(checks),
        render_suggestion(suggested_edits(checks)),
        render_ratchet(tightened_edits(checks)),
        dirty,
    )


def markdown_summary(report: GateReport) -> str:
    parts = [f"### Register budget gate: {report.verdict.upper()}", ""]
    if report.dirty:
        parts += [f"**{report.dirty}**", ""]
    parts += [report.base_note, "", markdown_table(report.rows)]
    for block in (report.suggestion, report.ratchet):
        if block:
            parts += ["", "```", block, "```"]
    return "\n".join(parts)


def gate_json(
    report: GateReport,
    checks: Sequence[TargetCheck],
    *,
    base: Mapping[str, Any],
    head: Mapping[str, Any],
    dirty_files: Sequence[str],
    budget_updated: Mapping[str, Any] | None,
) -> dict[str, Any]:
    return {
        "schema": GATE_SCHEMA,
        "verdict": report.verdict,
        "base": dict(base),
        "head": dict(head),
        "uncommitted_files_not_measured": list(dirty_files),
        # Per target: the sentences people read, and the codes behind them.
        "targets": [
            {**vars(c), "reasons": c.reasons, "notes": c.notes, "findings": [f.to_json() for f in c.findings]}
            for c in checks
        ],
        "suggested_budget": suggested_edits(checks),
        "tightened_budget": tightened_edits(checks),
        "budget_updated": budget_updated,
    }
