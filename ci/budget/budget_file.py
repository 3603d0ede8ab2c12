"""The committed budget (``ci/register_budget.json``): its schema, parsing, validation and the ratchet's writes.

Every problem (a key given twice in one object too) is a HarnessError naming the file and the key, never a default.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ci.budget.metrics import BUDGET_KEYS, FAMILY_KEYS, METRIC_BY_FIELD, SPILL_FIELDS
from ci.common.errors import HarnessError
from ci.common.files import write_json_atomic
from ci.common.json_file import parse_json, read_text

BUDGET_PATH = "ci/register_budget.json"
BUDGET_SCHEMA = "mxfp4-register-budget/2"
# The schema before per-field tolerances: read only from a base, to see what an edit changed.
LEGACY_BUDGET_SCHEMA = "mxfp4-register-budget/1"


@dataclass(frozen=True)
class Budget:
    """Limits per target, and the tolerance of each compared field (defaults and per-target overrides)."""

    entries: Mapping[str, Mapping[str, int]]  # target -> {budget key: limit}
    default_tolerances: Mapping[str, int] = field(default_factory=dict)  # field -> tolerance
    tolerance_overrides: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # target -> {field: tolerance}
    schema: str = BUDGET_SCHEMA

    def tolerance(self, target: str, field_name: str) -> int:
        """How much worse ``field_name`` may be than its limit and its base value; 0 where unknown (a legacy budget)."""
        override = self.tolerance_overrides.get(target, {})
        return override.get(field_name, self.default_tolerances.get(field_name, 0))

    def entry_with_overrides(self, target: str) -> dict[str, Any] | None:
        """The target's entry as written in the file (limits and its ``tolerance`` override); None without one."""
        entry = self.entries.get(target)
        if entry is None:
            return None
        override = self.tolerance_overrides.get(target)
        return dict(entry, tolerance=dict(override)) if override else dict(entry)


def parse_budget(text: str, where: str, *, allow_legacy: bool = False) -> Budget:
    """Validate a budget file; every problem names the file and the key. ``allow_legacy``: also read the /1 schema (a
    base's budget from before per-field tolerances)."""
    data = parse_json(text, where)  # a key given twice is an error too
    if not isinstance(data, dict):
        raise HarnessError(f"{where}: expected a JSON object at the top level")
    if allow_legacy and data.get("schema") == LEGACY_BUDGET_SCHEMA:
        return _parse_legacy_budget(data, where)
    if data.get("schema") != BUDGET_SCHEMA:
        raise HarnessError(f'{where}: "schema" must be {BUDGET_SCHEMA!r}, got {data.get("schema")!r}')
    defaults = _parse_default_tolerances(data.get("default_tolerances"), f"{where}: default_tolerances")
    targets = data.get("targets")
    if not isinstance(targets, dict):
        raise HarnessError(f'{where}: "targets" must be an object of kernel/arch/config -> limits')
    entries, overrides = {}, {}
    for target, entry in targets.items():
        entries[target], override = _parse_entry(target, entry, f"{where}: targets[{target!r}]")
        if override:
            overrides[target] = override
    return Budget(entries, defaults, overrides, BUDGET_SCHEMA)


def _parse_default_tolerances(block: Any, where: str) -> dict[str, int]:
    if not isinstance(block, dict):
        raise HarnessError(f'{where}: must be an object of field -> {{"tolerance": N, "why": "..."}}')
    unknown = sorted(set(block) - set(METRIC_BY_FIELD))
    missing = [name for name in METRIC_BY_FIELD if name not in block]
    if unknown or missing:
        raise HarnessError(
            f"{where}: every compared field needs a tolerance and its reason; unknown {unknown}, missing {missing}"
        )
    tolerances = {}
    for name, spec in block.items():
        if not isinstance(spec, dict) or set(spec) != {"tolerance", "why"}:
            raise HarnessError(f'{where}.{name}: expected {{"tolerance": N, "why": "..."}}, got {spec!r}')
        if not isinstance(spec["why"], str) or not spec["why"].strip():
            raise HarnessError(f"{where}.{name}.why: say what this tolerance protects (a non-empty string)")
        tolerances[name] = _check_tolerance(name, spec["tolerance"], f"{where}.{name}.tolerance")
    return tolerances


def _check_tolerance(name: str, value: Any, where: str) -> int:
    _check_count(value, where)
    if name in SPILL_FIELDS and value != 0:
        raise HarnessError(f"{where}: must be 0 -- spills and scratch cannot be tolerated")
    return value


def _parse_entry(target: str, entry: Any, where: str) -> tuple[dict[str, int], dict[str, int]]:
    parts = target.split("/")
    if len(parts) != 3 or not all(parts):
        raise HarnessError(f"{where}: the key must be kernel/arch/config")
    if not isinstance(entry, dict):
        raise HarnessError(f"{where}: expected an object of limits, got {type(entry).__name__}")
    family = "gfx" if parts[1].startswith("gfx") else "sm"
    allowed = FAMILY_KEYS[family]
    unknown = sorted(set(entry) - set(allowed) - {"tolerance"})
    if unknown:
        raise HarnessError(
            f"{where}: unknown key(s) {unknown} for {parts[1]}; known: {sorted(allowed) + ['tolerance']} "
            "(spills and scratch cannot be budgeted: they must be 0)"
        )
    missing = [key for key in allowed if key not in entry]
    if missing:
        raise HarnessError(f"{where}: missing required key(s) {missing}")
    limits = {key: value for key, value in entry.items() if key != "tolerance"}
    for key, value in limits.items():
        _check_count(value, f"{where}.{key}")
    override = entry.get("tolerance", {})
    if not isinstance(override, dict):
        raise HarnessError(f'{where}.tolerance: expected an object of field -> tolerance, e.g. {{"sgpr": 4}}')
    measured = {BUDGET_KEYS[key].field for key in allowed} | set(SPILL_FIELDS)
    for name, value in override.items():
        if name not in measured:
            raise HarnessError(f"{where}.tolerance: unknown field {name!r} for {parts[1]}; known: {sorted(measured)}")
        _check_tolerance(name, value, f"{where}.tolerance.{name}")
    return limits, dict(override)


def _parse_legacy_budget(data: Mapping[str, Any], where: str) -> Budget:
    """The /1 schema: limits only are needed (its one tolerance covered registers and arch VGPRs)."""
    targets = data.get("targets")
    if not isinstance(targets, dict):
        raise HarnessError(f'{where}: "targets" must be an object')
    entries = {}
    for target, entry in targets.items():
        if not isinstance(entry, dict):
            raise HarnessError(f"{where}: targets[{target!r}]: expected an object")
        entries[target] = {k: v for k, v in entry.items() if k in BUDGET_KEYS and isinstance(v, int)}
    return Budget(entries, {}, {}, LEGACY_BUDGET_SCHEMA)


def _check_count(value: Any, where: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise HarnessError(f"{where}: must be a non-negative integer, got {value!r}")


def read_base_budget(repo, sha: str) -> Budget | None:
    """The base's budget (to see what this change's edit loosened); None when absent or unreadable there."""
    from ci.common import gitutil

    text = gitutil.read_file(repo, sha, BUDGET_PATH)
    if text is None:
        return None
    try:
        return parse_budget(text, f"{BUDGET_PATH} at base", allow_legacy=True)
    except HarnessError as exc:
        print(
            f"budget_gate: note: ignoring the base's budget ({exc}); its measured numbers stand in for it",
            file=sys.stderr,
        )
        return None


def suggested_entry(usage: Mapping[str, Any], old: Mapping[str, Any] | None) -> dict[str, Any]:
    """The budget entry that accepts ``usage`` exactly (keeps the old entry's tolerance overrides)."""
    entry: dict[str, Any] = {}
    for key, metric in BUDGET_KEYS.items():
        if usage.get(metric.field) is not None:
            entry[key] = int(usage[metric.field])
    tolerance = (old or {}).get("tolerance")
    if isinstance(tolerance, dict) and tolerance:
        entry["tolerance"] = dict(tolerance)
    return entry


def update_budget_file(path: Path, edits: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Write ``edits`` into the budget file at ``path`` (atomically), only where they tighten its current limits and
    never adding an entry; returns what changed: ``{target: {key: new limit}}``."""
    data = parse_json(read_text(path, str(path)), str(path))
    changed: dict[str, dict[str, int]] = {}
    for target, edit in edits.items():
        current = data.get("targets", {}).get(target)
        if not isinstance(current, dict):
            continue
        for key, limit in edit.items():
            if key not in BUDGET_KEYS or not isinstance(current.get(key), int):
                continue
            tighter = BUDGET_KEYS[key].tightest(current[key], limit)
            if tighter != current[key]:
                current[key] = tighter
                changed.setdefault(target, {})[key] = tighter
    if changed:
        parse_budget(json.dumps(data), str(path))  # never write a file the gate itself would reject
        write_json_atomic(path, data, kept=f"{path} as it was (run --update-budget again)")
    return changed
