"""One run of the budget gate, from checked options to the exit code: resolve, measure, compare, report."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from contextlib import nullcontext

from ci.budget.budget_file import BUDGET_PATH, parse_budget, read_base_budget, update_budget_file
from ci.budget.compare import evaluate
from ci.budget.measure import Measurement, measure_tree
from ci.budget.options import GateOptions, selectors_text
from ci.budget.report import (
    dirty_warning,
    gate_json,
    gate_report,
    markdown_summary,
    tightened_edits,
    update_line,
    verdict_line,
)
from ci.common import gitutil
from ci.common.errors import HarnessError, WriteError
from ci.common.files import append_step_summary_or_fallback, write_or_fallback
from ci.common.json_file import read_text
from harness.report import json_text, text_table


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def run(options: GateOptions) -> int:
    """0 pass, 1 failed; a harness problem raises HarnessError or gitutil.GitError (the front turns it into 2)."""
    repo = gitutil.open_repo(options.repo)
    working_dir = gitutil.work_tree(repo)
    head_sha = gitutil.resolve_commit(repo, "HEAD" if options.working_tree else options.head, "--head")
    base = gitutil.resolve_base(repo, head_sha, options.base, head_may_be_base=options.working_tree)
    head_label = "working tree" if options.working_tree else f"head {options.head} ({head_sha[:12]})"
    _progress(f"budget_gate: {head_label}; {base.note}")
    dirty_files = [] if options.working_tree else gitutil.uncommitted_files(repo)  # what a commit-based run leaves out
    dirty = dirty_warning(dirty_files, head_sha)
    if dirty:
        _progress(dirty)

    only = options.selectors
    head_tree = nullcontext(working_dir) if options.working_tree else gitutil.checkout(repo, head_sha)
    with head_tree as head_dir:
        budget_path = options.budget or head_dir / BUDGET_PATH
        if not budget_path.exists():
            raise HarnessError(f"budget file {budget_path} does not exist")
        where = f"--budget {options.budget}" if options.budget else str(BUDGET_PATH)
        budget = parse_budget(read_text(budget_path, where), where)  # capped, as every file the tools read
        head = measure_tree(head_dir, "head", only)
    if head.results is None:
        raise HarnessError(f"the head has no ci/budget/resources.py ({head.note})")

    base_results, base_budget, base_note = None, None, base.note
    if base.sha is not None:
        base_budget = read_base_budget(repo, base.sha)
        with gitutil.checkout(repo, base.sha) as base_dir:
            try:
                measured = measure_tree(base_dir, "base", only)
            except HarnessError as exc:
                # A change that fixes a base that no longer compiles must not be blocked by it: only the
                # head's own failures fail. Its targets are then new, checked against the budget only.
                _progress(f"budget_gate: the base could not be measured: {exc}")
                measured = Measurement(None, f"the base could not be measured ({_last_line(exc)})")
        base_results = measured.results
        if base_results is None:
            base_note += f"; {measured.note}: every target is new, checked against budget only"

    checks = evaluate(head.results, base_results, budget, base_budget, options.selects)
    if not checks:
        raise HarnessError(_nothing_selected(only, set(head.results) | set(base_results or {}) | set(budget.entries)))
    report = gate_report(checks, base_note, dirty)

    update_path = options.budget or working_dir / BUDGET_PATH
    tightened = tightened_edits(checks)
    # An output the disk refuses goes to a named fallback file (the budget: it stays as it was), not nowhere; the
    # others are still written, then the run is a WriteError naming each (exit 2).
    refused: list[str] = []
    updated: dict | None = {}
    try:
        updated = update_budget_file(update_path, tightened) if options.update_budget and tightened else {}
    except WriteError as exc:
        refused.append(str(exc))
        updated = None

    print(f"{base_note}\n")
    print(text_table(report.rows))
    for block in (report.suggestion, report.ratchet):
        if block:
            print("\n" + block)
    if options.update_budget and updated is not None:
        print("\n" + update_line(updated, update_path))
    if dirty:
        print("\n" + dirty)
    print("\n" + verdict_line(checks))
    append_step_summary_or_fallback(markdown_summary(report), refused.append)
    if options.json:
        write_or_fallback(
            options.json,
            json_text(
                gate_json(
                    report,
                    checks,
                    base={"ref": base.ref, "sha": base.sha, "note": base_note},
                    head={"ref": options.head, "sha": head_sha, "working_tree": options.working_tree},
                    dirty_files=dirty_files,
                    budget_updated={"path": str(update_path), "changes": updated} if updated else None,
                )
            ).encode("utf-8"),
            "--json",
            refused.append,
        )
    if refused:
        raise WriteError("; ".join(refused))
    return 1 if report.verdict == "fail" else 0


def _last_line(exc: Exception) -> str:
    """The error's last line, where a child's output ends with what went wrong (300 characters at most)."""
    text = str(exc).strip().splitlines()
    return (text[-1] if text else type(exc).__name__)[:300]


def _nothing_selected(only: Mapping[str, Sequence[str]], names: set[str]) -> str:
    asked = selectors_text(only["kernel"], only["arch"], only["config"])
    if not asked:
        return "no compile target and no budget entry: nothing was checked"
    known = [sorted({n.split("/")[i] for n in names}) for i in range(3)]
    return (
        f"{asked} matches no target at head, base or in the budget; known kernels: {', '.join(known[0]) or '-'}; "
        f"archs: {', '.join(known[1]) or '-'}; configs: {', '.join(known[2]) or '-'}"
    )
