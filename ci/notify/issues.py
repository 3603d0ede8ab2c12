"""One issue per regression on main: titles, bodies and comments (pure), and what to do given the issues there are.

:func:`plan_issues` decides from the findings (ci.notify.history) and the issues this
workflow opened before (found by the hidden marker in their body, :func:`existing_issue`):

* a regression change point gets one issue, ever: when an issue (open or closed) carries its
  key, nothing new is opened; when that issue is open and the change point has since
  recovered, one comment says so (once: the comment carries a note marker);
* a failing drift guard gets one issue per (machine, benchmark, best), or, when an issue
  of the same series is already open (or about to be opened by this run), one comment on it;
* a drift issue whose series is back within the threshold of the same best gets one
  "recovered" comment.

Markers hold only hex digests and commit shas, so an issue body cannot forge another
key by its text. Issues and comments by anyone but the workflow's bot are not read
(ci.notify.post filters them), so nobody else can silence a finding.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Sequence

from ci.notify.history import DriftAlarm, Finding, Slowdown, kernel_page
from ci.notify.markdown import FIELD_LIMIT, clean, code, percent

MARKER = "<!-- mxfp4-perf-regression kind={kind} key={key} series={series}{best} -->"
NOTE = "<!-- mxfp4-perf-note what={what} key={key} -->"
_MARKER = re.compile(r"<!-- mxfp4-perf-regression kind=(change-point|drift) key=([0-9a-f]{16}) series=([0-9a-f]{16})"
                     r"(?: best=([0-9a-f]{7,40}))? -->")
_NOTE = re.compile(r"<!-- mxfp4-perf-note what=(drift|recovered) key=([0-9a-f]{16}) -->")
TITLE_LIMIT = 256  # GitHub's


@dataclass(frozen=True)
class Context:
    """What the findings do not say: where they were found and where to link (from the event and the options)."""

    repo: str  # OWNER/NAME
    run_url: str  # the history run
    server_url: str = "https://github.com"
    site_url: str | None = None
    results_commit: str | None = None


@dataclass(frozen=True)
class NewIssue:
    title: str
    body: str
    key: str


@dataclass(frozen=True)
class Comment:
    issue: int
    body: str
    why: str


@dataclass(frozen=True)
class ExistingIssue:
    number: int
    open: bool
    kind: str
    key: str
    series: str
    best: str | None
    notes: frozenset[tuple[str, str]] = field(default_factory=frozenset)  # (what, key) in its body and comments


def existing_issue(issue: dict[str, Any]) -> ExistingIssue | None:
    """An issue this workflow opened (its body's marker), with the notes of its body and ``comment_bodies``; else None."""
    body = str(issue.get("body") or "")
    match = _MARKER.search(body)
    if not match or not isinstance(issue.get("number"), int):
        return None
    texts = [body, *[str(c) for c in issue.get("comment_bodies") or []]]
    notes = frozenset((m.group(1), m.group(2)) for text in texts for m in _NOTE.finditer(text))
    return ExistingIssue(issue["number"], issue.get("state") == "open", match.group(1), match.group(2), match.group(3),
                         match.group(4), notes)


def gate_id(benchmark: str) -> str:
    """The speed gate's id of an asv GEMM key (``kernel[config]/shape``), else the key itself."""
    from ci.bisect.change_point import gate_bench_id
    from ci.common.options import OptionsError

    try:
        return gate_bench_id(benchmark)
    except OptionsError:
        return benchmark


def _fenced(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}sh\n{text}\n{fence}"


def bisect_block(machine: str, good: str, bad: str, benchmark: str) -> str:
    bench = clean(gate_id(benchmark), FIELD_LIMIT)
    command = f"python -m ci.bisect \\\n  --good {good} \\\n  --bad {bad} \\\n  --bench {shlex.quote(bench)}"
    return (f"**Bisect** (on a runner like {code(machine)}, with the speed gate as the measurer):\n\n{_fenced(command)}\n\n"
            "_Good and bad are what `python -m ci.bisect --from-change-point REPORT.json --bench ID` takes from the main "
            "job's JSON report of that machine; this job runs no bisection (it has no GPU)._")


def _compare(context: Context, a: str, b: str) -> str:
    return f"[{a[:12]}..{b[:12]}]({context.server_url}/{context.repo}/compare/{a}...{b})"


def _facts(rows: list[tuple[str, str]]) -> str:
    return "\n".join(f"- **{k}**: {v}" for k, v in rows)


def _where(context: Context, benchmark: str) -> list[tuple[str, str]]:
    page = kernel_page(context.site_url, benchmark)
    found = f"[history run]({context.run_url})"
    if context.results_commit:
        found += f" on asv-results {code(context.results_commit[:12])}"
    return [("kernel page", f"[{page.rsplit('/', 1)[-1]}]({page})" if page else "(the site's address is not known)"),
            ("found by", found)]


def title(finding: Finding) -> str:
    what = (f"Slowdown {percent(finding.relative_change)}" if isinstance(finding, Slowdown)
            else f"Drift {percent(-finding.drop)}")
    text = f"{what} of {clean(gate_id(finding.benchmark), 120)} on {clean(finding.machine, 60)}"
    commits = ((finding.last_before, finding.first_after) if isinstance(finding, Slowdown) else (finding.best, finding.newest))
    return clean(f"{text} ({commits[0][:7]}..{commits[1][:7]})", TITLE_LIMIT)


def slowdown_body(f: Slowdown, context: Context) -> str:
    low, high = f.interval
    rows = [("benchmark", code(f.benchmark)), ("machine", code(f.machine)),
            ("size", f"**{percent(f.relative_change)}** TFLOPS, {f.confidence:.0%} interval {percent(low)} to {percent(high)}"),
            ("significance", f"p = {f.p_value:.2g} at level {f.level:.2g} (E-divisive, docs/CHANGE_POINTS.md)"),
            ("suspected commits", f"{_compare(context, f.last_before, f.first_after)}: after the last commit measured at "
                                  "the old level, up to the first measured at the new"),
            *_where(context, f.benchmark)]
    return "\n\n".join([
        f"### Slowdown on main: {code(gate_id(f.benchmark))} on {code(f.machine)}",
        "The history job found a change point in this benchmark's TFLOPS history on main.", _facts(rows),
        bisect_block(f.machine, f.last_before, f.first_after, f.benchmark),
        "_Opened by the regression-issues workflow, once per change point. A later run that finds the level back "
        "says so here._", MARKER.format(kind="change-point", key=f.key, series=f.series, best="")])


def drift_text(d: DriftAlarm, context: Context) -> str:
    rows = [("benchmark", code(d.benchmark)), ("machine", code(d.machine)),
            ("drop", f"**{percent(-d.drop)}**: the newest commit against the best of the last {d.window} measured"),
            ("threshold", f"{d.threshold:.2%} (3 x {d.noise:.2%} commit-to-commit noise, at least 2%)"),
            ("suspected commits", f"{_compare(context, d.best, d.newest)}: from the best to the newest"),
            *_where(context, d.benchmark)]
    return "\n\n".join(["The drift guard fires: every step may have passed the PR gate while their sum did not.",
                        _facts(rows), bisect_block(d.machine, d.best, d.newest, d.benchmark)])


def drift_body(d: DriftAlarm, context: Context) -> str:
    return "\n\n".join([f"### Drift on main: {code(gate_id(d.benchmark))} on {code(d.machine)}", drift_text(d, context),
                        "_Opened by the regression-issues workflow, once per (machine, benchmark, best commit). A later "
                        "run that finds the newest commit back within the threshold of that best says so here._",
                        MARKER.format(kind="drift", key=d.key, series=d.series, best=f" best={d.best}")])


def recovered_comment(finding: Finding, context: Context) -> str:
    if isinstance(finding, Slowdown):
        r = finding.recovery
        assert r is not None
        text = (f"**Recovered**: a later change point, in {_compare(context, r.last_before, r.first_after)}, is an "
                f"improvement of {percent(r.relative_change)}; the level is now {percent(r.net)} from where it was before "
                f"this slowdown ([history run]({context.run_url})).")
    else:
        text = (f"**Recovered**: the newest commit {code(finding.newest[:12])} is {percent(-finding.drop)} from the best "
                f"{code(finding.best[:12])}, within the threshold {finding.threshold:.2%} ([history run]({context.run_url})).")
    return f"{text}\n\n{NOTE.format(what='recovered', key=finding.key)}"


def plan_issues(findings: Sequence[Finding], existing: Sequence[ExistingIssue], context: Context) -> list[NewIssue | Comment]:
    by_key = {e.key: e for e in existing}
    noted = {note for e in existing for note in e.notes}
    open_by_series: dict[str, ExistingIssue] = {}
    for e in sorted(existing, key=lambda e: e.number):
        if e.open:
            open_by_series[e.series] = e  # the newest open issue of the series
    actions: list[NewIssue | Comment] = []
    new_by_series: dict[str, int] = {}  # series -> index in actions of the issue this run opens
    for f in sorted(findings, key=lambda f: isinstance(f, DriftAlarm)):  # change points first: a drift joins their issue
        issue = by_key.get(f.key)
        if isinstance(f, Slowdown):
            if issue is None and f.recovery is None and f.recent:
                new_by_series[f.series] = len(actions)
                actions.append(NewIssue(title(f), slowdown_body(f, context), f.key))
            elif issue is not None and issue.open and f.recovery is not None and ("recovered", f.key) not in issue.notes:
                actions.append(Comment(issue.number, recovered_comment(f, context), "the change point recovered"))
            continue
        if not f.failed:
            for e in existing:
                if (e.open and e.kind == "drift" and e.series == f.series and e.best == f.best
                        and ("recovered", e.key) not in e.notes):
                    actions.append(Comment(e.number, recovered_comment(f, context), "the drift recovered"))
            continue
        if issue is not None or ("drift", f.key) in noted:
            continue
        note = NOTE.format(what="drift", key=f.key)
        if f.series in new_by_series:
            pending = actions[new_by_series[f.series]]
            assert isinstance(pending, NewIssue)
            actions[new_by_series[f.series]] = NewIssue(pending.title, f"{pending.body}\n\n{drift_text(f, context)}\n\n{note}",
                                                        pending.key)
        elif f.series in open_by_series:
            actions.append(Comment(open_by_series[f.series].number, f"{drift_text(f, context)}\n\n{note}",
                                   "the drift guard fires on its series"))
        else:
            new_by_series[f.series] = len(actions)
            actions.append(NewIssue(title(f), drift_body(f, context), f.key))
    return actions
