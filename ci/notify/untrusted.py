"""Untrusted JSON read safely: a size cap, JSON only, only the schema majors of :data:`KNOWN_SCHEMAS`, every field
type-checked by a :class:`Reader` whose error names its path ("verdict.json: benchmarks[2].decision.estimate.point:
expected a finite number, got 'x'"); :func:`read` turns a file that fails any of these into a :class:`Rejected`."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, overload

from ci.common.errors import InputError

MAX_BYTES = 2_000_000  # a gate's record without its raw rounds is ~50 kB; a full speed record of 20 benchmarks ~1 MB
MAX_ITEMS = 2000  # benchmarks, targets, jobs, steps, table rows
# schema name -> the major versions read here. A speed gate /2 (issue 28) is adapted here at merge.
KNOWN_SCHEMAS = {
    "mxfp4-speed-gate": {1},
    "mxfp4-changes": {1},
    "mxfp4-budget-gate": {2},
    "mxfp4-history-changes": {1},
    "mxfp4-pr-files": {1},
    "mxfp4-commit-status": {1},
}
_SCHEMA = re.compile(r"^([a-z0-9-]{1,60})/([0-9]{1,4})$")
# An address that can go into a Markdown link as it is: https, no spaces, brackets, quotes or query.
SAFE_URL = re.compile(r"^https://[A-Za-z0-9.:-]+(/[A-Za-z0-9._~%/-]*)?$")


@dataclass(frozen=True)
class Rejected:
    """A gate's file that was found but not used, and why (shown in the comment)."""

    what: str  # "speed gate", "budget gate", "code changes", "jobs"
    reason: str


def load_json(path: Path, limit: int = MAX_BYTES) -> Any:
    """The JSON in ``path``, refused when it is over ``limit`` bytes (read no further) or not JSON."""
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise InputError(f"{path.name}: over {limit} bytes: not read")
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InputError(f"{path.name}: not JSON ({clip(exc)})") from None


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def clip(value: object, limit: int = 120) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Reader:
    """Typed access to one JSON value, which knows its path for the error message."""

    def __init__(self, value: Any, path: str) -> None:
        self.value, self.path = value, path

    def _fail(self, expected: str) -> InputError:
        return InputError(f"{self.path}: expected {expected}, got {clip(self.value)}")

    def _checked(self, optional: bool, valid: bool, expected: str) -> Any:
        """The value when ``valid`` (None when absent and ``optional``), else the error naming ``expected``."""
        if self.value is None and optional:
            return None
        if not valid:
            raise self._fail(expected)
        return self.value

    def get(self, key: str) -> Reader:
        if not isinstance(self.value, dict):
            raise self._fail("an object")
        return Reader(self.value.get(key), f"{self.path}.{key}")

    def has(self, key: str) -> bool:
        return isinstance(self.value, dict) and self.value.get(key) is not None

    def items(self, optional: bool = False) -> list[Reader]:
        values = self._checked(optional, isinstance(self.value, list), "a list") or []
        if len(values) > MAX_ITEMS:
            raise InputError(f"{self.path}: {len(values)} items, over {MAX_ITEMS}")
        return [Reader(v, f"{self.path}[{i}]") for i, v in enumerate(values)]

    def mapping(self, optional: bool = False) -> dict[str, Reader]:
        valid = isinstance(self.value, dict) and len(self.value) <= MAX_ITEMS
        values = self._checked(optional, valid, f"an object of at most {MAX_ITEMS} keys") or {}
        return {str(k): Reader(v, f"{self.path}.{k}") for k, v in values.items()}

    @overload
    def text(self, optional: Literal[False] = ...) -> str: ...
    @overload
    def text(self, optional: bool) -> str | None: ...
    def text(self, optional: bool = False) -> str | None:
        return self._checked(optional, isinstance(self.value, str), "a string")

    @overload
    def number(self, optional: Literal[False] = ...) -> float: ...
    @overload
    def number(self, optional: bool) -> float | None: ...
    def number(self, optional: bool = False) -> float | None:
        finite = isinstance(self.value, (int, float)) and not isinstance(self.value, bool) and math.isfinite(self.value)
        value = self._checked(optional, finite, "a finite number")
        return None if value is None else float(value)

    @overload
    def integer(self, optional: Literal[False] = ...) -> int: ...
    @overload
    def integer(self, optional: bool) -> int | None: ...
    def integer(self, optional: bool = False) -> int | None:
        return self._checked(optional, isinstance(self.value, int) and not isinstance(self.value, bool), "an integer")

    @overload
    def boolean(self, optional: Literal[False] = ...) -> bool: ...
    @overload
    def boolean(self, optional: bool) -> bool | None: ...
    def boolean(self, optional: bool = False) -> bool | None:
        return self._checked(optional, isinstance(self.value, bool), "true or false")

    @overload
    def choice(self, allowed: set[str], optional: Literal[False] = ...) -> str: ...
    @overload
    def choice(self, allowed: set[str], optional: bool) -> str | None: ...
    def choice(self, allowed: set[str], optional: bool = False) -> str | None:
        value = self.text(optional)
        if value is not None and value not in allowed:
            raise self._fail(f"one of {sorted(allowed)}")
        return value


def check_schema(data: Any, name: str, file: str) -> Reader:
    """The top-level reader of ``data`` when its ``schema`` is ``name/<known major>``; else InputError says why."""
    root = Reader(data, file)
    schema = root.get("schema").text(optional=True) if isinstance(data, dict) else None
    match = _SCHEMA.match(schema or "")
    if not match or match.group(1) != name:
        raise InputError(f"{file}: not a {name} record (schema {clip(schema)})")
    if int(match.group(2)) not in KNOWN_SCHEMAS[name]:
        known = ", ".join(f"{name}/{v}" for v in sorted(KNOWN_SCHEMAS[name]))
        raise InputError(f"{file}: unknown schema {schema} (this publisher reads {known})")
    return root


def read(path: Path, parse: Callable[[Any, str], Any], what: str) -> Any:
    """``parse`` of the JSON in ``path``, or :class:`Rejected` naming what is wrong with it."""
    try:
        return parse(load_json(path), path.name)
    except (OSError, InputError) as exc:
        return Rejected(what, str(exc))
