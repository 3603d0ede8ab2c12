"""Every results file and its records, summarized once and kept (SQLite beside the folder), read as one History.

Everything that looks at the history reads it through here; the files themselves are opened by
ci.history.asv_results.folder (docs/HISTORY.md, "asv_results/store.py").
"""

from __future__ import annotations

import ast
import contextlib
import functools
import json
import math
import os
import re
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from asv_bench import records
from ci.history.asv_results import folder as history_results

GEMM_PREFIX = "bench_gemm.GemmOn"
RESOURCES_PREFIX = "bench_resources.CompiledResources.track_"
GEMM_KEY = re.compile(r"^bench_gemm\.(\w+)\.track_time\('([^']*)', '([^']*)'\)$")
COMPILE_MACHINE = "compile-only"  # ci.history.measure.tracks.COMPILE_MACHINE (not imported: that pulls in asv driving)
SCHEMA = 3  # of a stored summary: bump when it changes, and every file is read again (the table is named by it)
FILES = f"files_v{SCHEMA}"
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


def _tflops_samples(entry: dict[str, Any] | None, record: dict[str, Any]) -> np.ndarray | None:
    flops = record.get("flops")
    raw = (entry or {}).get("samples") or record.get("samples_s")
    if isinstance(flops, (int, float)) and raw:
        times = np.array([t for t in raw if isinstance(t, (int, float)) and t > 0], dtype=float)
        if times.size:
            return flops / times / 1e12
    tflops = record.get("tflops")
    if isinstance(tflops, (int, float)) and math.isfinite(tflops) and tflops > 0:
        return np.array([float(tflops)])
    return None


def _level(samples: np.ndarray) -> tuple[float, float]:
    logs = np.log(samples)
    centre = float(np.median(logs))
    if logs.size < 2:
        return centre, 0.0
    return centre, _SE_OF_MEDIAN * 1.4826 * float(np.median(np.abs(logs - centre))) / math.sqrt(logs.size)


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


class Store:
    """File summaries kept between runs, keyed by size and mtime: derived data, set aside and rebuilt when damaged;
    ``path`` None keeps them in memory only."""

    def __init__(self, path: Path | None, log: Callable[[str], None] = lambda message: None):
        self.path, self.log = path, log
        self.parsed = self.reused = 0
        self.db = self._open()

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
        for legacy in ("files", *(f"files_v{v}" for v in range(1, SCHEMA))):  # summaries of an older schema: read again
            db.execute(f"DROP TABLE IF EXISTS {legacy}")
        # Fingerprints apart: only the main job's identical-code plan reads them, and they are most of a summary.
        db.execute(
            f"CREATE TABLE IF NOT EXISTS {FILES} (machine TEXT, stem TEXT, stamp TEXT, summary TEXT, "
            "fingerprints TEXT, PRIMARY KEY (machine, stem))"
        )
        db.execute("CREATE TABLE IF NOT EXISTS memos (name TEXT PRIMARY KEY, memo TEXT)")
        db.execute(f"SELECT count(*) FROM {FILES}").fetchone()  # a damaged file fails here, not later
        return db

    def close(self) -> None:
        self.db.close()

    def summaries(
        self, results_dir: Path, machines: tuple[str, ...] | None = None, fingerprints: bool = False
    ) -> dict[str, list[dict[str, Any]]]:
        """machine -> the summary of each of its results files (``machines``: of these only; ``fingerprints``: with
        their records' fingerprints); a file is stamped by its and its sidecar's size and modification time."""
        out: dict[str, list[dict[str, Any]]] = {}
        columns = "machine, stem, stamp, summary" + (", fingerprints" if fingerprints else ", NULL")
        kept = {
            (m, s): (stamp, summary, prints)
            for m, s, stamp, summary, prints in self.db.execute(f"SELECT {columns} FROM {FILES}")
            if machines is None or m in machines
        }
        seen = set()
        for machine_dir in history_results.machine_dirs(results_dir):
            machine = machine_dir.name
            if machines is not None and machine not in machines:
                continue
            for name in sorted(os.listdir(machine_dir)):
                if not name.endswith(".json") or name == "machine.json":
                    continue
                stem = name.removesuffix(".json")
                stamp = self._stamp(machine_dir, stem)
                seen.add((machine, stem))
                old = kept.get((machine, stem))
                if old is not None and old[0] == stamp:
                    summary, prints = json.loads(old[1]), old[2] and json.loads(old[2])
                    self.reused += 1
                else:
                    summary = _summarize_file(machine_dir / name, machine)
                    prints = None if summary is None else summary.pop("fingerprints")
                    self.parsed += 1
                    self.db.execute(
                        f"INSERT OR REPLACE INTO {FILES} VALUES (?, ?, ?, ?, ?)",
                        (machine, stem, stamp, json.dumps(summary), json.dumps(prints)),
                    )
                if summary is not None:
                    out.setdefault(machine, []).append({**summary, "fingerprints": prints} if fingerprints else summary)
        for gone in set(kept) - seen:
            self.db.execute(f"DELETE FROM {FILES} WHERE machine = ? AND stem = ?", gone)
        self.db.commit()
        return out

    @staticmethod
    def _stamp(machine_dir: Path, stem: str) -> str:
        def of(name: str) -> str:
            try:
                stat = (machine_dir / name).stat()
            except FileNotFoundError:
                return "-"
            return f"{stat.st_size}:{stat.st_mtime_ns}"

        return f"{SCHEMA}|{of(stem + '.json')}|{of(stem + records.SUFFIX)}"

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
def _split(key: str) -> tuple[str, str] | None:
    _, _, params = key.partition("(")
    try:
        first, second = ast.literal_eval("(" + params)
    except (ValueError, SyntaxError, TypeError):
        return None
    return str(first), str(second)


def _add(out: History, machine: str, commit: str, order: int, summary: dict[str, Any]) -> None:
    for key, row in summary["gemm"].items():
        split = _split(key)
        if split is not None:
            tflops, median_s, level, error, iqr, device, flags, clocks, copied = row
            numbers = (tflops, median_s, level, error, iqr, device)
            out.points.append(Point(machine, *split, key, commit, order, *numbers, tuple(flags), clocks, copied))
    for key, why in summary["missing"].items():
        split = _split(key)
        if split is not None:
            out.missing.append(Missing(machine, split[0], split[1], commit, order, why))
    for key, value in summary["resources"].items():
        split = _split(key)
        if split is not None:
            metric = key[len(RESOURCES_PREFIX) :].partition("(")[0]
            out.resources.setdefault((split[0], split[1], metric), []).append((order, commit, value))


def read_history(results_dir: Path, order: dict[str, int] | None = None, store: Store | None = None) -> History:
    """The whole history under ``results_dir`` (through ``store``'s kept summaries when given)."""
    if store is not None:
        return history(store.summaries(results_dir), order)
    with contextlib.closing(Store(None)) as own:
        return history(own.summaries(results_dir), order)
