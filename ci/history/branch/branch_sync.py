"""The results branch <-> ``.asv/results``: what the branch adds to this checkout, and what this machine adds to it.

Why: docs/HISTORY.md, "branch/branch_sync.py".
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from asv_bench import records
from ci.common import gitutil
from ci.history.asv_results import folder as history_results
from ci.history.asv_results import result_points
from ci.history.asv_results.ledger import Ledger
from ci.history.asv_results.ledger import git_blob_id as ledger_blob_of
from ci.history.branch.results_branch import BRANCH, BranchError, ResultsBranch, merge_file
from ci.history.messages import HarnessError, log
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


def import_from_branch(
    branch: ResultsBranch,
    tip: str | None,
    results_dir: Path,
    machine: str | Sequence[str],
    ledger: Ledger | None = None,
) -> int:
    """Bring the branch's results into ``results_dir``: other machines' as they are (they own them), this
    machine's merged under the local copy; files of commits this clone lacks, or unreadable ones, are left out.

    Only files whose blob differs from what the ledger says the local file holds are read and written: a
    branch of 10,000 commits costs one listing and the new commits' files."""
    own_machines = (
        {machine} if isinstance(machine, str) else set(machine)
    )  # a run may write several (ci.history.measure.tracks)
    ledger = ledger or Ledger(results_dir)
    known: set[str] | None = None
    imported = skipped = 0
    scratch = Path(tempfile.mkdtemp(prefix="branch-files-"))  # where each new file is checked before it is used
    try:
        for path, blob in branch.tree(tip, "results/").items():
            imported, skipped, known = _import_one(
                branch, tip, results_dir, own_machines, ledger, scratch, path, blob, imported, skipped, known
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    ledger.save()
    if skipped:
        log(f"{BRANCH}: {skipped} files left out (above); the rest of the history is used")
    return imported


def _import_one(branch, tip, results_dir, own_machines, ledger, scratch, path, blob, imported, skipped, known):
    """One file of the branch into ``results_dir`` (see import_from_branch); returns the updated counts."""
    name = path.removeprefix("results/")
    if ledger.known_blob(name) == blob:
        return imported, skipped, known  # the local file is the branch's (or was merged from it and not changed since)
    relative = Path(name)
    target = results_dir / relative
    if relative == Path("benchmarks.json") and target.exists():
        return imported, skipped, known
    data = branch.blob(blob)
    known = known if known is not None else gitutil.all_commits(branch.repo)
    problem = _branch_file_problem(relative, data, known, scratch)
    if problem:
        log(f"{BRANCH}: not using {path}: {problem}")
        return imported, skipped + 1, known
    own = relative.parts[0] in own_machines
    if own and target.exists():
        data = merge_file(path, theirs=data, ours=target.read_bytes())
    as_branch = ledger_blob_of(data) == blob
    if not target.exists() or target.read_bytes() != data:
        # A kill here must not leave a half results file; a file that is the branch's own need not survive a power
        # cut (the branch keeps it), a merged one (points only this clone has) must.
        _write_kept(target, data, imported, tip, durable=not as_branch)
        imported += 1
    ledger.record(relative.as_posix(), blob if as_branch else ledger_blob_of(data))
    return imported, skipped, known


def _write_kept(target: Path, data: bytes, written: int, tip: str | None, durable: bool = True) -> None:
    try:
        write_bytes_atomic(target, data, durable=durable)
    except OSError as exc:
        raise HarnessError(
            f"cannot write {target} ({exc.strerror or exc}): kept: the {BRANCH} branch as it is "
            f"({tip[:8] if tip else 'empty'}: every recorded point is still there), {target.name} as it was before "
            "this write (files are replaced whole, never half-written)"
            + (f", and the {written} files already brought over from the branch" if written else "")
            + ". Free space (or fix the permissions) and run again: the next run brings the branch's points back here"
        ) from None


def _branch_file_problem(relative: Path, data: bytes, known: set[str], scratch: Path) -> str | None:
    probe = scratch / relative
    try:
        probe.parent.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(data)
        history_results.check_file(probe, scratch)
    except history_results.InvalidFile as exc:
        return f"unreadable ({exc})"
    finally:
        probe.unlink(missing_ok=True)
    if relative.suffix == ".json" and len(relative.parts) == 2 and relative.name != "machine.json":
        commit = json.loads(data)["commit_hash"]
        if commit not in known:
            return f"commit {commit[:8]} is not in this clone (git fetch it to publish it)"
    return None


def machine_files(
    results_dir: Path,
    machine: str,
    drop: tuple[str, ...] = (),
    ledger: Ledger | None = None,
    on_branch: dict[str, str] | None = None,
) -> dict[str, bytes]:
    """What this machine contributes to the branch: its folder, and the suite's benchmarks.json.

    With ``on_branch`` (path -> blob id of the branch's tip, ResultsBranch.tree) and a ledger, only the files whose
    content differs from the branch's are offered: the commit step then costs what changed, not the history.
    With ``drop`` (``--drop`` regexes of point ids), the points named are first removed from the local files
    too: else the next run would put them back on the branch; every file is offered then.
    """
    files = {}
    for path in sorted(history_results.machine_files(results_dir, machine)):
        if path.suffix in (".json", records.SUFFIX):
            key = f"results/{machine}/{path.name}"
            if (
                not drop
                and on_branch is not None
                and ledger is not None
                and on_branch.get(key) == ledger.blob(f"{machine}/{path.name}")
            ):
                continue
            data = path.read_bytes()
            if drop:
                data = _drop_locally(path, key, data, drop)
            files[key] = data
    benchmarks = results_dir / "benchmarks.json"
    if benchmarks.is_file() and (
        on_branch is None
        or ledger is None
        or on_branch.get("results/benchmarks.json") != ledger.blob("benchmarks.json")
    ):
        files["results/benchmarks.json"] = benchmarks.read_bytes()
    return files


def _drop_locally(path: Path, key: str, data: bytes, drop: tuple[str, ...]) -> bytes:
    kept = merge_file(key, None, data, drop)
    if kept != data:
        before = set(_point_ids(key, data))
        gone = sorted(before - set(_point_ids(key, kept)))
        if gone:
            log(
                f"--drop: removing {len(gone)} points of {path.name}: "
                f"{', '.join(gone[:5])}{' ...' if len(gone) > 5 else ''}"
            )
        _write_kept(path, kept, 0, None)
    return kept


def _point_ids(key: str, data: bytes) -> list[str]:
    document = json.loads(data)
    prefix = result_points.point_prefix(key)
    if isinstance(document.get("records"), dict):
        return [prefix + k for k in document["records"]]
    return [prefix + k for k, v in result_points.values(document).items() if v is not None]
