"""Which of a pull request's changed files (GitHub's list) are the speed gate itself: the base judges rounds that the
PR's own code measured. Why GitHub's list, and its limit: docs/PR_COMMENT.md."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# path prefix -> what it is to the gate. The thresholds and the noise model are under ci/ and named on their own.
GATE_PREFIXES = {
    "ci/speed_thresholds": "the speed thresholds (policy)",
    "ci/speed_noise": "a runner's noise model",
    "ci/": "the gates' code and data",
    "harness/": "the measuring code (timing, statistics)",
    ".github/workflows/": "the workflows",
}
GITHUB_FILES_LIMIT = 3000  # GitHub's "list pull request files" returns at most this many
SCHEMA = "mxfp4-pr-files/1"


def gate_files(files: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """The entries of GitHub's file list that touch the gate (path, what it is, GitHub's status); a rename counts by
    either name, the most specific prefix first."""
    found = []
    for f in files:
        names = [n for n in (f.get("filename"), f.get("previous_filename")) if isinstance(n, str)]
        what = next((what for name in names for prefix, what in GATE_PREFIXES.items() if name.startswith(prefix)), None)
        if what is not None:
            found.append({"path": names[0], "what": what, "status": str(f.get("status") or "?")})
    return found


def files_record(
    pull_requests: Sequence[int], files: Sequence[Mapping[str, Any]], truncated: bool = False, error: str | None = None
) -> dict[str, Any]:
    """What ``python -m ci.notify pr-files`` writes: the PR(s), how many files GitHub listed, and those of the gate."""
    return {
        "schema": SCHEMA,
        "pull_requests": list(pull_requests),
        "files_listed": len(files),
        "truncated": truncated,
        "gate_files": gate_files(files),
        "error": error,
    }
