"""Git plumbing for the tools (GitPython): the base of a comparison, temporary worktrees, commit lists, remotes and
branches. Every git command of ci/ runs here or through GitPython, never as a subprocess."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import git

from ci.common.errors import HarnessError
from ci.common.interrupts import sweep_stale, temp_dir

T = TypeVar("T")

DEFAULT_BASE_REFS = ("origin/main", "main")


class GitError(HarnessError, RuntimeError):
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


def work_tree(repo: git.Repo) -> Path:
    """The root folder of ``repo``'s checkout; GitError for a bare repository."""
    if repo.working_tree_dir is None:
        raise GitError(f"{repo.git_dir} is a bare repository: this needs a checkout")
    return Path(repo.working_tree_dir)


def resolve_commit(repo: git.Repo, ref: str, option: str | None = None) -> str:
    """The sha of ``ref``, a commit this clone has; else GitError naming ``option`` (e.g. ``"--head"``) when given,
    and how to deepen a shallow clone (``HEAD~1`` there names a parent that is not in it)."""
    try:
        return _commit(repo, ref)
    except (git.BadName, git.BadObject, ValueError, git.GitCommandError):
        what = f"{option} {ref!r}" if option else f"ref {ref!r}"
        hint = f"; {deepen_hint(ref, remote_names(repo))}" if is_shallow(repo) else ""
        raise GitError(f"{what} does not name a commit in {repo.working_tree_dir}{hint}") from None


def _live(repo: git.Repo, read: Callable[[], T]) -> T:
    """``read()``, once more after restarting GitPython's long-lived ``git cat-file`` helpers when they had died: a
    signal to the whole process group (GNU timeout's, a cancelled job's) ends them with the gate's workers, and the
    gate still reads files to write its record (an H100 lease, 2026-12-07: an error record over its rounds)."""
    try:
        return read()
    except BrokenPipeError:
        repo.git.clear_cache()
        return read()


def _commit(repo: git.Repo, ref: str) -> str:
    """``ref``'s sha, checked present: GitPython resolves ``HEAD~1`` from the parent's sha written in the commit,
    which a shallow clone lists but does not have (git merge-base then fails: a GitCommandError, not a GitError)."""

    def read() -> str:
        commit = repo.commit(ref)
        repo.odb.info(commit.binsha)  # ValueError for an object this clone lacks
        return commit.hexsha

    return _live(repo, read)


def is_shallow(repo: git.Repo) -> bool:
    """A clone with truncated history (``git clone --depth N``, actions/checkout's default)."""
    return repo.git.rev_parse("--is-shallow-repository").strip() == "true"


def deepen_hint(base_ref: str | None = None, remotes: Iterable[str] = ("origin",)) -> str:
    """How to fetch enough history for a merge-base, for a message about a shallow clone."""
    remote, _, branch = (base_ref or "").partition("/")
    if not (remote in set(remotes) and branch):  # a sha, HEAD~1, a local branch: deepen the default branch
        remote, branch = "origin", "main"
    # The refspec also creates the remote-tracking ref, which a single-branch clone lacks for other branches.
    deepen = f"git fetch --deepen=200 {remote} {branch}:refs/remotes/{remote}/{branch}"
    return (
        f"this is a shallow clone: fetch the history, e.g. `git fetch --unshallow` or `{deepen}` "
        "(GitHub Actions: actions/checkout with fetch-depth: 0)"
    )


def running_in_ci(environ: Mapping[str, str] | None = None) -> bool:
    """True under CI (``CI=true``, set by GitHub Actions and most CI services, or ``GITHUB_ACTIONS=true``)."""
    env = os.environ if environ is None else environ
    return any(env.get(name, "").strip().lower() == "true" for name in ("CI", "GITHUB_ACTIONS"))


def resolve_base(
    repo: git.Repo, head_sha: str, base_ref: str | None, *, head_may_be_base: bool = False, ci: bool | None = None
) -> Base:
    """The merge-base of ``head_sha`` and ``base_ref`` (default: origin/main, then main). GitError (a gate never passes
    by comparing less than it was told to) for a ``base_ref`` that does not resolve, a base with no common ancestor
    (a shallow clone: the message says how to deepen it), and no default ref under CI (``ci``, default
    :func:`running_in_ci`). No base (``sha=None`` and why) only for no default ref outside CI, or a merge-base that is
    the head itself (a run on main), unless ``head_may_be_base`` (uncommitted edits are compared with HEAD)."""
    if base_ref is None:
        candidates = [r for r in DEFAULT_BASE_REFS if resolves(repo, r)]
        if not candidates:
            missing = f"none of {', '.join(DEFAULT_BASE_REFS)} exists"
            if running_in_ci() if ci is None else ci:
                shallow = f"; {deepen_hint()}" if is_shallow(repo) else ""
                raise GitError(
                    f"no base to compare with: {missing}, and under CI a base is required; pass --base REF "
                    f"or fetch main (`git fetch origin main:refs/remotes/origin/main`){shallow}"
                )
            return Base(None, None, f"no base: {missing}; checked against budget only")
        base_ref = candidates[0]
    elif not resolves(repo, base_ref):
        hint = deepen_hint(base_ref, remote_names(repo)) if is_shallow(repo) else "try origin/main, main or a sha"
        raise GitError(f"--base {base_ref!r} does not name a commit; {hint}")
    base_tip = resolve_commit(repo, base_ref)
    merge_bases = repo.merge_base(head_sha, base_tip)
    if not merge_bases:
        hint = f"; {deepen_hint(base_ref, remote_names(repo))}" if is_shallow(repo) else ""
        raise GitError(f"the head ({head_sha[:12]}) and {base_ref!r} have no common ancestor{hint}")
    sha = merge_bases[0].hexsha
    if sha == head_sha and not head_may_be_base:
        note = f"no base: the merge-base of HEAD and {base_ref} is HEAD itself; checked against budget only"
        return Base(None, base_ref, note)
    return Base(sha, base_ref, f"base: merge-base of HEAD and {base_ref} = {sha[:12]}")


def uncommitted_files(repo: git.Repo) -> list[str]:
    """Paths with uncommitted changes: modified, staged, deleted or untracked (not ignored), sorted."""
    # -z: one NUL-terminated "XY path" record each; a rename or copy adds its source path as a record of its own.
    records = iter(repo.git.status("--porcelain=v1", "-z", "--untracked-files=all").split("\0"))
    paths = set()
    for record in filter(None, records):
        paths.add(record[3:])
        if "R" in record[:2] or "C" in record[:2]:
            next(records, None)
    return sorted(paths)


def remote_names(repo: git.Repo) -> list[str]:
    return [remote.name for remote in repo.remotes]


def first_parent_commits(repo: git.Repo, ref: str, count: int) -> list[str]:
    """The last ``count`` commits of ``ref`` along first parents (a branch's own history), newest first."""
    try:
        commits = repo.git.rev_list("--first-parent", f"--max-count={count}", ref, "--").split()
    except git.GitCommandError as exc:
        raise GitError(f"git rev-list {ref}: {exc.stderr.strip()}") from None
    if not commits:
        raise GitError(f"{ref} has no commits")
    return commits


def all_commits(repo: git.Repo) -> set[str]:
    """Every commit reachable from any ref of the clone (what it can check out)."""
    return set(repo.git.rev_list("--all").split())


def ensure_local_branch(repo: git.Repo, branch: str, remote: str) -> bool:
    """Create ``branch`` tracking ``remote``/``branch`` when only the remote-tracking ref exists (a fresh clone of
    another branch); whether it was created."""
    if resolves(repo, f"refs/heads/{branch}") or not resolves(repo, f"refs/remotes/{remote}/{branch}"):
        return False
    repo.git.branch("--track", branch, f"{remote}/{branch}")
    return True


def resolves(repo: git.Repo, ref: str) -> bool:
    try:
        _commit(repo, ref)
        return True
    except (git.BadName, git.BadObject, ValueError, git.GitCommandError):
        return False


def read_file(repo: git.Repo, sha: str, path: str) -> str | None:
    """The text of ``path`` at commit ``sha``, or None when the commit has no such file."""

    def read() -> str | None:
        try:
            blob = repo.commit(sha).tree / path
        except KeyError:
            return None
        return blob.data_stream.read().decode("utf-8")

    return _live(repo, read)


_swept: set[str] = set()  # repositories already swept by this process


def prune_stale_worktrees(repo: git.Repo, log=None) -> None:
    """Once per repository and process: remove what killed gate runs left (their temporary folders, worktrees
    included: ci.common.interrupts.sweep_stale), then let git forget the worktrees whose folder is gone."""
    key = str(repo.git_dir)
    if key in _swept:
        return
    _swept.add(key)
    sweep_stale(log if log is not None else (lambda line: print(f"gitutil: {line}", file=sys.stderr, flush=True)))
    try:
        repo.git.worktree("prune")
    except git.GitCommandError:
        pass  # a read-only repository: the stale entries stay listed, harmlessly


@contextmanager
def checkout(repo: git.Repo, sha: str) -> Iterator[Path]:
    """A temporary detached worktree of ``sha``; removed (and pruned) on exit."""
    prune_stale_worktrees(repo)
    parent = temp_dir("worktree")
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
