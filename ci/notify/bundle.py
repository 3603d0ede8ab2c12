"""pr-checks.yml's artifacts as actions/download-artifact lays them out (one folder per artifact;
tests/test_notify_comment.py checks the names on both sides) -> the comment's inputs: a missing file is None, one there
but wrong a Rejected."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ci.common.errors import InputError
from ci.notify.comment import Inputs
from ci.notify.records import budget_record, changes_record, jobs_record, pr_files_record, speed_record
from ci.notify.untrusted import Reader, load_json, read

# artifact (without "-attempt<N>") -> (file in it, reader, what the comment calls it)
SPEED_ARTIFACT, CHANGES_ARTIFACT, BUDGET_ARTIFACT = "speed-gate", "speed-changes", "budget-gate"
FILES = {
    SPEED_ARTIFACT: ("verdict.json", speed_record, "speed gate"),
    CHANGES_ARTIFACT: ("changes.json", changes_record, "code changes"),
    BUDGET_ARTIFACT: ("budget.json", budget_record, "register budget gate"),
}


def artifact_name(name: str, attempt: int) -> str:
    return f"{name}-attempt{attempt}"


def record_path(folder: Path, name: str, attempt: int) -> Path | None:
    """The newest record file of ``name`` up to ``attempt``: a re-run of the failed jobs keeps the others' artifacts
    under the attempt that made them."""
    file = FILES[name][0]
    for k in range(attempt, 0, -1):
        path = folder / artifact_name(name, k) / file
        if path.is_file() and not path.is_symlink():
            return path
    return None


def _read(folder: Path, name: str, attempt: int) -> Any:
    path = record_path(folder, name, attempt)
    _, parse, what = FILES[name]
    return None if path is None else read(path, parse, what)


def load_inputs(
    folder: Path, attempt: int, jobs: Path | None, judged: Path | None = None, pr_files: Path | None = None
) -> Inputs:
    """The records of one run attempt's artifacts in ``folder``, and the run's job list; with ``judged``, the base's
    verdict of the speed record (``python -m ci.notify judge``'s file: a missing one is an error, not a pass), and
    with ``pr_files`` the PR's gate files (``python -m ci.notify pr-files``)."""
    return Inputs(
        speed=_read(folder, SPEED_ARTIFACT, attempt),
        changes=_read(folder, CHANGES_ARTIFACT, attempt),
        budget=_read(folder, BUDGET_ARTIFACT, attempt),
        jobs=None if jobs is None else read(jobs, jobs_record, "jobs"),
        judged=read(judged, speed_record, "base's verdict") if judged is not None and judged.is_file() else None,
        judge_expected=judged is not None,
        pr_files=read(pr_files, pr_files_record, "PR files") if pr_files is not None and pr_files.is_file() else None,
    )


def artifact_url(listing: Path | None, run_url: str, name: str) -> str | None:
    """The page of artifact ``name`` of the run, from GitHub's list of the run's artifacts (its numeric id only)."""
    if listing is None:
        return None
    try:
        root = Reader(load_json(listing), listing.name)
        for artifact in root.get("artifacts").items():
            if artifact.get("name").text(optional=True) == name and not artifact.get("expired").boolean(optional=True):
                return f"{run_url}/artifacts/{artifact.get('id').integer()}"
    except (OSError, InputError):
        return None
    return None
