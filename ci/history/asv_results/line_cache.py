"""Every line's rows in commit order as arrays, kept beside the history store and grown by the newest files only.

Reading a line of 50,000 commits out of SQLite makes 50,000 Python tuples and sorts them; the checks and the kernel
pages did that for every line at every publish (at 50,000 commits x 4 machines, 20 of the 22 CPU s of the checks and
most of the pages' 59 s). Here each line is numpy arrays over one axis: every results file at the publish's commits,
in commit order (of one commit's files, by name; file id last, as the store's line reads order them).

Valid when the axis it was built on is the start of today's axis: file ids are never reused (the store's files table
is AUTOINCREMENT) and a file's rows never change under its id (a changed file is deleted and inserted anew), so an
edited or removed file, a commit placed in the middle of the history, or another commit order makes the old axis no
longer a prefix and everything is read again; a new commit at the end adds only its own files' rows. The cache names
the store it was built from (``identity``: a new database restarts its ids) and its own VERSION (bump it when what
it keeps or how changes). Written whole and atomically (a temporary file renamed over it); unreadable: read again.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

VERSION = 2  # 2: an array a member of the file (1: each field of every line concatenated)
_CHUNK = 500  # file ids per IN (...) query: below SQLite's variable limit


@dataclass
class Line:
    """One line's rows, oldest first: ``at`` their files' places on the axis, ``rowid`` their points' rows (to read a
    whole row for what a page shows), their TFLOPS, level and error, whether flagged, whether copied."""

    at: np.ndarray
    rowid: np.ndarray
    tflops: np.ndarray
    level: np.ndarray
    error: np.ndarray
    flagged: np.ndarray
    copied: np.ndarray


_LINE_FIELDS = ("at", "rowid", "tflops", "level", "error", "flagged", "copied")
_LINE_TYPES = (np.int64, np.int64, np.float64, np.float64, np.float64, np.bool_, np.bool_)


@dataclass
class Counts:
    """One compile-only count's rows (any machine), in axis order: places, rows, values."""

    at: np.ndarray
    rowid: np.ndarray
    value: np.ndarray


_COUNT_FIELDS = ("at", "rowid", "value")
_COUNT_TYPES = (np.int64, np.int64, np.float64)


@dataclass
class Missed:
    """One benchmark key's missing points (any machine), in axis order: places, rows, why (a text id)."""

    at: np.ndarray
    rowid: np.ndarray
    why: np.ndarray


_MISSED_FIELDS = ("at", "rowid", "why")
_MISSED_TYPES = (np.int64, np.int64, np.int64)


@dataclass
class Lines:
    """Every line (machine id, key id) and count (key id) over ``axis`` (file ids in commit order)."""

    identity: str
    axis: np.ndarray
    lines: dict[tuple[int, int], Line]
    counts: dict[int, Counts]
    missed: dict[int, Missed]


def _line(columns: list[list]) -> Line:
    arrays: list[np.ndarray] = [np.asarray(c, dtype=t) for c, t in zip(columns, _LINE_TYPES)]
    order = np.lexsort((arrays[1], arrays[0]))  # by place, then row: the store's line order
    return Line(*(a[order] for a in arrays))


def _counts(columns: list, kind=None, types: tuple = _COUNT_TYPES):
    """Rows of one key (places, rows, one more column) in axis order, then row order."""
    arrays: list[np.ndarray] = [np.asarray(c, dtype=t) for c, t in zip(columns, types)]
    order = np.lexsort((arrays[1], arrays[0]))
    return (kind or Counts)(*(a[order] for a in arrays))


def _missed(columns: list) -> Missed:
    return _counts(columns, Missed, _MISSED_TYPES)


def _joined(old, new, fields):
    return type(old)(*(np.concatenate([getattr(old, f), getattr(new, f)]) for f in fields))


def _rows_of_files(
    db: sqlite3.Connection, tables: tuple[str, str, str], files: np.ndarray, first: int, flagged: set[int]
) -> tuple[dict[tuple[int, int], list[list]], dict[int, list[list]], dict[int, list[list]]]:
    """The point, count and missing rows of ``files`` (their places start at ``first``), by line and by key."""
    points, resources, missing = tables
    place = {int(f): first + i for i, f in enumerate(files)}
    lines: dict[tuple[int, int], list[list]] = {}
    counts: dict[int, list[list]] = {}
    missed: dict[int, list[list]] = {}
    for start in range(0, len(files), _CHUNK):
        chunk = [int(f) for f in files[start : start + _CHUNK]]
        marks = ",".join("?" * len(chunk))
        for rowid, file_id, machine, key, tflops, level, error, flags, copied in db.execute(
            f"SELECT rowid, file, machine, key, tflops, level, error, flags, copied IS NOT NULL FROM {points} "
            f"WHERE file IN ({marks})",
            chunk,
        ):
            columns = lines.setdefault((machine, key), [[] for _ in _LINE_FIELDS])
            for column, value in zip(
                columns, (place[file_id], rowid, tflops, level, error, flags in flagged, bool(copied))
            ):
                column.append(value)
        for rowid, file_id, key, value in db.execute(
            f"SELECT rowid, file, key, value FROM {resources} WHERE file IN ({marks})", chunk
        ):
            columns = counts.setdefault(key, [[] for _ in _COUNT_FIELDS])
            for column, item in zip(columns, (place[file_id], rowid, value)):
                column.append(item)
        for rowid, file_id, key, why in db.execute(
            f"SELECT rowid, file, key, why FROM {missing} WHERE file IN ({marks})", chunk
        ):
            columns = missed.setdefault(key, [[] for _ in _MISSED_FIELDS])
            for column, item in zip(columns, (place[file_id], rowid, why)):
                column.append(item)
    return lines, counts, missed


def _table(cursor: sqlite3.Cursor, width: int) -> np.ndarray:
    """A query's rows (numbers: ids below 2**53 and REALs, exact as float64) as one array, fetched 100,000 at a time:
    C loops, not a Python loop per row (reading 50,000 commits' rows a row at a time cost seconds per line)."""
    parts = []
    while chunk := cursor.fetchmany(100_000):
        parts.append(np.array(chunk, dtype=np.float64).reshape(-1, width))
    return np.concatenate(parts) if parts else np.zeros((0, width))


class _Places:
    """File id -> its place on the axis, for arrays of ids (-1: not on it)."""

    def __init__(self, axis: np.ndarray):
        self.order = np.argsort(axis, kind="stable")
        self.ids = axis[self.order]

    def of(self, files: np.ndarray) -> np.ndarray:
        files = files.astype(np.int64)
        found = np.minimum(np.searchsorted(self.ids, files), max(len(self.ids) - 1, 0))
        if not len(self.ids):
            return np.full(len(files), -1, dtype=np.int64)
        return np.where(self.ids[found] == files, self.order[found], -1)


def _by_key(rows: np.ndarray, places: _Places, key_column: int) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """(rowid, file, ..., key, ...) rows on the axis, split by key: key -> (their places, their rows), in axis order
    then row order."""
    at = places.of(rows[:, 1])
    on = at >= 0
    rows, at = rows[on], at[on]
    keys = rows[:, key_column].astype(np.int64)
    order = np.lexsort((rows[:, 0], at, keys))
    rows, at, keys = rows[order], at[order], keys[order]
    bounds = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1], True]) if len(keys) else np.zeros(0, dtype=np.int64)
    return {int(keys[a]): (at[a:b], rows[a:b]) for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist())}


def _read_all(
    db: sqlite3.Connection, tables: tuple[str, str, str], identity: str, axis: np.ndarray, flagged: set[int]
) -> Lines:
    """Every line read anew, a line at a time through the store's (machine, key) index (memory of one line), then
    every count key by key, then the missing points in one pass (no index by key), as arrays."""
    points, resources, missing = tables
    places, marked = _Places(axis), np.array(sorted(flagged), dtype=np.float64)
    lines: dict[tuple[int, int], Line] = {}
    for machine, key in db.execute(f"SELECT DISTINCT machine, key FROM {points}").fetchall():
        rows = _table(
            db.execute(
                f"SELECT rowid, file, tflops, level, error, flags, copied IS NOT NULL FROM {points} "
                "WHERE machine = ? AND key = ?",
                (machine, key),
            ),
            7,
        )
        for _, (at, mine) in _by_key(np.c_[rows, np.zeros(len(rows))], places, 7).items():
            lines[(machine, key)] = Line(
                at,
                mine[:, 0].astype(np.int64),
                mine[:, 2],
                mine[:, 3],
                mine[:, 4],
                np.isin(mine[:, 5], marked),
                mine[:, 6] != 0,
            )
    counts: dict[int, Counts] = {}
    for (key,) in db.execute(f"SELECT DISTINCT key FROM {resources}").fetchall():
        rows = _table(db.execute(f"SELECT rowid, file, key, value FROM {resources} WHERE key = ?", (key,)), 4)
        for found, (at, mine) in _by_key(rows, places, 2).items():
            counts[found] = Counts(at, mine[:, 0].astype(np.int64), mine[:, 3])
    rows = _table(db.execute(f"SELECT rowid, file, key, why FROM {missing}"), 4)
    missed = {
        key: Missed(at, mine[:, 0].astype(np.int64), mine[:, 3].astype(np.int64))
        for key, (at, mine) in _by_key(rows, places, 2).items()
    }
    return Lines(identity, axis, lines, counts, missed)


def _grown(
    db: sqlite3.Connection, tables: tuple[str, str, str], kept: Lines, axis: np.ndarray, flagged: set[int]
) -> Lines:
    """``kept`` with the rows of the files ``axis`` has after ``kept.axis`` (which is its start)."""
    first = len(kept.axis)
    new_lines, new_counts, new_missed = _rows_of_files(db, tables, axis[first:], first, flagged)
    lines, counts, missed = dict(kept.lines), dict(kept.counts), dict(kept.missed)
    for name, columns in new_lines.items():
        added = _line(columns)
        lines[name] = _joined(lines[name], added, _LINE_FIELDS) if name in lines else added
    for key, columns in new_counts.items():
        added_counts = _counts(columns)
        counts[key] = _joined(counts[key], added_counts, _COUNT_FIELDS) if key in counts else added_counts
    for key, columns in new_missed.items():
        added_missed = _missed(columns)
        missed[key] = _joined(missed[key], added_missed, _MISSED_FIELDS) if key in missed else added_missed
    return Lines(kept.identity, axis, lines, counts, missed)


def current(
    db: sqlite3.Connection,
    tables: tuple[str, str, str],
    identity: str,
    axis: np.ndarray,
    flagged: set[int],
    kept: Lines | None,
) -> tuple[Lines, str]:
    """The lines over ``axis`` (file ids in commit order), from ``kept`` where it is valid; and what was done:
    "kept", "grown" or "read" (every line read anew)."""
    if kept is not None and kept.identity == identity and len(kept.axis) <= len(axis):
        if np.array_equal(kept.axis, axis[: len(kept.axis)]):
            if len(kept.axis) == len(axis):
                return kept, "kept"
            return _grown(db, tables, kept, axis, flagged), "grown"
    return _read_all(db, tables, identity, axis, flagged), "read"


# -- on disk ------------------------------------------------------------------------------------------------------


def save(path: Path, lines: Lines) -> None:
    """``lines`` as one .npz file (an array a member), written to a temporary file beside ``path`` and renamed over
    it."""
    names = sorted(lines.lines)
    keys = sorted(lines.counts)
    missed = sorted(lines.missed)
    arrays: dict[str, np.ndarray] = {"axis": lines.axis}
    for prefix, items, fields in (
        ("line", [lines.lines[n] for n in names], _LINE_FIELDS),
        ("count", [lines.counts[k] for k in keys], _COUNT_FIELDS),
        ("missed", [lines.missed[k] for k in missed], _MISSED_FIELDS),
    ):
        for n, item in enumerate(items):  # each array its own member: no concatenated copy of the history in memory
            for f in fields:
                arrays[f"{prefix}{n}_{f}"] = getattr(item, f)
    meta = {"version": VERSION, "identity": lines.identity, "lines": names, "counts": keys, "missed": missed}
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            np.savez(out, **arrays)  # type: ignore[arg-type]  # numpy's stub reads ** as its allow_pickle
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def load(path: Path, log: Callable[[str], None] = lambda message: None) -> Lines | None:
    """What :func:`save` wrote; None when there is none, it is of another VERSION, or it cannot be read (said)."""
    if not path.is_file():
        return None
    try:
        with np.load(path) as found:
            meta = json.loads(found["meta"].tobytes())
            if meta.get("version") != VERSION:
                return None
            lines = dict(
                zip(
                    [tuple(n) for n in meta["lines"]],
                    _split(found, "line", _LINE_FIELDS, _LINE_TYPES, Line, len(meta["lines"])),
                )
            )
            counts = dict(
                zip(meta["counts"], _split(found, "count", _COUNT_FIELDS, _COUNT_TYPES, Counts, len(meta["counts"])))
            )
            missed = dict(
                zip(meta["missed"], _split(found, "missed", _MISSED_FIELDS, _MISSED_TYPES, Missed, len(meta["missed"])))
            )
            return Lines(str(meta["identity"]), found["axis"].astype(np.int64), lines, counts, missed)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log(f"history line cache {path} unreadable ({exc}): every line is read again")
        return None


def _split(found, prefix: str, fields: tuple[str, ...], types: tuple, kind, count: int) -> list:
    return [
        kind(*(found[f"{prefix}{n}_{f}"].astype(t, copy=False) for f, t in zip(fields, types))) for n in range(count)
    ]
