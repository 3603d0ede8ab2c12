"""Every results file and its records, summarized once and kept as indexed rows (SQLite beside the folder).

Everything that looks at the history reads it through here; the files themselves are opened by
ci.history.asv_results.folder (docs/HISTORY.md, "asv_results/store.py").
"""

from __future__ import annotations

import ast
import concurrent.futures
import contextlib
import functools
import json
import math
import os
import re
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asv_bench import records
from ci.history.asv_results import folder as history_results

GEMM_PREFIX = "bench_gemm.GemmOn"
RESOURCES_PREFIX = "bench_resources.CompiledResources.track_"
GEMM_KEY = re.compile(r"^bench_gemm\.(\w+)\.track_time\('([^']*)', '([^']*)'\)$")
COMPILE_MACHINE = "compile-only"  # ci.history.measure.tracks.COMPILE_MACHINE (not imported: that pulls in asv driving)
SCHEMA = 4  # of the kept rows: bump when they change, and every file is read again (the tables are named by it)
FILES, TEXTS, POINTS = f"files_v{SCHEMA}", f"texts_v{SCHEMA}", f"points_v{SCHEMA}"
MISSING, RESOURCES, PRINTS = f"missing_v{SCHEMA}", f"resources_v{SCHEMA}", f"prints_v{SCHEMA}"
_SE_OF_MEDIAN = 1.2533


@dataclass(frozen=True, slots=True)
class Point:
    """One measured GEMM: (machine, kernel config, shape) at one commit."""

    machine: str
    kernel_config: str
    shape: str
    benchmark: str  # asv's key: bench_gemm.GemmOnGpu.track_time('<config>', '<shape>')
    commit: str
    order: int
    tflops: float  # the record's: 2*M*N*K / median time
    median_s: float
    level: float  # log of the median TFLOPS over every sample (change points work on it)
    error: float  # that median's standard error, log units (0 with one sample)
    relative_iqr: float
    device: str  # the GPU's name as it reports it, or "cpu"
    flags: tuple[str, ...]
    clocks: str
    copied_from: str | None  # identical code: this is another commit's measurement, copied (ci.history.measure.copies)

    @property
    def is_cpu(self) -> bool:
        return self.device == "cpu"


@dataclass(frozen=True, slots=True)
class Missing:
    """A (machine, kernel config, shape) with a record but no number at a commit: n/a or failed, and why."""

    machine: str
    kernel_config: str
    shape: str
    commit: str
    order: int
    why: str


@dataclass
class History:
    points: list[Point] = field(default_factory=list)
    missing: list[Missing] = field(default_factory=list)
    # (kernel, arch, metric) -> [(order, commit, value)]
    resources: dict[tuple[str, str, str], list[tuple[int, str, float]]] = field(default_factory=dict)
    commits: dict[str, int] = field(default_factory=dict)  # every commit with results -> its order

    def machines(self) -> list[str]:
        return sorted({p.machine for p in self.points} | {m.machine for m in self.missing})

    def kernels(self) -> list[str]:
        names = {p.kernel_config.partition(":")[0] for p in self.points}
        names |= {m.kernel_config.partition(":")[0] for m in self.missing}
        return sorted(names | {kernel for kernel, _, _ in self.resources})

    def commit_axis(self) -> list[str]:
        return [c for c, _ in sorted(self.commits.items(), key=lambda item: (item[1], item[0]))]


def lines(points: Iterable[Point]) -> dict[tuple[str, str, str], list[Point]]:
    """(machine, kernel config, shape) -> its points in commit order: one line each, machines never mixed."""
    grouped: dict[tuple[str, str, str], list[Point]] = {}
    for point in sorted(points, key=lambda p: (p.order, p.commit)):
        grouped.setdefault((point.machine, point.kernel_config, point.shape), []).append(point)
    return grouped


def read_commit(
    results_dir: Path, machine: str, commit: str
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]], dict | None]:
    """(asv values by key, records by key, the results document or None) of one commit on ``machine``."""
    values: dict[str, dict[str, Any]] = {}
    recs: dict[str, dict[str, Any]] = {}
    document = None
    for _, document in history_results.commit_documents(results_dir, machine, commit):
        values.update(history_results.values_by_key(document))
    for _, entries in history_results.sidecars(results_dir, machine, commit[:8]):
        recs.update(entries)
    return values, recs, document


def _tflops_samples(entry: dict[str, Any] | None, record: dict[str, Any]) -> list[float] | None:
    flops = record.get("flops")
    raw = (entry or {}).get("samples") or record.get("samples_s")
    if isinstance(flops, (int, float)) and raw:
        tflops = [flops / t / 1e12 for t in raw if isinstance(t, (int, float)) and t > 0]
        if tflops:
            return tflops
    single = record.get("tflops")
    if isinstance(single, (int, float)) and math.isfinite(single) and single > 0:
        return [float(single)]
    return None


def _median(ordered: list[float]) -> float:
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _level(samples: Sequence[float]) -> tuple[float, float]:
    """The log of the samples' median TFLOPS, and that median's standard error (1.2533 x the MAD's SD over sqrt n).
    Plain Python: numpy's per-call overhead was a third of summarizing a file (30 lines of ~10 samples)."""
    logs = sorted(math.log(x) for x in samples)
    centre = _median(logs)
    if len(logs) < 2:
        return centre, 0.0
    spread = _median(sorted(abs(x - centre) for x in logs))
    return centre, _SE_OF_MEDIAN * 1.4826 * spread / math.sqrt(len(logs))


def summarize(document: dict[str, Any], recs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One commit's results document and records as a plain summary (what the database keeps)."""
    values = history_results.values_by_key(document)
    gemm, missing = {}, {}
    for key, record in recs.items():
        if not key.startswith(GEMM_PREFIX):
            continue
        if record.get("status") != "measured" or not record.get("tflops"):
            missing[key] = records.describe(record)
            continue
        samples = _tflops_samples(values.get(key), record)
        if samples is None:
            continue
        level, error = _level(samples)
        before = record.get("gpu_before") or {}
        device = "cpu" if ".GemmOnCpu." in key else (before.get("name") or "GPU")
        gemm[key] = [
            float(record["tflops"]),
            float(record["median_s"]),
            level,
            error,
            float(record.get("relative_iqr") or 0.0),
            device,
            list(record.get("flags") or ()),
            _clocks(record),
            record.get("identical_to"),
        ]
    stamped = {
        k: r for k, r in recs.items() if r.get("status") == "measured" and isinstance(r.get("fingerprint"), dict)
    }
    fingerprints = {
        "of": {k: r["fingerprint"] for k, r in stamped.items()},
        "originals": sorted({r.get("identical_to") or document["commit_hash"] for r in stamped.values()}),
        "at": max((float(r.get("fingerprint_at") or 0.0) for r in stamped.values()), default=0.0),
    }
    resources = {
        key: float(entry["value"])
        for key, entry in values.items()
        if key.startswith(RESOURCES_PREFIX)
        and isinstance(entry["value"], (int, float))
        and math.isfinite(entry["value"])
    }
    return {
        "commit": document["commit_hash"],
        "date": document.get("date"),
        "gemm": gemm,
        "missing": missing,
        "resources": resources,
        "fingerprints": fingerprints,
    }


def _clocks(record: dict[str, Any]) -> str:
    before = record.get("gpu_before") or {}
    if before.get("sm_clock_mhz"):
        after = record.get("gpu_after") or {}
        after_mhz, max_mhz = after.get("sm_clock_mhz", "?"), before.get("max_sm_clock_mhz", "?")
        return f"SM {before['sm_clock_mhz']} MHz before, {after_mhz} after, max {max_mhz}"
    return str(record.get("clock") or "")


def _summarize_file(path: Path, machine: str) -> dict[str, Any] | None:
    try:
        document = history_results.check_results_file(path, machine)
    except history_results.InvalidFile:
        return None  # ci.history.asv_results.folder.validate_tree quarantines it, saying why
    return summarize(document, history_results.read_records(records.sidecar_for_results_file(path)))


def default_path(results_dir: Path) -> Path:
    """Where a results folder's summaries are kept: beside it (asv reads every *.json inside it), named after it (the
    main job's .asv/results and the site build's mirror .asv/site-results must not share one)."""
    return results_dir.with_name(results_dir.name + ".cache.sqlite")


_TABLES = (
    # One row per results file (its stamp: size and mtime of it and its sidecar); commit NULL: a file asv cannot use.
    f"CREATE TABLE IF NOT EXISTS {FILES} (id INTEGER PRIMARY KEY, machine TEXT NOT NULL, stem TEXT NOT NULL, "
    "stamp TEXT NOT NULL, commit_hash TEXT, date INTEGER, fingerprints TEXT, UNIQUE (machine, stem))",
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
_BATCH = 500  # results files summarized between two database commits (a killed rebuild keeps what it committed)


def _summarize_at(job: tuple[str, str]) -> dict[str, Any] | None:
    """:func:`_summarize_file` of (path, machine), as a worker process takes it."""
    return _summarize_file(Path(job[0]), job[1])


class Store:
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
        for statement in _TABLES:
            db.execute(statement)
        db.execute(f"SELECT count(*) FROM {FILES}").fetchone()  # a damaged file fails here, not later
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

    def _forget(self, file_ids: list[int]) -> None:
        for table in (POINTS, MISSING, RESOURCES, PRINTS):
            self.db.executemany(f"DELETE FROM {table} WHERE file = ?", [(i,) for i in file_ids])
        self.db.executemany(f"DELETE FROM {FILES} WHERE id = ?", [(i,) for i in file_ids])

    def _keep(self, machine: str, stem: str, stamp: str, summary: dict[str, Any] | None, old: int | None) -> None:
        """``summary`` (None: a file asv cannot use) as the rows of (machine, stem), in place of ``old``'s."""
        if old is not None:
            self._forget([old])
        stamped = {} if summary is None else summary["fingerprints"]
        prints = None if summary is None else json.dumps({k: v for k, v in stamped.items() if k != "of"})
        commit, date = (None, None) if summary is None else (summary["commit"], summary.get("date"))
        file_id = self.db.execute(
            f"INSERT INTO {FILES} (machine, stem, stamp, commit_hash, date, fingerprints) VALUES (?, ?, ?, ?, ?, ?)",
            (machine, stem, stamp, commit, date, prints),
        ).lastrowid
        if summary is None:
            return
        where = self._id(machine)
        self.db.executemany(
            f"INSERT INTO {POINTS} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (file_id, where, self._id(key), tflops, median_s, level, error, iqr, self._id(device))
                + (self._id(json.dumps(flags)), self._id(clocks), copied)
                for key, (tflops, median_s, level, error, iqr, device, flags, clocks, copied) in summary["gemm"].items()
            ],
        )
        self.db.executemany(
            f"INSERT INTO {MISSING} VALUES (?, ?, ?)",
            [(file_id, self._id(key), self._id(why)) for key, why in summary["missing"].items()],
        )
        self.db.executemany(
            f"INSERT INTO {RESOURCES} VALUES (?, ?, ?)",
            [(file_id, self._id(key), value) for key, value in summary["resources"].items()],
        )
        self.db.executemany(
            f"INSERT INTO {PRINTS} VALUES (?, ?, ?)",
            [(file_id, self._id(key), self._id(json.dumps(value))) for key, value in stamped["of"].items()],
        )

    def update(self, results_dir: Path, machines: tuple[str, ...] | None = None) -> None:
        """Bring the kept rows to ``results_dir``'s files (``machines``: of these only): a file whose stamp (its and its
        sidecar's size and modification time) is unchanged is not read; a changed or new one is summarized and its
        rows replaced; a gone one's rows deleted. Memory: one machine's stamps and one batch of files."""
        present = set()
        self._files = self._ranked = None
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
            done = pool.map(_summarize_at, jobs, chunksize=16) if pool is not None else map(_summarize_at, jobs)
            for (stem, stamp), summary in zip(batch, done):
                self._keep(machine, stem, stamp, summary, kept.get(stem, (None, None))[0])
                self.parsed += 1
            self.db.commit()

    @staticmethod
    def _stamp(machine_dir: Path, stem: str) -> str:
        def of(name: str) -> str:
            try:
                stat = (machine_dir / name).stat()
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
        self, wanted: Callable[[str, str], bool], fingerprints: bool = False
    ) -> dict[str, list[dict[str, Any]]]:
        """machine -> the summaries of its files (machine, file name order) whose (machine, commit) is ``wanted``."""
        text = self._texts
        out: dict[str, list[dict[str, Any]]] = {}
        by_id: dict[int, dict[str, Any]] = {}
        for file_id, machine, commit, date, prints in self.db.execute(
            f"SELECT id, machine, commit_hash, date, fingerprints FROM {FILES} WHERE commit_hash IS NOT NULL "
            "ORDER BY machine, stem"
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

    def line_keys(self) -> list[tuple[str, str]]:
        """Every (machine, benchmark key) with a GEMM point, sorted."""
        text = self._texts
        return sorted((text[m], text[k]) for m, k in self.db.execute(f"SELECT DISTINCT machine, key FROM {POINTS}"))

    def keys(self) -> set[str]:
        """Every benchmark key with a point, a missing point or a resource count."""
        found = set()
        for table in (POINTS, MISSING, RESOURCES):
            found |= {self._texts[k] for (k,) in self.db.execute(f"SELECT DISTINCT key FROM {table}")}
        return found

    def _file_map(self) -> dict[int, tuple[str, str, str]]:
        """file id -> (machine, file name, commit) of every file with a commit: read once per update, so that a line
        is read through its index alone (no join, no sort in the database)."""
        if self._files is None:
            self._files = {
                file_id: (machine, stem, commit)
                for file_id, machine, stem, commit in self.db.execute(
                    f"SELECT id, machine, stem, commit_hash FROM {FILES} WHERE commit_hash IS NOT NULL"
                )
            }
        return self._files

    def _places(self, commits: dict[str, int]) -> dict[int, int]:
        """file id -> its place among the files at ``commits`` in commit order (of one commit's files, by name): one
        integer to sort a line's rows by; kept for the last ``commits`` asked about."""
        if self._ranked is None or self._ranked[0] is not commits:
            files = self._file_map()
            at = sorted((commits[c], c, stem, i) for i, (_, stem, c) in files.items() if c in commits)
            self._ranked = (commits, {entry[3]: place for place, entry in enumerate(at)})
        return self._ranked[1]

    def timed_machines(self, commits: dict[str, int]) -> dict[str, bool]:
        """machine -> whether a GPU measured any of its GEMM points at ``commits`` (every machine with one): a line's
        device is the CPU or a GPU by its benchmark (bench_gemm.GemmOnCpu or GemmOnGpu), so its first point at
        ``commits`` tells."""
        files, out = self._file_map(), dict[str, bool]()
        for machine, key in self.line_keys():
            for file_id, device in self.db.execute(
                f"SELECT file, device FROM {POINTS} WHERE machine = ? AND key = ?",
                (self._text_ids[machine], self._text_ids[key]),
            ):
                if file_id in files and files[file_id][2] in commits:
                    out[machine] = out.get(machine, False) or self._texts[device] != "cpu"
                    break
        return out

    def newest_missing(self, commits: dict[str, int], used: set[str]) -> list[Missing]:
        """Per (machine, kernel config, shape) with a point missing at one of ``used`` (of ``commits``, commit ->
        order): its newest Missing, of two at one commit the later file and row (what a page says of a line with no
        number, as it reads a History's), read row by row."""
        files, text = self._file_map(), self._texts
        newest: dict[tuple[str, tuple[str, str]], tuple[tuple[int, str, int], Missing]] = {}
        for rowid, file_id, key, why in self.db.execute(f"SELECT rowid, file, key, why FROM {MISSING}"):
            machine, stem, commit = files.get(file_id, ("", "", ""))
            split = split_key(text[key])
            if split is not None and commit in used and commit in commits:
                rank = (commits[commit], stem, rowid)
                if (machine, split) not in newest or newest[(machine, split)][0] <= rank:
                    newest[(machine, split)] = (rank, Missing(machine, *split, commit, commits[commit], text[why]))
        return [missing for _, missing in newest.values()]

    def no_gpu(self, commits: dict[str, int]) -> str:
        """Where no GPU measured, when no GEMM point at ``commits`` was a GPU's (as the kernel pages say it); ""
        otherwise."""
        timed = self.timed_machines(commits)
        if any(timed.values()):
            return ""
        for machine, commit in self.db.execute(
            f"SELECT DISTINCT f.machine, f.commit_hash FROM {MISSING} m JOIN {FILES} f ON f.id = m.file"
        ):
            if commit in commits:
                timed.setdefault(machine, False)
        return f"on {', '.join(sorted(timed))}" if timed else "in these results"

    def line(self, machine: str, key: str, commits: dict[str, int]) -> list[Point]:
        """The points of one line (machine, benchmark key) at ``commits`` (commit -> order), in commit order."""
        return [self.point(machine, key, row) for row in self.line_rows(machine, key, commits)]

    def line_rows(self, machine: str, key: str, commits: dict[str, int]) -> list[tuple]:
        """One line's rows at ``commits``, in commit order: (order, commit, tflops, median s, level, error, IQR,
        device, flags, clocks, copied from), the texts as ids (:meth:`point` makes a Point, :meth:`flagged` reads
        the flags): a line of 50,000 commits without 50,000 objects."""
        if machine not in self._text_ids or key not in self._text_ids or split_key(key) is None:
            return []
        files, places = self._file_map(), self._places(commits)
        ranked = [
            (places[row[1]], row[0], row)
            for row in self.db.execute(
                f"SELECT rowid, file, tflops, median_s, level, error, iqr, device, flags, clocks, copied FROM {POINTS} "
                "WHERE machine = ? AND key = ?",
                (self._text_ids[machine], self._text_ids[key]),
            )
            if row[1] in places
        ]
        ranked.sort(key=lambda item: (item[0], item[1]))  # commit order; of one commit's two files, by name
        return [(commits[files[row[1]][2]], files[row[1]][2], *row[2:]) for _, _, row in ranked]

    def point(self, machine: str, key: str, row: tuple) -> Point:
        """A row of :meth:`line_rows` as a Point."""
        order, commit, tflops, median_s, level, error, iqr, device, flags, clocks, copied = row
        config, shape = split_key(key) or ("", "")
        text = self._texts
        numbers = (tflops, median_s, level, error, iqr, text[device])
        return Point(machine, config, shape, key, commit, order, *numbers, self._flags(flags), text[clocks], copied)

    def _flags(self, flags: int) -> tuple[str, ...]:
        found = self._flag_sets.get(flags)
        if found is None:
            found = self._flag_sets[flags] = tuple(json.loads(self._texts[flags]))
        return found

    def flagged(self, flags: int) -> bool:
        """Whether a row's flags (:meth:`line_rows`) name any flag."""
        return bool(self._flags(flags))

    def levels(self, machine: str, key: str, commits: dict[str, int]) -> tuple[list[str], list[float], list[float]]:
        """One line's measured (not copied) commits in commit order, with each one's level and error: a series."""
        if machine not in self._text_ids or key not in self._text_ids:
            return [], [], []
        files, places = self._file_map(), self._places(commits)
        rows = [
            (places[file_id], rowid, file_id, level, error)
            for rowid, file_id, level, error in self.db.execute(
                f"SELECT rowid, file, level, error FROM {POINTS} WHERE machine = ? AND key = ? AND copied IS NULL",
                (self._text_ids[machine], self._text_ids[key]),
            )
            if file_id in places
        ]
        rows.sort(key=lambda row: (row[0], row[1]))
        return [files[r[2]][2] for r in rows], [r[3] for r in rows], [r[4] for r in rows]

    def resource_counts(self, key: str, commits: dict[str, int]) -> list[tuple[int, str, float]]:
        """One compile-only count (its benchmark key)'s (order, commit, value) at ``commits``, as History keeps them."""
        if key not in self._text_ids:
            return []
        files = self._file_map()
        rows = []
        for rowid, file_id, value in self.db.execute(
            f"SELECT rowid, file, value FROM {RESOURCES} WHERE key = ?", (self._text_ids[key],)
        ):
            machine, stem, commit = files.get(file_id, ("", "", ""))
            if commit in commits:
                rows.append(((machine, stem, rowid), (commits[commit], commit, value)))
        rows.sort(key=lambda item: item[0])
        return [row for _, row in rows]

    def history(self, commits: dict[str, int], only: set[str] | None = None) -> History:
        """The History of ``commits`` (commit -> order; ``only``: of these commits only), as :func:`history` makes it
        from the summaries: every point in memory, so for a window of the newest commits, or a small history."""
        wanted = commits if only is None else {c: o for c, o in commits.items() if c in only}
        return history(self._summaries(lambda machine, commit: commit in wanted), wanted)

    def memo(self, name: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT memo FROM memos WHERE name = ?", (name,)).fetchone()
        return None if row is None else json.loads(row[0])

    def keep_memo(self, name: str, memo: dict[str, Any]) -> None:
        self.db.execute("INSERT OR REPLACE INTO memos VALUES (?, ?)", (name, json.dumps(memo)))

    def commit(self) -> None:
        self.db.commit()


def history(summaries: dict[str, list[dict[str, Any]]], order: dict[str, int] | None = None) -> History:
    """Every summary as one History; ``order`` (commit -> position, asv's revisions) limits and orders the commits,
    else each results file's date does."""
    out = History()
    for machine, files in sorted(summaries.items()):
        for summary in files:
            commit = summary["commit"]
            if order is None:
                position = int(summary.get("date") or 0)
            elif commit in order:
                position = order[commit]
            else:
                continue
            out.commits[commit] = position
            _add(out, machine, commit, position, summary)
    return out


@functools.lru_cache(maxsize=4096)  # a few hundred distinct keys, repeated at every commit
def split_key(key: str) -> tuple[str, str] | None:
    _, _, params = key.partition("(")
    try:
        first, second = ast.literal_eval("(" + params)
    except (ValueError, SyntaxError, TypeError):
        return None
    return str(first), str(second)


def _add(out: History, machine: str, commit: str, order: int, summary: dict[str, Any]) -> None:
    for key, row in summary["gemm"].items():
        split = split_key(key)
        if split is not None:
            tflops, median_s, level, error, iqr, device, flags, clocks, copied = row
            numbers = (tflops, median_s, level, error, iqr, device)
            out.points.append(Point(machine, *split, key, commit, order, *numbers, tuple(flags), clocks, copied))
    for key, why in summary["missing"].items():
        split = split_key(key)
        if split is not None:
            out.missing.append(Missing(machine, split[0], split[1], commit, order, why))
    for key, value in summary["resources"].items():
        split = split_key(key)
        if split is not None:
            metric = key[len(RESOURCES_PREFIX) :].partition("(")[0]
            out.resources.setdefault((split[0], split[1], metric), []).append((order, commit, value))


def read_history(results_dir: Path, order: dict[str, int] | None = None, store: Store | None = None) -> History:
    """The whole history under ``results_dir`` (through ``store``'s kept summaries when given)."""
    if store is not None:
        store.update(results_dir)
        return store.history(store.commits(order))
    with contextlib.closing(Store(None)) as own:
        return history(own.summaries(results_dir), order)
