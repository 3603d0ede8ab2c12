"""The history store's reads by line (machine, benchmark key): a line's rows through its index, without the history.

A mixin of ci.history.asv_results.store.Store (docs/HISTORY.md, "asv_results/store.py").
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ci.history.asv_results import line_cache
from ci.history.asv_results.summaries import Missing, Point, split_key

# Of the kept rows: bump when they change, and every file is read again (the tables are named by it). 5: file ids
# never given twice (the line cache trusts them).
SCHEMA = 5
FILES, TEXTS, POINTS = f"files_v{SCHEMA}", f"texts_v{SCHEMA}", f"points_v{SCHEMA}"
MISSING, RESOURCES, PRINTS = f"missing_v{SCHEMA}", f"resources_v{SCHEMA}", f"prints_v{SCHEMA}"
IDENTITY = f"identity|{FILES}"  # memos' name of this database's identity (line_cache.py: a new database, new ids)


@dataclass(frozen=True)
class FileAxis:
    """Every results file at ``commits`` in commit order (of one commit's files, by name): ids, commits, orders,
    (order, commit) group numbers, machines (as numbers into ``machine_names``) and names."""

    commits: dict[str, int]
    ids: np.ndarray
    shas: np.ndarray
    orders: np.ndarray
    groups: np.ndarray
    machines: np.ndarray
    machine_names: list[str]
    stems: list[str]


class LineReads:
    """What :class:`~ci.history.asv_results.store.Store` reads a line at a time (its database and text ids)."""

    db: sqlite3.Connection
    _texts: dict[int, str]
    _text_ids: dict[str, int]
    _flag_sets: dict[int, tuple[str, ...]]
    _files: dict[int, tuple[str, str, str]] | None
    _ranked: tuple[dict[str, int], dict[int, int]] | None
    _line_keys: list[tuple[str, str]] | None
    _key_set: set[str] | None
    log: Callable[[str], None]
    line_cache_path: Path | None
    line_cache_done: str
    _line_cache: line_cache.Lines | None
    _line_cache_loaded: bool
    _axis: FileAxis | None

    def line_keys(self) -> list[tuple[str, str]]:
        """Every (machine, benchmark key) with a GEMM point, sorted (read once per update: the checks ask per
        machine, and a scan of every point's index entry costs ~1 s at 50,000 commits)."""
        if self._line_keys is None:
            text = self._texts
            self._line_keys = sorted(
                (text[m], text[k]) for m, k in self.db.execute(f"SELECT DISTINCT machine, key FROM {POINTS}")
            )
        return self._line_keys

    def keys(self) -> set[str]:
        """Every benchmark key with a point, a missing point or a resource count (read once per update)."""
        if self._key_set is None:
            found = set()
            for table in (POINTS, MISSING, RESOURCES):
                found |= {self._texts[k] for (k,) in self.db.execute(f"SELECT DISTINCT key FROM {table}")}
            self._key_set = found
        return set(self._key_set)

    # -- the line cache (line_cache.py): every line as arrays over the axis of every file in commit order --------

    def _axis_of(self, commits: dict[str, int]) -> FileAxis:
        """The :class:`FileAxis` of ``commits`` (made once per update and commit order)."""
        if self._axis is None or self._axis.commits is not commits:
            places, files = self._places(commits), self._file_map()
            ids = sorted(places, key=places.__getitem__)
            shas = [files[i][2] for i in ids]
            orders = [commits[c] for c in shas]
            changed = [True] + [a != b or x != y for a, b, x, y in zip(orders, orders[1:], shas, shas[1:])]
            names = sorted({files[i][0] for i in ids})
            code = {name: n for n, name in enumerate(names)}
            self._axis = FileAxis(
                commits,
                np.array(ids, dtype=np.int64),
                np.array(shas, dtype=object),
                np.array(orders, dtype=np.int64),
                np.cumsum(np.array(changed[: len(ids)], dtype=np.int64)) - 1,
                np.array([code[files[i][0]] for i in ids], dtype=np.int64),
                names,
                [files[i][1] for i in ids],
            )
        return self._axis

    def _lines(self, commits: dict[str, int]) -> line_cache.Lines:
        """Every line over ``commits``' axis: the kept cache where still valid, grown by new files, or read anew;
        saved beside the database when it changed."""
        axis = self._axis_of(commits).ids
        if self._line_cache is not None and self._line_cache.axis is axis:
            return self._line_cache  # checked against this axis already (the axis is made anew after an update)
        if not self._line_cache_loaded and self.line_cache_path is not None:
            self._line_cache = line_cache.load(self.line_cache_path, self.log)
        self._line_cache_loaded = True
        identity = json.loads(self.db.execute("SELECT memo FROM memos WHERE name = ?", (IDENTITY,)).fetchone()[0])
        flagged = {i for i, t in self._texts.items() if t.startswith("[") and self._flags(i)}
        lines, done = line_cache.current(
            self.db, (POINTS, RESOURCES, MISSING), identity, axis, flagged, self._line_cache
        )
        if lines is not self._line_cache and self.line_cache_path is not None:
            line_cache.save(self.line_cache_path, lines)
        lines.axis = axis
        self._line_cache = lines
        self.line_cache_done = done
        return lines

    def line_arrays(self, machine: str, key: str, commits: dict[str, int]) -> tuple[line_cache.Line, np.ndarray] | None:
        """One line (machine, benchmark key) at ``commits`` as arrays, oldest first, with each row's commit; None:
        no point there."""
        if machine not in self._text_ids or key not in self._text_ids:
            return None
        found = self._lines(commits).lines.get((self._text_ids[machine], self._text_ids[key]))
        if found is None or not len(found.at):
            return None
        return found, self._axis_of(commits).shas[found.at]

    def rows_at(self, rowids: list[int], commits: dict[str, int]) -> list[tuple]:
        """The points' rows ``rowids`` as :meth:`line_rows` gives them, in that order."""
        files, by_rowid = self._file_map(), {}
        for start in range(0, len(rowids), 500):
            chunk = rowids[start : start + 500]
            for rowid, file_id, *rest in self.db.execute(
                f"SELECT rowid, file, tflops, median_s, level, error, iqr, device, flags, clocks, copied FROM {POINTS} "
                f"WHERE rowid IN ({','.join('?' * len(chunk))})",
                chunk,
            ):
                commit = files[file_id][2]
                by_rowid[rowid] = (commits[commit], commit, *rest)
        return [by_rowid[r] for r in rowids]

    def changed_counts(self, key: str, commits: dict[str, int]) -> list[tuple[int, str, float]]:
        """views.changed_counts(:meth:`resource_counts`): one count's (order, commit, value) where it changes, and
        its first and newest, from the cached arrays (a sort of 50,000 tuples per count was seconds per page build)."""
        if key not in self._text_ids:
            return []
        found = self._lines(commits).counts.get(self._text_ids[key])
        if found is None or not len(found.at):
            return []
        shas, groups = self._axis_of(commits).shas, self._axis_of(commits).groups
        ordered = np.lexsort((found.value, groups[found.at]))  # (order, commit, value), as the tuples sort
        values = found.value[ordered]
        n = len(values)
        kept = np.zeros(n, dtype=bool)
        kept[[0, n - 1]] = True
        kept[1:] |= values[1:] != values[:-1]
        kept[:-1] |= values[:-1] != values[1:]
        at = found.at[ordered][kept]
        return [(commits[c], c, v) for c, v in zip(shas[at].tolist(), values[kept].tolist())]

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
        """:meth:`newest_missing_read` from the line cache: per key and machine, the rows at ``used`` commits with the
        highest order (numpy), then of those the highest (file name, row); in the order the database's rows first name
        each (machine, kernel config, shape), as the rows read in turn do."""
        axis, text = self._axis_of(commits), self._texts
        in_used = np.fromiter((c in used for c in axis.shas.tolist()), dtype=bool, count=len(axis.shas))
        newest: dict[tuple[str, tuple[str, str]], tuple[int, tuple[int, str, int], Missing]] = {}
        for key, missed in self._lines(commits).missed.items():
            split = split_key(text[key])
            if split is None:
                continue
            eligible = in_used[missed.at]
            at, rowid, why = missed.at[eligible], missed.rowid[eligible], missed.why[eligible]
            machines = axis.machines[at]
            for code in np.unique(machines).tolist():
                mine = machines == code
                orders = axis.orders[at[mine]]
                top = np.flatnonzero(mine)[orders == orders.max()]
                rank, i = max(((int(axis.orders[at[j]]), axis.stems[at[j]], int(rowid[j])), j) for j in top.tolist())
                machine = axis.machine_names[code]
                first = int(rowid[mine].min())
                found = Missing(machine, *split, str(axis.shas[at[i]]), rank[0], text[int(why[i])])
                before = newest.get((machine, split))
                if before is None:
                    newest[(machine, split)] = (first, rank, found)
                else:  # two keys of one (config, shape): GemmOnGpu's and GemmOnCpu's
                    newest[(machine, split)] = (
                        min(first, before[0]),
                        *(max((rank, found), (before[1], before[2]), key=lambda item: item[0])),
                    )
        return [found for _, _, found in sorted(newest.values(), key=lambda item: item[0])]

    def newest_missing_read(self, commits: dict[str, int], used: set[str]) -> list[Missing]:
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
        """One line's measured (not copied) commits in commit order, with each one's level and error: a series (from
        the line cache)."""
        found = self.line_arrays(machine, key, commits)
        if found is None:
            return [], [], []
        line, shas = found
        measured = ~line.copied
        return shas[measured].tolist(), line.level[measured].tolist(), line.error[measured].tolist()

    def levels_read(
        self, machine: str, key: str, commits: dict[str, int]
    ) -> tuple[list[str], list[float], list[float]]:
        """:meth:`levels` read from the database itself (what the cache is checked against)."""
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
