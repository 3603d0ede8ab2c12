"""Git plumbing for gates that compare two commits (GitPython).

``resolve_base`` finds the commit a change is measured against (the merge-base
of HEAD and a base ref), ``checkout`` materializes any commit in a temporary
``git worktree`` so that commit's own code can be run, and ``read_file`` reads
one file of a commit without checking it out.
"""

from __future__ import annotations

import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import git

DEFAULT_BASE_REFS = ("origin/main", "main")


class GitError(RuntimeError):
    """A ref, repository or worktree problem; the message says which."""


@dataclass(frozen=True)
class Base:
    """The commit to compare with, or None and why there is none."""

    sha: str | None
    ref: str | None
    note: str


def open_repo(path: str | Path = ".") -> git.Repo:
    try:
        repo = git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise GitError(f"{Path(path).resolve()} is not inside a git repository") from None
    if not repo.head.is_valid():
        raise GitError(f"{repo.working_tree_dir} has no commits yet")
    return repo


def resolve_commit(repo: git.Repo, ref: str) -> str:
    try:
        return repo.commit(ref).hexsha
    except (git.BadName, git.BadObject, ValueError, git.GitCommandError):
        raise GitError(f"ref {ref!r} does not name a commit in {repo.working_tree_dir}") from None


def _is_single_commit_or_shallow(repo: git.Repo, head_sha: str) -> bool:
    shallow = Path(repo.git_dir, "shallow").exists()
    return shallow or not repo.commit(head_sha).parents


def resolve_base(repo: git.Repo, head_sha: str, base_ref: str | None, *, head_may_be_base: bool = False) -> Base:
    """The merge-base of ``head_sha`` and ``base_ref`` (default: origin/main, then main).

    No base (``sha=None``) when no default ref exists, when ``base_ref`` does not
    resolve in a single-commit or shallow clone (CI's fresh clone), or when the
    merge-base is the head itself (nothing to compare) -- unless
    ``head_may_be_base`` (uncommitted edits are compared with HEAD). An explicit ``base_ref``
    that does not resolve in a full history is an error.
    """
    if base_ref is None:
        candidates = [r for r in DEFAULT_BASE_REFS if _resolves(repo, r)]
        if not candidates:
            return Base(None, None, f"no base: none of {', '.join(DEFAULT_BASE_REFS)} exists; checked against budget only")
        base_ref = candidates[0]
    elif not _resolves(repo, base_ref):
        if _is_single_commit_or_shallow(repo, head_sha):
            return Base(None, base_ref, f"no base: {base_ref!r} does not resolve in this single-commit/shallow clone; "
                                        "checked against budget only")
        raise GitError(f"--base {base_ref!r} does not name a commit (try origin/main, main or a sha)")
    base_tip = resolve_commit(repo, base_ref)
    merge_bases = repo.merge_base(head_sha, base_tip)
    if not merge_bases:
        raise GitError(f"HEAD and {base_ref!r} have no common ancestor")
    sha = merge_bases[0].hexsha
    if sha == head_sha and not head_may_be_base:
        return Base(None, base_ref, f"no base: the merge-base of HEAD and {base_ref} is HEAD itself; checked against budget only")
    return Base(sha, base_ref, f"base: merge-base of HEAD and {base_ref} = {sha[:12]}")


def _resolves(repo: git.Repo, ref: str) -> bool:
    try:
        repo.commit(ref)
        return True
    except (git.BadName, git.BadObject, ValueError, git.GitCommandError):
        return False


def read_file(repo: git.Repo, sha: str, path: str) -> str | None:
    """The text of ``path`` at commit ``sha``, or None when the commit has no such file."""
    try:
        blob = repo.commit(sha).tree / path
    except KeyError:
        return None
    return blob.data_stream.read().decode("utf-8")


@contextmanager
def checkout(repo: git.Repo, sha: str) -> Iterator[Path]:
    """A temporary detached worktree of ``sha``; removed (and pruned) on exit."""
    parent = Path(tempfile.mkdtemp(prefix="gate-worktree-"))
    path = parent / sha[:12]
    try:
        repo.git.worktree("add", "--detach", "--quiet", str(path), sha)
    except git.GitCommandError as exc:
        shutil.rmtree(parent, ignore_errors=True)
        raise GitError(f"git worktree add {sha[:12]} failed: {exc.stderr.strip()}") from None
    try:
        yield path
    finally:
        try:
            repo.git.worktree("remove", "--force", str(path))
        except git.GitCommandError:
            shutil.rmtree(path, ignore_errors=True)
            repo.git.worktree("prune")
        shutil.rmtree(parent, ignore_errors=True)
