"""Views of a long history for what must stay light: the newest commits, and every line thinned.

A kernel page of 10,000 commits with every point of every line is tens of MB and slow to draw; these cut a
:class:`~ci.history.asv_results.store.History` down without hiding what a reader looks for (a drop, a spike, a flagged
measurement, a change point). Imports ci.history.asv_results.store only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ci.history.asv_results.store import History, Point, lines


def newest(full: History, count: int) -> History:
    """The newest ``count`` commits of ``full`` (all of it when it has no more)."""
    if len(full.commits) <= count:
        return full
    kept = set(full.commit_axis()[-count:])
    return History(
        points=[p for p in full.points if p.commit in kept],
        missing=[m for m in full.missing if m.commit in kept],
        resources={k: [v for v in values if v[1] in kept] for k, values in full.resources.items()},
        commits={c: o for c, o in full.commits.items() if c in kept},
    )


def thinned(full: History, columns: int, keep: set[str], when: dict[str, float] | None = None) -> History:
    """Each line down to what ``columns`` pixel columns of its axis can show: per column its lowest and highest TFLOPS
    (a drop or a spike is never averaged away; a step shows as the column where the level moves), and always every
    flagged point, the newest one, and those at ``keep`` (the commits either side of each change point). ``when``:
    commit -> its place on the date axis (seconds), so that a column is a stretch of time, as the page draws it;
    without it, a stretch of commits. A line no longer than twice ``columns`` is kept whole. Resource counts keep the
    commits where a count changes."""
    axis = Axis.of(full.commits, columns, when)
    points = [p for line in lines(full.points).values() for p in axis.thin(line, keep)]
    resources = {key: changed_counts(values) for key, values in full.resources.items()}
    used = {p.commit for p in points} | {v[1] for values in resources.values() for v in values} | keep
    return History(
        points=points,
        missing=[m for m in full.missing if m.commit in used],
        resources=resources,
        commits={c: o for c, o in full.commits.items() if c in used},
    )


@dataclass(frozen=True)
class Axis:
    """The pixel columns of a whole history's axis: ``place`` (commit -> seconds, or its order) from ``first`` over
    ``width``."""

    place: dict[str, float]
    columns: int
    first: float
    width: float

    @classmethod
    def of(cls, commits: dict[str, int], columns: int, when: dict[str, float] | None = None) -> Axis:
        place = when if when is not None else {c: float(o) for c, o in commits.items()}
        first, last = min(place.values(), default=0.0), max(place.values(), default=0.0)
        return cls(place, columns, first, max(last - first, 1e-9))

    def thin(self, line: list[Point], keep: set[str]) -> list[Point]:
        """One line's points (in commit order) as :func:`thinned` keeps them."""
        chosen = self.chosen([p.commit for p in line], [p.tflops for p in line], [bool(p.flags) for p in line], keep)
        return line if chosen is None else [line[i] for i in chosen]

    def chosen(
        self,
        commits: list[str],
        tflops: Sequence[float] | np.ndarray,
        flagged: Sequence[bool] | np.ndarray,
        keep: set[str],
    ) -> list[int] | None:
        """Which of a line's points (its commits, TFLOPS and flags, in commit order) :meth:`thin` keeps, ascending;
        None: all of them (a line no longer than twice the columns). Per column the first lowest and the first highest:
        where the columns run in order along the line (a date axis in commit order), each column's stretch at once."""
        n, columns = len(commits), self.columns
        if n <= 2 * columns:
            return None
        place = np.fromiter((self.place[c] for c in commits), dtype=float, count=n)
        column = np.minimum(((place - self.first) / self.width * columns).astype(np.int64), columns - 1)
        values = np.asarray(tflops, dtype=float)
        if np.any(np.diff(column) < 0):
            return self._chosen_one_by_one(commits, tflops, flagged, keep, column.tolist())
        starts = np.flatnonzero(np.r_[True, column[1:] != column[:-1]])
        picked = [np.array([n - 1]), np.flatnonzero(flagged), np.flatnonzero([c in keep for c in commits])]
        for reduce in (np.minimum, np.maximum):
            extreme = np.repeat(reduce.reduceat(values, starts), np.diff(np.r_[starts, n]))
            at = np.flatnonzero(values == extreme)
            _, first = np.unique(np.searchsorted(starts, at, side="right"), return_index=True)
            picked.append(at[first])
        return np.unique(np.concatenate(picked)).tolist()

    @staticmethod
    def _chosen_one_by_one(
        commits: list[str],
        tflops: Sequence[float] | np.ndarray,
        flagged: Sequence[bool] | np.ndarray,
        keep: set[str],
        column: list[int],
    ) -> list[int]:
        chosen = {len(commits) - 1}
        lowest: dict[int, int] = {}
        highest: dict[int, int] = {}
        for i, (commit, value, where) in enumerate(zip(commits, tflops, column)):
            if where not in lowest or value < tflops[lowest[where]]:
                lowest[where] = i
            if where not in highest or value > tflops[highest[where]]:
                highest[where] = i
            if flagged[i] or commit in keep:
                chosen.add(i)
        return sorted(chosen | set(lowest.values()) | set(highest.values()))


def changed_counts(values: list[tuple[int, str, float]]) -> list[tuple[int, str, float]]:
    """A resource count's (order, commit, value) where it changes (and the first and the newest)."""
    ordered = sorted(values)
    return [
        v
        for i, v in enumerate(ordered)
        if i in (0, len(ordered) - 1) or v[2] != ordered[i - 1][2] or v[2] != ordered[i + 1][2]
    ]
