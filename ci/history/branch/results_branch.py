"""The asv history on its own branch (``asv-results``) and this checkout's ``.asv/results``: the one way between them.

A runner writes only its own machine's files; races are retried, files merged per point, a lost point refused
(:class:`ShrinkError`). Layout and reasons: docs/HISTORY.md, "branch/results_branch.py".
"""

from __future__ import annotations

import io
import json
import os
import random
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeGuard

import git
from gitdb import IStream

from asv_bench import records
from ci.common import gitutil
from ci.common.errors import HarnessError
from ci.history.asv_results import folder as history_results
from ci.history.asv_results import result_points
from ci.history.asv_results.ledger import Ledger
from ci.history.asv_results.ledger import git_blob_id as ledger_blob_of
from ci.history.messages import log
from harness.report import write_bytes_atomic

BRANCH = "asv-results"
# A push that lost a race: the remote moved between our fetch and our push.
_RETRYABLE = re.compile(
    r"non-fast-forward|fetch first|\[rejected\]|cannot lock ref|failed to update ref|stale info|incorrect old value",
    re.I,
)


class BranchError(HarnessError, RuntimeError):
    """The results branch could not be read or written; the message says what git said."""


class ShrinkError(BranchError):
    """A commit would remove recorded points from the branch that no ``--drop`` names; nothing was committed."""


class ResultsBranch:
    def __init__(self, checkout: Path, remote: str | None, log: Callable[[str], None] = print):
        try:
            self.repo = git.Repo(checkout)
        except git.exc.InvalidGitRepositoryError:
            raise BranchError(f"{checkout} is not a git repository") from None
        self.remote, self.branch, self.log = remote, BRANCH, log
        if self.repo.head.is_valid() and not self.repo.head.is_detached and self.repo.active_branch.name == BRANCH:
            raise BranchError(
                f"the checkout has {BRANCH} checked out; the results branch is written without a work tree"
            )

    def check_remote(self) -> None:
        """Fail before the work when the remote is missing or unreachable (ls-remote)."""
        if self.remote is None:
            return
        if self.remote not in [r.name for r in self.repo.remotes]:
            raise BranchError(
                f"no git remote {self.remote!r} in this checkout (git remote -v lists "
                f"{[r.name for r in self.repo.remotes]})"
            )
        try:
            self.repo.git.ls_remote("--heads", self.remote, self.branch)
        except git.GitCommandError as exc:
            raise BranchError(f"cannot reach remote {self.remote!r}: {exc.stderr.strip()}") from None

    def fetch(self) -> str | None:
        """The remote branch's tip (fetched into refs/remotes/<remote>/<branch>), or None if it has none yet."""
        if self.remote is None:
            return self.local_tip()
        try:
            listed = str(self.repo.git.ls_remote("--heads", self.remote, self.branch)).split()
            if not listed:
                return None
            self.repo.git.fetch("--quiet", self.remote, f"+refs/heads/{self.branch}:{self._tracking_ref}")
        except git.GitCommandError as exc:
            raise BranchError(f"git fetch {self.remote} {self.branch}: {exc.stderr.strip()}") from None
        return self.repo.git.rev_parse(self._tracking_ref)

    def fetch_or_local(self, push: bool) -> str | None:
        """The remote's tip; without a push, the local branch when the remote cannot be read."""
        try:
            return self.fetch()
        except BranchError as exc:
            if push:
                raise HarnessError(str(exc)) from None
            self.log(f"warning: {exc}; using the local {self.branch} branch")
            return self.local_tip()

    @property
    def _tracking_ref(self) -> str:
        return f"refs/remotes/{self.remote}/{self.branch}"

    def _rev(self, ref: str) -> str | None:
        try:
            return self.repo.git.rev_parse("--verify", "--quiet", ref) or None
        except git.GitCommandError:
            return None

    def tracking_tip(self, remote: str) -> str | None:
        """``refs/remotes/<remote>/<branch>`` as the last fetch left it, or None."""
        return self._rev(f"refs/remotes/{remote}/{self.branch}")

    def local_tip(self) -> str | None:
        return self._rev(f"refs/heads/{self.branch}")

    def tree(self, commit: str | None, under: str = "") -> dict[str, str]:
        """path -> blob id of every file under ``under`` in ``commit``'s tree (one ``git ls-tree``, no content read)."""
        if commit is None:
            return {}
        out = {}
        listing = self.repo.git.ls_tree("-r", "-z", "--full-tree", commit, *([under] if under else []))
        for entry in filter(None, listing.split("\0")):
            meta, _, path = entry.partition("\t")
            _, kind, sha = meta.split()
            if kind == "blob":
                out[path] = sha
        return out

    def blob(self, sha: str) -> bytes:
        """A blob's content, through git's long-running ``cat-file --batch`` (GitPython's object database)."""
        return self.repo.odb.stream(bytes.fromhex(sha)).read()

    def commit(self, files: dict[str, bytes], message: str, base: str | None, drop: tuple[str, ...] = ()) -> str | None:
        """A commit on ``base`` adding/merging ``files`` point by point; None when it would change nothing.

        Raises :class:`ShrinkError` when a point of ``base`` would lose its value and no ``drop`` pattern names it.
        """
        lost: list[str] = []
        try:
            with tempfile.TemporaryDirectory() as tmp:
                env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
                self.repo.git.read_tree(base if base is not None else "--empty", env=env)
                # The base's blob ids listed once: each file's old content is then read by id, never by walking the
                # tree (a machine folder holds a file per commit: walking it per file grew with the square of the
                # history).
                theirs_ids = self.tree(base)
                index_lines = []
                for path, data in sorted(files.items()):
                    theirs = self.blob(theirs_ids[path]) if path in theirs_ids else None
                    merged = merge_file(path, theirs, data, drop)
                    lost += _lost(path, theirs, merged, drop)
                    if lost:
                        continue
                    sha = self.repo.odb.store(IStream("blob", len(merged), io.BytesIO(merged))).hexsha.decode()
                    index_lines.append(f"100644 {sha}\t{path}\n")
                if lost:
                    raise ShrinkError(_shrink_message(lost, base, self.branch))
                if index_lines:  # one git process for every file of the commit
                    listing = Path(tmp) / "index-info"
                    listing.write_text("".join(index_lines))
                    with open(listing, "rb") as stdin:
                        self.repo.git.update_index("--add", "--index-info", istream=stdin, env=env)
                tree = self.repo.git.write_tree(env=env)
            if base is not None and self.repo.commit(base).tree.hexsha == tree:
                return None
            parents = ["-p", base] if base is not None else []
            return self.repo.git.commit_tree(tree, *parents, "-m", message, env=self._identity())
        except (OSError, git.GitCommandError) as exc:
            # A full disk or an unwritable .git: the objects were not written, the branch ref was never moved.
            if isinstance(exc, git.GitCommandError):  # GitPython's "stderr: 'fatal: ...'" as git's own words
                detail = exc.stderr.strip().removeprefix("stderr:").strip().strip("'").strip()
            else:
                detail = exc.strerror or str(exc)
            kept = f"{base[:8]}" if base else "no commit yet"
            raise BranchError(
                f"cannot write the {self.branch} commit ({detail}); the branch is left as it was ({kept}), every "
                "recorded point is still on it"
            ) from None

    def _identity(self) -> dict[str, str]:
        """git's configured author, or a stated one where none is configured (a fresh machine)."""
        if os.environ.get("GIT_COMMITTER_EMAIL") and os.environ.get("GIT_AUTHOR_EMAIL"):
            return {}
        try:
            self.repo.git.config("user.email")
            return {}
        except git.GitCommandError:
            who = {"NAME": "mxfp4 main job", "EMAIL": "main-job@localhost"}
            return {f"GIT_{role}_{k}": v for role in ("AUTHOR", "COMMITTER") for k, v in who.items()}

    def _newest_known_tip(self) -> str | None:
        """Without a push: the local branch, or the last fetched remote tip when the local one is behind it."""
        local = self.local_tip()
        fetched = None if self.remote is None else self._rev(self._tracking_ref)
        if fetched is not None and (local is None or self.repo.is_ancestor(local, fetched)):  # type: ignore[arg-type]
            return fetched
        return local

    def _set_local(self, sha: str) -> None:
        self.repo.git.update_ref(f"refs/heads/{self.branch}", sha)

    def commit_and_push(
        self,
        files: dict[str, bytes],
        message: str,
        *,
        push: bool,
        attempts: int = 6,
        before_push: Callable[[], None] | None = None,
        drop: tuple[str, ...] = (),
    ) -> str | None:
        """Commit ``files`` on the newest tip; with ``push``, push it, rebuilding on a rejection. Returns the tip.

        ``drop``: regexes of point ids (ci.history.asv_results.result_points) that may leave the branch; any other loss
        is a ShrinkError.
        """
        for attempt in range(1, attempts + 1):
            base = self.fetch() if push else self._newest_known_tip()
            sha = self.commit(files, message, base, drop)
            if sha is None:
                self.log(f"{self.branch}: nothing new to commit (the branch already holds these results)")
                if base is not None:
                    self._set_local(base)
                return base
            if not push:
                self._set_local(sha)
                return sha
            if before_push is not None:
                before_push()  # tests: let another runner push in between
            try:
                self.repo.git.push("--quiet", self.remote, f"{sha}:refs/heads/{self.branch}")
            except git.GitCommandError as exc:
                if not _RETRYABLE.search(exc.stderr or ""):
                    raise BranchError(f"git push {self.remote} {self.branch}: {exc.stderr.strip()}") from None
                delay = min(30.0, 0.5 * 2**attempt) * random.uniform(0.5, 1.0)
                self.log(
                    f"{self.branch}: another runner pushed first (attempt {attempt}/{attempts}); fetching and "
                    f"retrying in {delay:.1f} s"
                )
                time.sleep(delay)
                continue
            self._set_local(sha)
            self.repo.git.update_ref(self._tracking_ref, sha)
            return sha
        raise BranchError(f"git push {self.remote} {self.branch}: still rejected after {attempts} attempts")


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
    # A run may write several machines (ci.history.measure.tracks).
    own_machines = {machine} if isinstance(machine, str) else set(machine)
    ledger = ledger or Ledger(results_dir)
    known: set[str] | None = None
    imported = skipped = 0
    scratch = Path(tempfile.mkdtemp(prefix="branch-files-"))  # where each new file is checked before it is used
    try:
        for path, blob in branch.tree(tip, "results/").items():
            name = path.removeprefix("results/")
            relative, target = Path(name), results_dir / name
            if ledger.known_blob(name) == blob or (relative == Path("benchmarks.json") and target.exists()):
                continue  # the local file is the branch's (or was merged from it and not changed since)
            data = branch.blob(blob)
            known = known if known is not None else gitutil.all_commits(branch.repo)
            problem = _branch_file_problem(relative, data, known, scratch)
            if problem:
                log(f"{BRANCH}: not using {path}: {problem}")
                skipped += 1
                continue
            if relative.parts[0] in own_machines and target.exists():
                data = merge_file(path, theirs=data, ours=target.read_bytes())
            as_branch = ledger_blob_of(data) == blob
            if not target.exists() or target.read_bytes() != data:
                # A kill here must not leave a half results file; a file that is the branch's own need not survive a
                # power cut (the branch keeps it), a merged one (points only this clone has) must.
                _write_kept(target, data, imported, tip, durable=not as_branch)
                imported += 1
            ledger.record(name, blob if as_branch else ledger_blob_of(data))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    ledger.save()
    if skipped:
        log(f"{BRANCH}: {skipped} files left out (above); the rest of the history is used")
    return imported


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

    def unchanged(name: str) -> bool:
        return on_branch is not None and ledger is not None and on_branch.get(f"results/{name}") == ledger.blob(name)

    files = {}
    for path in sorted(history_results.machine_files(results_dir, machine)):
        if path.suffix in (".json", records.SUFFIX):
            key = f"results/{machine}/{path.name}"
            if not drop and unchanged(f"{machine}/{path.name}"):
                continue
            data = path.read_bytes()
            if drop:
                data = _drop_locally(path, key, data, drop)
            files[key] = data
    benchmarks = results_dir / "benchmarks.json"
    if benchmarks.is_file() and not unchanged("benchmarks.json"):
        files["results/benchmarks.json"] = benchmarks.read_bytes()
    return files


def _drop_locally(path: Path, key: str, data: bytes, drop: tuple[str, ...]) -> bytes:
    kept = merge_file(key, None, data, drop)
    if kept != data:
        document = json.loads(data)
        dropper = result_points.drop_records if isinstance(document.get("records"), dict) else result_points.drop_points
        gone = sorted(dropper(document, result_points.point_prefix(key), drop)[1])
        if gone:
            log(
                f"--drop: removing {len(gone)} points of {path.name}: "
                f"{', '.join(gone[:5])}{' ...' if len(gone) > 5 else ''}"
            )
        _write_kept(path, kept, 0, None)
    return kept


def merge_file(path: str, theirs: bytes | None, ours: bytes, drop: tuple[str, ...] = ()) -> bytes:
    """Ours, except asv results and records files: merged per measured point (ci.history.asv_results.result_points),
    then without the points a ``drop`` pattern names."""
    if theirs == ours and not drop:
        return ours
    try:
        new = json.loads(ours)
        old = json.loads(theirs) if theirs is not None else None
    except ValueError:
        return ours  # theirs is unreadable (ours was validated before the commit): nothing readable to keep
    prefix = result_points.point_prefix(path)
    if path.endswith(".records") and isinstance(new.get("records"), dict):
        merged = (
            new
            if not isinstance(old, dict) or not isinstance(old.get("records"), dict)
            else {**old, **new, "records": {**old["records"], **new["records"]}}
        )
        merged = result_points.drop_records(merged, prefix, drop)[0]
    elif path.endswith(".json") and isinstance(new.get("results"), dict) and "result_columns" in new:
        merged = new if not _is_results(old) else result_points.merge_documents(old, new)
        merged = result_points.drop_points(merged, prefix, drop)[0]
    else:
        return ours
    if merged == new and theirs is None:
        return ours
    return result_points.dumps(merged)


def _is_results(data: Any) -> TypeGuard[dict[str, Any]]:
    return (
        isinstance(data, dict)
        and isinstance(data.get("results"), dict)
        and isinstance(data.get("result_columns"), list)
    )


def _lost(path: str, theirs: bytes | None, merged: bytes, drop: tuple[str, ...]) -> list[str]:
    """The points of ``theirs`` (a results file of the branch) without a value in ``merged`` that no ``drop`` names."""
    if theirs is None or not path.endswith(".json"):
        return []
    try:
        old, new = json.loads(theirs), json.loads(merged)
    except ValueError:
        return []  # an unreadable file on the branch holds no point anyone can read
    if not _is_results(old) or not _is_results(new):
        return []
    patterns = [re.compile(p) for p in drop]
    return [
        p
        for p in result_points.lost_points(old, new, result_points.point_prefix(path))
        if not any(r.search(p) for r in patterns)
    ]


def _shrink_message(lost: list[str], base: str | None, branch: str) -> str:
    shown = ", ".join(lost[:8]) + (f" and {len(lost) - 8} more" if len(lost) > 8 else "")
    return (
        f"this commit would remove {len(lost)} recorded points from {branch} ({shown}); nothing was committed, "
        f"the branch is left at {base[:8] if base else '?'}. If they should go, name them with --drop PATTERN "
        "(a regex searched in '<machine>/<commit8>-<env>/<benchmark>(<params>)')"
    )
