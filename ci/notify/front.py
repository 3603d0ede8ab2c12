"""Where the gates' verdicts are told: the PR comment and the regression issues (the front of ``python -m ci.notify``).

    python -m ci.notify judge --artifacts DIR --attempt N --out judged.json     # the base's verdict of the PR's rounds
    python -m ci.notify comment --artifacts DIR --attempt N --run-url URL --out comment.md
    python -m ci.notify regression-issues --github-repo OWNER/NAME --changes changes.json --run-url URL [--dry-run]

``judge`` replays the speed record with this checkout's gate; ``comment`` renders (nothing run, no
network); ``pr-files``, ``post-comment`` and ``regression-issues`` use ``gh api`` with ``GH_TOKEN``.
Exit: 0 done (also when no open PR has that head any more), 2 a bad option, an unusable file or a
failed GitHub call; no gate here, so no exit 1. Every option: ``--help`` and docs/PR_COMMENT.md.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ci.common.command import Command
from ci.common.options import OptionsError, output_value
from ci.notify.post import BOT_LOGIN
from ci.notify.untrusted import SAFE_URL

_REPO = re.compile(r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$")
_SHA = re.compile(r"^[0-9a-f]{40}$")
_URL = SAFE_URL
# --github-repo, not --repo: every other front's --repo is a directory (ci.common.options.add_repo).
GITHUB_REPO = "this repository on GitHub (github.repository)"
# Any branch name git allows (it is only ever an argument and a URL-encoded query value), but on one line.
_BRANCH = re.compile(r"^[^\x00-\x1f\x7f]{1,255}$")


@dataclass(frozen=True)
class Options:
    command: str  # comment | post-comment | regression-issues
    out: Path | None = None
    artifacts: Path | None = None
    attempt: int = 1
    run_url: str | None = None
    head_sha: str | None = None
    jobs: Path | None = None
    artifact_list: Path | None = None
    repo: str | None = None
    head_repo: str | None = None
    head_branch: str | None = None
    body: Path | None = None
    judged: Path | None = None  # comment: the judge's file (given: a missing file is an error, not the PR's verdict)
    pr_files: Path | None = None
    status_out: Path | None = None
    status: Path | None = None  # post-comment: the status comment --status-out wrote
    changes: Path | None = None
    server_url: str = "https://github.com"
    bot_login: str = BOT_LOGIN
    dry_run: bool = False
    max_new: int = 10
    max_wait: float = 600.0
    write_interval: float = 1.0
    json: Path | None = None


def _arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    comment = sub.add_parser("comment", help="render the PR comment from pr-checks' artifacts (Markdown file)")
    judge = sub.add_parser(
        "judge", help="decide the speed record's rounds with this checkout's gate (--replay --judge)"
    )
    for p in (comment, judge):
        p.add_argument(
            "--artifacts", type=Path, required=True, metavar="DIR", help="the downloaded artifacts, one folder each"
        )
        p.add_argument("--attempt", type=int, default=1, help="the pr-checks run attempt to read (default 1)")
    comment.add_argument("--run-url", required=True, metavar="URL", help="the pr-checks run's page (from the event)")
    comment.add_argument("--head-sha", metavar="SHA", help="the run's head commit (from the event)")
    comment.add_argument("--jobs", type=Path, metavar="PATH", help="GitHub's job list of the run attempt (JSON)")
    comment.add_argument(
        "--artifact-list", type=Path, metavar="PATH", help="GitHub's artifact list of the run (JSON): the plot link"
    )
    comment.add_argument(
        "--judged",
        type=Path,
        metavar="PATH",
        help="the base's verdict of the speed record (`judge --out`): the speed verdict shown; given "
        "and missing, the speed area is ERROR (never the PR's own verdict in its place)",
    )
    comment.add_argument(
        "--pr-files", type=Path, metavar="PATH", help="`pr-files --out`: the PR's files that are the gate"
    )
    comment.add_argument(
        "--status-out", type=Path, metavar="PATH", help="also write the commit status of the speed verdict (JSON)"
    )
    comment.add_argument("--out", type=Path, required=True, metavar="PATH", help="write the Markdown here")
    judge.add_argument(
        "--out", type=Path, required=True, metavar="PATH", help="the base's verdict (JSON, without the rounds)"
    )
    files = sub.add_parser("pr-files", help="list the PR's changed files that are the gate itself (gh api)")
    files.add_argument("--out", type=Path, required=True, metavar="PATH", help="write the list here (JSON)")
    post = sub.add_parser("post-comment", help="create or edit the PR's one comment (gh api)")
    for p in (files, post):
        p.add_argument(
            "--head-repo", required=True, metavar="OWNER/NAME", help="the run's head repository (a fork's too)"
        )
        p.add_argument("--head-branch", required=True, metavar="BRANCH")
        p.add_argument("--head-sha", required=True, metavar="SHA")
    post.add_argument("--body", type=Path, required=True, metavar="PATH", help="the Markdown that `comment` wrote")
    post.add_argument(
        "--status",
        type=Path,
        metavar="PATH",
        help="the commit status `comment --status-out` wrote: set on --head-sha (POST statuses/SHA)",
    )
    files.add_argument("--github-repo", dest="repo", required=True, metavar="OWNER/NAME", help=GITHUB_REPO)
    issues = sub.add_parser("regression-issues", help="open, edit or close one issue per regression on main (gh api)")
    issues.add_argument(
        "--changes", type=Path, required=True, metavar="PATH", help="the history-changes artifact's changes.json"
    )
    issues.add_argument("--run-url", required=True, metavar="URL", help="the history run's page (from the event)")
    issues.add_argument(
        "--dry-run", action="store_true", help="print what would be opened, edited or closed (JSON); change nothing"
    )
    issues.add_argument(
        "--max-new",
        type=int,
        default=10,
        metavar="N",
        help="issues opened per run at most, a roll-up issue included (default 10)",
    )
    issues.add_argument(
        "--max-wait",
        type=float,
        default=600.0,
        metavar="S",
        help="seconds this run may wait on GitHub's rate limits in all; then exit 2, a re-run resumes (default 600)",
    )
    issues.add_argument(
        "--write-interval",
        type=float,
        default=1.0,
        metavar="S",
        help="seconds between two writes (GitHub asks for 1; default 1)",
    )
    issues.add_argument(
        "--json",
        type=Path,
        metavar="PATH",
        help="write every regression issue after this run (schema mxfp4-regression-issues/2)",
    )
    for p in (post, issues):
        p.add_argument("--github-repo", dest="repo", required=True, metavar="OWNER/NAME", help=GITHUB_REPO)
        p.add_argument("--server-url", default="https://github.com", metavar="URL", help="github.server_url (links)")
        p.add_argument(
            "--bot-login",
            default=BOT_LOGIN,
            metavar="LOGIN",
            help=f"whose comments and issues are ours (default {BOT_LOGIN})",
        )


def options_from(args: argparse.Namespace) -> Options:
    values = {k: v for k, v in vars(args).items() if k in Options.__dataclass_fields__}
    options = Options(**values)
    for flag, value, pattern, what in (
        ("--github-repo", options.repo, _REPO, "OWNER/NAME"),
        ("--head-repo", options.head_repo, _REPO, "OWNER/NAME"),
        ("--head-sha", options.head_sha, _SHA, "a full commit sha (40 hex digits)"),
        ("--run-url", options.run_url, _URL, "an https:// address"),
        ("--server-url", options.server_url, _URL, "an https:// address"),
        ("--head-branch", options.head_branch, _BRANCH, "a branch name"),
    ):
        if value is not None and not pattern.match(value):
            raise OptionsError(f"{flag} {value[:100]!r}: expected {what}")
    if options.attempt < 1:
        raise OptionsError(f"--attempt must be >= 1 (got {options.attempt})")
    if options.max_new < 2:
        raise OptionsError(f"--max-new must be >= 2: one issue may be the roll-up (got {options.max_new})")
    for flag, seconds in (("--max-wait", options.max_wait), ("--write-interval", options.write_interval)):
        if not 0 <= seconds <= 3600:
            raise OptionsError(f"{flag} must be between 0 and 3600 seconds (got {seconds})")
    # No speed-gate artifact when the GPU job never ran: nothing for the judge to judge, not an error.
    if options.artifacts is not None and not options.artifacts.is_dir() and options.command != "judge":
        raise OptionsError(f"--artifacts {options.artifacts}: no such folder")
    for flag in ("--jobs", "--artifact-list", "--body", "--changes", "--status"):
        path = getattr(options, flag[2:].replace("-", "_"))
        if path is not None and not path.is_file():
            raise OptionsError(f"{flag} {path}: no such file")
    # Outputs as every front checks them: writable before any GitHub call, and a folder that is not there is an
    # error, not made (a typo must not create folders; the workflows make theirs first).
    for flag in ("--out", "--status-out", "--json"):
        output_value(getattr(options, flag[2:].replace("-", "_")), flag)
    return options


def run(options: Options, log=lambda line: print(line, file=sys.stderr, flush=True)) -> int:
    from ci.notify.commands import COMMANDS

    return COMMANDS[options.command](options, log)


COMMAND = Command(
    "python -m ci.notify",
    __doc__ or "",
    _arguments,
    options_from,
    run,
    {0: "done (also when no open PR has that head any more: nothing to post to, said on stderr)"},
    error_fields=None,
)  # regression-issues --json is the issues' state the site reads: never an error


def main(argv: Sequence[str] | None = None) -> int:
    return COMMAND.main(argv)
