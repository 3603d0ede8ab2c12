"""Posting, decided by pure functions from what GitHub lists: the PR comment created once and edited in place (ours: the
marker and the bot as author), the PR found from the ``workflow_run`` event (never an artifact), the regression issues
filed. Why: docs/PR_COMMENT.md, "Found again, never duplicated" and "Which PR"."""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ci.common.errors import InputError
from ci.notify.comment import MARKER
from ci.notify.github import GitHub
from ci.notify.regression_issues.history import HistoryChanges
from ci.notify.regression_issues.issue_state import IssueState, Tracked, tracked
from ci.notify.regression_issues.issues import STATUS_TAG, Context, body, merged, title, transition_comment
from ci.notify.regression_issues.matching import MAX_NEW, plan
from ci.notify.status import CONTEXT, DESCRIPTION_LIMIT, STATES
from ci.notify.untrusted import SAFE_URL, check_schema

BOT_LOGIN = "github-actions[bot]"  # the author of what GITHUB_TOKEN posts


@dataclass(frozen=True)
class CommentPlan:
    action: str  # "create", "update" or "unchanged"
    comment_id: int | None = None


def plan_comment(existing: Sequence[dict[str, Any]], body: str, bot_login: str = BOT_LOGIN) -> CommentPlan:
    """Edit the oldest comment of ours that carries the marker; create one when there is none."""
    ours = [
        c
        for c in existing
        if isinstance(c, dict)
        and MARKER in str(c.get("body") or "")
        and (c.get("user") or {}).get("login") == bot_login
        and isinstance(c.get("id"), int)
    ]
    if not ours:
        return CommentPlan("create")
    oldest = min(ours, key=lambda c: c["id"])
    return CommentPlan("unchanged" if oldest.get("body") == body else "update", oldest["id"])


def find_pull_requests(gh: GitHub, head_repo: str, head_branch: str, head_sha: str) -> list[int]:
    """The open PRs of ``gh.repo`` whose head is ``head_sha`` on ``head_repo``'s ``head_branch``."""
    owner = head_repo.split("/", 1)[0]
    query = urllib.parse.urlencode({"state": "open", "head": f"{owner}:{head_branch}"})
    found = []
    for pr in gh.get_all(gh.repo_path(f"pulls?{query}")):
        head = pr.get("head") or {}
        if (
            head.get("sha") == head_sha
            and (head.get("repo") or {}).get("full_name") == head_repo
            and head.get("ref") == head_branch
            and isinstance(pr.get("number"), int)
        ):
            found.append(pr["number"])
    return sorted(found)


def post_comment(gh: GitHub, pr: int, body: str, bot_login: str = BOT_LOGIN) -> CommentPlan:
    existing = gh.get_all(gh.repo_path(f"issues/{pr}/comments"))
    plan = plan_comment(existing, body, bot_login)
    if plan.action == "create":
        created = gh.post(gh.repo_path(f"issues/{pr}/comments"), {"body": body})
        return CommentPlan("create", created.get("id") if isinstance(created, dict) else None)
    if plan.action == "update":
        gh.patch(gh.repo_path(f"issues/comments/{plan.comment_id}"), {"body": body})
    return plan


def checked_status(data: Any) -> dict[str, str]:
    """The commit status ``comment --status-out`` wrote, checked again before it is sent (state, context, lengths)."""
    root = check_schema(data, "mxfp4-commit-status", "status.json")
    status = {
        "state": root.get("state").choice(set(STATES.values())),
        "context": root.get("context").choice({CONTEXT}),
        "description": root.get("description").text(),
    }
    if len(status["description"]) > DESCRIPTION_LIMIT:
        raise InputError(f"status.json: description over {DESCRIPTION_LIMIT} characters")
    url = root.get("target_url").text(optional=True)
    if url is not None:
        if not SAFE_URL.match(url):
            raise InputError("status.json: target_url is not an https:// address")
        status["target_url"] = url
    return status


# Regression issues on main

LABEL = "perf-regression"  # for people to filter by; never read back (removing it changes nothing)
LABEL_COLOR = "d73a4a"
STATE_REASON = {"recovered": "completed", "not-confirmed": "not_planned", "retired": "not_planned"}


def ensure_label(gh: GitHub) -> None:
    if LABEL not in {label.get("name") for label in gh.get_all(gh.repo_path("labels"))}:
        description = "A slowdown on main found by the history job (ci.notify)"
        gh.post(gh.repo_path("labels"), {"name": LABEL, "color": LABEL_COLOR, "description": description})


def list_regression_issues(gh: GitHub, bot_login: str = BOT_LOGIN) -> list[Tracked]:
    """The bot's issues, open and closed, whose body holds the marker line (regression_issues.issue_state), oldest
    first. Listed by author, not by label (a person may remove it) nor by the search API (indexed with a delay)."""
    query = urllib.parse.urlencode({"state": "all", "creator": bot_login, "sort": "created", "direction": "asc"})
    found = []
    for item in gh.get_all(gh.repo_path(f"issues?{query}")):
        if isinstance(item, dict) and "pull_request" not in item and (item.get("user") or {}).get("login") == bot_login:
            t = tracked(item)
            if t is not None:
                found.append(t)
    return found


def issues_record(
    existing: Sequence[Tracked],
    done: dict[int, IssueState],
    actions: list[str],
    deferred: int,
    context: Context,
    github_open: dict[int, bool],
) -> dict[str, Any]:
    """Every regression issue after this run, as JSON for the site build (ci.history.site.issue_links): its address,
    GitHub's ``state`` and the bot's ``status``, and per member what ci.common.regression_identity needs."""
    states = {t.number: t.state for t in existing} | done
    opened = {t.number: t.open for t in existing} | github_open
    return {
        "schema": ISSUES_SCHEMA,
        "repository": f"{context.server_url.rstrip('/')}/{context.repo}",
        "run_url": context.run_url,
        "results_commit": context.results_commit,
        "issues": [_issue_json(n, s, opened.get(n, True)) for n, s in sorted(states.items())],
        "actions": actions,
        "deferred": deferred,
    }


# 2: the repository's address, the run and results commit it is as of, GitHub's state, each member's index and orders
ISSUES_SCHEMA = "mxfp4-regression-issues/2"


def _issue_json(number: int, state: IssueState, github_open: bool) -> dict[str, Any]:
    return {
        "number": number,
        "kind": state.kind,
        "status": state.status,
        "state": "open" if github_open else "closed",
        "members": [
            {
                "machine": m.machine,
                "benchmark": m.benchmark,
                "index": m.index,
                "last_before": m.last_before,
                "first_after": m.first_after,
                "orders": list(m.orders) if m.orders else None,
                "relative_change": m.change,
                "status": m.status,
                "fixed_in": list(m.fix[:2]) if m.fix else None,
            }
            for m in state.members
        ],
        "drifts": [
            {"machine": d.machine, "benchmark": d.benchmark, "best": d.best, "newest": d.newest, "status": d.status}
            for d in state.drifts
        ],
    }


def _announced(gh: GitHub, number: int, status: str, bot_login: str) -> bool:
    """Whether the bot's newest comment on the issue already announces ``status`` (a run that stopped after posting it
    and before its edit); any other newest comment of the bot, or none, is not."""
    ours = [
        c
        for c in gh.get_all(gh.repo_path(f"issues/{number}/comments"))
        if isinstance(c, dict) and (c.get("user") or {}).get("login") == bot_login and isinstance(c.get("body"), str)
    ]
    return bool(ours) and ours[-1]["body"].rstrip().endswith(STATUS_TAG.format(status))


def file_issues(
    gh: GitHub,
    changes: HistoryChanges,
    context: Context,
    bot_login: str = BOT_LOGIN,
    log: Callable[[str], None] = print,
    *,
    max_new: int = MAX_NEW,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Open, edit, close or reopen the regression issues for ``changes`` (ci.notify.regression_issues.matching); returns
    :func:`issues_record`. On a change of status its comment first (unless the bot's newest comment already says it),
    then the issue written whole in one request (its state is a line of its body; a person's lines kept): a run stopped
    between two requests leaves nothing a re-run duplicates or loses."""
    existing = list_regression_issues(gh, bot_login)
    by_number = {t.number: t for t in existing}
    planned = plan(changes, existing, max_new=max_new)
    if planned.stale:
        line = (
            f"this report (newest commit position {changes.newest_order}) is older than one an issue was written from: "
            "nothing applied (reports are applied in commit order)"
        )
        log(line)
        return issues_record(existing, {}, [line], 0, context, {})
    actions, done = [], {}
    github_open: dict[int, bool] = {}  # GitHub's state after this run, of the issues it opened, closed or reopened
    if not dry_run and any(p.number is None for p in planned.plans):
        ensure_label(gh)
    for p in planned.plans:
        state = p.new.with_(
            run_url=context.run_url,
            results_commit=context.results_commit,
            site_url=context.site_url,
            as_of=changes.newest_order,
        )
        if p.number is None:
            state = state.with_(opened_in=changes.results_commit)
        text_title, text_body = title(state), body(state, context.server_url, context.repo)
        if p.number is None:
            line = f"open: {text_title}"
            if not dry_run:
                created = gh.post(gh.repo_path("issues"), {"title": text_title, "body": text_body, "labels": [LABEL]})
                number = created.get("number") if isinstance(created, dict) else None
                line = f"opened #{number}: {text_title}"
                if isinstance(number, int):
                    done[number] = state
                    github_open[number] = True
        else:
            old = by_number[p.number]
            change: dict[str, Any] = {}
            text_body = merged(old.body, old.state, state, context.server_url, context.repo)  # a person's lines kept
            if text_body != old.body:
                change["body"] = text_body
            # a person's own title is kept for good: ours only replaces the title we wrote
            if old.title == title(old.state) and old.title != text_title:
                change["title"] = text_title
            moved = p.old.status if p.old is not None and p.old.status != state.status else None  # moved from
            if moved and state.status == "open" and not p.github_open:
                change["state"] = "open"
            elif moved and state.status != "open" and p.github_open:
                change.update(state="closed", state_reason=STATE_REASON[state.status])
            if "state" in change and not dry_run:
                github_open[p.number] = change["state"] == "open"
            line = f"#{p.number}: " + (f"{moved} -> {state.status}" if moved else "edited") + f" ({text_title})"
            if not dry_run:
                # The comment first, then the edit that records the new status: a run stopped between the two leaves
                # the old status in the body, so the re-run plans the change again and finds its comment posted.
                if moved and not _announced(gh, p.number, state.status, bot_login):
                    gh.post(
                        gh.repo_path(f"issues/{p.number}/comments"),
                        {"body": transition_comment(moved, state.status, state, context)},
                    )
                if change:
                    gh.patch(gh.repo_path(f"issues/{p.number}"), change)
            done[p.number] = state
        log(line)
        actions.append(line)
    if planned.deferred:
        log(f"{planned.deferred} finding(s) left for the next run: the roll-up issue is full")
    return issues_record(existing, done, actions, planned.deferred, context, github_open)
