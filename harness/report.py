"""The one report module: tables, atomic JSON/text files, the GitHub step summary (docs/MEASURING.md, "Reports").

Every command writes through here. Imports nothing from kernels/ or ci/.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes, durable: bool = True) -> Path:
    """Replace ``path`` with ``data`` atomically: a temporary file beside it, fsynced, ``os.replace``d, the directory
    fsynced; returns the path. ``durable=False`` skips the fsyncs, for copies kept elsewhere (docs/PERF_NOTES.md)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp creates 0600; the file is meant for others (a web server, another user, CI artifacts):
        # keep the mode of the file it replaces, else what a plain open() would give under the umask.
        os.chmod(tmp, _mode_for(path))
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if durable:
        _fsync_directory(path.parent)
    return path


def _mode_for(path: Path) -> int:
    """The replaced file's permission bits, or 0666 less the process umask for a new file."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)  # the only portable way to read it: set and restore at once
        os.umask(umask)
        return 0o666 & ~umask


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """:func:`write_bytes_atomic` of ``text`` in UTF-8."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str | os.PathLike[str], data: Any) -> Path:
    """JSON (indented, keys in insertion order, Paths and the like as text) via :func:`write_text_atomic`."""
    # Serialize first: a value JSON cannot hold fails here, before any file is touched.
    return write_text_atomic(path, json_text(data))


def json_text(data: Any) -> str:
    """The text :func:`write_json_atomic` writes: indented, insertion order, Paths and the like as text."""
    return json.dumps(data, indent=2, default=str, allow_nan=True) + "\n"


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable; a file system that cannot open directories is left as is."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def check_writable(path: str | os.PathLike[str], what: str, create: bool = False) -> Path:
    """Fail before the work, not after it: ``path``'s folder must exist (``create``: or be creatable, for an output
    that is itself a folder) and be writable; else ``OSError`` naming ``what`` (e.g. ``"--json"``) and the reason. A
    file path into a missing folder is refused, not created: a typo must not make folders (as root, anywhere)."""
    path = Path(path)
    if path.is_dir():
        raise OSError(f"{what} {path}: is a directory, expected a file path")
    parent = path.parent if str(path.parent) else Path(".")
    if not create and not parent.is_dir():
        missing = "is not a folder" if parent.exists() else "does not exist; create it first"
        raise OSError(f"{what} {path}: cannot write there (the folder {parent} {missing})")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise OSError(f"{what} {path}: cannot write there ({exc.strerror or exc})") from None
    return path


def fallback_path(path: str | os.PathLike[str], what: str) -> Path:
    """Where the data meant for ``path`` go when ``path`` cannot be written: the system temp dir, a named file."""
    import time

    label = "".join(c if c.isalnum() else "_" for c in what).strip("_") or "output"
    return Path(tempfile.gettempdir()) / f"{label}-{os.getpid()}-{time.time_ns()}-{Path(path).name or 'output'}"


def write_or_fallback(path: str | os.PathLike[str], data: bytes, what: str, log: Callable[[str], None]) -> Path:
    """Write ``data`` to ``path`` atomically; when that fails (disk full, a folder gone read-only), write them to
    :func:`fallback_path` and say so through ``log``, so measured results are never lost. Returns where they are.
    Raises ``OSError`` only when the fallback cannot be written either (both paths in the message)."""
    try:
        return write_bytes_atomic(path, data)
    except OSError as exc:
        reason = exc.strerror or str(exc)
    try:
        spare = fallback_path(path, what)
        write_bytes_atomic(spare, data)
    except OSError as exc:
        raise OSError(
            f"{what} {path}: cannot write there ({reason}), nor to a fallback file in "
            f"{tempfile.gettempdir()} ({exc.strerror or exc})"
        ) from None
    log(f"{what} {path}: cannot write there ({reason}); kept: the data in {spare}")
    return spare


def markdown_table(rows: Sequence[Mapping[str, Any]], empty: str = "_(no rows)_") -> str:
    """GitHub-flavoured Markdown; columns in order of first appearance; missing cells empty."""
    return _table(rows, empty, markdown=True)


def text_table(rows: Sequence[Mapping[str, Any]], empty: str = "(no rows)") -> str:
    """Aligned plain text for a terminal; the same columns as :func:`markdown_table`."""
    return _table(rows, empty, markdown=False)


def _table(rows: Sequence[Mapping[str, Any]], empty: str, markdown: bool) -> str:
    if not rows:
        return empty
    from tabulate import tabulate  # here, not at the top: asv's install step writes files before tabulate exists

    columns = list(dict.fromkeys(key for row in rows for key in row))
    cells = [["" if row.get(c) is None else str(row.get(c)) for c in columns] for row in rows]
    if markdown:  # a pipe or newline would break a Markdown row
        cells = [[text.replace("|", "\\|").replace("\n", " ") for text in row] for row in cells]
    return tabulate(cells, headers=columns, tablefmt="github" if markdown else "simple", disable_numparse=True)


def append_step_summary(markdown: str, environ: Mapping[str, str] | None = None) -> Path | None:
    """Append ``markdown`` to ``$GITHUB_STEP_SUMMARY`` when set; returns its path or None."""
    path = (os.environ if environ is None else environ).get("GITHUB_STEP_SUMMARY")
    if not path:
        return None
    start = os.path.getsize(path) if os.path.isfile(path) else 0
    try:
        with open(path, "a") as f:
            f.write(markdown.rstrip() + "\n\n")
    except OSError:
        with contextlib.suppress(OSError):
            os.truncate(path, start)  # a disk that took half the summary: the file as it was, no half summary
        raise
    return Path(path)


def append_step_summary_or_fallback(
    markdown: str, log: Callable[[str], None], environ: Mapping[str, str] | None = None
) -> Path | None:
    """:func:`append_step_summary`; when ``$GITHUB_STEP_SUMMARY`` cannot be written, the Markdown goes to a
    named fallback file (:func:`write_or_fallback`) and ``log`` says where, instead of a traceback at the end."""
    try:
        return append_step_summary(markdown, environ)
    except OSError as exc:
        path = (os.environ if environ is None else environ).get("GITHUB_STEP_SUMMARY", "")
        spare = fallback_path(path, "GITHUB_STEP_SUMMARY")
        write_bytes_atomic(spare, (markdown.rstrip() + "\n").encode("utf-8"))
        log(f"$GITHUB_STEP_SUMMARY {path}: cannot write there ({exc.strerror or exc}); kept: the summary in {spare}")
        return spare


def check_step_summary(environ: Mapping[str, str] | None = None) -> Path | None:
    """``$GITHUB_STEP_SUMMARY`` checked appendable before the work (``OSError`` naming it), or None when unset."""
    path = (os.environ if environ is None else environ).get("GITHUB_STEP_SUMMARY")
    if not path:
        return None
    try:
        with open(path, "a"):
            pass
    except OSError as exc:
        raise OSError(f"$GITHUB_STEP_SUMMARY {path}: cannot write there ({exc.strerror or exc})") from None
    return Path(path)
