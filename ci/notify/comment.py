"""The pull request's one comment, from the gates' records: a pure function, records in, Markdown out.

First line: the verdict of each area (speed, resources, correctness) and the overall one.
Then only what changed, worst first: regressions and wrong results and failed budgets
(with interval and threshold), what stopped a gate and why, improvements, inconclusive
benchmarks with the gate's reason, one line for everything else (identical code, no
change, new, removed), each changed compiled code's instruction-mix and resource diff
folded in ``<details>``, the GPU seconds spent and saved, and links to the run, its
artifacts and the speed plot. The hidden :data:`MARKER` at the end is how the publisher
finds the comment again to edit it (ci.notify.post).

The job and step names below are pr-checks.yml's: tests/test_notify_comment.py checks them
against the workflow, so a renamed step cannot silently turn into "not run".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from ci.notify.markdown import Capped, code, details, html_code, join_capped, percent, table
from ci.notify.records import BudgetRecord, ChangesRecord, CodeChange, Jobs, Rejected, SpeedBenchmark, SpeedRecord

MARKER = "<!-- mxfp4-perf: pr-comment -->"
# pr-checks.yml's job names (`name:`) and step names, as the jobs API reports them.
JOB_CPU, STEP_TESTS, STEP_BUDGET = "CPU gates and register budget", "tests", "register budget vs the PR base"
JOB_CHANGES, STEP_CHANGES = "which benchmarks the PR changes (gfx950 code, on a CPU)", "fingerprint base and head"
JOB_APPROVE = "approve the GPU run of a fork PR"
JOB_GPU, STEP_GPU_TESTS, STEP_SPEED = "GPU correctness and speed gate (MI355X)", "correctness gates on the GPU", "speed gate vs the PR base"
ROWS_SHOWN = 25  # per table; the rest is counted
PASS, FAIL, ERROR, NOT_RUN = "PASS", "FAIL", "ERROR", "NOT RUN"
_SEVERITY = {FAIL: 3, ERROR: 2, NOT_RUN: 1, PASS: 0}
_NUMBER = re.compile(r"^[+-]?[0-9]{1,12}(\.[0-9]{1,6})?$")
_SYMBOL = {FAIL: "✗", ERROR: "⚠", NOT_RUN: "–", PASS: "✓"}
_STOPPED = {"cancelled": "was cancelled", "timed_out": "timed out", "failure": "failed"}


@dataclass(frozen=True)
class Links:
    run_url: str  # the pr-checks run (from the workflow_run event, not from an artifact)
    plot_url: str | None = None  # the speed-gate artifact, which holds ratios.png
    head_sha: str | None = None  # the run's head commit (from the event)
    attempt: int = 1


@dataclass(frozen=True)
class Inputs:
    speed: SpeedRecord | Rejected | None
    changes: ChangesRecord | Rejected | None
    budget: BudgetRecord | Rejected | None
    jobs: Jobs | Rejected | None


@dataclass(frozen=True)
class Area:
    state: str  # PASS, FAIL, ERROR, NOT_RUN
    lines: tuple[str, ...] = ()  # what to say under "what stopped" (errors) or "not run"
    note: str = ""  # after the state in the first line: " (2 inconclusive)"


def _jobs(inputs: Inputs) -> Jobs:
    return inputs.jobs if isinstance(inputs.jobs, Jobs) else Jobs({})


def speed_area(inputs: Inputs) -> Area:
    speed, changes, jobs = inputs.speed, inputs.changes, _jobs(inputs)
    if isinstance(speed, SpeedRecord):
        if speed.verdict == "error":
            return Area(ERROR, (f"The speed gate stopped (exit {speed.exit_code}): {code(speed.error, 600)}",))
        inconclusive = sum(b.status == "gated" and b.verdict == "inconclusive" and b.stopped_by != "pr failed"
                           for b in speed.benchmarks)
        return Area(FAIL if speed.verdict == "fail" else PASS, note=f" ({inconclusive} inconclusive)" if inconclusive else "")
    if isinstance(speed, Rejected):
        return Area(ERROR, (f"The speed gate's record was not read: {code(speed.reason, 600)}",))
    if isinstance(changes, ChangesRecord) and not changes.error and not changes.gpu_needed:
        return Area(PASS)  # every benchmark's code is identical: the GPU job does not start
    gpu, step = jobs.conclusion(JOB_GPU), jobs.step(JOB_GPU, STEP_SPEED)
    if gpu == "skipped" and jobs.conclusion(JOB_APPROVE) in ("failure", "cancelled"):
        return Area(NOT_RUN, ("The GPU job did not run: the fork's GPU run was not approved (`gpu-fork-pr`).",))
    if gpu == "skipped" or (gpu is None and not jobs.by_name):
        return Area(NOT_RUN, ("The speed gate did not run, and left no record.",))
    if gpu in ("cancelled", "timed_out") and step not in ("failure", "success"):
        return Area(ERROR, (f"The GPU job {_STOPPED[gpu]} before the speed gate had a verdict.",))
    if step == "failure":
        return Area(ERROR, ("The speed gate stopped before it wrote a record (see the GPU job's log).",))
    return Area(ERROR, ("No speed-gate record was found in the run's artifacts.",))


def budget_area(inputs: Inputs) -> Area:
    budget, jobs = inputs.budget, _jobs(inputs)
    if isinstance(budget, BudgetRecord):
        if budget.verdict == "error":
            return Area(ERROR, (f"The register budget gate stopped (exit 2): {code(budget.error, 600)}",))
        return Area(FAIL if budget.verdict == "fail" else PASS)
    if isinstance(budget, Rejected):
        return Area(ERROR, (f"The register budget gate's record was not read: {code(budget.reason, 600)}",))
    step, job = jobs.step(JOB_CPU, STEP_BUDGET), jobs.conclusion(JOB_CPU)
    if step == "failure":
        return Area(ERROR, ("The register budget gate stopped before it wrote a verdict (exit 2: see the CPU job's log).",))
    if job in ("cancelled", "timed_out"):
        return Area(ERROR, (f"The CPU job {_STOPPED[job]} before the register budget gate had a verdict.",))
    return Area(NOT_RUN, ("The register budget gate did not run" + (" (the tests before it failed)." if step == "skipped" else "."),))


def correctness_area(inputs: Inputs) -> Area:
    jobs, speed = _jobs(inputs), inputs.speed
    states: list[str] = []
    lines: list[str] = []
    for job, step, what in ((JOB_CPU, STEP_TESTS, "the CPU correctness gates and tests"),
                            (JOB_GPU, STEP_GPU_TESTS, "the GPU correctness tests")):
        conclusion = jobs.step(job, step)
        if conclusion == "failure":
            states.append(FAIL)
            url = jobs.by_name[job].url
            lines.append(f"{what[0].upper()}{what[1:]} failed" + (f" ([log]({url}))." if url else "."))
        elif conclusion == "success":
            states.append(PASS)
    if isinstance(speed, SpeedRecord) and speed.verdict != "error":
        states.append(FAIL if speed.wrong_at_head or any(b.status == "wrong result" for b in speed.benchmarks) else PASS)
    if not states:
        return Area(NOT_RUN, ("No correctness check reported a result.",))
    return Area(max(states, key=_SEVERITY.__getitem__), tuple(lines))


def _ratio_cells(b: SpeedBenchmark) -> dict[str, str]:
    interval = f"{b.low:.3f} – {b.high:.3f}" if b.low is not None and b.high is not None else "unbounded"
    return {"benchmark": code(b.id, in_table=True),
            "head vs base": "?" if b.ratio is None else f"**{percent(b.ratio - 1)}**",
            "interval (head/base)": interval,
            "threshold": "?" if b.threshold is None else f"±{b.threshold:.1%}",
            "rounds": "?" if b.rounds_used is None else str(b.rounds_used)}


def _table(title: str, rows: list[dict[str, str]]) -> str:
    shown = rows[:ROWS_SHOWN]
    more = f"\n\n…and {len(rows) - ROWS_SHOWN} more (the step summary has all)." if len(rows) > ROWS_SHOWN else ""
    return f"**{title}**\n\n{table(shown)}{more}"


def speed_blocks(speed: SpeedRecord) -> tuple[list[str], list[str]]:
    """(blocks for what went wrong, blocks for the rest) of a speed record."""
    by = {v: [b for b in speed.benchmarks if b.status == "gated" and b.verdict == v] for v in ("regression", "improvement", "inconclusive")}
    bad, rest = [], []
    if by["regression"]:
        bad.append(_table(f"Regressions ({len(by['regression'])})", [_ratio_cells(b) for b in by["regression"]]))
    # A benchmark wrong at its timed shape or in the survey's check; the survey's own line only when no benchmark says it.
    wrong = [f"- {code(b.id)}: {code(b.reason, 600)}" for b in speed.benchmarks if b.status == "wrong result"]
    wrong = wrong or [f"- {code(w.where)}: {code(w.message, 600)}" for w in speed.wrong_at_head]
    if wrong:
        bad.append("**Wrong result at head** (not timed)\n\n" + "\n".join(wrong[:ROWS_SHOWN]))
    if by["improvement"]:
        rest.append(_table(f"Improvements ({len(by['improvement'])})", [_ratio_cells(b) for b in by["improvement"]]))
    if by["inconclusive"]:
        rows = [dict(_ratio_cells(b), why=code(b.reason, 300, in_table=True)) for b in by["inconclusive"]]
        for row in rows:
            row.pop("rounds")
        rest.append(_table(f"Inconclusive ({len(rows)}): the change could not be told from the threshold", rows))
    return bad, rest


def summary_line(inputs: Inputs) -> str:
    """One line for everything that needs no row: identical code, no change, new, removed, n/a."""
    speed, changes = inputs.speed, inputs.changes
    parts = []
    if isinstance(speed, SpeedRecord) and speed.verdict != "error":
        counts: dict[str, int] = {}
        for b in speed.benchmarks:
            key = b.verdict if b.status == "gated" and b.verdict == "no change" else b.status
            counts[key] = counts.get(key, 0) + 1
        identical = max(counts.pop("unchanged (identical code)", 0), speed.skipped_identical)
        if identical:
            parts.append(f"{identical} unchanged (identical code): not measured")
        for key, words in (("no change", "no change beyond the threshold"), ("new", "new at head"),
                           ("removed", "removed at head"), ("n/a", "not run on this device")):
            if counts.get(key):
                parts.append(f"{counts[key]} {words}")
    elif isinstance(changes, ChangesRecord) and not changes.error:
        if changes.unchanged:
            parts.append(f"{changes.unchanged} benchmark(s) unchanged (identical code): not measured")
        if changes.removed:
            parts.append(f"{changes.removed} removed at head")
    return ("Benchmarks: " + "; ".join(parts) + ".") if parts else ""


def code_change_block(change: CodeChange) -> str:
    """One changed compiled code: the rows that changed, folded."""
    mix = [r for r in change.instruction_mix if r.delta]
    resources = [r for r in change.resources if r.delta]

    def rows(items, label):
        return [{label: code(r.name, 80, in_table=True), "base": _number(r.base), "head": _number(r.head),
                 "delta": _number(r.delta)} for r in items]

    summary = (f"{html_code(change.target)}: {len(mix)} instruction kind(s) and {len(resources)} resource(s) changed "
               f"({html_code(change.dialect, 20)})")
    body = [table(rows(mix, "instructions")) if mix else "_(the same instruction mix)_", "",
            table(rows(resources, "resource")) if resources else "_(the same resources)_", "",
            "_Static counts; unchanged rows left out._"]
    return details(summary, "\n".join(body))


def _number(text: str) -> str:
    """A count as it is (nothing in it can be Markdown); anything else as code."""
    return text if _NUMBER.match(text) else code(text, 40, in_table=True)


def cost_line(inputs: Inputs) -> str:
    speed, changes = inputs.speed, inputs.changes
    spent = speed.gpu_seconds_spent if isinstance(speed, SpeedRecord) else None
    saved = speed.gpu_seconds_saved if isinstance(speed, SpeedRecord) and speed.verdict != "error" else None
    estimated = True
    if saved is None and isinstance(changes, ChangesRecord) and not changes.error:
        saved, estimated = changes.saved_seconds, changes.saved_estimated
    if spent is None and isinstance(changes, ChangesRecord) and not changes.error and not changes.gpu_needed:
        spent = 0.0
    if spent is None and saved is None:
        return ""
    parts = [f"{spent:.0f} s spent" if spent is not None else "time spent not recorded (the speed gate left no measurement)"]
    if saved:
        parts.append(f"~{saved:.0f} s saved by not measuring identical code{' (estimated)' if estimated else ''}")
    return "GPU runner: " + ", ".join(parts) + "."


def links_line(links: Links) -> str:
    items = [f"[run]({links.run_url})", f"[artifacts]({links.run_url}#artifacts)"]
    if links.plot_url:
        items.append(f"[speed plot (ratios.png)]({links.plot_url})")
    return " · ".join(items)


def render(inputs: Inputs, links: Links) -> str:
    """The comment's Markdown (at most GitHub's 65536 characters)."""
    return render_capped(inputs, links).text


def render_capped(inputs: Inputs, links: Links, limit: int | None = None) -> Capped:
    areas = {"speed": speed_area(inputs), "resources": budget_area(inputs), "correctness": correctness_area(inputs)}
    overall = max((a.state for a in areas.values()), key=_SEVERITY.__getitem__)
    overall = PASS if overall == NOT_RUN and any(a.state == PASS for a in areas.values()) else overall
    head = f"### {overall} — " + " · ".join(f"{name} {_SYMBOL[a.state]} **{a.state}**{a.note}" for name, a in areas.items())
    blocks: list[str] = [head]
    stopped = [line for a in areas.values() if a.state in (ERROR, NOT_RUN) for line in a.lines]
    failed_lines = [line for a in areas.values() if a.state == FAIL for line in a.lines]
    bad, rest = speed_blocks(inputs.speed) if isinstance(inputs.speed, SpeedRecord) else ([], [])
    blocks += bad
    if isinstance(inputs.budget, BudgetRecord) and inputs.budget.failed:
        rows = [{"target": code(t.target, in_table=True),
                 "why": "<br>".join(code(r, 200, in_table=True) for r in t.reasons[:12]) or "?"} for t in inputs.budget.failed]
        blocks.append(_table(f"Register budget exceeded ({len(rows)} of {inputs.budget.targets} targets)", rows))
    if failed_lines:
        blocks.append("**Correctness**\n\n" + "\n".join(f"- {line}" for line in failed_lines))
    if stopped:
        blocks.append("**Not decided**\n\n" + "\n".join(f"- {line}" for line in stopped))
    blocks += rest
    blocks.append(summary_line(inputs))
    blocks += _notes(inputs)
    if isinstance(inputs.changes, ChangesRecord):
        blocks += [code_change_block(c) for c in inputs.changes.code_changes[:ROWS_SHOWN]]
    blocks.append(cost_line(inputs))
    blocks.append(links_line(links))
    sha = f"head {code(links.head_sha[:12])} · " if links.head_sha else ""
    footer = f"<sub>{sha}attempt {links.attempt} · posted by the pr-comment workflow, edited in place</sub>\n\n{MARKER}"
    return join_capped(blocks, footer=footer, **({"limit": limit} if limit else {}))


def _notes(inputs: Inputs) -> Sequence[str]:
    notes = []
    changes = inputs.changes
    if isinstance(changes, Rejected):
        notes.append(f"Code changes: the record was not read: {code(changes.reason, 600)}")
    elif isinstance(changes, ChangesRecord):
        if changes.error:
            notes.append(f"Code changes: the fingerprinting stopped: {code(changes.error, 600)}; every benchmark was measured.")
        notes += [f"Code changes: kernels not readable at {code(f, 600)}" for f in changes.failures]
    if isinstance(inputs.jobs, Rejected):
        notes.append(f"The run's job list was not read: {code(inputs.jobs.reason, 600)}")
    return ["\n".join(f"- {n}" for n in notes)] if notes else []
