"""An identical-code commit's results: the measured commit's, copied under its hash; and what the GPU spent.

Why: docs/HISTORY.md, "measure/copies.py".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asv_bench import records
from ci.common.files import write_bytes_atomic
from ci.history.asv_results import folder as history_results


def note(source: str) -> str:
    return f"identical code to {source[:12]}: not re-measured"


@dataclass
class Copied:
    rows: int = 0  # asv benchmarks (rows) copied
    records: int = 0
    seconds_saved: float = 0.0  # the source's asv durations of those rows


def copy_results(
    results_dir: Path, machine: str, source: str, target: str, target_date_ms: int, track: str, job: str
) -> Copied:
    """Copy ``source``'s rows matching ``track`` (a regex) and their records to ``target``; see the module doc."""
    done = Copied()
    for path, document in history_results.commit_documents(results_dir, machine, source):
        rows = {name: row for name, row in document["results"].items() if re.search(track, name)}
        if not rows:
            continue
        target_file = path.with_name(records.results_file_stem(target, document["env_name"]) + ".json")
        existing = _existing(target_file, machine, target, document["result_columns"])
        copied = {
            **document,
            "commit_hash": target,
            "date": target_date_ms,
            "results": {**existing, **rows},
            "durations": {},
        }  # set-up/build durations were the source's run, not this commit's
        kept = f"{target_file.name} as it was (or none), {source[:8]}'s results, every earlier one; nothing committed"
        write_bytes_atomic(target_file, (json.dumps(copied, separators=(",", ":")) + "\n").encode(), kept=kept)
        done.rows += len(rows)
        done.seconds_saved += sum(_duration(row, document["result_columns"]) for row in rows.values())
        done.records += _copy_records(
            records.sidecar_for_results_file(path), records.sidecar_for_results_file(target_file), rows, source, job
        )
    return done


def _existing(target_file: Path, machine: str, target: str, columns: list[str]) -> dict[str, Any]:
    if not target_file.exists():
        return {}
    try:
        document = history_results.check_results_file(target_file, machine)
    except history_results.InvalidFile:
        return {}
    if document["commit_hash"] != target or document["result_columns"] != columns:
        return {}
    return document["results"]


def _copy_records(source_sidecar: Path, target_sidecar: Path, rows: dict[str, Any], source: str, job: str) -> int:
    entries = history_results.read_records(source_sidecar)
    wanted = {key: record for key, record in entries.items() if key.partition("(")[0] in rows}
    changes: dict[str, dict[str, Any] | None] = {
        key: {
            **record,
            "identical_to": record.get("identical_to") or source,
            "copied_by": job,
            "note": note(record.get("identical_to") or source),
            "resume": False,
            "samples_s": None,
        }
        for key, record in wanted.items()
    }
    if changes:
        records.update(target_sidecar, changes)
    return len(changes)


def _duration(row: list[Any], columns: list[str]) -> float:
    cells = dict(zip(columns, row))
    value = cells.get("duration")
    if isinstance(value, list):
        return float(sum(v for v in value if isinstance(v, (int, float))))
    return float(value) if isinstance(value, (int, float)) else 0.0


def benchmark_seconds(results_dir: Path, machine: str, commit: str, track: str, since_ms: float) -> float:
    """asv's wall seconds of the ``track`` rows of ``commit`` that ran at or after ``since_ms`` (this run)."""
    total = 0.0
    for _, document in history_results.commit_documents(results_dir, machine, commit):
        columns = document["result_columns"]
        for name, row in document["results"].items():
            started = dict(zip(columns, row)).get("started_at")
            if re.search(track, name) and isinstance(started, (int, float)) and started >= since_ms:
                total += _duration(row, columns)
    return total
