"""The command-line options the tools share, defined once (asv's ``common_args`` in spirit).

Each command's front module builds its parser, calls the ``add_*`` functions for
the shared options it takes, and turns the parsed namespace into one frozen
options object with the ``*_value`` checkers below. Everything under a front
takes that object; nothing below it parses ``argv`` or re-reads an option.
A bad value is an :class:`OptionsError` (exit 2 before any work), naming the
option and what was wrong.
"""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path
from typing import Any, Mapping, Sequence


class OptionsError(ValueError):
    """An option's value is wrong; the message names the option."""


def add_timing(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument("--timing", action="append", default=[], metavar="FIELD=VALUE",
                        help="override a harness.timing.TimingBudget field, e.g. rep_ms=200 (repeatable)")


def add_json(parser: argparse.ArgumentParser | argparse._ArgumentGroup, what: str = "the verdict") -> None:
    parser.add_argument("--json", type=Path, metavar="PATH",
                        help=f"write {what} as JSON here (atomically; checked writable before any work)")


def add_machine(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument("--machine", metavar="NAME", help="asv machine name (default <host>-<gpu model>)")


def add_max_minutes(parser: argparse.ArgumentParser | argparse._ArgumentGroup, default: float | None, what: str) -> None:
    shown = "none" if not default else f"{default:g}"
    parser.add_argument("--max-minutes", type=float, default=default, metavar="M",
                        help=f"{what} (default {shown}; 0: no limit)")


def timing_value(items: Sequence[str]) -> dict[str, Any]:
    """``FIELD=VALUE`` items as checked TimingBudget overrides (finite, positive)."""
    if not items:
        return {}
    import dataclasses

    from harness.timing import TimingBudget  # imports torch: only when there is something to check

    fields = {f.name: f for f in dataclasses.fields(TimingBudget)}
    out: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or name not in fields:
            raise OptionsError(f"--timing {item!r}: expected FIELD=VALUE with FIELD one of {sorted(fields)}")
        kind = type(getattr(TimingBudget(), name))
        try:
            value = float(text) if kind is float else int(text)
        except ValueError:
            raise OptionsError(f"--timing {item!r}: {name} must be a{'n integer' if kind is int else ' number'}") from None
        if not math.isfinite(value) or value <= 0:
            raise OptionsError(f"--timing {item!r}: {name} must be a finite number > 0")
        out[name] = value
    return out


def minutes_value(minutes: float | None, flag: str = "--max-minutes") -> float | None:
    """A time limit in minutes: finite and >= 0; 0 or None means no limit (returned as None)."""
    if minutes is None:
        return None
    if not math.isfinite(minutes) or minutes < 0:
        raise OptionsError(f"{flag} must be a finite number >= 0 (got {minutes})")
    return minutes or None


def positive_int_value(value: int | None, flag: str) -> int | None:
    if value is not None and value < 1:
        raise OptionsError(f"{flag} must be >= 1 (got {value})")
    return value


def output_value(path: str | Path | None, flag: str) -> Path | None:
    """An output file that must be writable before any work starts (so no measured result is lost at the end)."""
    if path is None or str(path) == "":
        return None
    from harness.report import check_writable

    try:
        check_writable(path, flag)
    except OSError as exc:
        raise OptionsError(str(exc)) from None
    return Path(path)


def step_summary_value(environ: Mapping[str, str] | None = None) -> Path | None:
    """``$GITHUB_STEP_SUMMARY``, when set, must be appendable before any work (the summary is written last)."""
    from harness.report import check_step_summary

    try:
        return check_step_summary(environ)
    except OSError as exc:
        raise OptionsError(str(exc)) from None


# An asv machine name is a folder of .asv/results and of the results branch (results/<machine>/).
_MACHINE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def machine_value(name: str | None, flag: str = "--machine") -> str | None:
    """An asv machine name: letters, digits, '.', '_', '-' (a path component), or None for the default."""
    if name is None:
        return None
    if not _MACHINE_NAME.fullmatch(name):
        raise OptionsError(
            f"{flag} {name!r}: expected 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit "
            "(it names a folder of the results)"
        )
    return name
