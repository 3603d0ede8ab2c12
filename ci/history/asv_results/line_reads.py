"""The history store's reads by line (machine, benchmark key): a line's rows through its index, without the history.

A mixin of ci.history.asv_results.store.Store (docs/HISTORY.md, "asv_results/store.py").
"""

from __future__ import annotations

import json
import sqlite3

from ci.history.asv_results.summaries import Missing, Point, split_key

SCHEMA = 4  # of the kept rows: bump when they change, and every file is read again (the tables are named by it)
FILES, TEXTS, POINTS = f"files_v{SCHEMA}", f"texts_v{SCHEMA}", f"points_v{SCHEMA}"
MISSING, RESOURCES, PRINTS = f"missing_v{SCHEMA}", f"resources_v{SCHEMA}", f"prints_v{SCHEMA}"


class LineReads:
    """What :class:`~ci.history.asv_results.store.Store` reads a line at a time (its database and text ids)."""

    db: sqlite3.Connection
    _texts: dict[int, str]
    _text_ids: dict[str, int]
    _flag_sets: dict[int, tuple[str, ...]]
    _files: dict[int, tuple[str, str, str]] | None
    _ranked: tuple[dict[str, int], dict[int, int]] | None

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
