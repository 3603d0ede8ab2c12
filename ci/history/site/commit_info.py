"""Each commit's date and subject, for the kernel pages' date axis and hover (a reader asks "when" and "which change").

Why: docs/HISTORY.md, "site/commit_info.py".
"""

from __future__ import annotations

import datetime
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class CommitInfo:
    date: str  # UTC, "YYYY-MM-DD HH:MM:SS": what plotly reads as a date
    subject: str


def from_git(repo_root: Path, wanted: Iterable[str]) -> dict[str, CommitInfo]:
    """The wanted commits that ``repo_root``'s refs reach; {} without git or a repository."""
    wanted = set(wanted)
    try:
        listing = subprocess.run(
            ["git", "-C", str(repo_root), "log", "--all", "--format=%H%x00%ct%x00%s"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    out = {}
    for row in listing.splitlines():
        sha, _, rest = row.partition("\0")
        if sha in wanted:
            seconds, _, subject = rest.partition("\0")
            out[sha] = CommitInfo(iso(int(seconds)), subject[:80])
    return out


def from_summaries(summaries: dict[str, list[dict[str, Any]]]) -> dict[str, CommitInfo]:
    """Each commit's date as its results files say it (asv's ``date``, ms since the epoch); no subject."""
    dates: dict[str, float] = {}
    for files in summaries.values():
        for summary in files:
            date = summary.get("date")
            if isinstance(date, (int, float)):
                dates.setdefault(summary["commit"], date)
    return from_dates(dates)


def from_dates(dates: dict[str, float]) -> dict[str, CommitInfo]:
    """commit -> its results file's date (ms since the epoch; store.Store.dates) as CommitInfo, no subject."""
    return {commit: CommitInfo(iso(date / 1000), "") for commit, date in dates.items()}


def read(repo_root: Path | None, summaries: dict[str, list[dict[str, Any]]]) -> dict[str, CommitInfo]:
    """git's date and subject where it knows the commit, the results files' date elsewhere."""
    return with_git(repo_root, from_summaries(summaries))


def with_git(repo_root: Path | None, found: dict[str, CommitInfo]) -> dict[str, CommitInfo]:
    """``found`` with git's date and subject where ``repo_root``'s git knows the commit."""
    if repo_root is not None:
        found |= from_git(repo_root, found)
    return found


def axis_seconds(commit_axis: list[str], info: dict[str, CommitInfo]) -> dict[str, float]:
    """Each commit's place on a date axis (seconds since the epoch), in the history's order: its date, moved one second
    after the previous commit's where it is not later (a rebase gives many commits one committer date; without
    this they would be drawn on one spot). A commit without a date sits one second after the previous one."""
    out: dict[str, float] = {}
    previous = None
    for commit in commit_axis:
        known = info.get(commit)
        seconds = (
            datetime.datetime.fromisoformat(known.date).replace(tzinfo=datetime.timezone.utc).timestamp()
            if known
            else None
        )
        if seconds is None or (previous is not None and seconds <= previous):
            seconds = (previous + 1) if previous is not None else (seconds or 0.0)
        out[commit] = previous = seconds
    return out


def iso(seconds: float, ms: bool = False) -> str:
    """What plotly reads as a date (UTC); ``ms``: to the millisecond (an axis's range), else the second (a point's)."""
    text = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    return text[:-3] if ms else text[:-7]
