"""The speed gate's thresholds: one committed file per runner, its policy (ci/speed_runners.json names it: the MI355X's
``ci/speed_thresholds.json``, an H200's ``_h200``).

A benchmark's threshold is the first override whose ``match`` pattern matches its name, else ``default_threshold``;
a malformed file is a :class:`ThresholdsError` naming the file and the key. Schema: docs/SPEED_GATE.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ci.common.errors import InputError
from ci.common.json_file import JsonFileError, checked_top, read_json
from ci.common.options import name_matches

THRESHOLDS_PATH = "ci/speed_thresholds.json"  # the MI355X's, and the default of a GPU without a runner profile
THRESHOLDS_SCHEMA = "mxfp4-speed-thresholds/1"
_TOP_KEYS = {"schema", "default_threshold", "overrides", "about", "targets"}
_OVERRIDE_KEYS = {"match", "threshold", "why"}


class ThresholdsError(InputError, ValueError):
    """The thresholds file is malformed; the message names the file and the key."""


@dataclass(frozen=True)
class Override:
    match: str
    threshold: float
    why: str


@dataclass(frozen=True)
class Thresholds:
    default: float
    overrides: tuple[Override, ...]
    source: str  # where they were read from (a path, or "recorded in <file>")
    targets: tuple[Override, ...] = ()  # policy, which the gate never reads (it decides on overrides and the default)
    about: str = ""

    def lookup(self, name: str) -> tuple[float, str]:
        """(threshold, where it came from) for benchmark ``name``: the first matching override, else the default."""
        for override in self.overrides:
            if name_matches(name, [override.match]):
                return override.threshold, f"override {override.match!r}: {override.why}"
        return self.default, "default_threshold"

    def to_json(self) -> dict[str, Any]:
        out = {
            "schema": THRESHOLDS_SCHEMA,
            "source": self.source,
            "default_threshold": self.default,
            "overrides": [{"match": o.match, "threshold": o.threshold, "why": o.why} for o in self.overrides],
        }
        if self.targets:
            out["targets"] = [{"match": o.match, "threshold": o.threshold, "why": o.why} for o in self.targets]
        return out


def _threshold(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise ThresholdsError(f"{where}: must be a fraction in (0, 1), e.g. 0.01 for 1% (got {value!r})")
    return float(value)


def parse_thresholds(data: Any, where: str) -> Thresholds:
    """Validate the parsed JSON of a thresholds file; every error names ``where`` and the key."""
    data = checked_top(data, where, THRESHOLDS_SCHEMA, _TOP_KEYS, ThresholdsError)
    if "default_threshold" not in data:
        raise ThresholdsError(f'{where}: missing "default_threshold"')
    default = _threshold(data["default_threshold"], f"{where}: default_threshold")
    overrides = _entries(data, "overrides", where)
    targets = _entries(data, "targets", where)
    about = data.get("about", "")
    if not isinstance(about, str):
        raise ThresholdsError(f'{where}: "about" must be text')
    return Thresholds(default, overrides, where, targets, about)


def _entries(data: dict[str, Any], key: str, where: str) -> tuple[Override, ...]:
    """The ``overrides`` or ``targets`` list, each entry {match, threshold, why} checked."""
    raw = data.get(key, [])
    if not isinstance(raw, list):
        raise ThresholdsError(f'{where}: "{key}" must be a list of {{match, threshold, why}} objects')
    overrides = []
    for i, entry in enumerate(raw):
        at = f"{where}: {key}[{i}]"
        if not isinstance(entry, dict):
            raise ThresholdsError(f"{at}: expected an object with match, threshold, why")
        extra, missing = sorted(set(entry) - _OVERRIDE_KEYS), sorted(_OVERRIDE_KEYS - set(entry))
        problems = ([f"unknown key(s) {extra}"] if extra else []) + ([f"missing key(s) {missing}"] if missing else [])
        if problems:
            raise ThresholdsError(f"{at}: {'; '.join(problems)}")
        if not isinstance(entry["match"], str) or not entry["match"].strip():
            raise ThresholdsError(f"{at}.match: must be a non-empty pattern over kernel[config]/shape")
        if not isinstance(entry["why"], str) or not entry["why"].strip():
            raise ThresholdsError(f"{at}.why: every override says why (e.g. the --calibrate line it came from)")
        overrides.append(
            Override(entry["match"], _threshold(entry["threshold"], f"{at}.threshold"), entry["why"].strip())
        )
    return tuple(overrides)


def load_thresholds(path: str | Path) -> Thresholds:
    path = Path(path)
    try:
        data = read_json(path)
    except JsonFileError as exc:
        raise ThresholdsError(str(exc)) from None
    return parse_thresholds(data, str(path))
