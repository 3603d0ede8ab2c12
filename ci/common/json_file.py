"""The one way the tools read a JSON file someone wrote: a key given twice in one object is an error, not
silently the last one (why, and which readers: docs/RELIABILITY.md, "JSON files read by the tools")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ci.common.errors import InputError


class JsonFileError(InputError, ValueError):
    """Not valid JSON, or a key given twice; the message names the file (``where``) and what is wrong."""


def parse_json(text: str, where: str) -> Any:
    """``text`` as JSON; :class:`JsonFileError` naming ``where`` for bad JSON or a duplicate key."""

    def refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for key, value in pairs:
            if key in seen:
                raise JsonFileError(f"{where}: duplicate key {key!r}: each key may appear once per object")
            seen[key] = value
        return seen

    try:
        return json.loads(text, object_pairs_hook=refuse_duplicates)
    except json.JSONDecodeError as exc:
        raise JsonFileError(f"{where}: not valid JSON ({exc})") from None


def read_json(path: str | Path, where: str | None = None) -> Any:
    """The file at ``path`` through :func:`parse_json`; an unreadable file is a :class:`JsonFileError` too."""
    where = str(path) if where is None else where
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise JsonFileError(f"{where}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise JsonFileError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return parse_json(text, where)
