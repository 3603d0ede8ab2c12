"""When two change points are one regression: the identity the issue filer and the published history share (pure),
so the page never names an issue the filer would not (docs/PR_COMMENT.md, "Identity")."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Protocol

NEAR = 2  # commits between two suspected ranges that are still one regression (a new change point settles within 1-3)
ALIKE = 0.5  # the smaller size over the larger, both as log ratios

Range = tuple[int, int]  # (x, y]: after commit position x, up to and including y


class Place(Protocol):
    """A change point as identity sees it (ci.notify.regression_issues.issue_state.Member's fields; a site build's too),
    as read-only properties, so that a frozen dataclass has them."""

    @property
    def machine(self) -> str: ...
    @property
    def benchmark(self) -> str: ...
    @property
    def index(self) -> int: ...  # in the series: the first commit at the new level
    @property
    def last_before(self) -> str: ...
    @property
    def first_after(self) -> str: ...
    @property
    def orders(self) -> tuple[int, int] | None: ...  # last_before's and first_after's positions in the commit order
    @property
    def change(self) -> float: ...  # relative change of the level (after / before - 1)


def series(machine: str, benchmark: str) -> str:
    """A series' short id (machine x benchmark)."""
    return hashlib.sha256(f"{machine}\n{benchmark}".encode()).hexdigest()[:16]


class OfSeries:
    """A record of one series: its ``series`` id from its machine and benchmark."""

    machine: str
    benchmark: str

    @property
    def series(self) -> str:
        return series(self.machine, self.benchmark)


@dataclass(frozen=True)
class Point(OfSeries):
    """A :class:`Place` as a record (ci.notify.regression_issues.issue_state.Member extends it)."""

    machine: str
    benchmark: str
    index: int
    last_before: str
    first_after: str
    orders: tuple[int, int] | None
    change: float


def span(p: Place) -> Range:
    """A change point's suspected range: by commit order, else by series index (reports before issue 38)."""
    return p.orders if p.orders else (p.index - 1, p.index)


def apart(a: Range, b: Range) -> int:
    """Commits between two ranges (0 when they touch or overlap)."""
    return max(0, max(a[0], b[0]) - min(a[1], b[1]))


def gap(a: Place, b: Place) -> int:
    """Commits between two change points' suspected ranges; by series index when either lacks commit order."""
    if a.orders and b.orders:
        return apart(a.orders, b.orders)
    return apart((a.index - 1, a.index), (b.index - 1, b.index))


def alike(a: Place, b: Place) -> bool:
    x, y = abs(math.log1p(a.change)), abs(math.log1p(b.change))
    return min(x, y) >= ALIKE * max(x, y)


def exact(a: Place, b: Place) -> bool:
    return (a.last_before, a.first_after) == (b.last_before, b.first_after)


def same(a: Place, b: Place) -> bool:
    """One regression: the same series, and the same commits or near (:data:`NEAR`) and alike (:data:`ALIKE`)."""
    return (a.machine, a.benchmark) == (b.machine, b.benchmark) and (exact(a, b) or (gap(a, b) <= NEAR and alike(a, b)))


def pair(found: Sequence[Place], known: Sequence[tuple[Place, Hashable]]) -> dict[int, int]:
    """found index -> known index, one to one: exact ranges first, then the nearest; among equals the smaller of the
    known ones' keys (``known``: each with a sortable key, e.g. an open issue before a closed one, then the newest)."""
    by_series: dict[str, list[int]] = {}
    for ki, (k, _) in enumerate(known):
        by_series.setdefault(series(k.machine, k.benchmark), []).append(ki)
    pairs = []
    for fi, f in enumerate(found):
        for ki in by_series.get(series(f.machine, f.benchmark), []):
            k, key = known[ki]
            if same(f, k):
                pairs.append((0 if exact(f, k) else 1, gap(f, k), key, fi, ki))
    taken_f, taken_k, out = set(), set(), {}
    for *_, fi, ki in sorted(pairs):
        if fi not in taken_f and ki not in taken_k:
            taken_f.add(fi)
            taken_k.add(ki)
            out[fi] = ki
    return out
