"""asv results as measured points (commit x benchmark x parameter x machine): merged point by point, never lost
silently; a point's id is ``<machine>/<commit8>-<env>/<benchmark>(<params>)`` (what ``--drop`` searches).

Why: docs/HISTORY.md, "asv_results/result_points.py".
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Container, Iterable, Iterator
from pathlib import PurePosixPath
from typing import Any

# Row-level columns keep ours; these hold one entry per parameter combination.
_PER_POINT_PREFIX = "stats_"
_PER_POINT = ("result", "samples")


def _per_point(column: str) -> bool:
    return column in _PER_POINT or column.startswith(_PER_POINT_PREFIX)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)


def point_prefix(path: str) -> str:
    """``results/<machine>/<stem>.json`` -> ``<machine>/<stem>/``, the start of every point id of that file."""
    parts = PurePosixPath(path).parts
    return f"{parts[-2]}/{PurePosixPath(parts[-1]).stem}/"


def _key(name: str, combo: tuple[str, ...]) -> str:
    return f"{name}({', '.join(combo)})" if combo else name


def _cells(columns: list[str], row: list[Any]) -> dict[str, Any]:
    return dict(itertools.zip_longest(columns, row[: len(columns)]))


def _row_points(cells: dict[str, Any], only: Container[str] | None = None) -> dict[tuple[str, ...], dict[str, Any]]:
    """combo -> {per-point column: value} of one row (a whole-column None gives None everywhere); ``only``: just these
    columns."""
    params = cells.get("params") or []
    combos = list(itertools.product(*params)) if params else [()]
    out: dict[tuple[str, ...], dict[str, Any]] = {combo: {} for combo in combos}
    for column, values in cells.items():
        if not _per_point(column) or (only is not None and column not in only):
            continue
        for i, combo in enumerate(combos):
            out[combo][column] = values[i] if isinstance(values, list) and i < len(values) else None
    return out


def points(data: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``benchmark(params)`` and its {per-point column: value, "started_at": its row's} for each point of a results
    document."""
    columns = data.get("result_columns") or []
    for name, row in (data.get("results") or {}).items():
        cells = _cells(columns, row)
        for combo, point in _row_points(cells).items():
            yield _key(name, combo), {**point, "started_at": cells.get("started_at")}


def results_and_samples(data: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """``benchmark(params)`` -> (its result, its samples) as :func:`points` gives them (None where a row has none),
    without the other columns' cells: what the history store summarizes, 200,000 files in a full publish."""
    columns = data.get("result_columns") or []
    return {
        _key(name, combo): (point.get("result"), point.get("samples"))
        for name, row in (data.get("results") or {}).items()
        for combo, point in _row_points(_cells(columns, row), _PER_POINT).items()
    }


def values(data: dict[str, Any]) -> dict[str, Any]:
    """``benchmark(params)`` -> value (None where the row has none) of a results document."""
    return {key: cells.get("result") for key, cells in points(data)}


def sample_counts(data: dict[str, Any]) -> dict[str, int]:
    """``benchmark(params)`` -> how many timing samples asv keeps for that point (``--record-samples``)."""
    return {
        key: len(cells["samples"])
        for key, cells in points(data)
        if isinstance(cells.get("samples"), list) and cells.get("result") is not None
    }


def _union(first: list[str], second: list[str]) -> list[str]:
    return list(dict.fromkeys([*first, *second]))


def _merge_row(columns: list[str], theirs: dict[str, Any], ours: dict[str, Any]) -> list[Any]:
    their_params, our_params = theirs.get("params") or [], ours.get("params") or []
    if theirs.get("version") != ours.get("version") or len(their_params) != len(our_params):
        # Another version of the benchmark: its old points are not comparable; ours stands (the loss check
        # names any point this leaves without a value).
        return [ours.get(c) for c in columns]
    axes = [_union(t, o) for t, o in zip(their_params, our_params)]
    their_points, our_points = _row_points(theirs), _row_points(ours)
    combos = list(itertools.product(*axes)) if axes else [()]
    merged: dict[str, list[Any]] = {c: [] for c in columns if _per_point(c)}
    for combo in combos:
        ours_here, theirs_here = our_points.get(combo, {}), their_points.get(combo, {})
        if is_number(ours_here.get("result")) or (ours_here and theirs_here.get("result") is None):
            source = ours_here
        else:
            source = theirs_here  # ours has no number here (n/a, failed, not run): theirs is kept
        for column in merged:
            merged[column].append(source.get(column))
    row: list[Any] = []
    for column in columns:
        if column == "params":
            row.append(axes)
        elif column in merged:
            cells = merged[column]
            row.append(None if all(v is None for v in cells) else cells)  # asv writes an all-None column as None
        else:
            row.append(ours.get(column) if ours.get(column) is not None else theirs.get(column))
    return row


def _trim(row: list[Any]) -> list[Any]:
    while row and row[-1] is None:
        row.pop()  # as asv saves it
    return row


def merge_documents(theirs: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
    """Ours, with every point of theirs that ours has no value for; rows, parameter values and durations a union."""
    columns = list(ours["result_columns"])
    their_columns = list(theirs.get("result_columns") or [])
    results = {}
    for name in _union(list(theirs.get("results") or {}), list(ours["results"])):
        if name not in ours["results"]:
            their_cells = _cells(their_columns, theirs["results"][name])
            results[name] = _trim([their_cells.get(c) for c in columns])
        elif name not in (theirs.get("results") or {}):
            results[name] = ours["results"][name]
        else:
            their_cells = _cells(their_columns, theirs["results"][name])
            results[name] = _trim(_merge_row(columns, their_cells, _cells(columns, ours["results"][name])))
    durations = {**(theirs.get("durations") or {}), **(ours.get("durations") or {})}
    return {**ours, "results": results, "durations": durations}


def lost_points(theirs: dict[str, Any], after: dict[str, Any], prefix: str) -> list[str]:
    """Ids of the points that had a value in ``theirs`` and have none in ``after`` (a number that became n/a
    included)."""
    before, now = values(theirs), values(after)
    lost = []
    for key, value in before.items():
        if value is None:
            continue
        kept = now.get(key)
        if kept is None or (is_number(value) and not is_number(kept)):
            lost.append(prefix + key)
    return lost


def _matches(point_id: str, patterns: Iterable[re.Pattern[str]]) -> bool:
    return any(p.search(point_id) for p in patterns)


def drop_points(data: dict[str, Any], prefix: str, patterns: Iterable[str]) -> tuple[dict[str, Any], list[str]]:
    """``data`` with every point whose id a pattern matches emptied (and a row left empty removed); the ids dropped."""
    compiled = [re.compile(p) for p in patterns]
    if not compiled:
        return data, []
    columns = list(data["result_columns"])
    dropped: list[str] = []
    results = {}
    for name, row in data["results"].items():
        cells = _cells(columns, row)
        points = _row_points(cells)
        hits = [i for i, combo in enumerate(points) if _matches(prefix + _key(name, combo), compiled)]
        if not hits:
            results[name] = row
            continue
        dropped += [
            prefix + _key(name, combo)
            for i, combo in enumerate(points)
            if i in hits and points[combo].get("result") is not None
        ]
        if len(hits) == len(points):
            continue
        for column in columns:
            if _per_point(column) and isinstance(cells.get(column), list):
                cells[column] = [None if i in hits else v for i, v in enumerate(cells[column])]
        results[name] = _trim([cells.get(c) for c in columns])
    return {**data, "results": results}, dropped


def drop_records(data: dict[str, Any], prefix: str, patterns: Iterable[str]) -> tuple[dict[str, Any], list[str]]:
    """A records sidecar document without the records whose point id a pattern matches."""
    compiled = [re.compile(p) for p in patterns]
    kept = {k: v for k, v in data["records"].items() if not _matches(prefix + k, compiled)}
    return {**data, "records": kept}, [prefix + k for k in data["records"] if k not in kept]


def dumps(data: dict[str, Any]) -> bytes:
    return (json.dumps(data, indent=None, separators=(",", ":")) + "\n").encode()
