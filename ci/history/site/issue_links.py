"""Each change point's regression issue on the published history: the issue filer's record, joined by identity.

Reads the newest ``mxfp4-regression-issues/2`` record (``--issues``) and joins each regression change point to
its issue by ci.common.regression_identity (the filer's own match), with the issue's state in words. A record
it cannot read shows no state and every page says why; every text of the record is HTML-escaped
(docs/HISTORY.md, "site/issue_links.py").
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ci.common import regression_identity as identity
from ci.common.errors import InputError
from ci.common.json_file import JsonFileError, read_json

SCHEMA = "mxfp4-regression-issues/2"
STATES = ("open", "closed")  # GitHub's
STATUSES = ("open", "recovered", "not-confirmed", "retired")  # the filer's (ci.notify.regression_issues.issue_state)
# "retired" (issue 47): its benchmark is no longer measured (renamed or removed); records before it said "not-confirmed"
# and "dissolved" for it
MEMBER_STATUSES = ("active", "recovered", "dissolved", "retired")
_SHA = re.compile(r"^[0-9a-f]{7,40}$")
_REPOSITORY = re.compile(r"^https://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9_.-]+)*/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
NAME_LIMIT = 4096  # characters of a machine or benchmark name (the filer's marker holds at most 4096 bytes of hex)


class IssueRecordError(InputError, ValueError):
    """The record cannot be read; the message names the file and the field."""


@dataclass(frozen=True)
class Member(identity.Point):
    """A change point an issue holds."""

    status: str  # MEMBER_STATUSES
    fixed_in: tuple[str, str] | None  # the recovering change's suspected commits: the fixing commit is the second
    issue: int


@dataclass(frozen=True)
class Issue:
    number: int
    url: str
    state: str  # GitHub's: STATES
    status: str  # the filer's: STATUSES


@dataclass(frozen=True)
class Record:
    repository: str  # https://HOST/OWNER/NAME
    results_commit: str | None  # the asv-results commit whose change points the filer ran on
    run_url: str | None
    issues: dict[int, Issue]
    members: tuple[Member, ...]


@dataclass(frozen=True)
class Link:
    """A change point's issue: its number and address, and the state in words."""

    number: int
    url: str
    state: str
    status: str  # the issue's (filer's)
    member_status: str  # this change point's within the issue
    fixing_commit: str | None

    def words(self) -> str:
        """'#12 open', '#12 closed: recovered at 0123456789ab', '#12 closed: not confirmed', '#12 closed: retired (the
        benchmark is no longer measured)'."""
        if self.member_status == "recovered":
            return f"#{self.number} {self.state}: recovered at {self.fixing_commit[:12] if self.fixing_commit else '?'}"
        if self.member_status == "dissolved":
            return f"#{self.number} {self.state}: not confirmed"
        if self.member_status == "retired":
            return f"#{self.number} {self.state}: retired (the benchmark is no longer measured)"
        if self.state == "closed":  # the filer closes only on recovered, not confirmed or retired: a person closed it
            return f"#{self.number} closed by a person: the change point is still there"
        return f"#{self.number} open"

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "words": self.words()}

    def html(self) -> str:
        """The issue's link and its state, escaped: ``<a href='URL'>#12</a> closed: recovered at <code>sha</code>``."""
        rest = self.words().removeprefix(f"#{self.number}")
        if self.fixing_commit and self.fixing_commit[:12] in rest:
            before, _, after = rest.partition(self.fixing_commit[:12])
            rest_html = f"{html.escape(before)}<code>{html.escape(self.fixing_commit[:12])}</code>{html.escape(after)}"
        else:
            rest_html = html.escape(rest)
        return (
            f"<span class='issue issue-{html.escape(self.state)}'><a href='{html.escape(self.url, quote=True)}'>"
            f"#{self.number}</a>{rest_html}</span>"
        )


Key = tuple[str, str, str, str]  # (machine, benchmark, last_before, first_after): one change point of the site


@dataclass(frozen=True)
class Issues:
    """What one site build knows of the issues: each change point's link, and the sentence every page says of them."""

    links: dict[Key, Link]
    note: str  # plain text (escaped where it is shown)
    known: bool  # a record was read: a change point without a link has no issue in it

    def link(self, machine: str, benchmark: str, last_before: str, first_after: str) -> Link | None:
        return self.links.get((machine, benchmark, last_before, first_after))

    def note_html(self) -> str:
        return f"<p class='note{'' if self.known else ' no-issues'}' id='issues-note'>{html.escape(self.note)}</p>"


NOT_GIVEN = Issues(
    {},
    "Regression issues are not shown: this build was given no issue record "
    "(python -m ci.history.publish --issues FILE reads one; the main job's own build has none).",
    False,
)


def for_site(path: Path | None, checks: list[dict[str, Any]]) -> Issues:
    """The issues of the change points in ``checks`` (ci.history.trends.regressions.all_checks) from the record at
    ``path``; a record that cannot be read gives no link and a note that says why (the site still builds)."""
    if path is None:
        return NOT_GIVEN
    try:
        record = load(path)
    except IssueRecordError as exc:
        return Issues({}, f"Regression issues are not shown: {exc}", False)
    where = f"asv-results {record.results_commit[:12]}" if record.results_commit else "an unnamed results commit"
    note = (
        f"Regression issues as the issue filer left them after its run on the change points of {where} "
        f"({record.run_url or 'run not named'}); a change point found since has no issue here yet. "
        f"{len(record.issues)} issues in {record.repository}."
    )
    return Issues(join(checks, record), note, True)


def join(checks: list[dict[str, Any]], record: Record) -> dict[Key, Link]:
    """Each regression change point -> its issue: ci.common.regression_identity.pair against every member of every
    issue, open or closed (among equals an open issue, then the newest: as the filer)."""
    found = [
        identity.Point(
            entry["machine"],
            entry["benchmark"],
            entry["change"]["index"],
            entry["last_before"],
            entry["first_after"],
            tuple(entry["orders"]) if entry.get("orders") else None,
            entry["change"]["relative_change"],
        )
        for machine in checks
        for entry in machine["change_points"]
        if entry["change"]["direction"] == "regression"
    ]
    known = [(m, (record.issues[m.issue].state != "open", -m.issue)) for m in record.members]
    links = {}
    # Place declares plain attributes; these frozen dataclasses have read-only ones, and pair only reads them.
    for fi, ki in identity.pair(found, known).items():  # type: ignore[arg-type]
        f, m = found[fi], record.members[ki]
        issue = record.issues[m.issue]
        links[(f.machine, f.benchmark, f.last_before, f.first_after)] = Link(
            issue.number, issue.url, issue.state, issue.status, m.status, m.fixed_in[1] if m.fixed_in else None
        )
    return links


def load(path: Path) -> Record:
    """The record at ``path``, checked whole; :class:`IssueRecordError` naming the file and the field."""
    name = path.name
    if not path.is_file():
        raise IssueRecordError(
            f"{name} is missing (the regression-issues workflow has not run yet, or its artifact "
            "could not be downloaded)"
        )
    try:
        data = read_json(path, name)
    except JsonFileError as exc:
        raise IssueRecordError(str(exc)) from None
    return parse(data, name)


def _fail(where: str, what: str, value: Any) -> IssueRecordError:
    return IssueRecordError(f"{where}: expected {what}, got {str(value)[:80]!r}")


def _text(data: dict, key: str, where: str, limit: int = NAME_LIMIT) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value or len(value) > limit:
        raise _fail(f"{where}.{key}", f"text of 1 to {limit} characters", value)
    return value


def _int(data: dict, key: str, where: str) -> int:
    value = data.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _fail(f"{where}.{key}", "a whole number >= 0", value)
    return value


def _sha(value: Any, where: str) -> str:
    if not isinstance(value, str) or not _SHA.match(value):
        raise _fail(where, "a commit sha (7 to 40 hex digits)", value)
    return value


def _choice(data: dict, key: str, where: str, choices: tuple[str, ...]) -> str:
    value = data.get(key)
    if value not in choices:
        raise _fail(f"{where}.{key}", " or ".join(choices), value)
    return value


def _object(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise _fail(where, "an object", value)
    return value


def _list(data: dict, key: str, where: str) -> list:
    value = data.get(key)
    if not isinstance(value, list):
        raise _fail(f"{where}.{key}", "a list", value)
    return value


def parse(data: Any, name: str = "the issue record") -> Record:
    root = _object(data, name)
    if root.get("schema") != SCHEMA:
        raise _fail(f"{name}: schema", SCHEMA, root.get("schema"))
    repository = root.get("repository")
    if not isinstance(repository, str) or not _REPOSITORY.match(repository):
        raise _fail(f"{name}: repository", "https://HOST/OWNER/NAME", repository)
    results_commit = root.get("results_commit")
    if results_commit is not None:
        _sha(results_commit, f"{name}: results_commit")
    run_url = root.get("run_url")
    if run_url is not None and (
        not isinstance(run_url, str) or not run_url.startswith("https://") or len(run_url) > 500
    ):
        raise _fail(f"{name}: run_url", "an https:// address", run_url)
    issues, members = {}, []
    for i, item in enumerate(_list(root, "issues", name)):
        where = f"{name}: issues[{i}]"
        item = _object(item, where)
        number = _int(item, "number", where)
        if number == 0 or number in issues:
            raise _fail(f"{where}.number", "a positive number, once", number)
        issues[number] = Issue(
            number,
            f"{repository}/issues/{number}",
            _choice(item, "state", where, STATES),
            _choice(item, "status", where, STATUSES),
        )
        for j, m in enumerate(_list(item, "members", where)):
            members.append(_member(_object(m, f"{where}.members[{j}]"), f"{where}.members[{j}]", number))
    return Record(repository, results_commit, run_url, issues, tuple(members))


def _member(m: dict, where: str, number: int) -> Member:
    orders = m.get("orders")
    if orders is not None and not (
        isinstance(orders, list)
        and len(orders) == 2
        and all(isinstance(o, int) and not isinstance(o, bool) for o in orders)
        and orders[0] <= orders[1]
    ):
        raise _fail(f"{where}.orders", "null or [before, after]", orders)
    change = m.get("relative_change")
    if not isinstance(change, (int, float)) or isinstance(change, bool) or not math.isfinite(change) or change <= -1:
        raise _fail(f"{where}.relative_change", "a finite number above -1", change)
    fixed = m.get("fixed_in")
    if fixed is not None and not (isinstance(fixed, list) and len(fixed) == 2):
        raise _fail(f"{where}.fixed_in", "null or [last_before, first_after]", fixed)
    status = _choice(m, "status", where, MEMBER_STATUSES)
    if status == "recovered" and fixed is None:
        raise _fail(f"{where}.fixed_in", "the recovering commits of a recovered change point", fixed)
    return Member(
        _text(m, "machine", where),
        _text(m, "benchmark", where),
        _int(m, "index", where),
        _sha(m.get("last_before"), f"{where}.last_before"),
        _sha(m.get("first_after"), f"{where}.first_after"),
        (orders[0], orders[1]) if orders else None,
        float(change),
        status,
        (_sha(fixed[0], f"{where}.fixed_in[0]"), _sha(fixed[1], f"{where}.fixed_in[1]")) if fixed else None,
        number,
    )
