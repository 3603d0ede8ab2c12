"""The results branch on temporary repositories: a bare remote, runners racing to push, nothing overwritten.

Each "runner" is a clone of one bare remote; its results are small asv-shaped files of its own
machine. Pushes race deterministically (another runner pushes between our fetch and our push)
and for real (two processes at once); every machine's results must end up on the branch.
"""

from __future__ import annotations

import json
import multiprocessing
import subprocess
from pathlib import Path

import pytest
from test_asv_suite import git

from ci.common import gitutil
from ci.history.branch import results_branch
from ci.history.branch.results_branch import BRANCH, BranchError, ResultsBranch


def results_file(machine: str, commit: str, benchmarks: dict[str, float]) -> bytes:
    """An asv results document (api version 2) with one value per benchmark."""
    data = {
        "commit_hash": commit,
        "env_name": "env",
        "date": 0,
        "params": {"machine": machine},
        "python": "3.11",
        "requirements": {},
        "env_vars": {},
        "result_columns": ["result", "params", "version", "started_at", "duration"],
        "results": {name: [[value], [], "1", 0, 1.0] for name, value in benchmarks.items()},
        "durations": {},
        "version": 2,
    }
    return json.dumps(data).encode()


def bare_remote_with_clones(tmp_path: Path, names: tuple[str, ...]) -> tuple[Path, list[Path]]:
    """A bare remote holding one commit on main, and a clone of it per name (runners, or one machine's clones)."""
    source = tmp_path / "source"
    source.mkdir()
    git(source, "init", "-q", "-b", "main")
    (source / "README.md").write_text("x\n")
    git(source, "add", "-A")
    git(source, "commit", "-q", "-m", "base")
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(source), str(remote))
    clones = []
    for name in names:
        clone = tmp_path / name
        git(tmp_path, "clone", "-q", str(remote), str(clone))
        clones.append(clone)
    return remote, clones


@pytest.fixture
def remote_and_clones(tmp_path):
    return bare_remote_with_clones(tmp_path, ("mi355x", "h200"))


def branch_files(repo: Path) -> set[str]:
    return set(git(repo, "ls-tree", "-r", "--name-only", BRANCH).split())


def test_a_runner_that_loses_the_race_fetches_rebuilds_and_keeps_both(remote_and_clones, monkeypatch):
    monkeypatch.setattr(results_branch.time, "sleep", lambda s: None)
    remote, (mi355x, h200) = remote_and_clones
    commit = git(mi355x, "rev-parse", "HEAD")
    theirs = ResultsBranch(h200, "origin", log=lambda m: None)
    their_files = {f"results/h200/{commit[:8]}-env.json": results_file("h200", commit, {"b.t": 2.0})}

    logs = []
    ours = ResultsBranch(mi355x, "origin", log=logs.append)
    pushed_in_between = []

    def the_other_runner_pushes_first():
        if not pushed_in_between:
            pushed_in_between.append(theirs.commit_and_push(their_files, "h200 results", push=True))

    our_files = {f"results/mi355x/{commit[:8]}-env.json": results_file("mi355x", commit, {"b.t": 1.0})}
    tip = ours.commit_and_push(our_files, "mi355x results", push=True, before_push=the_other_runner_pushes_first)

    assert any("another runner pushed first" in line for line in logs), logs
    assert git(remote, "rev-parse", BRANCH) == tip
    assert branch_files(remote) == {f"results/h200/{commit[:8]}-env.json", f"results/mi355x/{commit[:8]}-env.json"}
    # A fast-forward of the other runner's commit: its history is kept, not replaced.
    assert git(remote, "merge-base", "--is-ancestor", pushed_in_between[0], tip) == ""
    assert git(remote, "log", "--format=%s", BRANCH).splitlines() == ["mi355x results", "h200 results"]


def _push_from(clone: str, machine: str, commit: str, rounds: int) -> list[str]:
    branch = ResultsBranch(Path(clone), "origin", log=lambda m: None)
    tips = []
    for i in range(rounds):
        files = {f"results/{machine}/{commit[:8]}-env{i}.json": results_file(machine, commit, {"b.t": float(i)})}
        tips.append(branch.commit_and_push(files, f"{machine} round {i}", push=True, attempts=20))
    return tips


def test_two_runners_pushing_at_once_keep_every_result(remote_and_clones):
    remote, clones = remote_and_clones
    commit = git(clones[0], "rev-parse", "HEAD")
    rounds = 4
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        jobs = [pool.apply_async(_push_from, (str(c), c.name, commit, rounds)) for c in clones]
        for job in jobs:
            job.get(timeout=240)
    expected = {f"results/{c.name}/{commit[:8]}-env{i}.json" for c in clones for i in range(rounds)}
    assert branch_files(remote) == expected
    assert len(git(remote, "log", "--format=%H", BRANCH).splitlines()) == 2 * rounds
    # Linear history: every push was a fast-forward (the remote would have refused anything else).
    assert git(remote, "log", "--merges", "--format=%H", BRANCH) == ""


def test_the_same_machine_racing_itself_merges_per_benchmark_never_drops_one(remote_and_clones):
    remote, (first, second) = remote_and_clones
    commit = git(first, "rev-parse", "HEAD")
    path = f"results/mi355x/{commit[:8]}-env.json"
    ResultsBranch(first, "origin", log=lambda m: None).commit_and_push(
        {path: results_file("mi355x", commit, {"a.t": 1.0, "b.t": 2.0})}, "run 1", push=True
    )
    ResultsBranch(second, "origin", log=lambda m: None).commit_and_push(
        {path: results_file("mi355x", commit, {"b.t": 3.0})}, "run 2", push=True
    )
    merged = json.loads(git(remote, "show", f"{BRANCH}:{path}"))
    assert {k: v[0] for k, v in merged["results"].items()} == {"a.t": [1.0], "b.t": [3.0]}


def test_the_work_tree_index_and_head_are_never_touched(remote_and_clones):
    _, (clone, _) = remote_and_clones
    head = git(clone, "rev-parse", "HEAD")
    (clone / "untracked.txt").write_text("mine\n")
    ResultsBranch(clone, None, log=lambda m: None).commit_and_push({"results/m/x.records": b"{}"}, "local", push=False)
    assert git(clone, "rev-parse", "HEAD") == head
    assert git(clone, "status", "--porcelain") == "?? untracked.txt"
    assert branch_files(clone) == {"results/m/x.records"}


def test_an_unreachable_remote_fails_before_the_work(tmp_path, remote_and_clones):
    _, (clone, _) = remote_and_clones
    with pytest.raises(BranchError, match="no git remote 'upstream'"):
        ResultsBranch(clone, "upstream").check_remote()
    git(clone, "remote", "add", "gone", str(tmp_path / "missing.git"))
    with pytest.raises(BranchError, match="cannot reach remote 'gone'"):
        ResultsBranch(clone, "gone").check_remote()


def test_a_rejection_that_is_not_a_race_is_reported_not_retried(remote_and_clones, monkeypatch):
    remote, (clone, _) = remote_and_clones
    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'refusing: results branch is read-only today' >&2\nexit 1\n")
    hook.chmod(0o755)
    attempts = []
    monkeypatch.setattr(results_branch.time, "sleep", lambda s: attempts.append(s))
    with pytest.raises(BranchError, match="read-only today"):
        ResultsBranch(clone, "origin", log=lambda m: None).commit_and_push(
            {"results/m/a.records": b"{}"}, "x", push=True
        )
    assert attempts == []
    assert subprocess.run(["git", "rev-parse", "--verify", "-q", BRANCH], cwd=remote).returncode != 0


def test_without_a_push_the_local_commit_builds_on_what_was_fetched(remote_and_clones):
    remote, (ours, theirs) = remote_and_clones
    commit = git(ours, "rev-parse", "HEAD")
    ResultsBranch(theirs, "origin", log=lambda m: None).commit_and_push(
        {f"results/h200/{commit[:8]}-env.json": results_file("h200", commit, {"b.t": 2.0})}, "h200", push=True
    )
    local = ResultsBranch(ours, "origin", log=lambda m: None)
    local.fetch()
    local.commit_and_push(
        {f"results/mi355x/{commit[:8]}-env.json": results_file("mi355x", commit, {"b.t": 1.0})}, "mine", push=False
    )
    assert branch_files(ours) == {f"results/h200/{commit[:8]}-env.json", f"results/mi355x/{commit[:8]}-env.json"}
    assert git(ours, "log", "--format=%s", BRANCH).splitlines() == ["mine", "h200"]


# ---------------------------------------------------------------------------
# the history job's git look-ups (ci.common.gitutil), on the same clones
# ---------------------------------------------------------------------------


def test_first_parent_commits_follow_the_branch_not_what_was_merged_into_it(remote_and_clones):
    _, (clone, _) = remote_and_clones
    base = git(clone, "rev-parse", "HEAD")
    git(clone, "checkout", "-q", "-b", "side")
    (clone / "side.txt").write_text("side\n")
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", "on the side")
    side = git(clone, "rev-parse", "HEAD")
    git(clone, "checkout", "-q", "main")
    git(clone, "merge", "-q", "--no-ff", "-m", "merge side", "side")
    merge = git(clone, "rev-parse", "HEAD")
    repo = gitutil.open_repo(clone)
    assert gitutil.first_parent_commits(repo, "main", 5) == [merge, base]
    assert gitutil.first_parent_commits(repo, "main", 1) == [merge]
    assert {merge, side, base} <= gitutil.all_commits(repo)
    with pytest.raises(gitutil.GitError, match="git rev-list no-such-branch"):
        gitutil.first_parent_commits(repo, "no-such-branch", 3)


def test_a_local_branch_is_created_only_where_just_the_remote_has_it(remote_and_clones):
    remote, (clone, other) = remote_and_clones
    git(other, "push", "-q", "origin", "HEAD:refs/heads/nightly")
    git(clone, "fetch", "-q", "origin")
    repo = gitutil.open_repo(clone)
    assert gitutil.remote_names(repo) == ["origin"]
    assert gitutil.ensure_local_branch(repo, "nightly", "origin") is True
    assert git(clone, "rev-parse", "nightly") == git(remote, "rev-parse", "nightly")
    assert git(clone, "rev-parse", "--abbrev-ref", "nightly@{upstream}") == "origin/nightly"
    assert gitutil.ensure_local_branch(repo, "nightly", "origin") is False  # exists now: left as it is
    assert gitutil.ensure_local_branch(repo, "nowhere", "origin") is False  # nothing to track
    assert not gitutil.resolves(repo, "refs/heads/nowhere")
