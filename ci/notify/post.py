"""Posting: the PR comment created once and then edited in place, the PR found from the event, the issues filed.

What to do is decided by pure functions (:func:`plan_comment`, ci.notify.issues.plan)
from what GitHub lists; this module only lists and carries the decisions out through
ci.notify.github (``gh api``).

* The comment is found again by :data:`ci.notify.comment.MARKER` in its body **and** its
  author being the workflow's bot, so a comment anyone else wrote with the marker in it
  is never taken for ours (editing it would fail, and the verdict would go nowhere).
* The pull request is found from the ``workflow_run`` event's head repository, branch
  and commit (``GET /repos/{repo}/pulls?head=OWNER:BRANCH``), never from an artifact:
  ``workflow_run.pull_requests`` is empty for a fork's PR, and an artifact is the PR's
  own words. Only an open PR whose head is still that commit gets the comment; a PR
  pushed again since has a newer run coming, whose comment would otherwise be overwritten.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ci.notify.comment import MARKER
from ci.notify.github import GitHub
from ci.notify.issues import Comment, Context, NewIssue, existing_issue, plan_issues
from ci.notify.history import Finding

BOT_LOGIN = "github-actions[bot]"  # the author of what GITHUB_TOKEN posts


@dataclass(frozen=True)
class CommentPlan:
    action: str  # "create", "update" or "unchanged"
    comment_id: int | None = None


def plan_comment(existing: Sequence[dict[str, Any]], body: str, bot_login: str = BOT_LOGIN) -> CommentPlan:
    """Edit the oldest comment of ours that carries the marker; create one when there is none."""
    ours = [c for c in existing
            if isinstance(c, dict) and MARKER in str(c.get("body") or "") and (c.get("user") or {}).get("login") == bot_login
            and isinstance(c.get("id"), int)]
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
        if (head.get("sha") == head_sha and (head.get("repo") or {}).get("full_name") == head_repo
                and head.get("ref") == head_branch and isinstance(pr.get("number"), int)):
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


def list_pr_files(gh: GitHub, pr: int) -> list[dict[str, Any]]:
    """GitHub's list of the PR's changed files, every page (at most 3000: GitHub's own limit)."""
    return [f for f in gh.get_all(gh.repo_path(f"pulls/{pr}/files")) if isinstance(f, dict)]


def checked_status(data: Any) -> dict[str, str]:
    """The commit status ``comment --status-out`` wrote, checked again before it is sent (state, context, lengths)."""
    from ci.notify.records import RecordError, check_schema
    from ci.notify.status import CONTEXT, DESCRIPTION_LIMIT, STATES

    root = check_schema(data, "mxfp4-commit-status", "status.json")
    status = {"state": root.get("state").choice(set(STATES.values())), "context": root.get("context").choice({CONTEXT}),
              "description": root.get("description").text()}
    if len(status["description"]) > DESCRIPTION_LIMIT:
        raise RecordError(f"status.json: description over {DESCRIPTION_LIMIT} characters")
    url = root.get("target_url").text(optional=True)
    if url is not None:
        from ci.notify.records import SAFE_URL

        if not SAFE_URL.match(url):
            raise RecordError("status.json: target_url is not an https:// address")
        status["target_url"] = url
    return status


def post_status(gh: GitHub, sha: str, status: dict[str, str]) -> None:
    """The commit status on ``sha`` (``POST /repos/{repo}/statuses/{sha}``): a new one with the same context replaces it."""
    gh.post(gh.repo_path(f"statuses/{sha}"), status)


# ---------------------------------------------------------------------------
# regression issues on main
# ---------------------------------------------------------------------------

LABEL = "perf-regression"
LABEL_COLOR = "d73a4a"


def ensure_label(gh: GitHub) -> None:
    names = {label.get("name") for label in gh.get_all(gh.repo_path("labels"))}
    if LABEL not in names:
        gh.post(gh.repo_path("labels"), {"name": LABEL, "color": LABEL_COLOR,
                                         "description": "A slowdown on main found by the history job (ci.notify)"})


def _by(item: dict[str, Any], login: str) -> bool:
    return (item.get("user") or {}).get("login") == login


def list_regression_issues(gh: GitHub, bot_login: str = BOT_LOGIN) -> list[dict[str, Any]]:
    """The bot's issues with the label (open and closed), each open one with its bot comments' bodies.

    Listing by label, not the search API: search is indexed with a delay, so an issue opened
    a minute ago could be missed and opened twice.
    """
    issues = [i for i in gh.get_all(gh.repo_path(f"issues?state=all&labels={LABEL}"))
              if isinstance(i, dict) and "pull_request" not in i and _by(i, bot_login)]
    for issue in issues:
        comments = gh.get_all(gh.repo_path(f"issues/{issue['number']}/comments")) if issue.get("state") == "open" else []
        issue["comment_bodies"] = [str(c.get("body") or "") for c in comments if isinstance(c, dict) and _by(c, bot_login)]
    return issues


def file_issues(gh: GitHub, findings: Sequence[Finding], context: Context, bot_login: str = BOT_LOGIN,
                log: Callable[[str], None] = print) -> list[str]:
    """Open or comment on issues for ``findings``; returns one line per action taken."""
    ensure_label(gh)
    existing = [existing_issue(i) for i in list_regression_issues(gh, bot_login)]
    done = []
    for action in plan_issues(findings, [e for e in existing if e is not None], context):
        if isinstance(action, NewIssue):
            created = gh.post(gh.repo_path("issues"), {"title": action.title, "body": action.body, "labels": [LABEL]})
            line = f"opened #{created.get('number')}: {action.title}"
        else:
            assert isinstance(action, Comment)
            gh.post(gh.repo_path(f"issues/{action.issue}/comments"), {"body": action.body})
            line = f"commented on #{action.issue}: {action.why}"
        log(line)
        done.append(line)
    return done
