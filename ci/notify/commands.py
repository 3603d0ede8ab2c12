"""The commands of ``python -m ci.notify`` (ci.notify.front parses; each takes the checked Options)."""

from __future__ import annotations

import json
from collections.abc import Callable

from ci.common.errors import InputError
from ci.common.files import append_step_summary_or_fallback, write_json_atomic, write_text_atomic
from ci.notify import bundle
from ci.notify.comment import Links, render
from ci.notify.gate_files import GITHUB_FILES_LIMIT, files_record
from ci.notify.github import GitHub, GitHubError, Limits
from ci.notify.judge import judge
from ci.notify.markdown import GITHUB_BODY_LIMIT
from ci.notify.post import checked_status, file_issues, find_pull_requests, post_comment
from ci.notify.regression_issues.history import load_history_changes
from ci.notify.regression_issues.issues import Context
from ci.notify.status import status_of
from ci.notify.untrusted import load_json

Log = Callable[[str], None]


def comment(options, log: Log) -> int:
    """Render the comment from the artifacts (data only) into ``--out``; also shown in the step summary. With
    ``--status-out``, the commit status of the same speed verdict (ci.notify.status), for post-comment."""
    inputs = bundle.load_inputs(options.artifacts, options.attempt, options.jobs, options.judged, options.pr_files)
    plot = bundle.artifact_url(
        options.artifact_list, options.run_url, bundle.artifact_name(bundle.SPEED_ARTIFACT, options.attempt)
    )
    text = render(inputs, Links(options.run_url, plot, options.head_sha, options.attempt))
    write_text_atomic(options.out, text)
    append_step_summary_or_fallback(text, log)
    log(f"ci.notify: comment written to {options.out} ({len(text)} characters): {text.splitlines()[0]}")
    if options.status_out is not None:
        status = status_of(inputs, options.run_url)
        write_json_atomic(options.status_out, status)
        log(f"ci.notify: commit status written to {options.status_out}: {status['state']}: {status['description']}")
    return 0


def pr_files(options, log: Log) -> int:
    """The PR's changed files that are the gate, from GitHub's list (``--out``); what went wrong is in the file too."""
    gh = GitHub(options.repo)
    try:
        prs = find_pull_requests(gh, options.head_repo, options.head_branch, options.head_sha)
        files, truncated = [], False
        for pr in prs:
            # GitHub's list of the PR's changed files, every page (at most GITHUB_FILES_LIMIT: GitHub's own limit)
            listed = [f for f in gh.get_all(gh.repo_path(f"pulls/{pr}/files")) if isinstance(f, dict)]
            truncated |= len(listed) >= GITHUB_FILES_LIMIT
            files += listed
        missing = None if prs else "no open pull request has this run's head (closed, or pushed again since)"
        record = files_record(prs, files, truncated, missing)
    except GitHubError as exc:
        log(f"ci.notify: {exc}")
        record = files_record([], [], error=f"GitHub's list of the PR's files failed: {exc}")
    write_json_atomic(options.out, record)
    log(
        f"ci.notify: PR(s) {record['pull_requests']}: {record['files_listed']} file(s) listed, "
        f"{len(record['gate_files'])} of the gate; written to {options.out}"
    )
    return 0


def post_comment_command(options, log: Log) -> int:
    body = options.body.read_text(encoding="utf-8")
    if len(body) > GITHUB_BODY_LIMIT:
        raise InputError(f"--body {options.body}: {len(body)} characters, over GitHub's {GITHUB_BODY_LIMIT}")
    try:
        status = None if options.status is None else checked_status(load_json(options.status))
    except (OSError, InputError) as exc:
        raise InputError(f"--status {options.status}: {exc}") from None
    gh = GitHub(options.repo)
    prs = find_pull_requests(gh, options.head_repo, options.head_branch, options.head_sha)
    if not prs:
        log(
            f"ci.notify: no open pull request of {options.repo} has head {options.head_repo}:{options.head_branch} at "
            f"{options.head_sha[:12]} (closed, or pushed again since: its newer run will comment); nothing posted"
        )
        return 0
    for pr in prs:
        plan = post_comment(gh, pr, body, options.bot_login)
        log(f"ci.notify: PR #{pr}: comment {plan.action}" + (f" (id {plan.comment_id})" if plan.comment_id else ""))
    if status is not None:
        # one of the same context on the commit replaces it
        gh.post(gh.repo_path(f"statuses/{options.head_sha}"), status)
        log(
            f"ci.notify: status {status['context']!r} on {options.head_sha[:12]}: "
            f"{status['state']}: {status['description']}"
        )
    return 0


def regression_issues(options, log: Log) -> int:
    try:
        changes = load_history_changes(load_json(options.changes), options.changes.name)
    except (OSError, InputError) as exc:
        raise InputError(f"--changes: {exc}") from None
    for line in changes.not_checked:
        log(f"ci.notify: not checked: {line}")
    context = Context(options.repo, options.run_url, options.server_url, changes.site_url, changes.results_commit)
    gh = GitHub(options.repo, limits=Limits(options.max_wait, write_interval_s=options.write_interval))
    try:
        record = file_issues(
            gh,
            changes,
            context,
            options.bot_login,
            lambda line: log(f"ci.notify: {line}"),
            max_new=options.max_new,
            dry_run=options.dry_run,
        )
    finally:
        if gh.waits:
            log(f"ci.notify: waited {sum(gh.waits):.0f} s on GitHub's rate limits ({len(gh.waits)} time(s))")
    if options.json is not None:
        write_json_atomic(options.json, record)
    if options.dry_run:
        print(json.dumps(record, indent=1))
    log(
        f"ci.notify: {len(changes.findings)} finding(s), {len(record['actions'])} issue(s) opened or changed"
        + (" (dry run: nothing written)" if options.dry_run else "")
    )
    return 0


COMMANDS = {
    "comment": comment,
    "post-comment": post_comment_command,
    "regression-issues": regression_issues,
    "judge": judge,
    "pr-files": pr_files,
}
