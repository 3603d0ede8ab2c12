"""Which issue a finding belongs to, and what each issue becomes (pure): one regression, one issue, for its whole life.
Identity is ci.common.regression_identity's (the site build joins change points to issues with it); the rules (members,
status, settling, grouping, the cap and its roll-up) and why: docs/PR_COMMENT.md, "One issue per regression on main"."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from ci.common import regression_identity as identity
from ci.common.regression_identity import ALIKE, NEAR, Range, apart, span  # noqa: F401 (the identity: shared with ci.history)
from ci.notify.regression_issues.history import DriftAlarm, HistoryChanges, Slowdown
from ci.notify.regression_issues.issue_state import DriftEntry, IssueState, Member, Tracked

MAX_NEW = 10  # new issues per run; the rest go to one roll-up issue
# A change point smaller than this opens no issue (it stays on the kernel pages): the speed gate, which a bisection
# uses as its measurer, gates at about +-1% on the runners (docs/SPEED_GATE.md), so it could not name a culprit.
MIN_SIZE = 0.01
# ... and whose 95% interval reaches nearer zero than this opens none either (issue 47): at 1% commit noise the detector
# confirms -1% steps whose interval reaches -0.2%, a third of the false issues on a grown history; a real slowdown's
# interval clears it within its settling commits.
MIN_SURE = 0.005
# Commits measured at the new level before a change point opens an issue: where it settles, and that it stays.
SETTLE = 5
# The most commits a change point's location confidence set (changes.json's ``suspected``) may allow for it to open or
# join an issue (issue 47): at 1% commit noise the false issues of a grown history were -1% to -2% change points whose
# set spanned 7 commits or more (noise, or a real step placed 6-8 commits off, which later moved), while each real
# regression had members whose set spans 1-3 commits; such a member placed off joined another regression's issue near
# it. A change point placed that loosely waits until the data place it.
LOCATED = 4
# A change point whose new level starts within its series' first SHORT_HISTORY commits (``index``: the commits measured
# before it) opens or joins an issue only when it is larger than MIN_SIZE by SHORT_Z standard errors of its size (the
# near half of its 95% interval / 1.96), the detector's own bar (harness.changepoints.DEFAULT_THRESHOLD) put against
# the size an issue needs instead of against no change (issue 47). Its evidence rests on those few commits: the noise
# estimate (the MAD of ~20 successive differences, low under heavy tails and exact repeats), the stray rule's share of
# straying commits (0 of ~20 proves little), and once published its position is held (segments.hold), so it outlives the
# short history that made it. SHORT_HISTORY from data (docs/data/short_history_filing.py null: 3000 pure-noise series,
# Student-t(5) noise of SD 1%, 5% exact repeats, grown from 20 to 80 commits, the filer's other rules after each
# commit): 16 false issues in 180,000 series-commits (3.2 per 1000 commits per 36 benchmarks), 13 of them at positions
# 4-27, 1.7e-4 per series and position there against 1.9e-5 from 28 on; 28 is the least bound past which a larger one
# removes no more (28 to 35 alike). With the rule: docs/PR_COMMENT.md, "Issue 47: a short history".
SHORT_HISTORY = 28
SHORT_Z = 4.7  # harness.changepoints.DEFAULT_THRESHOLD (ci/notify imports no numpy; tests check they agree)
_Z95 = 1.96  # a 95% interval's half-width in standard errors
# Newest commits in a row below the best before a drift alarm opens an issue: as many as a change point needs to settle
# (issue 47: 3 filed noise; evidence comparable to a change point's), never one noisy commit.
DRIFT_STREAK = SETTLE
ROLLUP_MAX = 100  # findings in one roll-up issue: its marker and table stay under GitHub's 65536-character body
# The most commits one issue's active findings may span together (issue 47): a runner-wide step's change points
# scatter over a few commits at 1% noise and stay one issue; regressions a few commits apart in a row are not chained.
GROUP_SPAN = 8
# A size band (issue 47): a member's size, as the issue shows it, is replaced only when the new size differs from it by
# at least this much (absolute) and this share of the shown size: a size that wobbles by its noise is no edit.
SIZE_BAND = 0.005
SIZE_BAND_SHARE = 0.1
# A member (or failing drift) whose series its machine's report has not named while the machine's history grew by this
# many commits is retired (issue 47): a renamed or removed benchmark never reports again, so it would hold its issue
# open for good. One run adds one commit or more, so this is at least this many runs.
RETIRE_AFTER = 5


def too_early(index: int, change: float, high: float, short_history: int | None = None, z: float | None = None) -> bool:
    """Whether a slowdown of ``change`` (< 0) whose new level starts at ``index`` of its series, its 95% interval's end
    nearer zero ``high``, is too early in its history to open or join an issue (:data:`SHORT_HISTORY`, :data:`SHORT_Z`;
    other values: docs/data/short_history_filing.py)."""
    early = index < (SHORT_HISTORY if short_history is None else short_history)
    error = max(0.0, high - change) / _Z95
    return early and change + (SHORT_Z if z is None else z) * error > -MIN_SIZE


@dataclass(frozen=True)
class Plan:
    """What one issue becomes: ``number`` None for an issue to open."""

    number: int | None
    old: IssueState | None
    new: IssueState
    github_open: bool  # GitHub's state now (True for a new issue)


def member_of(f: Slowdown) -> Member:
    # A recovery counts once the improvement has settled (SETTLE): it names the fixing commit then.
    r = f.recovery if f.recovery and (f.recovery.settled is None or f.recovery.settled >= SETTLE) else None
    # Sizes to 0.1% and p to two digits, as the body shows them; whether a matched member's numbers are replaced at
    # all is :func:`material`'s (a size band, never a p-value alone).
    return Member(
        f.machine,
        f.benchmark,
        f.index,
        f.last_before,
        f.first_after,
        f.orders,
        round(f.relative_change, 3),
        (round(f.interval[0], 3), round(f.interval[1], 3)),
        float(f"{f.p_value:.2g}"),
        "recovered" if r else "active",
        (r.last_before, r.first_after, round(r.relative_change, 3), round(r.net, 3)) if r else None,
    )


def material(old: Member, new: Member) -> bool:
    """Whether a member's new look differs in what the issue is about: its commits (and their order), its status,
    its fixing commits, or its size out of :data:`SIZE_BAND`. A p-value, an interval or a size within its band is not:
    docs/PR_COMMENT.md, "What is an edit"."""
    if (old.last_before, old.first_after, old.orders, old.index, old.status) != (
        new.last_before,
        new.first_after,
        new.orders,
        new.index,
        new.status,
    ):
        return True
    if (old.fix[:2] if old.fix else None) != (new.fix[:2] if new.fix else None) or (old.gone, old.missed) != (
        new.gone,
        new.missed,
    ):
        return True
    return abs(new.change - old.change) >= max(SIZE_BAND, SIZE_BAND_SHARE * abs(old.change))


def kept(old: Member, new: Member) -> Member:
    """The member as the issue holds it after this run: the new look on a material change, else the old (its
    numbers as last shown, so the issue is not edited)."""
    return new if material(old, new) else old


def entry_of(d: DriftAlarm) -> DriftEntry:
    """A failing drift alarm as an issue holds it."""
    return DriftEntry(
        d.machine, d.benchmark, d.best, d.newest, d.drop, d.threshold, d.noise, d.window, "failing", d.orders
    )


def _match(found: list[Member], issues: list[Tracked]) -> dict[int, tuple[int, int]]:
    """found index -> (issue index, member index): ci.common.regression_identity.pair, among equals an open issue,
    then the newest."""
    where = [(ii, mi) for ii, t in enumerate(issues) for mi in range(len(t.state.members))]
    known = [(issues[ii].state.members[mi], (not issues[ii].open, -issues[ii].number)) for ii, mi in where]
    return {fi: where[ki] for fi, ki in identity.pair(found, known).items()}


def _status(members: Sequence[Member], drifts: Sequence[DriftEntry]) -> str:
    """A drift of a series that has a change point in the issue is that change point's: its status decides."""
    covered = {m.series for m in members}
    drifts = [d for d in drifts if d.series not in covered]
    if any(m.status == "active" for m in members) or any(d.status == "failing" for d in drifts):
        return "open"
    if any(m.status == "recovered" for m in members) or any(d.status == "recovered" for d in drifts):
        return "recovered"
    if any(m.status == "retired" for m in members) or any(d.status == "retired" for d in drifts):
        return "retired"
    return "not-confirmed"


@dataclass
class _Work:
    tracked: Tracked | None
    members: list[Member]
    drifts: list[DriftEntry] = field(default_factory=list)
    kind: str = "slowdown"

    def open_to_join(self) -> bool:
        """An issue that new findings may join: open on GitHub and by its own state."""
        return (self.tracked is None or self.tracked.open) and _status(self.members, self.drifts) == "open"

    def ranges(self) -> list[Range]:
        """Where its open findings point: active change points' ranges, failing drifts' newest commit at their first
        alarm (a drift without orders points nowhere)."""
        out = [span(m) for m in self.members if m.status == "active"]
        covered = {m.series for m in self.members}  # a change point says where better than its drift alarm
        return out + [
            (d.orders[1] - 1, d.orders[1])
            for d in self.drifts
            if d.status == "failing" and d.series not in covered and d.orders
        ]

    def distance(self, r: Range | None) -> int | None:
        """Commits from ``r`` to the nearest of :meth:`ranges`, when within NEAR and the ranges with ``r`` still span
        at most GROUP_SPAN commits (issue 47: a finding near only the newest member of a group does not chain another
        regression on; single linkage made a 36-member issue of regressions a few commits apart)."""
        ranges = self.ranges()
        if r is None or not ranges:
            return None
        width = max(r[1], *(x[1] for x in ranges)) - min(r[0], *(x[0] for x in ranges))
        nearest = min(apart(r, x) for x in ranges)
        return nearest if nearest <= NEAR and width <= GROUP_SPAN else None

    def holds_series(self, series: str) -> bool:
        return any(m.series == series and m.status == "active" for m in self.members) or any(
            d.series == series and d.status == "failing" for d in self.drifts
        )


def _nearest(candidates: list[_Work], r: Range | None) -> _Work | None:
    near = [(d, i) for i, w in enumerate(candidates) if (d := w.distance(r)) is not None]
    return candidates[min(near)[1]] if near else None


def _groups(units: list[_Work]) -> list[_Work]:
    """Groups of new findings (any benchmark, any machine): oldest range first, each joins the closest group it is
    near within GROUP_SPAN (:meth:`_Work.distance`, for each of its ranges), else starts one. Before issue 47 this was
    single linkage, which chained regressions a few commits apart into one issue (36 members in a grown history)."""
    groups: list[_Work] = []
    for u in sorted(units, key=lambda w: min((r[1] for r in w.ranges()), default=-1)):
        fits = []
        for i, g in enumerate(groups):
            distances = [g.distance(r) for r in u.ranges()]
            if distances and all(d is not None for d in distances):
                fits.append((max(d for d in distances if d is not None), i))
        if fits:
            g = groups[min(fits)[1]]
            g.members += u.members
            g.drifts += u.drifts
        else:
            groups.append(_Work(None, list(u.members), list(u.drifts), u.kind))
    return groups


@dataclass(frozen=True)
class Planned:
    plans: list[Plan]
    deferred: int  # findings left for the next run: the roll-up issue was full
    stale: bool = False  # the report is older than one an issue was written from: nothing applied


def _missed(m: Member, changes: HistoryChanges) -> Member:
    """An active member whose series is in the report without a change point that matches it: dissolved once its
    machine has measured SETTLE commits since it was first missed, not on one run (issue 47: a change point the
    detector drops for a run closed its issue as not confirmed and reopened it the next). The first miss is kept
    (``missed``: one edit); found again, cleared. A report without commit order: dissolved at once, as before."""
    newest = dict(changes.newest).get(m.machine)
    if newest is None:
        return replace(m, status="dissolved")
    if m.missed is None:
        return replace(m, missed=newest)
    return replace(m, status="dissolved", missed=None) if newest - m.missed >= SETTLE else m


_Live = TypeVar("_Live", Member, DriftEntry)


def _absent(item: _Live, changes: HistoryChanges, live: bool) -> _Live:
    """A live member or failing drift whose series is no longer measured while its machine is (a benchmark renamed or
    removed), retired once its machine has measured RETIRE_AFTER commits past the series' last.

    A series in the report whose own newest commit (its drift entry's) lags its machine's: its last is known, no
    state kept. A series the report no longer names: the machine's newest position at the first such report is kept
    (``gone``: one edit, the body says so). Measured again: ``gone`` cleared."""
    newest = dict(changes.newest).get(item.machine)
    if not live or newest is None:
        return item
    if item.series in changes.present:
        last = dict(changes.last_measured).get(item.series)
        if last is not None and newest - last >= RETIRE_AFTER:
            return replace(item, status="retired", gone=last)
        return replace(item, gone=None) if item.gone is not None else item
    if item.gone is None:
        return replace(item, gone=newest)
    return replace(item, status="retired") if newest - item.gone >= RETIRE_AFTER else item


def plan(changes: HistoryChanges, existing: Sequence[Tracked], *, max_new: int = MAX_NEW) -> Planned:
    """Every issue this run opens or whose state changes (module doc); unchanged issues are left out."""
    if max_new < 2:
        raise ValueError("max_new must be at least 2 (one of them may be the roll-up issue)")
    issues = sorted(existing, key=lambda t: t.number)
    newest = changes.newest_order
    if newest is not None and any(t.state.as_of is not None and t.state.as_of > newest for t in issues):
        return Planned([], 0, stale=True)  # an older report never undoes what a newer one wrote
    work = [_Work(t, list(t.state.members), list(t.state.drifts), t.state.kind) for t in issues]
    slowdowns = [f for f in changes.findings if isinstance(f, Slowdown)]
    found = [member_of(f) for f in slowdowns]
    matched = _match(found, issues)
    for fi, (ii, mi) in matched.items():
        work[ii].members[mi] = kept(work[ii].members[mi], found[fi])
    for ii, w in enumerate(work):  # members without a change point this run: dissolved, when their series was looked at
        for mi, m in enumerate(w.members):
            if (ii, mi) not in matched.values() and m.status == "active" and m.series in changes.present:
                w.members[mi] = _missed(m, changes)
            now = _absent(w.members[mi], changes, w.members[mi].status == "active")
            was = issues[ii].state.members[mi]
            w.members[mi] = was if was.status == now.status == "retired" else now  # retired stays as it was said
        for di, d in enumerate(w.drifts):
            w.drifts[di] = _absent(d, changes, d.status == "failing")
    pending = _drift_alarms(changes, work)
    joinable = [w for w in work if w.open_to_join()]
    units = []
    for fi, f in enumerate(slowdowns):
        if (
            fi in matched
            or not f.recent
            or f.recovery is not None
            or abs(f.relative_change) < MIN_SIZE
            or f.interval[1] > -MIN_SURE
            or too_early(f.index, f.relative_change, f.interval[1])
            or (f.settled is not None and f.settled < SETTLE)
            or (f.suspected is not None and f.suspected[1] - f.suspected[0] > LOCATED)
        ):
            continue
        m = found[fi]
        # the change point a failing drift of its series raised first; else any open issue whose findings are near.
        # Ties go to the oldest issue: joinable is in issue-number order.
        by_drift = [
            (apart(span(m), d.orders), i)
            for i, w in enumerate(joinable)
            for d in w.drifts
            if d.series == m.series and d.status == "failing" and d.orders and apart(span(m), d.orders) <= NEAR
        ]
        home = joinable[min(by_drift)[1]] if by_drift else _nearest(joinable, span(m))
        if home is not None:
            home.members.append(m)
        else:
            units.append(_Work(None, [m]))
    for entry, streak in pending:
        if any(w.holds_series(entry.series) for w in joinable):
            continue  # its series' issue is open: a drift against another best is the same story
        home = next((w for w in units if w.holds_series(entry.series)), None)
        if home is not None:  # this run's new change point of its series: one issue, the drift in it
            home.drifts.append(entry)
            continue
        if streak is not None and streak < DRIFT_STREAK:
            continue  # not yet: a noisy commit, or a step the change points will name
        # Its range's newest SETTLE commits: an alarm raised a few commits after a step still spans the step's commit,
        # and an older regression that its window of 10 also spans is not pulled in.
        reach = (max(entry.orders[0], entry.orders[1] - SETTLE), entry.orders[1]) if entry.orders else None
        home = _nearest(joinable, reach)
        if home is not None:
            home.drifts.append(entry)
        else:
            units.append(_Work(None, [], [entry], kind="drift"))
    units = sorted(
        _groups(units), key=lambda g: (-len(g.members) - len(g.drifts), min((m.change for m in g.members), default=0))
    )
    deferred = 0
    # A re-run of the same history run (same results commit) counts what it opened before it stopped.
    max_new -= sum(1 for t in issues if t.state.opened_in and t.state.opened_in == changes.results_commit)
    max_new = max(1, max_new)
    if len(units) > max_new:
        joinable = [w for w in work if w.kind == "rollup" and w.open_to_join()]
        rollup = next((w for w in joinable if len(w.members) + len(w.drifts) < ROLLUP_MAX), None)
        if rollup is None:
            rollup = _Work(None, [], kind="rollup")
            units, left = units[: max_new - 1] + [rollup], units[max_new - 1 :]
        else:
            units, left = units[:max_new], units[max_new:]
        for w in left:
            room = ROLLUP_MAX - len(rollup.members) - len(rollup.drifts)
            if len(w.members) + len(w.drifts) > room:  # the next run files it (its marker would not fit GitHub's limit)
                deferred += len(w.members) + len(w.drifts)
                continue
            rollup.members.extend(w.members)
            rollup.drifts.extend(w.drifts)
    plans = []
    for w in [*work, *units]:
        old = w.tracked.state if w.tracked else None
        members = tuple(w.members) if old else tuple(sorted(w.members, key=lambda m: (span(m), m.machine, m.benchmark)))
        kind = "rollup" if w.kind == "rollup" else "slowdown" if w.members else "drift"
        new = IssueState(
            kind, _status(w.members, w.drifts), members, tuple(w.drifts), opened_in=old.opened_in if old else None
        )
        if old is not None and new.content() == old.content():
            continue
        plans.append(Plan(w.tracked.number if w.tracked else None, old, new, w.tracked.open if w.tracked else True))
    return Planned(plans, deferred)


def _drift_alarms(changes: HistoryChanges, work: list[_Work]) -> list[tuple[DriftEntry, int | None]]:
    """Recoveries judged on the issues that hold a failing drift; the failing drifts no issue holds, returned.

    A held alarm passes in a report when its series' drift entry does not fail and no regression change point of the
    series after the alarm's best is unrecovered (the change point, which compares levels, says the level before the
    alarm is not back). It is recovered once it has passed in every report while its machine measured SETTLE more
    commits (``passing`` keeps where it started): never on one passing commit (issue 47). A report without commit
    order (before issue 38) has no commits to count: there, a passing entry against the alarm's own best recovers it."""
    report = {d.series: d for d in changes.findings if isinstance(d, DriftAlarm)}
    slowdowns: dict[str, list[int]] = {}
    for f in changes.findings:
        if isinstance(f, Slowdown) and f.recovery is None and f.orders:
            slowdowns.setdefault(f.series, []).append(f.orders[1])
    newest = dict(changes.newest)
    for w in work:
        for i, e in enumerate(w.drifts):
            r = report.get(e.series)
            if e.status != "failing" or r is None:
                continue
            if newest.get(e.machine) is None:  # a report without commit order (before issue 38): the same best passes
                if not r.failed and r.best == e.best:
                    w.drifts[i] = replace(e, status="recovered")
                continue
            since = e.orders[0] if e.orders else -1
            passing = not r.failed and not any(at > since for at in slowdowns.get(e.series, []))
            now = newest[e.machine]
            if not passing:
                w.drifts[i] = replace(e, passing=None)
            elif e.passing is None:
                w.drifts[i] = replace(e, passing=now)
            elif now - e.passing >= SETTLE:
                w.drifts[i] = replace(e, status="recovered", passing=None)
    held = {e.series for w in work for e in w.drifts if e.status == "failing"}
    return [(entry_of(d), d.streak) for d in report.values() if d.failed and d.series not in held]
