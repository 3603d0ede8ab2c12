"""The pull request's one comment: a pure function, the gates' records in, Markdown out (docs/PR_COMMENT.md, "The
comment"); the hidden :data:`MARKER` at its end is how ci.notify.post finds it again. The job and step names below are
pr-checks.yml's (tests/test_notify_comment.py holds them to the workflow, so a renamed step is never "not run")."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ci.notify.markdown import GITHUB_BODY_LIMIT, Capped, code, details, html_code, join_capped, table
from ci.notify.records import BudgetRecord, ChangesRecord, CodeChange, Jobs, PrFiles, SpeedRecord
from ci.notify.speed_table import ROWS_SHOWN, speed_blocks, table_of, undecided_benchmarks
from ci.notify.untrusted import Rejected

MARKER = "<!-- mxfp4-perf: pr-comment -->"
# pr-checks.yml's job names (`name:`) and step names, as the jobs API reports them.
JOB_CPU, STEP_TESTS, STEP_BUDGET = "CPU gates and register budget", "tests", "register budget vs the PR base"
JOB_CHANGES, STEP_CHANGES = "which benchmarks the PR changes (gfx950 code, on a CPU)", "fingerprint base and head"
JOB_APPROVE = "approve the GPU run of a fork PR"
JOB_GPU = "GPU correctness and speed gate (MI355X)"
STEP_GPU_TESTS, STEP_SPEED = "correctness gates on the GPU", "speed gate vs the PR base"
PASS, FAIL, ERROR, INCONCLUSIVE, NOT_RUN = "PASS", "FAIL", "ERROR", "INCONCLUSIVE", "NOT RUN"
_SEVERITY = {FAIL: 4, ERROR: 3, INCONCLUSIVE: 2, NOT_RUN: 1, PASS: 0}
_NUMBER = re.compile(r"^[+-]?[0-9]{1,12}(\.[0-9]{1,6})?$")
_SYMBOL = {FAIL: "✗", ERROR: "⚠", INCONCLUSIVE: "⚠", NOT_RUN: "–", PASS: "✓"}
_STOPPED = {"cancelled": "was cancelled", "timed_out": "timed out", "failure": "failed"}


@dataclass(frozen=True)
class Links:
    run_url: str  # the pr-checks run (from the workflow_run event, not from an artifact)
    plot_url: str | None = None  # the speed-gate artifact, which holds ratios.png
    head_sha: str | None = None  # the run's head commit (from the event)
    attempt: int = 1


@dataclass(frozen=True)
class Inputs:
    speed: SpeedRecord | Rejected | None  # the PR's own job's record (its artifact)
    changes: ChangesRecord | Rejected | None
    budget: BudgetRecord | Rejected | None
    jobs: Jobs | Rejected | None
    # The base's verdict of the PR's rounds (python -m ci.speed --replay --judge in pr-comment.yml's judge job).
    # judge_expected: the workflow ran a judge, so a missing judged record is an error (not the PR's own verdict).
    judged: SpeedRecord | Rejected | None = None
    judge_expected: bool = False
    pr_files: PrFiles | Rejected | None = None  # the PR's changed files that are the gate (GitHub's list)


@dataclass(frozen=True)
class Area:
    state: str  # PASS, FAIL, ERROR, NOT_RUN
    lines: tuple[str, ...] = ()  # what to say under "what stopped" (errors) or "not run"
    note: str = ""  # after the state in the first line: " (2 inconclusive)"


def _jobs(inputs: Inputs) -> Jobs:
    return inputs.jobs if isinstance(inputs.jobs, Jobs) else Jobs({})


def record_state(speed: SpeedRecord) -> Area:
    """A speed record's state, from its benchmarks as much as its verdict: a regression or a wrong result fails; an
    undecided benchmark is INCONCLUSIVE (not green: a measurement failed or ran out, and a re-run is the remedy)."""
    if speed.verdict == "error":
        return Area(ERROR, (f"The speed gate stopped (exit {speed.exit_code}): {code(speed.error, 600)}",))
    undecided = len(undecided_benchmarks(speed))
    failing = any(
        b.status == "wrong result" or (b.status == "gated" and b.verdict == "regression") for b in speed.benchmarks
    )
    if failing or speed.wrong_at_head or (speed.verdict == "fail" and not undecided):
        return Area(FAIL, note=f" ({undecided} inconclusive)" if undecided else "")
    if undecided or speed.verdict == "inconclusive":
        what = f"{undecided} benchmark{'s' if undecided != 1 else ''} not decided: " if undecided else ""
        return Area(INCONCLUSIVE, note=f" ({what}re-run)")
    return Area(PASS)


def judged_speed(inputs: Inputs) -> SpeedRecord | Area | None:
    """The speed record the verdict is taken from: the base's judgement of the PR's rounds when the workflow
    judged them; an Area (ERROR) when it should have and did not; else (a local render) the PR's own record."""
    own = inputs.speed
    if not isinstance(own, SpeedRecord):
        return None
    if own.verdict == "error" or not inputs.judge_expected:
        return own  # a gate that stopped left no rounds to judge: its own words say why
    judged = inputs.judged
    if judged is None:
        return Area(
            ERROR,
            (
                "The base's gate left no verdict of the PR's rounds (the pr-comment run's judge job): the "
                "PR's own job's verdict is not taken in its place.",
            ),
        )
    if isinstance(judged, Rejected):
        return Area(ERROR, (f"The base's verdict was not read: {code(judged.reason, 600)}",))
    if judged.verdict == "error":
        return Area(ERROR, (f"The base's gate could not judge the PR's recorded rounds: {code(judged.error, 600)}",))
    return judged


def speed_area(inputs: Inputs) -> Area:
    speed, changes, jobs = judged_speed(inputs), inputs.changes, _jobs(inputs)
    if isinstance(speed, Area):
        return speed
    if isinstance(speed, SpeedRecord):
        return record_state(speed)
    if isinstance(inputs.speed, Rejected):
        return Area(ERROR, (f"The speed gate's record was not read: {code(inputs.speed.reason, 600)}",))
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


_JUDGE_SOURCE = " of this checkout (--judge)"  # how ci.speed --judge names the files it took: the base's, here


def judge_lines(inputs: Inputs, area: Area) -> list[str]:
    """Who decided the speed verdict, and what the PR's own job said when it said something else."""
    own, judged = inputs.speed, inputs.judged
    if not (
        isinstance(own, SpeedRecord)
        and isinstance(judged, SpeedRecord)
        and inputs.judge_expected
        and own.verdict != "error"
    ):
        return []
    files = " and ".join(code(f.removesuffix(_JUDGE_SOURCE), 120) for f in judged.judged_by if f)
    lines = [
        f"Speed: decided by the base's gate{f' with its {files}' if files else ''}, "
        "from the rounds the PR's job recorded."
    ]
    # The PR's job's own word (its record's verdict), not this comment's reading of its benchmarks.
    mine = {"pass": PASS, "fail": FAIL, "inconclusive": INCONCLUSIVE}.get(own.verdict, ERROR)
    if mine != area.state:
        lines.insert(0, f"**The PR's own job reported {mine}; judged with the base's gate: {area.state}.**")
    return lines


def gate_change_block(inputs: Inputs) -> str:
    """The PR's changed files that are the gate itself, or why that is not known."""
    files = inputs.pr_files
    if isinstance(files, Rejected):
        return (
            f"_Whether this PR changes the gate is not known: its file list was not read ({code(files.reason, 300)})._"
        )
    if not isinstance(files, PrFiles):
        return ""
    if files.error:
        return f"_Whether this PR changes the gate is not known: {code(files.error, 300)}._"
    cut = (
        f" GitHub lists only the first {files.files_listed} files of this PR; the rest may change it too."
        if files.truncated
        else ""
    )
    if not files.gate_files:
        return f"_This PR changes none of the gate's files ({files.files_listed} files listed)._{cut}" if cut else ""
    rows = [
        {"path": code(path, in_table=True), "what it is": what, "change": code(status, 20, in_table=True)}
        for path, what, status in files.gate_files
    ]
    return table_of(
        f"⚠ This PR changes the gate itself ({len(rows)} file{'s' if len(rows) != 1 else ''}). Its own job "
        "ran with them: its rounds were measured, and its own verdict decided, by the PR's files; the speed "
        "verdict above is the base's gate's, from those rounds",
        rows,
    ) + (f"\n\n{cut.strip()}" if cut else "")


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
        return Area(
            ERROR, ("The register budget gate stopped before it wrote a verdict (exit 2: see the CPU job's log).",)
        )
    if job in ("cancelled", "timed_out"):
        return Area(ERROR, (f"The CPU job {_STOPPED[job]} before the register budget gate had a verdict.",))
    return Area(
        NOT_RUN,
        ("The register budget gate did not run" + (" (the tests before it failed)." if step == "skipped" else "."),),
    )


def correctness_area(inputs: Inputs) -> Area:
    jobs, speed = _jobs(inputs), inputs.speed
    states: list[str] = []
    lines: list[str] = []
    for job, step, what in (
        (JOB_CPU, STEP_TESTS, "the CPU correctness gates and tests"),
        (JOB_GPU, STEP_GPU_TESTS, "the GPU correctness tests"),
    ):
        conclusion = jobs.step(job, step)
        if conclusion == "failure":
            states.append(FAIL)
            url = jobs.by_name[job].url
            lines.append(f"{what[0].upper()}{what[1:]} failed" + (f" ([log]({url}))." if url else "."))
        elif conclusion == "success":
            states.append(PASS)
    if isinstance(speed, SpeedRecord) and speed.verdict != "error":
        states.append(
            FAIL if speed.wrong_at_head or any(b.status == "wrong result" for b in speed.benchmarks) else PASS
        )
    if not states:
        return Area(NOT_RUN, ("No correctness check reported a result.",))
    return Area(max(states, key=_SEVERITY.__getitem__), tuple(lines))


def summary_line(inputs: Inputs) -> str:
    """One line for everything that needs no row: identical code, no change, new, removed, n/a."""
    judged, changes = judged_speed(inputs), inputs.changes
    speed = judged if isinstance(judged, SpeedRecord) else inputs.speed
    parts = []
    if isinstance(speed, SpeedRecord) and speed.verdict != "error":
        counts = Counter(
            b.verdict if b.status == "gated" and b.verdict in ("no change", "not a regression") else b.status
            for b in speed.benchmarks
        )
        identical = max(counts.pop("unchanged (identical code)", 0), speed.skipped_identical)
        if identical:
            parts.append(f"{identical} unchanged (identical code): not measured")
        words = {
            "no change": "no change beyond the threshold",
            "not a regression": "not a regression (slower by less than the threshold, not shown within half of it)",
            "new": "new at head",
            "removed": "removed at head",
            "n/a": "not run on this device",
        }
        parts += [f"{counts[key]} {text}" for key, text in words.items() if counts[key]]
        # A status a later gate writes: counted as it says (as text).
        parts += [
            f"{n} {code(key, 60)}"
            for key, n in counts.items()
            if key not in words and key not in ("gated", "wrong result")
        ]
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
        return [
            {
                label: code(r.name, 80, in_table=True),
                "base": _number(r.base),
                "head": _number(r.head),
                "delta": _number(r.delta),
            }
            for r in items
        ]

    summary = (
        f"{html_code(change.target)}: {len(mix)} instruction kind(s) and {len(resources)} resource(s) changed "
        f"({html_code(change.dialect, 20)})"
    )
    body = [
        table(rows(mix, "instructions")) if mix else "_(the same instruction mix)_",
        "",
        table(rows(resources, "resource")) if resources else "_(the same resources)_",
        "",
        "_Static counts; unchanged rows left out._",
    ]
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
    parts = [
        f"{spent:.0f} s spent" if spent is not None else "time spent not recorded (the speed gate left no measurement)"
    ]
    if saved:
        parts.append(f"~{saved:.0f} s saved by not measuring identical code{' (estimated)' if estimated else ''}")
    return "GPU runner: " + ", ".join(parts) + "."


def runner_lines(inputs: Inputs) -> list[str]:
    """The comment's first line when the speed gate ran on a GPU no runner profile names (issue 46): its thresholds
    are the defaults, and without a calibrated model it decided on the run's own rounds."""
    speed = inputs.speed
    if not isinstance(speed, SpeedRecord) or speed.unknown_runner is None:
        return []
    gpu, has_model = speed.unknown_runner
    how = (
        "with its calibrated noise model"
        if has_model
        else "on this run's own rounds (no noise model yet: `python -m ci.speed.calibrate --write` fits one)"
    )
    return [
        f"**Unknown runner** {code(gpu, 80)}: no profile in `ci/speed_runners.json`; the speed gate decided {how} "
        "and the default thresholds."
    ]


def render(inputs: Inputs, links: Links) -> str:
    """The comment's Markdown (at most GitHub's 65536 characters)."""
    return render_capped(inputs, links).text


def render_capped(inputs: Inputs, links: Links, limit: int = GITHUB_BODY_LIMIT) -> Capped:
    areas = {"speed": speed_area(inputs), "resources": budget_area(inputs), "correctness": correctness_area(inputs)}
    overall = max((a.state for a in areas.values()), key=_SEVERITY.__getitem__)
    if overall == NOT_RUN and any(a.state == PASS for a in areas.values()):
        overall = PASS
    head = f"### {overall} — " + " · ".join(
        f"{name} {_SYMBOL[a.state]} **{a.state}**{a.note}" for name, a in areas.items()
    )
    blocks: list[str] = [*runner_lines(inputs), head, *judge_lines(inputs, areas["speed"]), gate_change_block(inputs)]
    stopped = [line for a in areas.values() if a.state in (ERROR, NOT_RUN) for line in a.lines]
    failed_lines = [line for a in areas.values() if a.state == FAIL for line in a.lines]
    speed = judged_speed(inputs)
    bad, rest = speed_blocks(speed) if isinstance(speed, SpeedRecord) else ([], [])
    blocks += bad
    if isinstance(inputs.budget, BudgetRecord) and inputs.budget.failed:
        rows = [
            {
                "target": code(t.target, in_table=True),
                "why": "<br>".join(code(r, 200, in_table=True) for r in t.reasons[:12]) or "?",
            }
            for t in inputs.budget.failed
        ]
        blocks.append(table_of(f"Register budget exceeded ({len(rows)} of {inputs.budget.targets} targets)", rows))
    if failed_lines:
        blocks.append("**Correctness**\n\n" + "\n".join(f"- {line}" for line in failed_lines))
    if stopped:
        blocks.append("**Not decided**\n\n" + "\n".join(f"- {line}" for line in stopped))
    blocks += rest
    blocks.append(summary_line(inputs))
    blocks += _notes(inputs)
    if isinstance(inputs.changes, ChangesRecord):
        blocks += [code_change_block(c) for c in inputs.changes.code_changes[:ROWS_SHOWN]]
    # The footer is never capped: the GPU line, the links the cap's note points to, the head, the marker.
    sha = f"head {code(links.head_sha[:12])} · " if links.head_sha else ""
    link_items = [f"[run]({links.run_url})", f"[artifacts]({links.run_url}#artifacts)"]
    if links.plot_url:
        link_items.append(f"[speed plot (ratios.png)]({links.plot_url})")
    footer = "\n\n".join(line for line in (cost_line(inputs), " · ".join(link_items)) if line)
    footer += (
        f"\n\n<sub>{sha}attempt {links.attempt} · posted by the pr-comment workflow, edited in place</sub>\n\n{MARKER}"
    )
    return join_capped(blocks, footer=footer, limit=limit)


def _notes(inputs: Inputs) -> Sequence[str]:
    notes = []
    changes = inputs.changes
    if isinstance(changes, Rejected):
        notes.append(f"Code changes: the record was not read: {code(changes.reason, 600)}")
    elif isinstance(changes, ChangesRecord):
        if changes.error:
            then = "every benchmark was measured" if changes.gpu_needed else "the speed gate did not run"
            notes.append(f"Code changes: the fingerprinting stopped: {code(changes.error, 600)}; {then}.")
        notes += [f"Code changes: kernels not readable at {code(f, 600)}" for f in changes.failures]
    if isinstance(inputs.jobs, Rejected):
        notes.append(f"The run's job list was not read: {code(inputs.jobs.reason, 600)}")
    return ["\n".join(f"- {n}" for n in notes)] if notes else []
