"""Every results file and its records, summarized once and kept as indexed rows (SQLite beside the folder).

Everything that looks at the history reads it through here; the files themselves are opened by
ci.history.asv_results.folder (docs/HISTORY.md, "asv_results/store.py").
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import re
import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from asv_bench import records
from ci.history.asv_results import folder as history_results
from ci.history.asv_results import line_cache
from ci.history.asv_results.file_rows import FileRows, summarized_rows
from ci.history.asv_results.line_reads import (
    FILES,
    IDENTITY,
    MISSING,
    POINTS,
    PRINTS,
    RESOURCES,
    SCHEMA,
    TEXTS,
    FileAxis,
    LineReads,
)
from ci.history.asv_results.summaries import (  # the store's names, as its readers have always imported them
    COMPILE_MACHINE,
    GEMM_KEY,
    GEMM_PREFIX,
    RESOURCES_PREFIX,
    History,
    Missing,
    Point,
    history,
    lines,
    read_commit,
    split_key,
    summarize,
)

__all__ = [
    "FILES",
    "MISSING",
    "POINTS",
    "PRINTS",
    "RESOURCES",
    "SCHEMA",
    "TEXTS",
    "COMPILE_MACHINE",
    "GEMM_KEY",
    "GEMM_PREFIX",
    "RESOURCES_PREFIX",
    "History",
    "Missing",
    "Point",
    "Store",
    "default_path",
    "history",
    "lines",
    "read_commit",
    "read_history",
    "split_key",
    "summarize",
]


def default_path(results_dir: Path) -> Path:
    """Where a results folder's summaries are kept: beside it (asv reads every *.json inside it), named after it (the
    main job's .asv/results and the site build's mirror .asv/site-results must not share one)."""
    return results_dir.with_name(results_dir.name + ".cache.sqlite")


_TABLES = (
    # One row per results file (its stamp: size and mtime of it and its sidecar); commit NULL: a file asv cannot use.
    # AUTOINCREMENT: an id is never given twice, so that the line cache (line_cache.py) can trust a kept file id.
    f"CREATE TABLE IF NOT EXISTS {FILES} (id INTEGER PRIMARY KEY AUTOINCREMENT, machine TEXT NOT NULL, "
    "stem TEXT NOT NULL, stamp TEXT NOT NULL, commit_hash TEXT, date INTEGER, fingerprints TEXT, "
    "UNIQUE (machine, stem))",
    # Every repeated string once: benchmark keys, devices, clocks, flags (JSON), why a point is missing.
    f"CREATE TABLE IF NOT EXISTS {TEXTS} (id INTEGER PRIMARY KEY, text TEXT NOT NULL UNIQUE)",
    # A GEMM point of a file; machine and key are texts' ids, so that a line (machine, key) is one index range.
    f"CREATE TABLE IF NOT EXISTS {POINTS} (file INTEGER NOT NULL, machine INTEGER NOT NULL, key INTEGER NOT NULL, "
    "tflops REAL, median_s REAL, level REAL, error REAL, iqr REAL, device INTEGER, flags INTEGER, clocks INTEGER, "
    "copied TEXT)",
    f"CREATE INDEX IF NOT EXISTS {POINTS}_line ON {POINTS} (machine, key)",
    f"CREATE INDEX IF NOT EXISTS {POINTS}_file ON {POINTS} (file)",
    f"CREATE TABLE IF NOT EXISTS {MISSING} (file INTEGER NOT NULL, key INTEGER NOT NULL, why INTEGER NOT NULL)",
    f"CREATE INDEX IF NOT EXISTS {MISSING}_file ON {MISSING} (file)",
    f"CREATE TABLE IF NOT EXISTS {RESOURCES} (file INTEGER NOT NULL, key INTEGER NOT NULL, value REAL NOT NULL)",
    f"CREATE INDEX IF NOT EXISTS {RESOURCES}_file ON {RESOURCES} (file)",
    f"CREATE INDEX IF NOT EXISTS {RESOURCES}_key ON {RESOURCES} (key)",
    # A record's fingerprint (ci.history.measure.identical), the text once: identical code has one at many commits.
    f"CREATE TABLE IF NOT EXISTS {PRINTS} (file INTEGER NOT NULL, key INTEGER NOT NULL, print INTEGER NOT NULL)",
    f"CREATE INDEX IF NOT EXISTS {PRINTS}_file ON {PRINTS} (file)",
    "CREATE TABLE IF NOT EXISTS memos (name TEXT PRIMARY KEY, memo TEXT)",
)
# The row tables' indexes: a build from nothing (every file new) writes its rows without them and makes them once at
# its end (one sort each, not 4.5 million B-tree insertions at 50,000 commits); a killed build's next open makes them.
_ROW_INDEXES = tuple(s for s in _TABLES if s.startswith("CREATE INDEX") and f" ON {FILES} " not in s)
_BATCH = 500  # results files summarized between two database commits (a killed rebuild keeps what it committed)


class _Pending:
    """A batch's rows (text ids resolved), inserted at its end: one ``executemany`` per table and batch rather than
    four per file."""

    def __init__(self) -> None:
        self.points: list[tuple] = []
        self.missing: list[tuple[int, int, int]] = []
        self.resources: list[tuple[int, int, float]] = []
        self.prints: list[tuple[int, int, int]] = []

    def insert(self, db: sqlite3.Connection) -> None:
        db.executemany(f"INSERT INTO {POINTS} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", self.points)
        db.executemany(f"INSERT INTO {MISSING} VALUES (?, ?, ?)", self.missing)
        db.executemany(f"INSERT INTO {RESOURCES} VALUES (?, ?, ?)", self.resources)
        db.executemany(f"INSERT INTO {PRINTS} VALUES (?, ?, ?)", self.prints)
        self.points, self.missing, self.resources, self.prints = [], [], [], []


class Store(LineReads):
    """Every results file's summary, kept between runs as indexed rows (a point, a missing point, a resource count a
    row), keyed by each file's size and mtime: derived data, set aside and rebuilt when damaged; ``path`` None keeps
    them in memory only. :meth:`update` brings it to the folder's state reading only what changed, one file at a time
    (``workers`` > 1: files summarized in that many processes, written here in order); the readers query it by
    line, by commit or whole (docs/HISTORY.md, "asv_results/store.py")."""

    def __init__(self, path: Path | None, log: Callable[[str], None] = lambda message: None, workers: int = 1):
        self.path, self.log, self.workers = path, log, workers
        self.parsed = self.reused = 0
        self.db = self._open()
        self._text_ids: dict[str, int] = dict(self.db.execute(f"SELECT text, id FROM {TEXTS}").fetchall())
        self._texts: dict[int, str] = {i: t for t, i in self._text_ids.items()}
        self._flag_sets: dict[int, tuple[str, ...]] = {}  # a few distinct flag sets, each read once
        self._files: dict[int, tuple[str, str, str]] | None = None  # file id -> (machine, name, commit), once read
        self._ranked: tuple[dict[str, int], dict[int, int]] | None = None  # (commits, file id -> place among them)
        self._line_keys: list[tuple[str, str]] | None = None  # line_keys(), once per update
        self._key_set: set[str] | None = None  # keys(), once per update
        # The line cache (line_cache.py): beside the database, or in memory only with it.
        self.line_cache_path = None if path is None else path.with_name(path.name + ".lines.npz")
        self.line_cache_done = ""  # what the last read of the lines did: "kept", "grown" or "read"
        self._line_cache: line_cache.Lines | None = None
        self._line_cache_loaded = False
        self._axis: FileAxis | None = None

    def _open(self) -> sqlite3.Connection:
        if self.path is None:
            return self._schema(sqlite3.connect(":memory:"))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            return self._schema(sqlite3.connect(self.path))
        except sqlite3.DatabaseError as exc:
            aside = self.path.with_name(self.path.name + ".damaged")
            os.replace(self.path, aside)
            self.log(
                f"history cache {self.path} unreadable ({exc}): moved to {aside}, every results file is read again"
            )
            return self._schema(sqlite3.connect(self.path))

    @staticmethod
    def _schema(db: sqlite3.Connection) -> sqlite3.Connection:
        names = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for legacy in names:  # an older schema's tables: every file is read again
            if legacy == "files" or re.fullmatch(r"(files|texts|points|missing|resources|prints)_v\d+", legacy):
                if not legacy.endswith(f"_v{SCHEMA}"):
                    db.execute(f"DROP TABLE {legacy}")
        fresh = FILES not in names
        for statement in _TABLES:
            db.execute(statement)
        db.execute(f"SELECT count(*) FROM {FILES}").fetchone()  # a damaged file fails here, not later
        if fresh or db.execute("SELECT memo FROM memos WHERE name = ?", (IDENTITY,)).fetchone() is None:
            # New file tables start their ids again: a line cache of another database must not be taken for this one's.
            db.execute("INSERT OR REPLACE INTO memos VALUES (?, ?)", (IDENTITY, json.dumps(uuid.uuid4().hex)))
        db.commit()
        return db

    def close(self) -> None:
        self.db.close()

    # -- writing -------------------------------------------------------------------------------------------------

    def _id(self, text: str) -> int:
        found = self._text_ids.get(text)
        if found is None:
            found = self.db.execute(f"INSERT INTO {TEXTS} (text) VALUES (?)", (text,)).lastrowid
            assert found is not None
            self._text_ids[text], self._texts[found] = found, text
        return found

    def _drop_row_indexes(self) -> None:
        for statement in _ROW_INDEXES:
            name = re.search(r"EXISTS (\w+) ON", statement)
            assert name is not None
            self.db.execute(f"DROP INDEX IF EXISTS {name[1]}")
        self.db.commit()

    def _forget(self, file_ids: list[int]) -> None:
        for table in (POINTS, MISSING, RESOURCES, PRINTS):
            self.db.executemany(f"DELETE FROM {table} WHERE file = ?", [(i,) for i in file_ids])
        self.db.executemany(f"DELETE FROM {FILES} WHERE id = ?", [(i,) for i in file_ids])

    def _keep(
        self, machine: str, stem: str, stamp: str, rows: FileRows | None, old: int | None, pending: _Pending
    ) -> None:
        """``rows`` (None: a file asv cannot use) as the rows of (machine, stem), in place of ``old``'s: its file row
        now, the others into ``pending`` (texts given ids in the order the rows name them)."""
        if old is not None:
            self._forget([old])
        commit, date, prints = (None, None, None) if rows is None else (rows.commit, rows.date, rows.fingerprints)
        file_id = self.db.execute(
            f"INSERT INTO {FILES} (machine, stem, stamp, commit_hash, date, fingerprints) VALUES (?, ?, ?, ?, ?, ?)",
            (machine, stem, stamp, commit, date, prints),
        ).lastrowid
        if rows is None:
            return
        assert file_id is not None
        # A text's id: known (a C-level dict look-up; ids start at 1) or new (~170 texts a file: a Python call each
        # was a fifth of the writer's time).
        known, new, where = self._text_ids.get, self._id, self._id(machine)
        pending.points += [
            (file_id, where, known(key) or new(key), tflops, median_s, level, error, iqr, known(device) or new(device))
            + (known(flags) or new(flags), known(clocks) or new(clocks), copied)
            for key, tflops, median_s, level, error, iqr, device, flags, clocks, copied in rows.points
        ]
        pending.missing += [(file_id, known(key) or new(key), known(why) or new(why)) for key, why in rows.missing]
        pending.resources += [(file_id, known(key) or new(key), value) for key, value in rows.resources]
        pending.prints += [(file_id, known(key) or new(key), known(value) or new(value)) for key, value in rows.prints]

    def update(self, results_dir: Path, machines: tuple[str, ...] | None = None) -> None:
        """Bring the kept rows to ``results_dir``'s files (``machines``: of these only): a file whose stamp (its and its
        sidecar's size and modification time) is unchanged is not read; a changed or new one is summarized and its
        rows replaced; a gone one's rows deleted. Memory: one machine's stamps and one batch of files."""
        present = set()
        self._files = self._ranked = self._axis = None
        self._line_keys = self._key_set = None
        from_nothing = self.db.execute(f"SELECT 1 FROM {FILES} LIMIT 1").fetchone() is None
        if from_nothing:
            self._drop_row_indexes()
        pool = concurrent.futures.ProcessPoolExecutor(self.workers) if self.workers > 1 else None
        try:
            for machine_dir in history_results.machine_dirs(results_dir):
                machine = machine_dir.name
                present.add(machine)
                if machines is None or machine in machines:
                    self._update_machine(machine_dir, pool)
        finally:
            if pool is not None:
                pool.shutdown()
            if from_nothing:
                for statement in _ROW_INDEXES:
                    self.db.execute(statement)
        if machines is None:
            known = [m for (m,) in self.db.execute(f"SELECT DISTINCT machine FROM {FILES}")]
            for machine in set(known) - present:
                self._forget([i for (i,) in self.db.execute(f"SELECT id FROM {FILES} WHERE machine = ?", (machine,))])
        self.db.commit()

    def _update_machine(self, machine_dir: Path, pool: concurrent.futures.Executor | None) -> None:
        machine = machine_dir.name
        kept = {
            stem: (file_id, stamp)
            for file_id, stem, stamp in self.db.execute(
                f"SELECT id, stem, stamp FROM {FILES} WHERE machine = ?", (machine,)
            )
        }
        todo: list[tuple[str, str]] = []
        seen = set()
        for name in sorted(os.listdir(machine_dir)):
            if not name.endswith(".json") or name == "machine.json":
                continue
            stem = name.removesuffix(".json")
            stamp = self._stamp(machine_dir, stem)
            seen.add(stem)
            if kept.get(stem, (None, None))[1] == stamp:
                self.reused += 1
            else:
                todo.append((stem, stamp))
        self._forget([kept[stem][0] for stem in set(kept) - seen])
        for start in range(0, len(todo), _BATCH):
            batch = todo[start : start + _BATCH]
            jobs = [(str(machine_dir / f"{stem}.json"), machine) for stem, _ in batch]
            done = pool.map(summarized_rows, jobs, chunksize=16) if pool is not None else map(summarized_rows, jobs)
            pending = _Pending()
            for (stem, stamp), rows in zip(batch, done):
                self._keep(machine, stem, stamp, rows, kept.get(stem, (None, None))[0], pending)
                self.parsed += 1
            pending.insert(self.db)
            self.db.commit()

    @staticmethod
    def _stamp(machine_dir: Path, stem: str) -> str:
        folder = str(machine_dir)  # os.stat of a string: pathlib's objects were 3/4 of stamping 200,000 files

        def of(name: str) -> str:
            try:
                stat = os.stat(os.path.join(folder, name))
            except FileNotFoundError:
                return "-"
            return f"{stat.st_size}:{stat.st_mtime_ns}"

        return f"{SCHEMA}|{of(stem + '.json')}|{of(stem + records.SUFFIX)}"

    # -- reading -------------------------------------------------------------------------------------------------

    def summaries(
        self, results_dir: Path, machines: tuple[str, ...] | None = None, fingerprints: bool = False
    ) -> dict[str, list[dict[str, Any]]]:
        """machine -> the summary of each of its results files, by file name (``machines``: of these only;
        ``fingerprints``: with their records' fingerprints), after :meth:`update`. Holds them all: the main job reads
        its own machine so; the site build reads by line and by window instead."""
        self.update(results_dir, machines)
        return self._summaries(lambda machine, commit: machines is None or machine in machines, fingerprints)

    def _summaries(
        self, wanted: Callable[[str, str], bool], fingerprints: bool = False, among: list[str] | None = None
    ) -> dict[str, list[dict[str, Any]]]:
        """machine -> the summaries of its files (machine, file name order) whose (machine, commit) is ``wanted``
        (``among``: of these commits only, chosen by the database: a window's few hundred of 200,000 files)."""
        text = self._texts
        out: dict[str, list[dict[str, Any]]] = {}
        by_id: dict[int, dict[str, Any]] = {}
        chosen = "" if among is None else f" AND commit_hash IN ({','.join('?' * len(among))})"
        for file_id, machine, commit, date, prints in self.db.execute(
            f"SELECT id, machine, commit_hash, date, fingerprints FROM {FILES} WHERE commit_hash IS NOT NULL{chosen} "
            "ORDER BY machine, stem",
            among or [],
        ):
            if wanted(machine, commit):
                summary = {"commit": commit, "date": date, "gemm": {}, "missing": {}, "resources": {}}
                if fingerprints:
                    summary["fingerprints"] = {"of": {}, **json.loads(prints)}
                by_id[file_id] = summary
                out.setdefault(machine, []).append(summary)
        ids = sorted(by_id)
        everything = len(ids) == self.db.execute(f"SELECT count(*) FROM {FILES}").fetchone()[0]
        for start in range(0, len(ids), 1 if everything else 500):
            chunk = [] if everything else ids[start : start + 500]
            where = "" if everything else f" WHERE file IN ({','.join('?' * len(chunk))})"
            for file_id, key, *row in self.db.execute(
                "SELECT file, key, tflops, median_s, level, error, iqr, device, flags, clocks, copied "
                f"FROM {POINTS}{where} ORDER BY rowid",
                chunk,
            ):
                if file_id in by_id:
                    tflops, median_s, level, error, iqr, device, flags, clocks, copied = row
                    by_id[file_id]["gemm"][text[key]] = [
                        tflops, median_s, level, error, iqr, text[device], json.loads(text[flags]), text[clocks], copied
                    ]  # fmt: skip
            for file_id, key, why in self.db.execute(
                f"SELECT file, key, why FROM {MISSING}{where} ORDER BY rowid", chunk
            ):
                if file_id in by_id:
                    by_id[file_id]["missing"][text[key]] = text[why]
            for file_id, key, value in self.db.execute(
                f"SELECT file, key, value FROM {RESOURCES}{where} ORDER BY rowid", chunk
            ):
                if file_id in by_id:
                    by_id[file_id]["resources"][text[key]] = value
            if fingerprints:
                for file_id, key, value in self.db.execute(
                    f"SELECT file, key, print FROM {PRINTS}{where} ORDER BY rowid", chunk
                ):
                    if file_id in by_id:
                        by_id[file_id]["fingerprints"]["of"][text[key]] = json.loads(text[value])
            if everything:
                break
        return out

    def fingerprints(self, results_dir: Path, machine: str) -> list[tuple[str, dict[str, Any]]]:
        """(commit, its records' fingerprints) of each of ``machine``'s results files, by file name, after
        :meth:`update` of that machine: what the main job's identical-code plan reads (no point is read)."""
        self.update(results_dir, (machine,))
        files: dict[int, tuple[str, dict[str, Any]]] = {}
        for file_id, commit, prints in self.db.execute(
            f"SELECT id, commit_hash, fingerprints FROM {FILES} WHERE machine = ? AND commit_hash IS NOT NULL "
            "ORDER BY stem",
            (machine,),
        ):
            files[file_id] = (commit, {"of": {}, **json.loads(prints)})
        for file_id, key, value in self.db.execute(
            f"SELECT p.file, p.key, p.print FROM {PRINTS} p JOIN {FILES} f ON f.id = p.file WHERE f.machine = ? "
            "ORDER BY p.rowid",
            (machine,),
        ):
            if file_id in files:
                files[file_id][1]["of"][self._texts[key]] = json.loads(self._texts[value])
        return list(files.values())

    def resource_keys(self, results_dir: Path, machine: str) -> dict[str, set[str]]:
        """commit -> the benchmark keys of its compile-only counts on ``machine``, after :meth:`update` of it."""
        self.update(results_dir, (machine,))
        out: dict[str, set[str]] = {}
        for commit, key in self.db.execute(
            f"SELECT DISTINCT f.commit_hash, r.key FROM {RESOURCES} r JOIN {FILES} f ON f.id = r.file "
            "WHERE f.machine = ?",
            (machine,),
        ):
            out.setdefault(commit, set()).add(self._texts[key])
        return out

    def commits(self, order: dict[str, int] | None = None) -> dict[str, int]:
        """Every commit with results -> its position: in ``order`` (asv's revisions; a commit not in it left out), else
        its results file's date (as :func:`history` places them)."""
        out: dict[str, int] = {}
        for commit, date in self.db.execute(
            f"SELECT commit_hash, date FROM {FILES} WHERE commit_hash IS NOT NULL ORDER BY machine, stem"
        ):
            if order is None:
                out[commit] = int(date or 0)
            elif commit in order:
                out[commit] = order[commit]
        return out

    def dates(self) -> dict[str, float]:
        """commit -> its results file's date (asv's ``date``, ms since the epoch), by machine and file name first."""
        out: dict[str, float] = {}
        for commit, date in self.db.execute(
            f"SELECT commit_hash, date FROM {FILES} WHERE commit_hash IS NOT NULL ORDER BY machine, stem"
        ):
            if isinstance(date, (int, float)):
                out.setdefault(commit, date)
        return out

    def history(self, commits: dict[str, int], only: set[str] | None = None) -> History:
        """The History of ``commits`` (commit -> order; ``only``: of these commits only), as :func:`history` makes it
        from the summaries: every point in memory, so for a window of the newest commits, or a small history."""
        wanted = commits if only is None else {c: o for c, o in commits.items() if c in only}
        among = None if only is None or len(wanted) > 900 else sorted(wanted)  # below SQLite's variable limit
        return history(self._summaries(lambda machine, commit: commit in wanted, among=among), wanted)

    def memo(self, name: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT memo FROM memos WHERE name = ?", (name,)).fetchone()
        return None if row is None else json.loads(row[0])

    def keep_memo(self, name: str, memo: dict[str, Any]) -> None:
        self.db.execute("INSERT OR REPLACE INTO memos VALUES (?, ?)", (name, json.dumps(memo)))

    def commit(self) -> None:
        self.db.commit()


def read_history(results_dir: Path, order: dict[str, int] | None = None, store: Store | None = None) -> History:
    """The whole history under ``results_dir`` (through ``store``'s kept summaries when given)."""
    if store is not None:
        store.update(results_dir)
        return store.history(store.commits(order))
    with contextlib.closing(Store(None)) as own:
        return history(own.summaries(results_dir), order)
