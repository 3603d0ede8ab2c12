"""The command-line options the tools share, defined once with one meaning (asv's ``common_args`` in spirit).

A front calls the ``add_*`` functions it takes and the ``*_value`` checkers; a bad value is an :class:`OptionsError`
(exit 2 before any work) naming the option. The meanings: docs/SPEED_GATE.md, "The command".
"""

from __future__ import annotations

import argparse
import fnmatch
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, overload

from ci.common.errors import UsageError

Parser = argparse.ArgumentParser | argparse._ArgumentGroup
# The GPU architectures whose compiled code the tools read (Triton for sm_90 and gfx950, FlyDSL for gfx950).
KNOWN_ARCHS = ("sm_90", "gfx950")


class OptionsError(UsageError, ValueError):
    """An option's value is wrong; the message names the option."""


def add_commits(parser: Parser, *, head: str = "the commit to check", working_tree: bool = True) -> None:
    parser.add_argument(
        "--base",
        metavar="REF",
        help="compare with the merge-base of the head and REF (default: origin/main, else main)",
    )
    parser.add_argument("--head", metavar="REF", help=f"{head} (default: HEAD)")
    if working_tree:
        parser.add_argument(
            "--working-tree",
            action="store_true",
            help="the current files, uncommitted edits included, are the head (the base may then be HEAD)",
        )
    add_repo(parser)


def add_repo(parser: Parser) -> None:
    parser.add_argument(
        "--repo", metavar="DIR", default=".", help="the git repository (default: the current directory)"
    )


def add_selection(parser: Parser, *, config: bool = True, shape: bool = False) -> None:
    repeatable = [("--kernel", "NAME", "only kernels with this registered name (repeatable; * and ? match)")]
    if config:
        repeatable.append(("--config", "NAME", "only configs with this name (repeatable; * and ? match)"))
    if shape:
        shape_help = "only this shape: a harness.shapes or asv CPU shape name, or MxNxK (repeatable)"
        repeatable.append(("--shape", "NAME|MxNxK", shape_help))
    for flag, metavar, text in repeatable:
        parser.add_argument(flag, action="append", default=[], metavar=metavar, help=text)


def add_arch(parser: Parser, default: str | None, default_text: str = "") -> None:
    parser.add_argument(
        "--arch",
        default=default,
        metavar="ARCH[,ARCH]",
        help=f"the compile targets whose device code counts, comma-separated, of {', '.join(KNOWN_ARCHS)} "
        f"(default {default_text or default or 'all'})",
    )


def add_timing(parser: Parser) -> None:
    parser.add_argument(
        "--timing",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a harness.timing.TimingBudget field, e.g. rep_ms=200 (repeatable)",
    )


def add_json(parser: Parser, what: str = "the verdict") -> None:
    parser.add_argument(
        "--json",
        type=Path,
        metavar="PATH",
        help=f"write {what} as JSON here (atomically; checked writable before any work)",
    )


def add_machine(parser: Parser) -> None:
    parser.add_argument("--machine", metavar="NAME", help="asv machine name (default <host>-<gpu model>)")


def add_max_minutes(parser: Parser, default: float | None, what: str) -> None:
    shown = "none" if not default else f"{default:g}"
    parser.add_argument(
        "--max-minutes", type=float, default=default, metavar="M", help=f"{what} (default {shown}; 0: no limit)"
    )


def name_pattern(patterns: Sequence[str]) -> re.Pattern[str]:
    """``--kernel``/``--config`` ``patterns`` compiled into one (none: every name). Brackets are literal: kernel
    ids hold them (``kernel[config]``), so ``[`` is never a character class here."""
    return re.compile("|".join(fnmatch.translate(p.replace("[", "[[]")) for p in patterns) or "(?s:.*)")


def name_matches(name: str, patterns: Sequence[str]) -> bool:
    """Whether ``name`` is selected by ``patterns`` (:func:`name_pattern`)."""
    return name_pattern(patterns).match(name) is not None


def names_value(values: Sequence[str] | None, flag: str) -> tuple[str, ...]:
    """``--kernel``/``--config`` values: names or patterns, not empty, without '/' (a target is kernel/arch/config)."""
    for value in values or ():
        if not value or "/" in value:
            raise OptionsError(f"{flag} {value!r}: expected a name or a pattern with * and ? (no '/', not empty)")
    return tuple(values or ())


def arch_value(text: str | None, allowed: Sequence[str] = KNOWN_ARCHS, most: int | None = None) -> tuple[str, ...]:
    """``--arch a,b``: each one of ``allowed``, at least one, at most ``most``; None (not given): ()."""
    if text is None:
        return ()
    archs = tuple(dict.fromkeys(a.strip() for a in text.split(",") if a.strip()))
    if not archs or any(a not in allowed for a in archs) or (most is not None and len(archs) > most):
        which = "one of" if most == 1 else "a comma-separated subset of"
        raise OptionsError(f"--arch {text!r}: expected {which} {', '.join(allowed)}")
    return archs


def key_values(items: Sequence[str], flag: str, keys: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` items (``--timing``, ``--plan``) with KEY one of ``keys``; a key given twice: the last wins."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or name not in keys:
            raise OptionsError(f"{flag} {item!r}: expected KEY=VALUE with KEY one of {sorted(keys)}")
        out[name] = text
    return out


def timing_value(items: Sequence[str]) -> dict[str, Any]:
    """``FIELD=VALUE`` items as checked TimingBudget overrides (finite, positive)."""
    if not items:
        return {}
    import dataclasses

    from harness.timing import TimingBudget  # imports torch: only when there is something to check

    fields = [f.name for f in dataclasses.fields(TimingBudget)]
    out: dict[str, Any] = {}
    for name, text in key_values(items, "--timing", fields).items():
        item = f"{name}={text}"
        kind = type(getattr(TimingBudget(), name))
        try:
            value = float(text) if kind is float else int(text)
        except ValueError:
            what = "an integer" if kind is int else "a number"
            raise OptionsError(f"--timing {item!r}: {name} must be {what}") from None
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


@overload
def positive_int_value(value: int, flag: str) -> int: ...
@overload
def positive_int_value(value: None, flag: str) -> None: ...
def positive_int_value(value: int | None, flag: str) -> int | None:
    if value is not None and value < 1:
        raise OptionsError(f"{flag} must be >= 1 (got {value})")
    return value


def output_value(path: str | Path | None, flag: str, create: bool = False) -> Path | None:
    """An output file that must be writable before any work starts (so no measured result is lost at the end); its
    folder must exist (``create``: made if missing, for an option that names a folder)."""
    if path is None or str(path) == "":
        return None
    from harness.report import check_writable

    try:
        check_writable(path, flag, create)
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
