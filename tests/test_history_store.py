"""The history store (ci/history/asv_results/store.py): indexed rows beside asv's results folder, updated file by file.

A synthetic results folder of 3 GPU-like machines and compile-only with exact repeats (tests/synthetic_history.py,
no git). Read from the store line by line, the checks and every kernel page are the bytes the whole in-memory
history gives; an update reads only the files that changed; worker processes change nothing kept.
"""

from __future__ import annotations

import contextlib
import filecmp
import json
import random
import sqlite3
from pathlib import Path

import pytest
import synthetic_history as synthetic

from ci.history.asv_results import folder as history_results
from ci.history.asv_results import result_points, store
from ci.history.site import commit_info, kernel_page, page_changes
from ci.history.trends import regressions, views
from harness import fast_json

END = 1_796_000_000.0  # dated in the past, reproducible
COMMITS = 60


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> tuple[Path, list[str], object]:
    root = tmp_path_factory.mktemp("store")
    commits = synthetic.results_folder_commits(synthetic.Spec(commits=COMMITS + 1, end=END), repeat_share=0.1)
    made = synthetic.write_results_folder(root / "results", commits, COMMITS)
    return root / "results", made, commits


def rows(path: Path) -> dict[str, list]:
    """Every kept row by table, as (machine, stem, ...) without the database's own ids: what a store holds."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        texts = dict(db.execute(f"SELECT id, text FROM {store.TEXTS}"))
        files = {i: (m, s) for i, m, s in db.execute(f"SELECT id, machine, stem FROM {store.FILES}")}
        out = {"files": sorted(db.execute(f"SELECT machine, stem, commit_hash, date, fingerprints FROM {store.FILES}"))}
        for table in (store.POINTS, store.MISSING, store.RESOURCES, store.PRINTS):
            out[table] = sorted(
                (*files[row[0]], *(texts.get(v, v) if isinstance(v, int) else v for v in row[1:]))
                for row in db.execute(f"SELECT * FROM {table}")
            )
    return out


def test_the_store_reads_the_folder_as_the_summaries_say_it(folder, tmp_path):
    results, made, _ = folder
    order = {c: i for i, c in enumerate(made)}
    with contextlib.closing(store.Store(tmp_path / "db.sqlite")) as kept:
        kept.update(results)
        assert kept.parsed == COMMITS * 4 and kept.reused == 0
        commits = kept.commits(order)
        summaries = store.Store(None).summaries(results)
        whole = store.history(summaries, order)
        assert kept.history(commits) == whole
        assert kept.summaries(results) == summaries
        assert any(p.copied_from for p in whole.points), "the history has exact repeats"
        assert commit_info.from_dates(kept.dates()) == commit_info.from_summaries(summaries)


def test_checks_and_pages_read_line_by_line_are_the_whole_historys(folder, tmp_path, monkeypatch):
    results, made, _ = folder
    order = {c: i for i, c in enumerate(made)}
    monkeypatch.setattr(kernel_page, "ALL_COLUMNS", 7)  # 60 commits thinned as 50,000 are: fewer columns than points
    with contextlib.closing(store.Store(tmp_path / "db.sqlite")) as kept:
        kept.update(results)
        commits = kept.commits(order)
        whole = kept.history(commits)
        checks = regressions.all_checks(whole)
        assert regressions.store_checks(kept, commits) == checks
        assert any(machine["change_points"] for machine in checks)
        info = commit_info.from_dates(kept.dates())
        when = commit_info.axis_seconds(whole.commit_axis(), info)
        changes = page_changes.from_checks(checks)
        in_memory = kernel_page.page_data(whole, changes, 10, when)
        from_store = kernel_page.page_data_from_store(kept, commits, changes, 10, when)
    assert from_store.whole is not None and in_memory.whole is not None
    assert from_store.whole.points == in_memory.whole.points
    assert len(from_store.whole.points) < len(whole.points)
    first = kernel_page.publish_pages(tmp_path / "a", in_memory, checks, "stamp", info)
    second = kernel_page.publish_pages(tmp_path / "b", from_store, checks, "stamp", info)
    assert [p.relative_to(tmp_path / "a") for p in first] == [p.relative_to(tmp_path / "b") for p in second]
    assert any(p.name.endswith("-all.html") for p in first)
    for mine, theirs in zip(first, second):
        assert filecmp.cmp(mine, theirs, shallow=False), mine.name


def test_an_update_reads_only_what_changed(folder, tmp_path):
    copy = tmp_path / "results"
    arriving = synthetic.results_folder_commits(synthetic.Spec(commits=COMMITS + 1, end=END), repeat_share=0.1)
    made = synthetic.write_results_folder(copy, arriving, COMMITS)
    path = tmp_path / "db.sqlite"
    with contextlib.closing(store.Store(path)) as kept:
        kept.update(copy)
    with contextlib.closing(store.Store(path)) as kept:
        kept.update(copy)
        assert (kept.parsed, kept.reused) == (0, COMMITS * 4)
    newest = synthetic.write_results_folder(copy, arriving, 1)
    with contextlib.closing(store.Store(path)) as kept:
        kept.update(copy)
        assert (kept.parsed, kept.reused) == (4, COMMITS * 4)
        assert newest[0] in kept.commits()
    gone = next((copy / "compile-only").glob(f"{made[3][:8]}-*.json"))
    gone.unlink()
    with contextlib.closing(store.Store(path)) as kept:
        kept.update(copy)
        assert kept.parsed == 0
    fresh = tmp_path / "fresh.sqlite"
    with contextlib.closing(store.Store(fresh)) as kept:
        kept.update(copy)
    assert rows(path) == rows(fresh)


def test_worker_processes_keep_the_same_rows(folder, tmp_path):
    results, _, _ = folder
    with contextlib.closing(store.Store(tmp_path / "one.sqlite")) as kept:
        kept.update(results)
    with contextlib.closing(store.Store(tmp_path / "two.sqlite", workers=2)) as kept:
        kept.update(results)
        assert kept.parsed == COMMITS * 4
    assert rows(tmp_path / "one.sqlite") == rows(tmp_path / "two.sqlite")


def test_the_standard_librarys_json_keeps_the_same_rows(folder, tmp_path, monkeypatch):
    """orjson (harness/fast_json.py) where installed, the standard library's json without it: the same rows."""
    pytest.importorskip("orjson")
    results, _, _ = folder
    with contextlib.closing(store.Store(tmp_path / "orjson.sqlite")) as kept:
        kept.update(results)
    monkeypatch.setattr(fast_json, "orjson", None)  # workers=1: summarized in this process, where it is patched
    with contextlib.closing(store.Store(tmp_path / "json.sqlite")) as kept:
        kept.update(results)
    assert rows(tmp_path / "orjson.sqlite") == rows(tmp_path / "json.sqlite")


def test_results_and_samples_are_what_the_points_say(folder):
    """result_points.results_and_samples (the summary's two columns alone) against values_by_key (every column)."""
    results, _, _ = folder
    documents = [json.loads(path.read_text()) for path in sorted(results.glob("*/*-*.json"))]
    columns = ["result", "params", "samples", "started_at"]
    documents += [  # equal combos, rows shorter than their columns, a column that is not a list, no columns
        {"result_columns": columns, "results": {"b": [[1, 2, 3], [["'x'", "'x'", "'y'"]], [[1], [2]], 7]}},
        {"result_columns": columns, "results": {"b": [[1], [["'x'", "'y'"]]], "c": [None, [], None, 1]}},
        {"result_columns": columns, "results": {"b": [5.0, [], 3.0, 1], "b()": [[1.0], [[]], [[2.0]], 2]}},
        {"results": {"b": []}},
    ]
    for document in documents:
        expected = {k: (v["value"], v["samples"]) for k, v in history_results.values_by_key(document).items()}
        found = result_points.results_and_samples(document)
        assert list(found.items()) == list(expected.items())


def test_a_build_from_nothing_makes_the_row_indexes_at_its_end(folder, tmp_path):
    """A build from nothing writes its rows without the row tables' indexes (faster), then makes them."""
    results, _, _ = folder
    path = tmp_path / "db.sqlite"

    def indexes() -> set[str]:
        with contextlib.closing(sqlite3.connect(path)) as db:
            return {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}

    with contextlib.closing(store.Store(path)) as kept:
        made = indexes()  # as the schema makes them
        kept.update(results)
    assert indexes() == made and {f"{store.POINTS}_line", f"{store.PRINTS}_file"} <= made


def test_an_older_schemas_tables_are_dropped_and_every_file_read_again(folder, tmp_path):
    results, _, _ = folder
    path = tmp_path / "db.sqlite"
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE files_v3 (machine TEXT, stem TEXT, stamp TEXT, summary TEXT, fingerprints TEXT)")
        db.commit()
    with contextlib.closing(store.Store(path)) as kept:
        kept.update(results)
        assert kept.parsed == COMMITS * 4
    with contextlib.closing(sqlite3.connect(path)) as db:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "files_v3" not in tables and store.FILES in tables


def test_the_main_jobs_reads_take_only_their_columns(folder, tmp_path):
    results, _, _ = folder
    machine = "synthetic-h200-0"
    summaries = store.Store(None).summaries(results, machines=(machine, "compile-only"), fingerprints=True)
    with contextlib.closing(store.Store(tmp_path / "db.sqlite")) as kept:
        prints = kept.fingerprints(results, machine)
        counted = kept.resource_keys(results, "compile-only")
    assert prints == [(s["commit"], s["fingerprints"]) for s in summaries[machine]]
    assert any(p["of"] for _, p in prints)
    assert counted == {s["commit"]: set(s["resources"]) for s in summaries["compile-only"]}
    assert counted and all(counted.values())


def test_a_lines_columns_taken_at_once_keep_what_the_loop_keeps():
    """views.Axis.chosen (each column's stretch at once, numpy) against the point-by-point loop: ties, flags, commits
    to keep, columns with no point, lines of every length around twice the columns."""
    rng = random.Random(1)
    for _ in range(300):
        commits = [f"c{i}" for i in range(rng.randint(30, 400))]
        place, at = {}, 0.0
        for commit in commits:
            at += rng.choice([0.0001, 1, 5, 60, 3600]) if rng.random() < 0.9 else 86_400
            place[commit] = at
        first = min(place.values())
        axis = views.Axis(place, rng.randint(3, 12), first, max(max(place.values()) - first, 1e-9))
        tflops = [rng.choice([1.0, 2.0, 3.0, rng.random()]) for _ in commits]
        flagged = [rng.random() < 0.05 for _ in commits]
        keep = {c for c in commits if rng.random() < 0.02}
        columns = [min(int((place[c] - first) / axis.width * axis.columns), axis.columns - 1) for c in commits]
        expected = (
            views.Axis._chosen_one_by_one(commits, tflops, flagged, keep, columns)
            if len(commits) > 2 * axis.columns
            else None
        )
        assert axis.chosen(commits, tflops, flagged, keep) == expected
