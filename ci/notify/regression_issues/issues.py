"""A regression issue's title, body and comments from its state (pure text): an unchanged state renders the same text,
so it is not edited. Every name from the history is a code span (ci.notify.markdown); links are built from shas."""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ci.common.regression_identity import span
from ci.notify.markdown import FIELD_LIMIT, clean, code, percent, table
from ci.notify.regression_issues.history import Finding, Slowdown, kernel_page
from ci.notify.regression_issues.issue_state import DriftEntry, IssueState, Member, is_marker, render_marker
from ci.notify.regression_issues.matching import RETIRE_AFTER, SETTLE, entry_of, member_of

TITLE_LIMIT = 256  # GitHub's
METHOD = "a multi-scale MOSUM scan, each change confirmed against its neighbours: docs/CHANGE_POINTS.md"


@dataclass(frozen=True)
class Context:
    """What the findings do not say: where they were found and where to link (from the event and the options)."""

    repo: str  # OWNER/NAME
    run_url: str  # the history run
    server_url: str = "https://github.com"
    site_url: str | None = None
    results_commit: str | None = None


def gate_id(benchmark: str) -> str:
    """The speed gate's id of an asv GEMM key (``kernel[config]/shape``), else the key itself."""
    from ci.bisect.change_point import gate_bench_id
    from ci.common.options import OptionsError

    try:
        return gate_bench_id(benchmark)
    except OptionsError:
        return benchmark


def bisect_block(machine: str, good: str, bad: str, benchmark: str) -> str:
    bench = clean(gate_id(benchmark), FIELD_LIMIT)
    command = f"python -m ci.bisect \\\n  --good {good} \\\n  --bad {bad} \\\n  --benchmark {shlex.quote(bench)}"
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", command)), default=0))
    return (
        f"**Bisect** (on a runner like {code(machine)}, with the speed gate as the measurer):\n\n"
        f"{fence}sh\n{command}\n{fence}\n\n"
        "_Good and bad are what `python -m ci.bisect --from-change-point REPORT.json --benchmark ID` takes from the "
        "main job's JSON report of that machine; this job runs no bisection (it has no GPU)._"
    )


def _compare(server_url: str, repo: str, a: str, b: str, short: int = 12) -> str:
    return f"[{a[:short]}..{b[:short]}]({server_url}/{repo}/compare/{a}...{b})"


def _facts(rows: list[tuple[str, str]]) -> str:
    return "\n".join(f"- **{k}**: {v}" for k, v in rows)


def _found(state: IssueState) -> str:
    found = f"[history run]({state.run_url})" if state.run_url else "a history run"
    return found + (f" on asv-results {code(state.results_commit[:12])}" if state.results_commit else "")


def _page(state: IssueState, benchmark: str) -> str:
    page = kernel_page(state.site_url, benchmark)
    return f"[{page.rsplit('/', 1)[-1]}]({page})" if page else "(the site's address is not known)"


def _span(members: Sequence[Member]) -> tuple[str, str]:
    """The suspected range of several change points: the earliest last_before to the latest first_after."""
    return min(members, key=lambda m: span(m)[0]).last_before, max(members, key=lambda m: span(m)[1]).first_after


def _machines(members: Sequence[Member], show: Callable[[str, int], str] = code) -> str:
    names = sorted({m.machine for m in members})
    return show(names[0], 60) if len(names) == 1 else f"{len(names)} machines"


def title(what: IssueState | Finding) -> str:
    """The issue's title (a finding's, for the issue it would open alone)."""
    state = what if isinstance(what, IssueState) else _alone(what)
    if state.kind == "drift" and state.drifts:
        d = state.drifts[0]
        text = f"Drift {percent(-d.drop)} of {clean(gate_id(d.benchmark), 120)} on {clean(d.machine, 60)}"
        return clean(f"{text} ({d.best[:7]}..{d.newest[:7]})", TITLE_LIMIT)
    members = state.members
    if state.kind == "rollup":
        return clean(
            f"Slowdowns over this workflow's per-run issue cap: {len(members)} change points, "
            f"{len(state.drifts)} drift alarms",
            TITLE_LIMIT,
        )
    a, b = _span(members)
    if len(members) == 1:
        m = members[0]
        text = f"Slowdown {percent(m.change)} of {clean(gate_id(m.benchmark), 120)} on {clean(m.machine, 60)}"
    else:
        text = f"Slowdown of {len(members)} benchmarks on {_machines(members, clean)}"
    return clean(f"{text} ({a[:7]}..{b[:7]})", TITLE_LIMIT)


def _status_line(state: IssueState, server: str, repo: str) -> str:
    if state.status == "open":
        return (
            "**Status: open.** A later run edits this issue when the change point moves, and closes it when the level "
            "comes back or more data does not confirm it."
        )
    if state.status == "recovered":
        fixed = [(m, m.fix) for m in state.members if m.status == "recovered" and m.fix]
        if fixed:
            lines = [
                f"{code(gate_id(m.benchmark), 80)}: recovered in {_compare(server, repo, fix[0], fix[1])} (fixing "
                f"commit {code(fix[1][:12])}), an improvement of {percent(fix[2])}; the level is now "
                f"{percent(fix[3])} from before the slowdown"
                for m, fix in fixed[:20]
            ]
            more = f"\n- … and {len(fixed) - 20} more" if len(fixed) > 20 else ""
            return "**Status: recovered, closed.**\n\n" + "\n".join(f"- {line}" for line in lines) + more
        return "**Status: recovered, closed.** The drift guard measures the newest commit back within its threshold."
    if state.status == "retired":
        names = sorted({gate_id(m.benchmark) for m in state.members if m.status == "retired"})
        names += sorted({gate_id(d.benchmark) for d in state.drifts if d.status == "retired"})
        shown = ", ".join(code(n, 80) for n in names[:5]) + (" and more" if len(names) > 5 else "")
        return (
            f"**Status: retired, closed.** The history has stopped reporting {shown} while its machine measured "
            f"{RETIRE_AFTER} or more newer commits: the benchmark was renamed or removed from the suite, so nothing is "
            "left here to watch. Under a new name, its own change points are filed anew."
        )
    return (
        "**Status: not confirmed, closed.** With more commits measured, the history no longer shows this change point: "
        "it was noise or a level that came back before it settled."
    )


def _gone(m: Member) -> list[tuple[str, str]]:
    if m.status == "active" and m.missed is not None:
        return [
            (
                "not found lately",
                f"the history's newest report has no change point here since its machine's commit #{m.missed}; "
                f"closed as not confirmed if it stays away for {SETTLE} commits",
            )
        ]
    if m.status != "active" or m.gone is None:
        return []
    return [
        (
            "not reported lately",
            f"the history's report has not named this benchmark since its machine's commit #{m.gone} (renamed or "
            f"removed?); it is retired once {RETIRE_AFTER} newer commits pass without it",
        )
    ]


def _member_row(m: Member, server: str, repo: str, machine: bool) -> dict[str, str]:
    low, high = m.interval
    status = {
        "active": "open, not reported lately (renamed or removed?)"
        if m.gone is not None
        else "open, not found lately"
        if m.missed is not None
        else "open",
        "recovered": f"recovered at {code(m.fix[1][:12])}" if m.fix else "recovered",
        "dissolved": "not confirmed",
        "retired": "retired: no longer reported (renamed or removed)",
    }[m.status]
    row = {"benchmark": code(gate_id(m.benchmark), 120, in_table=True)}
    if machine:
        row["machine"] = code(m.machine, 60, in_table=True)
    return {
        **row,
        "TFLOPS": f"**{percent(m.change)}**",
        "95% interval": f"{percent(low)} to {percent(high)}",
        "suspected commits": _compare(server, repo, m.last_before, m.first_after, 7),
        "status": status,
    }


def _drift_text(d: DriftEntry, server: str, repo: str) -> str:
    rows = [
        ("benchmark", code(d.benchmark)),
        ("machine", code(d.machine)),
        ("drop", f"**{percent(-d.drop)}**: the newest commit against the best of the last {d.window} measured"),
        ("threshold", f"{d.threshold:.2%} (3 x {d.noise:.2%} commit-to-commit noise, at least 2%)"),
        ("suspected commits", f"{_compare(server, repo, d.best, d.newest)}: from the best to the newest"),
        (
            "status",
            {
                "failing": "failing"
                if d.passing is None
                else f"failing at the alarm, passing since commit #{d.passing}: recovered once it passes for "
                f"{SETTLE} more commits",
                "recovered": "recovered: the newest commit is back within the threshold",
                "retired": "retired: the benchmark is no longer reported (renamed or removed)",
            }[d.status],
        ),
    ]
    why = "The drift guard fires: every step may have passed the PR gate while their sum did not."
    return "\n\n".join([why, _facts(rows), bisect_block(d.machine, d.best, d.newest, d.benchmark)])


FOOTER = (
    "_Filed by the regression-issues workflow: one issue per regression, found again by the hidden line at the end "
    "of this part of the body (not by its label or title), edited when its commits, members, status or size band "
    "change, closed when the level comes back or more data does not confirm it. Notes you add above or below are "
    'kept. docs/PR_COMMENT.md, "One issue per regression on main"._'
)


def body(state: IssueState, server_url: str, repo: str) -> str:
    """The bot's whole body: what a person reads, then the marker line (last: a person who replaces the first line or
    adds a note above does not touch it; issue_state.parse finds it on any line)."""
    return _text(state, server_url, repo) + "\n\n" + render_marker(state)


def _legacy_body(state: IssueState, server_url: str, repo: str) -> str:
    """The body as the bot wrote it before issue 47: the marker first."""
    return render_marker(state) + "\n\n" + _text(state, server_url, repo)


def merged(current: str, old: IssueState, new: IssueState, server_url: str, repo: str) -> str:
    """The body to write when the issue's state goes from ``old`` to ``new`` and GitHub holds ``current``: the bot's
    new body with every line a person added or changed kept (docs/PR_COMMENT.md, "A person's text is kept").

    The bot's lines are those of the body it wrote last (``old`` rendered, either layout); a line of ``current``
    that is not one of them is a person's. A person's lines above the first of the bot's stay above the new body,
    the rest follow it in their order; a marker line is never a person's. Without a person's line: ``body(new)``."""
    lines = current.split("\n")
    candidates = [
        difflib.SequenceMatcher(None, render(old, server_url, repo).split("\n"), lines, autojunk=False).get_opcodes()
        for render in (body, _legacy_body)
    ]
    best = max(candidates, key=lambda ops: sum(j2 - j1 for tag, _, _, j1, j2 in ops if tag == "equal"))
    above: list[str] = []
    below: list[str] = []
    seen_ours = False
    for tag, _, _, j1, j2 in best:
        if tag == "equal":
            seen_ours = True
            continue
        theirs = [line for line in lines[j1:j2] if not is_marker(line)]
        if any(line.strip() for line in theirs):
            (below if seen_ours else above).append("\n".join(theirs).strip("\n"))
    new_body = body(new, server_url, repo)
    return "\n\n".join([*above, new_body, *below])


def _text(state: IssueState, server_url: str, repo: str) -> str:
    server = server_url.rstrip("/")
    blocks: list[str] = []
    members = state.members
    if state.kind == "drift" and state.drifts:
        d = state.drifts[0]
        blocks += [
            f"### Drift on main: {code(gate_id(d.benchmark))} on {code(d.machine)}",
            _status_line(state, server, repo),
            _drift_text(d, server, repo),
            _facts([("found by", _found(state))]),
        ]
        return "\n\n".join(blocks + [FOOTER])
    if len(members) == 1 and state.kind == "slowdown":
        m = members[0]
        low, high = m.interval
        blocks += [
            f"### Slowdown on main: {code(gate_id(m.benchmark))} on {code(m.machine)}",
            _status_line(state, server, repo),
            "The history job found a change point in this benchmark's TFLOPS history on main.",
            _facts(
                [
                    ("benchmark", code(m.benchmark)),
                    ("machine", code(m.machine)),
                    ("size", f"**{percent(m.change)}** TFLOPS, 95% interval {percent(low)} to {percent(high)}"),
                    ("significance", f"p = {m.p_value:.2g} ({METHOD})"),
                    (
                        "suspected commits",
                        f"{_compare(server, repo, m.last_before, m.first_after)}: after the last "
                        "commit measured at the old level, up to the first measured at the new",
                    ),
                    ("kernel page", _page(state, m.benchmark)),
                    ("found by", _found(state)),
                ]
                + _gone(m)
            ),
            bisect_block(m.machine, m.last_before, m.first_after, m.benchmark),
        ]
    elif members:
        a, b = _span(members)
        head = (
            "Slowdowns over this workflow's per-run issue cap"
            if state.kind == "rollup"
            else f"Slowdown on main: {len(members)} benchmarks on {_machines(members)}"
        )
        why = (
            "More change points were found in one run than this workflow opens issues for; these are listed here "
            "instead. A later run adds to this issue until it is closed."
            if state.kind == "rollup"
            else "The history job found change points that share a suspected commit range in several benchmarks or "
            "machines: one cause (a shared module, the runner, a driver) is the likely story, so they are one issue."
        )
        active = [m for m in members if m.status == "active"] or list(members)
        largest = min(active, key=lambda m: m.change)
        several = len({m.machine for m in members}) > 1
        # The group's bisection spans every member's suspected commits: one member's range may miss the culprit
        # when noise placed its change point a commit late.
        good, bad = (
            _span([m for m in active if m.machine == largest.machine])
            if state.kind != "rollup"
            else (largest.last_before, largest.first_after)
        )
        blocks += [
            f"### {head}",
            _status_line(state, server, repo),
            why,
            _facts(
                [
                    ("suspected commits", _compare(server, repo, a, b) + " (all of them together)"),
                    ("significance", METHOD),
                    ("found by", _found(state)),
                ]
            ),
            table([_member_row(m, server, repo, several) for m in members]),
            bisect_block(largest.machine, good, bad, largest.benchmark),
        ]
    for d in state.drifts:
        blocks.append(_drift_text(d, server, repo))
    return "\n\n".join(blocks + [FOOTER])


STATUS_TAG = "<!-- mxfp4-perf-status {} -->"  # the last line of every status comment: which status it announced


def transition_comment(old: str, new: str, state: IssueState, context: Context) -> str:
    """What a person is told when an issue changes status (``old`` -> ``new``), with a hidden last line naming ``new``
    (post.file_issues: a comment posted by a run that stopped before its edit is not posted twice)."""
    return _transition_text(old, new, state, context) + "\n\n" + STATUS_TAG.format(new)


def _transition_text(old: str, new: str, state: IssueState, context: Context) -> str:
    run = f"([history run]({context.run_url}))"
    server = context.server_url.rstrip("/")
    if new == "recovered":
        fixes = [m.fix for m in state.members if m.status == "recovered" and m.fix]
        if fixes:
            commits = ", ".join(sorted({fix[1][:12] for fix in fixes}))
            after = _compare(server, context.repo, fixes[0][0], fixes[0][1])
            return (
                f"**Recovered**: the level is back (within the noise) after {after}; fixing commit `{commits}`. "
                f"Closing {run}."
            )
        return f"**Recovered**: the drift guard finds the newest commit back within its threshold. Closing {run}."
    if new == "not-confirmed":
        return (
            f"**Not confirmed**: with more commits measured, the change point is no longer there (noise, or a level "
            f"that moved back before it settled). Closing {run}."
        )
    if new == "retired":
        return (
            "**Retired**: the history no longer reports this benchmark (renamed or removed from the suite) while its "
            f"machine measured {RETIRE_AFTER} or more newer commits: nothing is left to watch here. Closing {run}."
        )
    return f"**Reopened**: the change point is back in the history {run}."


def _alone(f: Finding) -> IssueState:
    """A finding's issue as it would open alone (the screenshots script's: docs/data/pr_comment_screenshots.py)."""
    if isinstance(f, Slowdown):
        return IssueState("slowdown", "open", (member_of(f),))
    return IssueState("drift", "open", (), (entry_of(f),))


def finding_body(f: Finding, context: Context) -> str:
    state = _alone(f).with_(run_url=context.run_url, results_commit=context.results_commit, site_url=context.site_url)
    return body(state, context.server_url, context.repo)
