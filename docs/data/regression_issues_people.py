"""Issue 47's growth: the regression issues over a grown history with noise, two machines and people editing them.

    PYTHONPATH=. .venv/bin/python docs/data/regression_issues_people.py --seeds 1 --noise 0.003 --json OUT.json

Per seed: tests/issue_growth.py's history with two machines of 36 benchmarks each (Student-t(5)
commit noise of ``--noise``, 5% of commits repeating the previous value exactly), 20 commits, then
``--runs`` runs of one commit each, each filed against tests/fake_github.py by the
``regression-issues`` command's front in this process. True regressions, each on both machines:
-5% in benchmark 0 at commit 30 fixed at 40, -4% in 1 at 45, -6% in 2 at 56, -3% in 3 at 84, -2% in
20 benchmarks (4-23) at 66. Benchmark 2 is renamed from commit 90 on (a new asv key: its old series
stops). What people do (``PEOPLE``), each to the oldest open issue no person has touched yet: a
triage note added above everything the bot wrote (before run 34), the body's first line replaced
(44), a note appended (56), every label removed and the title changed (72); and the -4%
regression's issue closed by hand (60). A rate limit refuses the next write of each kind once (an
issue created, a status comment, an issue edited or closed, twice: ``LIMITS``); the stopped run
(exit 2) is run again at once on the same file (a re-run of the workflow).

Counted: issues per true regression (an issue is a regression's when one of its members, as the bot
wrote it last, is in that regression's benchmarks within NEAR_TRUTH commits of its commit; one is
the goal; duplicates are the excess), issues of none (false issues, also per 1000 commits), issues a
person orphaned (no marker the code reads left in the body), whether each regression's issue names its
culprit commit within its members' suspected ranges, the body edits and which of them changed only
numbers (a p-value, an interval, a size by less than its band) rather than commits, members, a status
or a size band (docs/PR_COMMENT.md, "What is an edit"), whether each person's text and title are
still there at the end, status changes without their comment, and a hand-closed issue reopened by
the bot without a change of status.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))  # the scenario and the GitHub stand-in live with the tests

from fake_github import FakeGitHub, State  # noqa: E402
from issue_growth import Scenario, benchmark_key, grow, machine_name  # noqa: E402

from ci.notify.regression_issues.issue_state import IssueState, parse, to_hex  # noqa: E402
from harness.report import write_json_atomic  # noqa: E402

REGRESSIONS = ((0, 30, -0.05, 10), (1, 45, -0.04, None), (2, 56, -0.06, None), (3, 84, -0.03, None))
SHARED = (4, 20, 66, -0.02)
RENAMED = (2, 90)
NEAR_TRUTH = 5  # commits: a member this far from a true regression's commit is another (false) finding
NOTE_ABOVE = "**Triage (a person)**: @alice is looking into this one; see the profile in the team notes."
FIRST_LINE = "Assigned to the kernels team (a person replaced the first line)."
NOTE_BELOW = "Update from a person: reproduced by hand on the runner, 4.1% slower."
TITLE = "perf: looking into it (retitled by a person)"
# run -> what a person does before it, to the oldest open issue no person has touched ("close by hand": to the -4%
# regression's issue, whatever was done to it before)
PEOPLE = {
    34: "note above",
    44: "replace first line",
    56: "note below",
    60: "close by hand",
    72: "unlabel all, retitle",
}
# run -> the write kind a rate limit refuses once in that run (the run stops; it is run again at once)
LIMITS = {
    12: ("POST", r"/issues$"),  # an issue created
    20: ("POST", r"/issues/\d+/comments$"),  # a status comment (the next: the fixed regression's "Recovered")
    40: ("PATCH", r"/issues/\d+$"),  # a body edited or an issue closed: whichever comes first
    75: ("PATCH", r"/issues/\d+$"),
}


def scenario(seed: int, runs: int, noise: float) -> Scenario:
    return Scenario(
        seed=seed,
        runs=runs,
        benchmarks=36,
        machines=2,
        noise=noise,
        regressions=REGRESSIONS,
        shared=SHARED,
        renamed=RENAMED,
    )


def truths(s: Scenario) -> dict[str, tuple[set[str], int]]:
    """Each true regression -> the benchmark keys it is in (every name a benchmark had) and its culprit's position."""
    out = {}
    for b, at, size, fixed in s.regressions:
        keys = {benchmark_key(s, b), benchmark_key(s, b, s.commits)}
        out[f"{size:+.0%} in {b} at {at}" + (f", fixed at {at + fixed}" if fixed else "")] = (keys, at)
    first, count, at, size = s.shared
    out[f"{size:+.0%} in {count} at {at}"] = ({benchmark_key(s, b) for b in range(first, first + count)}, at)
    return out


def numbers_only(old: IssueState, new: IssueState) -> str:
    """What a body edit changed: "material" (commits, members, status, fix, a member not reported or not found lately,
    a drift passing, a size band), "size" (a size within its band only) or "p/interval" (neither: a p-value or an
    interval moved)."""

    def key(s: IssueState, with_size: bool) -> tuple:
        members = tuple(
            (m.machine, m.benchmark, m.last_before, m.first_after, m.orders, m.status, m.fix[:2] if m.fix else None)
            + (getattr(m, "gone", None), getattr(m, "missed", None))  # not reported / not found lately (issue 47)
            + ((m.change,) if with_size else ())
            for m in s.members
        )
        drifts = tuple((d.series, d.best, d.newest, d.status, getattr(d, "passing", None)) for d in s.drifts)
        return s.kind, s.status, members, drifts

    if key(old, False) != key(new, False):
        return "material"
    if any(abs(a.change - b.change) >= 0.005 for a, b in zip(old.members, new.members)):
        return "material"  # half a point or more: a size band
    return "size" if key(old, True) != key(new, True) else "p/interval"


def one_seed(seed: int, runs: int, noise: float) -> dict[str, Any]:
    s = scenario(seed, runs, noise)
    with tempfile.TemporaryDirectory() as tmp, FakeGitHub(Path(tmp), State()) as server:
        state = server.state
        log: list[str] = []
        stops: list[int] = []
        people: dict[int, dict[str, Any]] = {}  # issue number -> what a person did to it
        env = server.env(dict(os.environ))

        def person(run: int) -> None:
            if run not in PEOPLE:
                return
            action = PEOPLE[run]
            if action == "close by hand":
                name = to_hex(f"{machine_name(0)}\n{benchmark_key(s, 1)}")  # as the marker holds it (any version)
                issue = next((i for i in state.issues if name in i["body"] and i["state"] == "open"), None)
            else:
                issue = next((i for i in state.issues if i["state"] == "open" and i["number"] not in people), None)
            if issue is None:
                log.append(f"run {run}: no issue for {action}")
                return
            did = people.setdefault(issue["number"], {})
            if action == "note above":
                issue["body"] = NOTE_ABOVE + "\n\n" + issue["body"]
                did["text"] = NOTE_ABOVE
            elif action == "replace first line":
                issue["body"] = FIRST_LINE + "\n" + issue["body"].split("\n", 1)[1]
                did["text"] = FIRST_LINE
            elif action == "note below":
                issue["body"] = issue["body"] + "\n\n" + NOTE_BELOW
                did["text"] = NOTE_BELOW
            elif action == "unlabel all, retitle":
                for i in state.issues:
                    i["labels"] = []
                issue["title"] = TITLE
                did["title"] = TITLE
            elif action == "close by hand":
                issue["state"] = "closed"
                did["closed_by_hand"] = True

        def file(changes: Path, run: int) -> None:
            if run in LIMITS:
                state.refuse_write(*LIMITS[run])
            for _attempt in (1, 2):
                code = notify(changes, run)
                if code == 0:
                    return
                stops.append(run)
                state.aimed.clear()
            raise AssertionError(f"run {run}: the re-run failed too: {log[-3:]}")

        def notify(changes: Path, run: int) -> int:
            from ci.notify.front import COMMAND
            from ci.notify.front import run as notify_run
            from ci.notify.github import GitHubError

            options = COMMAND.checked(
                [
                    "regression-issues",
                    "--github-repo",
                    "OWNER/REPO",
                    "--changes",
                    str(changes),
                    "--run-url",
                    f"https://github.com/OWNER/REPO/actions/runs/{run}",
                    "--write-interval",
                    "0",
                    "--max-wait",
                    "1",
                ]
            )
            saved = dict(os.environ)
            os.environ.clear()
            os.environ.update(env)
            try:
                return notify_run(options, log=lambda line: log.append(f"run {run}: {line}"))
            except GitHubError as e:  # the front's wrapper makes this exit 2 (ci.common.command)
                log.append(f"run {run}: stopped: {e}")
                return 2
            finally:
                os.environ.clear()
                os.environ.update(saved)

        started = time.process_time()
        grow(s, Path(tmp), file, person)
        cpu = time.process_time() - started
        issues = [dict(i) for i in state.issues]
        comments = {n: list(c) for n, c in state.comments.items()}
        refused = set(state.refused_at)
        requests = [r for i, r in enumerate(state.requests) if i not in refused]  # what GitHub carried out

    # body edits, by what they changed (each against the body the bot wrote before it)
    written: dict[int, IssueState] = {}
    edits = {"material": 0, "size": 0, "p/interval": 0}
    transitions: dict[int, int] = {}
    reopened_by_bot = 0
    numbers = iter(i["number"] for i in issues)
    for method, path, payload in requests:
        if method == "POST" and path.endswith("/issues") and isinstance(payload, dict) and "body" in payload:
            parsed = parse(payload["body"])
            if parsed is not None:
                written[next(numbers)] = parsed
        elif method == "PATCH" and "/issues/" in path and "/comments" not in path and isinstance(payload, dict):
            number = int(path.rsplit("/", 1)[1])
            new = parse(payload.get("body", "")) if "body" in payload else None
            if new is not None and number in written:
                edits[numbers_only(written[number], new)] += 1
                if new.status != written[number].status:
                    transitions[number] = transitions.get(number, 0) + 1
                written[number] = new
            if payload.get("state") == "open" and number in people and people[number].get("closed_by_hand"):
                reopened_by_bot += 1
    # Each issue's regression: by the state the bot wrote last (a body a person orphaned still counts as the issue it
    # was); orphaned: its body as it ends has no marker the code under test reads.
    found = {i["number"]: written.get(i["number"]) for i in issues}
    orphaned = [i["number"] for i in issues if parse(i["body"]) is None]
    per_truth: dict[str, list[int]] = {}
    culprit_named: dict[str, bool] = {}
    for name, (keys, at) in truths(s).items():
        # an issue is this regression's when a member of it is in one of its benchmarks within NEAR_TRUTH of its commit
        numbers_of = [
            n
            for n, p in found.items()
            if p
            and any(
                m.benchmark in keys and m.orders and m.orders[0] - NEAR_TRUTH < at <= m.orders[1] + NEAR_TRUTH
                for m in p.members
            )
        ]
        per_truth[name] = numbers_of
        ranges = [
            m.orders for n in numbers_of for m in found[n].members if m.benchmark in keys and m.orders is not None
        ]
        culprit_named[name] = bool(ranges) and any(lo < at <= hi for lo, hi in ranges)
    claimed = {n for v in per_truth.values() for n in v}
    false_issues = [n for n in found if n not in claimed]
    lost = sum(max(0, t - len(comments.get(n, []))) for n, t in transitions.items())
    kept = {
        n: all(
            [did.get("text", "") in next(i["body"] for i in issues if i["number"] == n)]
            + [did.get("title", "") in next(i["title"] for i in issues if i["number"] == n)]
        )
        for n, did in people.items()
    }
    renamed_key = benchmark_key(s, RENAMED[0])
    renamed = [(n, m.status) for n, p in found.items() if p for m in p.members if m.benchmark == renamed_key]
    return {
        "seed": seed,
        "runs": runs,
        "noise": noise,
        "commits": s.commits,
        "series": s.machines * s.benchmarks,
        "machines": [machine_name(m) for m in range(s.machines)],
        "cpu_seconds": round(cpu, 1),
        "issues": len(issues),
        "issues_per_regression": {k: len(v) for k, v in per_truth.items()},
        "duplicates": sum(max(0, len(v) - 1) for v in per_truth.values()),
        "missed": sum(not v for v in per_truth.values()),
        "culprit_in_range": culprit_named,
        "orphaned": orphaned,
        "false_issues": len(false_issues),
        "false_per_1000_commits": round(1000 * len(false_issues) / s.commits, 2),
        "body_edits": edits,
        "status_changes": sum(transitions.values()),
        "status_comments": sum(len(c) for c in comments.values()),
        "status_changes_without_comment": lost,
        "people": {str(n): {**did, "kept": kept[n]} for n, did in people.items()},
        "hand_closed_reopened_by_bot": reopened_by_bot,
        "renamed_benchmark_members": renamed,
        "runs_stopped_by_rate_limit": stops,
        "open_at_end": sum(i["state"] == "open" for i in issues),
        "titles": {i["number"]: i["title"] for i in issues},
        # what each issue holds as the bot wrote it last: "machine/benchmark (before, after] size status", and its drift
        # alarms "machine/benchmark drift (best, newest] status" (machine 0 or 1, benchmark by its number)
        "members": {n: _held(s, p) for n, p in found.items() if p},
        "false": sorted(false_issues),
    }


def _held(s: Scenario, state: IssueState) -> list[str]:
    names = {benchmark_key(s, b, c): b for b in range(s.benchmarks) for c in (0, s.commits)}
    machines = {machine_name(m): m for m in range(s.machines)}
    out = [
        f"{machines.get(m.machine, m.machine)}/{names.get(m.benchmark, '?')} ({m.orders[0] if m.orders else '?'}, "
        f"{m.orders[1] if m.orders else '?'}] {m.change:+.1%} {m.status}"
        for m in state.members
    ]
    return out + [
        f"{machines.get(d.machine, d.machine)}/{names.get(d.benchmark, '?')} drift "
        f"({d.orders[0] if d.orders else '?'}, {d.orders[1] if d.orders else '?'}] {d.status}"
        for d in state.drifts
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--runs", type=int, default=80)
    parser.add_argument("--noise", type=float, default=0.003)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    results = []
    for seed in range(args.first, args.first + args.seeds):
        result = one_seed(seed, args.runs, args.noise)
        print(json.dumps(result), flush=True)
        results.append(result)
    if args.json:
        write_json_atomic(args.json, {"command": " ".join(sys.argv), "per_seed": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
