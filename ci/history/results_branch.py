"""The asv history on its own branch (``asv-results``), written with GitPython, safe when runners race.

Layout of the branch (a tree of files, no source code)::

    results/benchmarks.json                      the suite, as the last writer discovered it
    results/<machine>/machine.json               one folder per machine (an MI355X, an H200, ...)
    results/<machine>/<commit8>-<env>.json       asv's results of one commit
    results/<machine>/<commit8>-<env>.records    the per-measurement records beside them

A runner only ever writes files of its own machine (and benchmarks.json), so two
runners' commits are a union: :meth:`ResultsBranch.commit_and_push` builds the commit
on the remote's newest tip (in a private index: the checkout's work tree, index
and HEAD are never touched), pushes without force, and on a rejected push
(another runner pushed first) fetches and builds it again on the new tip, up to
a bound. Where a file of this machine already exists on the branch with other
content (two runs of one machine raced), results are merged per benchmark, this
run's values winning; nothing of another machine is ever replaced.

The credentials are git's own (the workflow's credential helper); nothing here reads a token.
"""

from __future__ import annotations

import io
import json
import os
import random
import re
import tempfile
import time
from pathlib import Path
from typing import Callable

import git
from gitdb import IStream

BRANCH = "asv-results"
# A push that lost a race: the remote moved between our fetch and our push.
_RETRYABLE = re.compile(r"non-fast-forward|fetch first|\[rejected\]|cannot lock ref|failed to update ref|stale info|incorrect old value", re.I)


class BranchError(RuntimeError):
    """The results branch could not be read or written; the message says what git said."""


class ResultsBranch:
    def __init__(self, checkout: Path, remote: str | None, branch: str = BRANCH, log: Callable[[str], None] = print):
        try:
            self.repo = git.Repo(checkout)
        except git.exc.InvalidGitRepositoryError:
            raise BranchError(f"{checkout} is not a git repository") from None
        self.remote = remote
        self.branch = branch
        self.log = log
        if self.repo.head.is_valid() and not self.repo.head.is_detached and self.repo.active_branch.name == branch:
            raise BranchError(f"the checkout has {branch} checked out; the results branch is written without a work tree")

    # -- reading ----------------------------------------------------------------

    def check_remote(self) -> None:
        """Fail before the work when the remote is missing or unreachable (ls-remote)."""
        if self.remote is None:
            return
        if self.remote not in [r.name for r in self.repo.remotes]:
            raise BranchError(f"no git remote {self.remote!r} in this checkout (git remote -v lists {[r.name for r in self.repo.remotes]})")
        try:
            self.repo.git.ls_remote("--heads", self.remote, self.branch)
        except git.GitCommandError as exc:
            raise BranchError(f"cannot reach remote {self.remote!r}: {exc.stderr.strip()}") from None

    def fetch(self) -> str | None:
        """The remote branch's tip (fetched into refs/remotes/<remote>/<branch>), or None if it has none yet."""
        if self.remote is None:
            return self.local_tip()
        try:
            listed = self.repo.git.ls_remote("--heads", self.remote, self.branch).split()
            if not listed:
                return None
            self.repo.git.fetch("--quiet", self.remote, f"+refs/heads/{self.branch}:{self._tracking_ref}")
        except git.GitCommandError as exc:
            raise BranchError(f"git fetch {self.remote} {self.branch}: {exc.stderr.strip()}") from None
        return self.repo.git.rev_parse(self._tracking_ref)

    @property
    def _tracking_ref(self) -> str:
        return f"refs/remotes/{self.remote}/{self.branch}"

    def local_tip(self) -> str | None:
        try:
            return self.repo.git.rev_parse("--verify", "--quiet", f"refs/heads/{self.branch}")
        except git.GitCommandError:
            return None

    def files(self, commit: str | None, under: str = "") -> dict[str, bytes]:
        """path -> content of every file under ``under`` in ``commit``'s tree."""
        if commit is None:
            return {}
        tree = self.repo.commit(commit).tree
        return {
            item.path: item.data_stream.read()
            for item in tree.traverse()
            if item.type == "blob" and item.path.startswith(under)
        }

    # -- writing ----------------------------------------------------------------

    def commit(self, files: dict[str, bytes], message: str, base: str | None) -> str | None:
        """A commit on ``base`` adding/merging ``files``; None when it would change nothing."""
        with tempfile.TemporaryDirectory() as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            if base is not None:
                self.repo.git.read_tree(base, env=env)
            else:
                self.repo.git.read_tree("--empty", env=env)
            for path, data in sorted(files.items()):
                merged = merge_file(path, self._blob(base, path), data)
                sha = self.repo.odb.store(IStream("blob", len(merged), io.BytesIO(merged))).hexsha.decode()
                self.repo.git.update_index("--add", "--cacheinfo", f"100644,{sha},{path}", env=env)
            tree = self.repo.git.write_tree(env=env)
        if base is not None and self.repo.commit(base).tree.hexsha == tree:
            return None
        parents = ["-p", base] if base is not None else []
        return self.repo.git.commit_tree(tree, *parents, "-m", message, env=self._identity())

    def _blob(self, commit: str | None, path: str) -> bytes | None:
        if commit is None:
            return None
        try:
            return (self.repo.commit(commit).tree / path).data_stream.read()
        except KeyError:
            return None

    def _identity(self) -> dict[str, str]:
        """git's configured author, or a stated one where none is configured (a fresh machine)."""
        if os.environ.get("GIT_COMMITTER_EMAIL") and os.environ.get("GIT_AUTHOR_EMAIL"):
            return {}
        try:
            self.repo.git.config("user.email")
            return {}
        except git.GitCommandError:
            name = "mxfp4 main job"
            email = "main-job@localhost"
            return {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email}

    def _newest_known_tip(self) -> str | None:
        """Without a push: the local branch, or the last fetched remote tip when the local one is behind it."""
        local = self.local_tip()
        if self.remote is None:
            return local
        try:
            fetched = self.repo.git.rev_parse("--verify", "--quiet", self._tracking_ref)
        except git.GitCommandError:
            return local
        if local is None or self.repo.is_ancestor(local, fetched):
            return fetched
        return local

    def _set_local(self, sha: str) -> None:
        self.repo.git.update_ref(f"refs/heads/{self.branch}", sha)

    def commit_and_push(
        self, files: dict[str, bytes], message: str, *, push: bool, attempts: int = 6, before_push: Callable[[], None] | None = None
    ) -> str | None:
        """Commit ``files`` on the newest tip; with ``push``, push it, rebuilding on a rejection. Returns the tip."""
        for attempt in range(1, attempts + 1):
            base = self.fetch() if push else self._newest_known_tip()
            sha = self.commit(files, message, base)
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
                self.log(f"{self.branch}: another runner pushed first (attempt {attempt}/{attempts}); fetching and retrying in {delay:.1f} s")
                time.sleep(delay)
                continue
            self._set_local(sha)
            self.repo.git.update_ref(self._tracking_ref, sha)
            return sha
        raise BranchError(f"git push {self.remote} {self.branch}: still rejected after {attempts} attempts")


# ---------------------------------------------------------------------------
# merging one file that both the branch and this run have
# ---------------------------------------------------------------------------


def merge_file(path: str, theirs: bytes | None, ours: bytes) -> bytes:
    """Ours, except asv results and records files: per benchmark, their entries that ours lacks are kept."""
    if theirs is None or theirs == ours:
        return ours
    try:
        old, new = json.loads(theirs), json.loads(ours)
    except ValueError:
        return ours  # theirs is unreadable; ours was validated before the commit
    if path.endswith(".records") and isinstance(old.get("records"), dict) and isinstance(new.get("records"), dict):
        merged = {**old, **new, "records": {**old["records"], **new["records"]}}
    elif path.endswith(".json") and isinstance(old.get("results"), dict) and old.get("result_columns") == new.get("result_columns"):
        merged = {**new, "results": {**old["results"], **new["results"]}}
    else:
        return ours
    return (json.dumps(merged, indent=None, separators=(",", ":")) + "\n").encode()
