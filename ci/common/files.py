"""harness/report.py's atomic writers for the ci tools: a refused write (ENOSPC, EDQUOT, EFBIG, EACCES) is one
``WriteError`` naming the file and what was kept (docs/RELIABILITY.md, "A full disk")."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ci.common.errors import WriteError
from harness import report

KEPT = "the file as it was before (or no file), no partial or temporary file left"


@contextlib.contextmanager
def writing(path: str | os.PathLike[str], kept: str = KEPT) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        raise WriteError(f"cannot write {path} ({exc.strerror or exc}); kept: {kept}") from None


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes, durable: bool = True, kept: str = KEPT) -> Path:
    with writing(path, kept):
        return report.write_bytes_atomic(path, data, durable)


def write_text_atomic(path: str | os.PathLike[str], text: str, kept: str = KEPT) -> Path:
    return write_bytes_atomic(path, text.encode("utf-8"), kept=kept)


def write_json_atomic(path: str | os.PathLike[str], data: Any, kept: str = KEPT) -> Path:
    return write_text_atomic(path, report.json_text(data), kept=kept)  # serialized before any file is touched


def write_or_fallback(path: str | os.PathLike[str], data: bytes, what: str, log: Callable[[str], None]) -> Path:
    """:func:`harness.report.write_or_fallback`: the data in a named fallback file when ``path`` refuses them."""
    with writing(path, "nothing of this output (the lines above say what the run found)"):
        return report.write_or_fallback(path, data, what, log)


def append_step_summary_or_fallback(markdown: str, log: Callable[[str], None]) -> Path | None:
    with writing("$GITHUB_STEP_SUMMARY", "nothing of the summary (it is on stdout)"):
        return report.append_step_summary_or_fallback(markdown, log)
