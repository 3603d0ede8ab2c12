"""What a regression issue tracks, kept as one line of its body, ``<!-- mxfp4-perf-issue {JSON} -->``: the next run
decides from it alone. Names and addresses are stored as hex, so nothing a benchmark can name reaches the line;
:func:`parse` is strict (a whole line, the exact prefix and suffix, JSON's characters only, every field typed) and
anything else is not ours. The line is found wherever it is in the body (issue 47): a person who adds a note above it
or replaces the body's first line does not orphan the issue. Why: docs/PR_COMMENT.md, "Found again by a marker no
benchmark name can reach"."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from ci.common.errors import InputError
from ci.common.regression_identity import OfSeries, Point
from ci.notify.regression_issues.history import SHA, orders, sha
from ci.notify.untrusted import Reader

PREFIX = "<!-- mxfp4-perf-issue "
SUFFIX = " -->"
VERSION = 2  # 1: issue 30's per-commit-pair key (never posted to GitHub); 2: issue 38
KINDS = ("slowdown", "drift", "rollup")
STATUSES = ("open", "recovered", "not-confirmed", "retired")
MEMBER_STATUSES = ("active", "recovered", "dissolved", "retired")
DRIFT_STATUSES = ("failing", "recovered", "retired")
_JSON_CHARS = re.compile(r'^\{[\[\]{}a-z0-9":,.+\- ]*\}$')
_HEX = re.compile(r"^(?:[0-9a-f]{2}){0,4096}$")


def to_hex(text: str) -> str:
    return text.encode("utf-8").hex()


@dataclass(frozen=True)
class Member(Point):
    """A regression change point of one series, as the issue last saw it (``change`` relative, < 0)."""

    interval: tuple[float, float]
    p_value: float
    status: str  # MEMBER_STATUSES
    fix: tuple[str, str, float, float] | None = None  # the recovering change: last_before, first_after, its size, net
    gone: int | None = None  # active, its series not reported since the history's newest position was this (issue 47)
    missed: int | None = None  # active, its series reported without its change point since this newest position


@dataclass(frozen=True)
class DriftEntry(OfSeries):
    """A failing drift guard of one series, against one best commit."""

    machine: str
    benchmark: str
    best: str
    newest: str
    drop: float
    threshold: float
    noise: float
    window: int
    status: str  # DRIFT_STATUSES
    # best's and newest's positions in the commit order (newest: at the first alarm)
    orders: tuple[int, int] | None = None
    gone: int | None = None  # failing, its series not reported since the history's newest position was this
    passing: int | None = None  # failing, its series passing since the history's newest position was this (issue 47)


@dataclass(frozen=True)
class IssueState:
    kind: str  # KINDS
    status: str  # STATUSES
    members: tuple[Member, ...] = ()
    drifts: tuple[DriftEntry, ...] = ()
    run_url: str = ""  # the history run that last changed what the issue says
    results_commit: str | None = None
    site_url: str | None = None
    opened_in: str | None = None  # the results commit of the history run that opened it: a re-run counts it in its cap
    as_of: int | None = None  # the newest commit position of the report it was last written from (issue 47)

    def content(self) -> tuple:
        """What the issue is about, without where it was last seen: equal contents need no edit."""
        return self.kind, self.status, self.members, self.drifts

    def with_(self, **changes: Any) -> IssueState:
        return replace(self, **changes)


def render_marker(state: IssueState) -> str:
    data = {
        "v": VERSION,
        "kind": state.kind,
        "status": state.status,
        "members": [_member_json(m) for m in state.members],
        "drifts": [_drift_json(d) for d in state.drifts],
        "run": to_hex(state.run_url),
        "rc": state.results_commit or "",
        "site": to_hex(state.site_url or ""),
        "orc": state.opened_in or "",
        "ao": state.as_of,
    }
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    assert _JSON_CHARS.match(text), text  # only what the parser accepts is ever written
    return f"{PREFIX}{text}{SUFFIX}"


def _member_json(m: Member) -> dict[str, Any]:
    return {
        "n": to_hex(f"{m.machine}\n{m.benchmark}"),
        "i": m.index,
        "b": m.last_before,
        "a": m.first_after,
        "o": list(m.orders) if m.orders else None,
        "r": m.change,
        "lo": m.interval[0],
        "hi": m.interval[1],
        "p": m.p_value,
        "st": m.status,
        "fx": list(m.fix) if m.fix else None,
        "g": m.gone,
        "ms": m.missed,
    }


def _drift_json(d: DriftEntry) -> dict[str, Any]:
    return {
        "n": to_hex(f"{d.machine}\n{d.benchmark}"),
        "best": d.best,
        "new": d.newest,
        "d": d.drop,
        "t": d.threshold,
        "noise": d.noise,
        "w": d.window,
        "st": d.status,
        "o": list(d.orders) if d.orders else None,
        "g": d.gone,
        "ps": d.passing,
    }


def parse(body: str) -> IssueState | None:
    """The state of the last line of the body that is exactly a marker this module wrote (the bot writes one, at the
    end of its part of the body: issues.body); None when no line is. Before issue 47 the marker was the first line:
    those bodies read the same."""
    for line in reversed(body.split("\n")):
        state = parse_line(line.rstrip("\r"))
        if state is not None:
            return state
    return None


def is_marker(line: str) -> bool:
    """Whether ``line`` is a marker line (well formed or not): never a person's text."""
    return line.rstrip("\r").startswith(PREFIX) and line.rstrip("\r").endswith(SUFFIX)


def parse_line(line: str) -> IssueState | None:
    """The state of one line that is exactly a marker, else None."""
    if not (line.startswith(PREFIX) and line.endswith(SUFFIX)):
        return None
    text = line[len(PREFIX) : -len(SUFFIX)]
    if not _JSON_CHARS.match(text):
        return None
    try:
        return _state(Reader(json.loads(text), "marker"))
    except (ValueError, InputError, UnicodeDecodeError):
        return None


def _names(r: Reader) -> tuple[str, str]:
    machine, sep, benchmark = _hex_text(r).partition("\n")
    if not sep:
        raise InputError(f"{r.path}: no machine and benchmark")
    return machine, benchmark


def _hex_text(r: Reader) -> str:
    value = r.text()
    if not _HEX.match(value):
        raise InputError(f"{r.path}: not hex")
    return bytes.fromhex(value).decode("utf-8")


def _state(root: Reader) -> IssueState:
    if root.get("v").integer() != VERSION:
        raise InputError("another version")
    members = []
    for m in root.get("members").items():
        fix = m.get("fx").items(optional=True)
        if len(fix) not in (0, 4):
            raise InputError(f"{m.path}: bad fx")
        members.append(
            Member(
                *_names(m.get("n")),
                m.get("i").integer(),
                sha(m.get("b")),
                sha(m.get("a")),
                orders(m.get("o")),
                m.get("r").number(),
                (m.get("lo").number(), m.get("hi").number()),
                m.get("p").number(),
                m.get("st").choice(set(MEMBER_STATUSES)),
                (sha(fix[0]), sha(fix[1]), fix[2].number(), fix[3].number()) if fix else None,
                m.get("g").integer(optional=True),
                m.get("ms").integer(optional=True),
            )
        )
    drifts = [
        DriftEntry(
            *_names(d.get("n")),
            sha(d.get("best")),
            sha(d.get("new")),
            d.get("d").number(),
            d.get("t").number(),
            d.get("noise").number(),
            d.get("w").integer(),
            d.get("st").choice(set(DRIFT_STATUSES)),
            orders(d.get("o")),
            d.get("g").integer(optional=True),
            d.get("ps").integer(optional=True),
        )
        for d in root.get("drifts").items()
    ]
    rc, orc = root.get("rc").text(), root.get("orc").text()
    if (rc and not SHA.match(rc)) or (orc and not SHA.match(orc)):
        raise InputError("rc, orc: not a sha")
    return IssueState(
        root.get("kind").choice(set(KINDS)),
        root.get("status").choice(set(STATUSES)),
        tuple(members),
        tuple(drifts),
        _hex_text(root.get("run")),
        rc or None,
        _hex_text(root.get("site")) or None,
        orc or None,
        root.get("ao").integer(optional=True),
    )


@dataclass(frozen=True)
class Tracked:
    """An issue of ours as GitHub lists it: its number, whether it is open, its title and body, and its state."""

    number: int
    open: bool
    title: str
    body: str
    state: IssueState


def tracked(issue: dict[str, Any]) -> Tracked | None:
    """An issue (GitHub's JSON) whose body holds our marker line; None for anything else."""
    number = issue.get("number")
    body = issue.get("body")
    if not isinstance(number, int) or isinstance(number, bool) or not isinstance(body, str):
        return None
    state = parse(body)
    if state is None:
        return None
    return Tracked(number, issue.get("state") == "open", str(issue.get("title") or ""), body, state)
