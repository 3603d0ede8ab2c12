"""The one way the tools read a JSON file someone wrote: a key given twice in one object is an error, not
silently the last one (why, and which readers: docs/RELIABILITY.md, "JSON files read by the tools")."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path
from typing import Any

from ci.common.errors import InputError

# The most a file the tools read may hold, read no further (ci.notify caps a gate's record at 2 MB the same way): the
# largest committed record, a calibration's every round (docs/data/h200_noise_model/calibrate/calibrate.json), is
# 2 MB; a file of 300 MB was read whole into ~700 MB of memory (issue 49).
MAX_BYTES = 64 << 20


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
    except RecursionError:  # [[[[...]]]] some thousands deep: no record of the tools is nested past ten levels
        raise JsonFileError(f"{where}: nested too deeply to be a file of these tools") from None


def read_json(path: str | Path, where: str | None = None, limit: int = MAX_BYTES) -> Any:
    """The file at ``path`` through :func:`parse_json`; an unreadable file, or one over ``limit`` bytes (not read
    past them), is a :class:`JsonFileError` too."""
    where = str(path) if where is None else where
    return parse_json(read_text(path, where, limit), where)


def read_text(path: str | Path, where: str, limit: int = MAX_BYTES) -> str:
    """The UTF-8 text of ``path`` (decompressed when its name ends in ``.gz``), at most ``limit`` bytes read;
    :class:`JsonFileError` naming ``where`` otherwise."""
    # A name ending in .gz is read through gzip, the limit counted on what it decompresses to (docs/data keeps the
    # GPU leases' records compressed: the working tree the device tool carries is capped at 64 MiB).
    try:
        with gzip.open(path, "rb") if str(path).endswith(".gz") else open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:  # gzip.BadGzipFile too
        raise JsonFileError(f"{where}: cannot read ({exc.strerror or exc})") from None
    except (EOFError, zlib.error) as exc:
        raise JsonFileError(f"{where}: a cut or damaged gzip file ({exc})") from None
    if len(data) > limit:
        raise JsonFileError(f"{where}: over {limit >> 20} MiB: not read (no file of these tools is that large)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JsonFileError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def checked_top(data: Any, where: str, schema: str | None, known: set[str], error: type[InputError]) -> dict[str, Any]:
    """``data`` as a project file's top level: a JSON object with this ``schema`` (None: not checked) and no key
    outside ``known``; else ``error`` naming ``where`` and what is wrong. The files' own readers check the rest."""
    if not isinstance(data, dict):
        raise error(f"{where}: expected a JSON object at the top level")
    if schema is not None and data.get("schema") != schema:
        raise error(f'{where}: "schema" must be {schema!r}, got {data.get("schema")!r}')
    unknown = sorted(set(data) - known)
    if unknown:
        raise error(f"{where}: unknown key(s) {unknown}; known: {sorted(known)}")
    return data
