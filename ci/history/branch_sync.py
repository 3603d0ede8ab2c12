"""The results branch <-> ``.asv/results``: what the branch adds to this checkout, and what this machine adds to it.

Other machines' files are taken as they are (they own them); this machine's are
merged under the local copy (ci.history.results_branch.merge_file). A file the
branch holds for a commit this clone lacks, or an unreadable one, is left out
with a message: the rest of the history is still used.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Sequence

from asv_bench import records
from ci.common import gitutil
from ci.history import results as history_results
from ci.history.messages import HarnessError, log
from ci.history.results_branch import BRANCH, BranchError, ResultsBranch, merge_file
from harness.report import write_bytes_atomic


def fetch_tip(branch: ResultsBranch, push: bool, problems: list[str]) -> str | None:
    """The branch's newest tip: the remote's; without a push, the local branch when the remote cannot be read."""
    try:
        return branch.fetch()
    except BranchError as exc:
        if push:
            raise HarnessError(str(exc)) from None
        log(f"warning: {exc}; using the local {BRANCH} branch")
        return branch.local_tip()


def import_from_branch(branch: ResultsBranch, tip: str | None, results_dir: Path, machine: str | Sequence[str]) -> int:
    """Bring the branch's results into ``results_dir``: other machines' as they are (they own them), this
    machine's merged under the local copy; files of commits this clone lacks, or unreadable ones, are left out."""
    own_machines = {machine} if isinstance(machine, str) else set(machine)  # a run may write several (ci.history.tracks)
    known = gitutil.all_commits(branch.repo)
    imported = skipped = 0
    for path, data in branch.files(tip, "results/").items():
        relative = Path(path).relative_to("results")
        target = results_dir / relative
        if relative == Path("benchmarks.json") and target.exists():
            continue
        problem = _branch_file_problem(relative, data, known)
        if problem:
            log(f"{BRANCH}: not using {path}: {problem}")
            skipped += 1
            continue
        own = relative.parts[0] in own_machines
        if own and target.exists():
            data = merge_file(path, theirs=data, ours=target.read_bytes())
        if not target.exists() or target.read_bytes() != data:
            write_bytes_atomic(target, data)  # a kill here must not leave a half results file
            imported += 1
    if skipped:
        log(f"{BRANCH}: {skipped} files left out (above); the rest of the history is used")
    return imported


def _branch_file_problem(relative: Path, data: bytes, known: set[str]) -> str | None:
    scratch = Path(tempfile.mkdtemp(prefix="branch-file-"))
    try:
        probe = scratch / relative
        probe.parent.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(data)
        history_results.check_file(probe, scratch)
    except history_results.InvalidFile as exc:
        return f"unreadable ({exc})"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if relative.suffix == ".json" and len(relative.parts) == 2 and relative.name != "machine.json":
        commit = json.loads(data)["commit_hash"]
        if commit not in known:
            return f"commit {commit[:8]} is not in this clone (git fetch it to publish it)"
    return None


def machine_files(results_dir: Path, machine: str) -> dict[str, bytes]:
    """What this machine contributes to the branch: its folder, and the suite's benchmarks.json."""
    files = {}
    for path in sorted((results_dir / machine).glob("*")):
        if path.is_file() and path.suffix in (".json", records.SUFFIX):
            files[f"results/{machine}/{path.name}"] = path.read_bytes()
    if (results_dir / "benchmarks.json").is_file():
        files["results/benchmarks.json"] = (results_dir / "benchmarks.json").read_bytes()
    return files
