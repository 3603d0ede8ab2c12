"""Posting (issue 30): the PR comment created once then edited, the PR found for a fork, one issue per regression.

The commands run as the workflows run them (``python -m ci.notify ...``, ``gh api``), against
tests/fake_github.py: a local HTTPS server with the endpoints they call, since GitHub itself
cannot be reached from here. What that proves is the logic and the calls; GitHub's own
behaviour (its permissions, its rate limits, the real event payloads) is not tested.
"""

from __future__ import annotations

import copy
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fake_github import BOT, FakeGitHub, State

from ci.notify.comment import MARKER
from ci.notify.post import plan_comment
from ci.notify.regression_issues.history import load_history_changes
from ci.notify.regression_issues.issue_state import parse, tracked
from ci.notify.regression_issues.issues import body as issue_body
from ci.notify.regression_issues.issues import title as issue_title
from ci.notify.regression_issues.matching import plan

PROJECT = Path(__file__).resolve().parents[1]
HISTORY = json.loads((PROJECT / "tests" / "data" / "history_changes.json").read_text())
FORK, BRANCH, SHA = "alice/mxfp4-fork", "fix/faster-tile", "a" * 40
RUN = "https://github.com/OWNER/REPO/actions/runs/77"


def _gh_or_skip() -> None:
    if shutil.which("gh") is None:
        pytest.skip("gh (the GitHub CLI, Debian package gh) is not installed; ci/setup.sh installs it")


def notify(server: FakeGitHub, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ci.notify", *args],
        cwd=PROJECT,
        env=server.env(dict(os.environ)),
        capture_output=True,
        text=True,
        timeout=300,
    )


def post_comment_args(body: Path) -> list[str]:
    """The workflow's post-comment call for the PR the fake serves, with the comment in ``body``."""
    head = ["--head-repo", FORK, "--head-branch", BRANCH, "--head-sha", SHA]
    return ["post-comment", "--github-repo", "OWNER/REPO", *head, "--body", str(body)]


@pytest.fixture
def github(tmp_path):
    _gh_or_skip()
    state = State()
    with FakeGitHub(tmp_path, state) as server:
        yield server


# ---------------------------------------------------------------------------
# the PR comment
# ---------------------------------------------------------------------------


def test_plan_comment_edits_only_the_bots_marked_comment():
    human = {"id": 5, "body": f"quoting the bot: {MARKER}", "user": {"login": "mallory"}}
    ours = {"id": 9, "body": f"old\n{MARKER}", "user": {"login": BOT}}
    later_dup = {"id": 12, "body": f"dup\n{MARKER}", "user": {"login": BOT}}
    assert plan_comment([human], "new").action == "create"
    assert plan_comment([human, later_dup, ours], "new").comment_id == 9  # the oldest of ours
    assert plan_comment([ours], f"old\n{MARKER}").action == "unchanged"


def test_the_comment_is_created_once_then_edited_in_place_on_a_fork_pr(github, tmp_path):
    state = github.state
    state.add_pull(7, FORK, BRANCH, SHA)
    state.add_pull(8, FORK, "other-branch", "b" * 40)
    # 120 comments before ours: two pages at 100 per page; one of them, by a person, quotes the marker.
    for i in range(119):
        state.add_comment(7, f"review comment {i}", "bob")
    state.add_comment(7, f"I saw {MARKER} in the source", "mallory")
    body = tmp_path / "comment.md"
    args = post_comment_args(body)

    body.write_text(f"### FAIL\n\n{MARKER}")
    done = notify(github, *args)
    assert done.returncode == 0, done.stderr
    ours = [c for c in state.comments[7] if c["user"]["login"] == BOT]
    assert len(ours) == 1 and ours[0]["body"] == body.read_text()
    # The PR was found from the head repository and branch (a fork: the event lists no PR), both pages were read.
    gets = [path for method, path, _ in state.requests if method == "GET"]
    assert any("pulls?" in p and "head=alice%3Afix%2Ffaster-tile" in p for p in gets), gets
    assert any("comments" in p and "page=2" in p for p in gets), gets

    body.write_text(f"### PASS\n\n{MARKER}")
    done = notify(github, *args)
    assert done.returncode == 0, done.stderr
    ours = [c for c in state.comments[7] if c["user"]["login"] == BOT]
    assert len(ours) == 1 and ours[0]["body"].startswith("### PASS"), ours
    assert [m for m, *_ in state.writes()] == ["POST", "PATCH"]
    assert state.comments[7][119]["body"].startswith("I saw")  # the person's comment is untouched
    assert 8 not in state.comments

    done = notify(github, *args)  # the same text again: nothing written
    assert done.returncode == 0 and "comment unchanged" in done.stderr
    assert [m for m, *_ in state.writes()] == ["POST", "PATCH"]


def test_a_pr_pushed_again_since_gets_nothing(github, tmp_path):
    github.state.add_pull(7, FORK, BRANCH, "c" * 40)  # the PR's head moved on: this run's verdict is stale
    body = tmp_path / "comment.md"
    body.write_text(f"### FAIL\n\n{MARKER}")
    done = notify(github, *post_comment_args(body))
    assert done.returncode == 0 and "nothing posted" in done.stderr, done.stderr
    assert github.state.writes() == []


def test_a_github_error_is_exit_2_with_what_gh_said(github, tmp_path):
    github.state.repo = "SOMEONE/ELSE"  # every path of OWNER/REPO is now 404
    body = tmp_path / "comment.md"
    body.write_text(MARKER)
    done = notify(github, *post_comment_args(body))
    assert done.returncode == 2 and "GET repos/OWNER/REPO/pulls" in done.stderr and "404" in done.stderr, done.stderr


# ---------------------------------------------------------------------------
# the regression issues
# ---------------------------------------------------------------------------


def _changes(tmp_path: Path, data: dict, name: str = "changes.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _issues(github: FakeGitHub, changes: Path, *extra: str) -> subprocess.CompletedProcess:
    done = notify(
        github,
        "regression-issues",
        "--github-repo",
        "OWNER/REPO",
        "--changes",
        str(changes),
        "--run-url",
        RUN,
        "--write-interval",
        "0",
        *extra,
    )
    assert done.returncode == 0, done.stderr
    return done


def _without_improvements(data: dict) -> dict:
    data = copy.deepcopy(data)
    for m in data["machines"]:
        m["change_points"] = [c for c in m["change_points"] if c["change"]["direction"] == "regression"]
    return data


def test_each_regression_is_filed_once_and_a_recovered_one_closed_naming_its_fix(github, tmp_path):
    state = github.state
    # Run 1: the short triton regression is not yet back (its improvement not seen yet).
    _issues(github, _changes(tmp_path, _without_improvements(HISTORY), "run1.json"))
    assert len(state.issues) == 3, [i["title"] for i in state.issues]
    assert {lb["name"] for i in state.issues for lb in i["labels"]} == {"perf-regression"}
    assert [lb["name"] for lb in state.labels] == ["perf-regression"]  # created once, when missing
    titles = " | ".join(i["title"] for i in state.issues)
    assert "flydsl_gfx950_4wave[default]" in titles and "triton_dot_scaled[" in titles and "[intrinsic_acc]" in titles
    # The failing drift of intrinsic_acc is in the issue of that series' change point, not an issue of its own.
    (intrinsic,) = [i for i in state.issues if "[intrinsic_acc]" in i["title"]]
    assert "The drift guard fires" in intrinsic["body"] and parse(intrinsic["body"]).drifts
    body = next(i["body"] for i in state.issues if "[default]" in i["title"])
    assert "python -m ci.bisect" in body and "--good " in body and "kernels/flydsl_gfx950_4wave.html" in body
    # The bisect command the issue prints spells the front's own options in full (not a prefix argparse would guess).
    from ci.bisect.options import COMMAND as bisect_front

    command = shlex.split(body.split("```sh\n", 1)[1].split("\n```", 1)[0].replace("\\\n", " "))
    assert command[:3] == ["python", "-m", "ci.bisect"] and "--benchmark" in command
    assert {word for word in command if word.startswith("--")} <= set(bisect_front.parser()._option_string_actions)
    assert "/compare/" in body and "-10.0%" in body and "MOSUM" in body and "E-divisive" not in body

    # Run 2: the same change points again: nothing written.
    writes = len(state.writes())
    _issues(github, _changes(tmp_path, _without_improvements(HISTORY), "run2.json"))
    assert len(state.writes()) == writes and len(state.issues) == 3

    # Run 3: the triton improvement is seen: its issue is closed, once, naming the fixing commit; nothing else changes.
    _issues(github, _changes(tmp_path, HISTORY, "run3.json"))
    (triton,) = [i for i in state.issues if "triton_dot_scaled[" in i["title"]]
    fix = next(c for c in HISTORY["machines"][0]["change_points"] if c["change"]["direction"] == "improvement")
    assert triton["state"] == "closed" and triton["state_reason"] == "completed"
    assert [c["body"].split(":")[0] for c in state.comments[triton["number"]]] == ["**Recovered**"]
    assert (
        fix["first_after"][:12] in state.comments[triton["number"]][0]["body"]
        and fix["first_after"][:12] in triton["body"]
    )
    assert sum(i["state"] == "open" for i in state.issues) == 2
    _issues(github, _changes(tmp_path, HISTORY, "run4.json"))
    assert len(state.comments[triton["number"]]) == 1 and len(state.issues) == 3

    # Run 5: another benchmark's change point in the same suspected commits joins that issue (one cause, one issue).
    data = copy.deepcopy(HISTORY)
    extra = copy.deepcopy(data["machines"][0]["change_points"][0])
    extra["benchmark"] = extra["benchmark"].replace("flydsl_gfx950_4wave:default", "torch_dequant:bf16")
    data["machines"][0]["change_points"].append(extra)
    _issues(github, _changes(tmp_path, data, "run5.json"))
    assert len(state.issues) == 3
    (group,) = [i for i in state.issues if "torch_dequant[bf16]" in i["body"]]
    assert group["title"].startswith("Slowdown of 2 benchmarks on mi355x-gpu0")


def test_a_drift_gets_its_issue_closed_when_it_recovers(github, tmp_path):
    state = github.state
    data = copy.deepcopy(HISTORY)
    data["machines"][0]["change_points"] = []  # the drift alone
    _issues(github, _changes(tmp_path, data, "a.json"))
    (issue,) = state.issues
    assert issue["title"].startswith("Drift -") and "[intrinsic_acc]" in issue["title"]
    # A window without that best says nothing.
    later = copy.deepcopy(data)
    (drift,) = [d for d in later["machines"][0]["drift"] if d["failed"]]
    moved = copy.deepcopy(later)
    next(d for d in moved["machines"][0]["drift"] if d["failed"]).update(best="f" * 40, failed=False)
    _issues(github, _changes(tmp_path, moved, "b.json"))
    assert issue["state"] == "open" and state.comments.get(issue["number"]) is None
    # A later run: the same best, the newest back within the threshold.
    drift.update(failed=False, drop=0.004)
    for name in ("c.json", "d.json"):
        _issues(github, _changes(tmp_path, later, name))
    assert [c["body"].split(":")[0] for c in state.comments[issue["number"]]] == ["**Recovered**"]
    assert issue["state"] == "closed" and len(state.issues) == 1


def test_issues_by_someone_else_do_not_silence_a_finding(github, tmp_path):
    # Someone opens an issue carrying the exact first line the bot would write for the first slowdown.
    changes = load_history_changes(HISTORY)
    first = plan(changes, []).plans[0].new
    forged = issue_body(first, "https://github.com", "OWNER/REPO")
    assert tracked({"number": 1, "state": "open", "body": forged}) is not None  # the marker alone would match
    github.state.issues.append(
        {
            "number": 1,
            "title": "forged",
            "body": forged,
            "state": "open",
            "labels": [{"name": "perf-regression"}],
            "user": {"login": "mallory"},
        }
    )
    _issues(github, _changes(tmp_path, HISTORY))
    assert any(i["title"] == issue_title(first) and i["user"]["login"] == BOT for i in github.state.issues)


def test_a_history_file_of_an_unknown_schema_is_refused(github, tmp_path):
    data = dict(HISTORY, schema="mxfp4-history-changes/9")
    done = notify(
        github,
        "regression-issues",
        "--github-repo",
        "OWNER/REPO",
        "--changes",
        str(_changes(tmp_path, data)),
        "--run-url",
        RUN,
    )
    assert done.returncode == 2 and "unknown schema mxfp4-history-changes/9" in done.stderr, done.stderr
    assert github.state.requests == []


def test_a_dry_run_writes_nothing_and_the_json_lists_every_issue(github, tmp_path):
    out = tmp_path / "issues.json"
    done = _issues(github, _changes(tmp_path, _without_improvements(HISTORY)), "--dry-run")
    assert github.state.writes() == [] and '"open: Slowdown' in done.stdout
    _issues(github, _changes(tmp_path, _without_improvements(HISTORY), "b.json"), "--json", str(out))
    record = json.loads(out.read_text())
    assert record["schema"] == "mxfp4-regression-issues/2" and len(record["issues"]) == 3
    assert {m["status"] for i in record["issues"] for m in i["members"]} == {"active"}


def test_only_a_recent_change_point_opens_an_issue():
    """The publish lists every change point of the whole history, each marked ``recent`` when its new level starts
    among the newest measured commits: the first publish of a long history must not file every old regression."""
    data = json.loads(json.dumps(HISTORY))
    for machine in data["machines"]:
        for change in machine["change_points"]:
            change["recent"] = False
        machine["drift"] = []
    assert plan(load_history_changes(data), []).plans == []
    recent = load_history_changes(HISTORY)  # no "recent" field: an older report, all filed
    assert any(p.new.kind == "slowdown" for p in plan(recent, []).plans)
