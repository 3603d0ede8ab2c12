"""How the main job speaks: progress lines on stderr (and into its log file), and the error that ends it with exit 2."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import TextIO

from ci.common.errors import HarnessError as HarnessError  # the one root; the main job's modules import it from here

_log_file: TextIO | None = None
_prefix = "main_job"  # whose lines these are: the main job's, or publish's (python -m ci.history.publish)


def speak_as(name: str) -> None:
    """From now on the lines start with ``name:`` (the main job's modules speak for whichever front runs them)."""
    global _prefix
    _prefix = name


def log_to(path: Path | None) -> None:
    """From now on every line (and :func:`log_detail`) is also appended to ``path``, written as it goes."""
    global _log_file
    if _log_file is not None:
        _log_file.close()
    _log_file = None
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        _log_file = path.open("w", encoding="utf-8", buffering=1)


def log(message: str) -> None:
    log_detail(f"{_prefix}: {message}")  # first: a log file the disk refuses is said before, the message stays last
    print(f"{_prefix}: {message}", file=sys.stderr, flush=True)


def log_detail(text: str) -> None:
    """Only into the log file: asv's and pip's own output, the full tables (the screen gets the short form)."""
    global _log_file
    if _log_file is None:
        return
    try:
        _log_file.write(text if text.endswith("\n") else text + "\n")
    except OSError as exc:  # a full disk: the job goes on (its results say what they can), the log stops
        refused, _log_file = _log_file, None
        with contextlib.suppress(OSError):
            refused.close()
        print(
            f"{_prefix}: cannot write {refused.name} ({exc.strerror or exc}); kept: the log up to here, the rest "
            "on this screen only",
            file=sys.stderr,
            flush=True,
        )
