"""asv's results folder as the main job keeps it: the only module that reads it; validated, quarantined, reconciled.

Every other module reads the folder through the functions of the first section below. Why each check, the
quarantine, reconcile and the full-disk probe exist: docs/HISTORY.md, "asv_results/folder.py".
"""

from __future__ import annotations

import errno
import json
import math
import os
import shutil
import time
from collections.abc import Callable, Container, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asv_bench import records
from ci.common.errors import InputError
from ci.history.asv_results import result_points
from harness import fast_json

RESULTS_API_VERSION = 2  # asv.results.Results.api_version (asv 0.6.x)
MACHINE_API_VERSION = 1  # asv.machine.Machine.api_version
BENCHMARKS_API_VERSION = 2  # asv.benchmarks.Benchmarks.api_version


class InvalidFile(InputError, ValueError):
    """A file under the results directory that asv (or the records reader) cannot use; the message says why."""


# ---------------------------------------------------------------------------
# reading: every other module reads the results folder through these
# ---------------------------------------------------------------------------


def machine_dirs(results_dir: Path) -> list[Path]:
    """Each machine's folder under ``results_dir``, sorted; none where the folder does not exist."""
    return sorted(p for p in results_dir.iterdir() if p.is_dir()) if results_dir.is_dir() else []


def machine_files(results_dir: Path, machine: str) -> list[Path]:
    """Every file in ``machine``'s folder; none where it does not exist."""
    folder = results_dir / machine
    return [p for p in folder.iterdir() if p.is_file()] if folder.is_dir() else []


def files(results_dir: Path) -> list[str]:
    """Every file under ``results_dir`` (the results folder, or asv's view of it), as a relative path, sorted
    (strings: there is one per commit)."""
    found: list[str] = []
    for folder, _, names in os.walk(results_dir):
        prefix = os.path.relpath(folder, results_dir)
        found += (name if prefix == "." else f"{prefix}/{name}" for name in names)
    return sorted(found)


def machine_json(results_dir: Path, machine: str) -> dict[str, Any] | None:
    """A machine's ``machine.json``, or None where it is missing or unreadable."""
    try:
        data = json.loads((results_dir / machine / "machine.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def commit_documents(results_dir: Path, machine: str, commit: str) -> list[tuple[Path, dict[str, Any]]]:
    """Each sound results file of ``commit`` on ``machine`` with its document (an unsound one is left out:
    :func:`validate_tree` quarantines it)."""
    found = []
    for path in sorted((results_dir / machine).glob(f"{commit[:8]}-*.json")):
        try:
            document = check_results_file(path, machine)
        except InvalidFile:
            continue
        if document["commit_hash"] == commit:
            found.append((path, document))
    return found


def read_records(sidecar: Path) -> dict[str, dict[str, Any]]:
    """A sidecar's records; none where it is missing or corrupt (:func:`validate_tree` quarantines it)."""
    try:
        return records.load(sidecar) if sidecar.exists() else {}
    except records.CorruptSidecar:
        return {}


def sidecars(
    results_dir: Path, machine: str, prefix: str = "", stems: Container[str] | None = None
) -> Iterator[tuple[Path, dict[str, dict[str, Any]]]]:
    """Each readable sidecar of ``machine`` whose name starts with ``prefix`` (and whose first 8 characters, a
    commit's, are in ``stems`` where given), with its records."""
    for sidecar in sorted((results_dir / machine).glob(f"{prefix}*{records.SUFFIX}")):
        if stems is None or sidecar.name[:8] in stems:
            if entries := read_records(sidecar):
                yield sidecar, entries


# ---------------------------------------------------------------------------
# checks, one per kind of file
# ---------------------------------------------------------------------------


def _load_versioned(path: Path, api_version: int) -> dict[str, Any]:
    try:
        data = fast_json.loads(path.read_text())  # every results file of a full publish: the faster decoder
    except UnicodeDecodeError as exc:
        raise InvalidFile(f"not text ({exc})") from None
    except ValueError as exc:
        raise InvalidFile(f"not valid JSON, truncated or corrupt ({exc})") from None
    if not isinstance(data, dict):
        raise InvalidFile("not a JSON object")
    if data.get("version") != api_version:
        raise InvalidFile(f"format version {data.get('version')!r}, asv expects {api_version}")
    return data


def check_results_file(path: Path, machine: str) -> dict[str, Any]:
    """What asv.results.Results.load needs, and what its readers assume (row lengths, parameter grid)."""
    data = _load_versioned(path, RESULTS_API_VERSION)
    missing = [
        k
        for k in ("commit_hash", "env_name", "params", "results", "result_columns", "requirements", "python", "date")
        if k not in data
    ]
    if missing:
        raise InvalidFile(f"missing {', '.join(missing)}")
    commit = data["commit_hash"]
    if not (isinstance(commit, str) and len(commit) == 40 and path.name.startswith(commit[:8])):
        raise InvalidFile(f"commit_hash {commit!r} does not match the file name")
    if not isinstance(data["params"], dict) or data["params"].get("machine") != machine:
        raise InvalidFile(
            f"machine {data['params'].get('machine') if isinstance(data['params'], dict) else '?'!r}, "
            f"expected {machine!r}"
        )
    columns = data["result_columns"]
    if not isinstance(columns, list) or "result" not in columns or "params" not in columns:
        raise InvalidFile("result_columns lacks result/params")
    if not isinstance(data["results"], dict):
        raise InvalidFile("results is not an object")
    for name, row in data["results"].items():
        _check_row(name, row, columns)
    return data


def _check_row(name: str, row: Any, columns: list[str]) -> None:
    if not isinstance(row, list) or len(row) > len(columns):
        raise InvalidFile(f"{name}: malformed row")
    cells = dict(zip(columns, row))
    params, result = cells.get("params") or [], cells.get("result")
    if not isinstance(params, list) or not all(isinstance(p, list) for p in params):
        raise InvalidFile(f"{name}: malformed params")
    if result is None:
        return
    expected = math.prod(len(p) for p in params) if params else 1
    if not isinstance(result, list) or len(result) != expected:
        raise InvalidFile(
            f"{name}: {len(result) if isinstance(result, list) else 'no'} values for {expected} parameter sets"
        )
    if not all(v is None or isinstance(v, (int, float)) for v in result):
        raise InvalidFile(f"{name}: a value that is not a number")


def check_file(path: Path, results_dir: Path) -> None:
    """Raise InvalidFile when ``path`` (under ``results_dir``) would break asv or the records reader."""
    relative = path.relative_to(results_dir)
    if path.suffix == records.SUFFIX:
        try:
            records.load(path)
        except records.CorruptSidecar as exc:
            raise InvalidFile(str(exc).partition(": ")[2] or str(exc)) from None
        return
    if relative == Path("benchmarks.json"):
        _load_versioned(path, BENCHMARKS_API_VERSION)
        return
    if path.name == "machine.json":
        data = _load_versioned(path, MACHINE_API_VERSION)
        if data.get("machine") != relative.parts[0]:
            raise InvalidFile(f"machine {data.get('machine')!r} in the folder of {relative.parts[0]!r}")
        return
    if len(relative.parts) == 2:
        check_results_file(path, relative.parts[0])


# ---------------------------------------------------------------------------
# a full disk
# ---------------------------------------------------------------------------

_PROBE_BYTES = 1 << 20  # more than a results file of the whole suite: asv's next write would fit


def full_disk_problem(results_dir: Path, branch: str) -> str | None:
    """A harness problem when ``results_dir`` cannot take another results file (no space, no quota, read-only)."""
    probe = results_dir / f".write-probe-{os.getpid()}"
    try:
        results_dir.mkdir(parents=True, exist_ok=True)
        with open(probe, "wb", buffering=0) as f:
            f.write(b"\0" * _PROBE_BYTES)
            os.fsync(f.fileno())
    except OSError as exc:
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        return (
            f"{results_dir} cannot be written ({exc.strerror or exc}) after asv ran: "
            + ("the disk is full, so " if full else "")
            + "this run's build failures and missing values may be the disk's, not the code's. Kept: every point "
            f"recorded before stays on {branch} (a point without a new value keeps its old one) and comes back to "
            f"{results_dir} when it can be written; files asv could not finish are quarantined"
        )
    finally:
        probe.unlink(missing_ok=True)
    return None


# ---------------------------------------------------------------------------
# quarantine
# ---------------------------------------------------------------------------


@dataclass
class Quarantined:
    path: str  # relative to the results directory
    reason: str
    moved_to: str


def validate_tree(
    results_dir: Path, quarantine_dir: Path, log: Callable[[str], None], ledger=None
) -> list[Quarantined]:
    """Check every ``.json`` and sidecar under ``results_dir``; move each bad one aside, saying so.

    ``ledger`` (ci.history.asv_results.ledger.Ledger): a file unchanged since it last passed is not read again, and
    each file that passes is recorded there."""
    moved: list[Quarantined] = []
    stamp = time.strftime("%Y%m%dT%H%M%S")
    for relative_name in (name for name in files(results_dir) if name.endswith((".json", records.SUFFIX))):
        if ledger is not None and ledger.unchanged(relative_name):
            continue
        path = results_dir / relative_name
        try:
            check_file(path, results_dir)
            if ledger is not None:
                ledger.blob(relative_name)  # hashed and recorded: it passed as it is now
        except InvalidFile as exc:
            relative = path.relative_to(results_dir)
            target = quarantine_dir / stamp / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(path), str(target))
            moved.append(Quarantined(str(relative), str(exc), str(target)))
            log(
                f"quarantined {path}: {exc}. Moved to {target}; the rest of the history goes on (its commit is "
                f"measured again)"
            )
    return moved


# ---------------------------------------------------------------------------
# asv's values, and the records beside them
# ---------------------------------------------------------------------------


def values_by_key(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``benchmark(params)`` -> {"value", "samples", "started_at"} from a checked results document."""
    return {
        key: {"value": point.get("result"), "samples": point.get("samples"), "started_at": point["started_at"]}
        for key, point in result_points.points(data)
    }


def same_value(record: dict[str, Any], value: Any) -> bool:
    """The record's measurement is the one asv holds (a later, unsaved re-measurement would differ)."""
    if not isinstance(value, (int, float)) or math.isnan(value):
        return False
    return math.isclose(value, record.get("median_s") or math.nan, rel_tol=1e-9)


@dataclass
class Reconciled:
    resumable: list[str] = field(default_factory=list)  # "<commit8> <key>" marked for reuse
    compacted: int = 0  # records whose samples asv now keeps


def reconcile(results_dir: Path, machine: str, ledger=None) -> Reconciled:
    """Mark records asv never saved as resumable; drop the samples of those it did save.

    ``ledger`` (ci.history.asv_results.ledger.Ledger): a sidecar reconciled before and unchanged since, beside an
    unchanged results file, is skipped (a run that wrote either changed its stat)."""
    report = Reconciled()
    folder = results_dir / machine
    names = sorted(n for n in os.listdir(folder) if n.endswith(records.SUFFIX)) if folder.is_dir() else []
    for name in names:
        if (
            ledger is not None
            and ledger.reconciled(f"{machine}/{name}")
            and ledger.unchanged(f"{machine}/{name[: -len(records.SUFFIX)]}.json")
        ):
            continue
        sidecar = folder / name
        try:
            entries = records.load(sidecar)
        except records.CorruptSidecar:
            continue  # validate_tree moves it aside
        results_file = sidecar.with_suffix(".json")
        try:
            saved = values_by_key(check_results_file(results_file, machine)) if results_file.exists() else {}
        except InvalidFile:
            saved = {}
        changes: dict[str, dict[str, Any] | None] = {}
        for key, record in entries.items():
            if record["status"] != "measured":
                continue
            if same_value(record, saved.get(key, {}).get("value")):
                if record.get("samples_s") or record.get("resume"):
                    changes[key] = {**record, "samples_s": None, "resume": False}
                    report.compacted += 1
            elif record.get("samples_s") and not record.get("resume"):
                changes[key] = {**record, "resume": True}
                report.resumable.append(f"{sidecar.name[:8]} {key}")
        if changes:
            records.update(sidecar, changes)
        if ledger is not None:
            ledger.mark_reconciled(f"{machine}/{sidecar.name}")
            ledger.blob(f"{machine}/{sidecar.with_suffix('.json').name}")
    return report
