"""The history store's line cache (ci/history/asv_results/line_cache.py): kept, grown by a new commit, read anew when
it would be stale.

A synthetic results folder (tests/synthetic_history.py, no git). After each change to the folder, what the checks and
the kernel pages read through the cache is what a store without one reads from the database, and the cache says
what it did: "kept" (nothing new), "grown" (a commit at the end) or "read" (anything else: a file edited or removed,
a commit placed in the middle, another commit order, another cache version or another database).
"""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import pytest
import synthetic_history as synthetic

from ci.history.asv_results import line_cache, store
from ci.history.site import commit_info, kernel_page, page_changes
from ci.history.trends import regressions, views

END = 1_796_000_000.0  # dated in the past, reproducible
COMMITS = 40


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> tuple[Path, list[str], dict[str, dict[str, bytes]]]:
    """A folder of every commit but the newest and the middle one, and those two commits' files."""
    root = tmp_path_factory.mktemp("line-cache")
    every = list(synthetic.results_folder_commits(synthetic.Spec(commits=COMMITS, end=END), repeat_share=0.1))
    middle, newest = every[COMMITS // 2], every[-1]
    for commit, files in every:
        if commit not in (middle[0], newest[0]):
            synthetic.write_results_folder(root / "results", iter([(commit, files)]), 1)
    return root / "results", [c for c, _ in every], {"middle": middle[1], "newest": newest[1]}


@pytest.fixture
def results(generated, tmp_path) -> Path:
    copy = tmp_path / "results"
    shutil.copytree(generated[0], copy)
    return copy


def write(results: Path, files: dict[str, bytes]) -> None:
    for relative, data in files.items():
        (results / relative).parent.mkdir(parents=True, exist_ok=True)
        (results / relative).write_bytes(data)


def reads(kept: store.Store, commits: dict[str, int]) -> dict:
    """Everything the checks and the pages read of the lines, by line."""
    out: dict = {}
    for machine, key in kept.line_keys():
        out[(machine, key)] = kept.levels(machine, key, commits)
        found = kept.line_arrays(machine, key, commits)
        if found is not None:
            line, shas = found
            out[(machine, key, "rows")] = (shas.tolist(), line.tflops.tolist(), line.flagged.tolist())
    for key in sorted(k for k in kept.keys() if k.startswith(store.RESOURCES_PREFIX)):
        out[key] = kept.changed_counts(key, commits)
    for share in (1, 3):  # every commit, and a thinned page's few
        out[("missing", share)] = kept.newest_missing(commits, set(list(commits)[::share]))
    return out


def from_database(results: Path, order: dict[str, int] | None) -> dict:
    """What a store with no cache reads, straight from the database's rows (levels_read, resource_counts)."""
    with contextlib.closing(store.Store(None)) as fresh:
        fresh.update(results)
        commits = fresh.commits(order)
        out: dict = {}
        for machine, key in fresh.line_keys():
            out[(machine, key)] = fresh.levels_read(machine, key, commits)
            rows = fresh.line_rows(machine, key, commits)
            if rows:
                out[(machine, key, "rows")] = (
                    [r[1] for r in rows],
                    [r[2] for r in rows],
                    [fresh.flagged(r[8]) for r in rows],
                )
        for key in sorted(k for k in fresh.keys() if k.startswith(store.RESOURCES_PREFIX)):
            out[key] = views.changed_counts(fresh.resource_counts(key, commits))
        for share in (1, 3):
            out[("missing", share)] = fresh.newest_missing_read(commits, set(list(commits)[::share]))
        return out


def cached(results: Path, order: dict[str, int] | None = None) -> tuple[dict, str]:
    """A store opened anew on ``results`` (its database and line cache beside it): what it reads, and what its
    line cache did."""
    with contextlib.closing(store.Store(store.default_path(results))) as kept:
        kept.update(results)
        got = reads(kept, kept.commits(order))
        return got, kept.line_cache_done


def test_a_new_commit_grows_the_cache_and_nothing_new_keeps_it(generated, results):
    _, _, held = generated
    assert cached(results) == (from_database(results, None), "read")
    assert cached(results)[1] == "kept"
    write(results, held["newest"])
    got, done = cached(results)
    assert done == "grown" and got == from_database(results, None)


def test_an_edited_results_file_is_read_again(results):
    assert cached(results)[1] == "read"
    sidecar = sorted((results / "synthetic-h200-0").glob("*.records"))[5]
    document = json.loads(sidecar.read_text())
    for record in document["records"].values():
        if record.get("status") == "measured":
            record["tflops"] = record["tflops"] * 2  # a number a page shows
    sidecar.write_text(json.dumps(document))
    got, done = cached(results)
    assert done == "read" and got == from_database(results, None)


def test_a_removed_results_file_is_read_again(results):
    assert cached(results)[1] == "read"
    gone = sorted((results / "synthetic-h200-1").glob("*.json"))[3]
    gone.unlink()
    got, done = cached(results)
    assert done == "read" and got == from_database(results, None)


def test_the_newest_results_file_removed_is_read_again(generated, results):
    """The newest file's id would be the next one given were ids reused (SQLite's default): AUTOINCREMENT."""
    write(results, generated[2]["newest"])
    assert cached(results)[1] == "read"
    newest = sorted((results / "synthetic-h200-2").iterdir(), key=lambda p: p.stat().st_mtime_ns)[-1]
    data = newest.read_bytes()
    newest.unlink()
    assert cached(results)[1] == "read"
    newest.write_bytes(data)  # back, as a new file with the id the removed one had had
    got, done = cached(results)
    assert done == "read" and got == from_database(results, None)


def test_a_commit_in_the_middle_of_the_history_is_read_again(generated, results):
    _, made, held = generated
    order = {c: i for i, c in enumerate(made)}  # asv's revisions: the middle commit has its place among them
    assert cached(results, order)[1] == "read"
    write(results, held["middle"])
    got, done = cached(results, order)
    assert done == "read" and got == from_database(results, order)


def test_another_commit_order_is_read_again(generated, results):
    assert cached(results)[1] == "read"
    reverse = {c: -i for i, c in enumerate(generated[1])}
    got, done = cached(results, reverse)
    assert done == "read" and got == from_database(results, reverse)


def test_another_cache_version_or_database_is_read_again(results, monkeypatch):
    assert cached(results)[1] == "read"
    monkeypatch.setattr(line_cache, "VERSION", line_cache.VERSION + 1)
    assert cached(results)[1] == "read"
    assert cached(results)[1] == "kept"
    store.default_path(results).unlink()  # a new database: its file ids start again; the cache file is left
    got, done = cached(results)
    assert done == "read" and got == from_database(results, None)


def test_an_unreadable_cache_is_read_again_and_said(results):
    assert cached(results)[1] == "read"
    path = store.default_path(results).with_name(store.default_path(results).name + ".lines.npz")
    path.write_bytes(b"not a cache")
    said: list[str] = []
    with contextlib.closing(store.Store(store.default_path(results), said.append)) as kept:
        kept.update(results)
        assert reads(kept, kept.commits()) == from_database(results, None)
        assert kept.line_cache_done == "read"
    assert any("unreadable" in line for line in said)


def test_pages_drawn_after_each_change_are_those_of_a_store_without_a_cache(generated, results, tmp_path, monkeypatch):
    """The kernel pages' bytes: through a kept cache grown by the newest commit, as from a fresh store."""
    monkeypatch.setattr(kernel_page, "ALL_COLUMNS", 7)  # thinned, as 50,000 commits are
    write(results, generated[2]["newest"])
    sidecar = sorted((results / "synthetic-h200-0").glob("*.records"))[2]
    cached(results)
    document = json.loads(sidecar.read_text())
    for record in document["records"].values():
        if record.get("status") == "measured":
            record["tflops"] = record["tflops"] * 3
    sidecar.write_text(json.dumps(document))

    def pages(path: Path | None, out: Path) -> list[bytes]:
        with contextlib.closing(store.Store(path)) as kept:
            kept.update(results)
            commits = kept.commits()
            checks = regressions.store_checks(kept, commits)
            info = commit_info.from_dates(kept.dates())
            when = commit_info.axis_seconds(kernel_page.commit_axis(commits), info)
            data = kernel_page.page_data_from_store(kept, commits, page_changes.from_checks(checks), 10, when)
        return [p.read_bytes() for p in kernel_page.publish_pages(out, data, checks, "stamp", info)]

    assert pages(store.default_path(results), tmp_path / "a") == pages(None, tmp_path / "b")
