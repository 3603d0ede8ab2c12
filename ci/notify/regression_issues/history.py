"""The history site build's ``changes.json`` (``mxfp4-history-changes/1``, the artifact ``history-changes``) as
findings: :class:`Slowdown` (a regression change point, recovered or not) and :class:`DriftAlarm`. Unused fields are
ignored; a used one of the wrong type is an InputError naming its path. docs/PR_COMMENT.md, "One issue per regression on
main"."""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass, replace
from typing import Any

from ci.common.errors import InputError
from ci.common.regression_identity import OfSeries
from ci.common.regression_identity import series as short_hash  # noqa: F401 (one series id for the filer and the site)
from ci.notify.untrusted import Reader, check_schema

SHA = re.compile(r"^[0-9a-f]{7,40}$")
_KERNEL = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
_ASV_KEY = re.compile(r"^bench_gemm\.\w+\.track_time\('([^':]*):[^']*', '[^']*'\)$")


@dataclass(frozen=True)
class Recovery:
    last_before: str
    first_after: str
    relative_change: float  # the improvement's own size
    net: float  # the level after both changes, relative to the level before the regression
    settled: int | None = None  # commits measured at the level it brought back (up to the next change)


@dataclass(frozen=True)
class Slowdown(OfSeries):
    machine: str
    benchmark: str  # the asv key
    last_before: str
    first_after: str
    relative_change: float  # < 0: after / before - 1 of TFLOPS
    interval: tuple[float, float]
    p_value: float
    recovery: Recovery | None
    # Its new level starts among the newest measured commits (the publish's "recent"; absent in older reports: True).
    # Only a recent change point opens an issue: the first publish of a long history must not file every old one.
    recent: bool = True
    index: int = 0  # in the series: the first commit at the new level
    orders: tuple[int, int] | None = None  # last_before's and first_after's positions in the history's commit order
    settled: int | None = None  # commits measured at the new level so far (up to the next change); None: not said
    # the commit-order range (x, y] its location's 95% confidence set allows the culprit in (issue 47); None: not said
    suspected: tuple[int, int] | None = None


@dataclass(frozen=True)
class DriftAlarm(OfSeries):
    machine: str
    benchmark: str
    newest: str
    best: str
    drop: float  # 1 - newest / best
    threshold: float
    noise: float
    window: int
    failed: bool
    orders: tuple[int, int] | None = None  # best's and newest's positions in the history's commit order
    streak: int | None = None  # the newest commits in a row that fail against best; None: not said


Finding = Slowdown | DriftAlarm


@dataclass(frozen=True)
class HistoryChanges:
    results_commit: str | None
    site_url: str | None  # ends with "/"; None when the site's address is not known
    findings: tuple[Finding, ...]  # every regression change point and every drift entry, failed or not
    not_checked: tuple[str, ...]  # "machine: why" for machines whose timings were not checked
    # series (short_hash(machine, benchmark)) this file speaks for: each has a drift entry or a change point. A change
    # point of an issue that is absent here while its series is present has dissolved; absent series say nothing.
    present: frozenset[str] = frozenset()
    # machine -> the newest commit position its drift entries name (orders): how far its history has grown. A series
    # absent while its machine grows was renamed or removed (matching.RETIRE_AFTER); a report whose newest position is
    # older than one an issue was written from is older than that issue (issue 47: reports applied in commit order).
    newest: tuple[tuple[str, int], ...] = ()
    # series -> its own newest measured commit position (its drift entry's): a series whose history stays in the
    # report but stops growing (asv keeps a renamed benchmark's old results) lags its machine's newest
    last_measured: tuple[tuple[str, int], ...] = ()

    @property
    def newest_order(self) -> int | None:
        return max((n for _, n in self.newest), default=None)


def sha(r: Reader) -> str:
    value = r.text()
    if not SHA.match(value):
        raise InputError(f"{r.path}: expected a commit sha (hex), got {value[:60]!r}")
    return value


def kernel_page(site_url: str | None, benchmark: str) -> str | None:
    """The site's page of an asv GEMM key's kernel (its config's part before ':', when that is a plain name)."""
    match = _ASV_KEY.match(benchmark)
    kernel = match.group(1) if match and _KERNEL.match(match.group(1)) else None
    return f"{site_url}kernels/{urllib.parse.quote(kernel)}.html" if site_url and kernel else None


def _site_url(r: Reader) -> str | None:
    url = r.text(optional=True)
    if url is None:
        return None
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme != "https" or not parsed.netloc or any(c in url for c in " ()<>[]\"'`\\"):
        raise InputError(f"{r.path}: expected an https:// address, got {url[:80]!r}")
    return url if url.endswith("/") else url + "/"


def load_history_changes(data: Any, file: str = "changes.json") -> HistoryChanges:
    root = check_schema(data, "mxfp4-history-changes", file)
    findings: list[Finding] = []
    not_checked = []
    present: set[str] = set()
    newest: dict[str, int] = {}
    last_measured: dict[str, int] = {}
    for m in root.get("machines").items():
        machine = m.get("machine").text()
        first = len(findings)
        if m.get("not_checked").text(optional=True):
            not_checked.append(f"{machine}: {m.get('not_checked').text()}")
        points = [_change_point(c, machine) for c in m.get("change_points").items(optional=True)]
        for index, (direction, cp) in enumerate(points):
            if direction == "regression":
                later = [p for p in points[index + 1 :] if p[1].benchmark == cp.benchmark and p[1].index > cp.index]
                findings.append(replace(cp, recovery=_recovery(cp, later)))
        present.update(short_hash(machine, cp.benchmark) for _, cp in points)
        for d in m.get("drift").items(optional=True):
            present.add(short_hash(machine, d.get("benchmark").text()))
            findings.append(
                DriftAlarm(
                    machine,
                    d.get("benchmark").text(),
                    sha(d.get("newest")),
                    sha(d.get("best")),
                    d.get("drop").number(),
                    d.get("threshold").number(),
                    d.get("noise").number(),
                    d.get("window").integer(),
                    bool(d.get("failed").boolean()),
                    orders(d.get("orders")),
                    d.get("streak").integer(optional=True),
                )
            )
        # the newest measured commit of each series is its drift entry's newest (a change point's orders end earlier)
        seen = [f.orders[1] for f in findings[first:] if isinstance(f, DriftAlarm) and f.orders]
        if seen:
            newest[machine] = max(seen)
        for f in findings[first:]:
            if isinstance(f, DriftAlarm) and f.orders:
                last_measured[f.series] = f.orders[1]
    commit = root.get("results_commit")
    return HistoryChanges(
        sha(commit) if commit.value is not None else None,
        _site_url(root.get("site_url")),
        tuple(findings),
        tuple(not_checked),
        frozenset(present),
        tuple(sorted(newest.items())),
        tuple(sorted(last_measured.items())),
    )


def _change_point(c: Reader, machine: str) -> tuple[str, Slowdown]:
    """A change point's direction, and the change point (either way) as a :class:`Slowdown` not yet recovered."""
    change = c.get("change")
    interval = change.get("interval").items()
    if len(interval) != 2:
        raise InputError(f"{change.path}.interval: expected [low, high]")
    if c.get("machine").text(optional=True) not in (None, machine):
        raise InputError(f"{c.path}.machine: {c.get('machine').text()!r} listed under machine {machine!r}")
    return change.get("direction").choice({"regression", "improvement"}), Slowdown(
        machine,
        c.get("benchmark").text(),
        sha(c.get("last_before")),
        sha(c.get("first_after")),
        change.get("relative_change").number(),
        (interval[0].number(), interval[1].number()),
        change.get("p_value").number(),
        None,
        c.get("recent").boolean(optional=True) is not False,
        change.get("index").integer(),
        orders(c.get("orders")),
        _settled(change.get("after")),
        orders(c.get("suspected")),
    )


def _settled(r: Reader) -> int | None:
    if r.value is None:
        return None
    pair = r.items()
    if len(pair) != 2:
        raise InputError(f"{r.path}: expected [start, end]")
    return pair[1].integer() - pair[0].integer()


def orders(r: Reader) -> tuple[int, int] | None:
    """The suspected range's positions in the commit order (absent in reports before issue 38: None)."""
    if r.value is None:
        return None
    pair = r.items()
    if len(pair) != 2 or pair[0].integer() > pair[1].integer():
        raise InputError(f"{r.path}: expected [before, after], before <= after")
    return pair[0].integer(), pair[1].integer()


def _recovery(regression: Slowdown, later: list[tuple[str, Slowdown]]) -> Recovery | None:
    """The first later improvement after which the level is back at least half way (module doc)."""
    level = 1 + regression.relative_change
    for direction, cp in later:
        level *= 1 + cp.relative_change
        if direction == "improvement" and level - 1 >= regression.relative_change / 2:
            return Recovery(cp.last_before, cp.first_after, cp.relative_change, level - 1, cp.settled)
    return None
