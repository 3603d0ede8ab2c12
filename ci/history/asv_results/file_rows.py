"""What one results file becomes in the history store (store.py): its summary as flat rows, made in the process
that reads the file, so that the writer only looks their texts up and inserts them.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, NamedTuple

from ci.history.asv_results.summaries import _summarize_file as summarize_file


class FileRows(NamedTuple):
    """A results file's summary as the rows the store keeps, its texts still strings (:func:`_rows_of`)."""

    commit: str
    date: Any
    fingerprints: str  # the file's fingerprints but its records' (JSON): its FILES row's
    points: list[tuple]  # (key, tflops, median_s, level, error, iqr, device, flags as JSON, clocks, copied)
    missing: list[tuple[str, str]]  # (key, why)
    resources: list[tuple[str, float]]  # (key, value)
    prints: list[tuple[str, str]]  # (key, its record's fingerprint as JSON)


def summarized_rows(job: tuple[str, str]) -> FileRows | None:
    """A results file's summary (``summaries._summarize_file`` of (path, machine)) as its rows, made where the file is
    read (a worker process): the writer only looks their texts up and inserts them, and flat tuples cross between
    processes cheaper than the summary's dicts (unpickling them was ~0.2 ms a file in the writer)."""
    summary = summarize_file(Path(job[0]), job[1])
    return None if summary is None else _rows_of(summary)


def _rows_of(summary: dict[str, Any]) -> FileRows:
    stamped = summary["fingerprints"]
    points = [
        (key, tflops, median_s, level, error, iqr, device, _flags_text(tuple(flags)), clocks, copied)
        for key, (tflops, median_s, level, error, iqr, device, flags, clocks, copied) in summary["gemm"].items()
    ]
    return FileRows(
        summary["commit"],
        summary.get("date"),
        json.dumps({k: v for k, v in stamped.items() if k != "of"}),
        points,
        list(summary["missing"].items()),
        list(summary["resources"].items()),
        [(key, json.dumps(value)) for key, value in stamped["of"].items()],
    )


@functools.lru_cache(maxsize=256)  # a few distinct flag lists, each dumped once rather than once a point
def _flags_text(flags: tuple[str, ...]) -> str:
    return json.dumps(list(flags))
