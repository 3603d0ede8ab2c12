"""Change points of a growing series, recomputed only where new commits can change them (:data:`REACH`).

The answer is the full computation's given the same published change points; the memo is plain JSON (a digest of the
levels: an old commit measured again forces a full computation). docs/CHANGE_POINTS.md, "Local, hence incremental".
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from harness.changepoints import scan, segments, strays

# A recomputed position needs every commit within its reach: candidates (scan.REACH), then the confirmation
# between neighbouring candidates, each up to CONFIRM_WINDOW away and itself a candidate (whose own confirmation,
# CONFIRM_WINDOW further, decides whether it bounds its neighbour: segments.confirm's second pass), then the segments
# between confirmed changes tested again (at most SEGMENT_MAX commits long), then a change tested again without a stray
# bump up to BESIDE_REACH away (strays._beside_strays).
REACH = scan.REACH + 3 * segments.CONFIRM_WINDOW + 2 * max(scan.SCALES) + segments.SEGMENT_MAX + strays.BESIDE_REACH
VERSION = 7  # bump when the method changes: old memos are then recomputed (2: issue 38's noise floor and splits;
# 3: published change points held, segments.hold; 4: issue 47's stray commits and segments searched again;
# 5: an edge confirmed again between the candidates that held, strays counted as they are; 6: a run of exact repeats
# counted as one measurement by the stray rules, scan.measured; 7: a change beside a stray bump tested again without
# it, strays._beside_strays)


@dataclass
class Memo:
    settings: dict[str, Any]
    length: int
    digest: str
    confirmed: list[tuple[int, float]] = field(default_factory=list)  # (position, z)
    described: list[dict[str, Any]] = field(default_factory=list)  # ChangePoint.to_json(), one per confirmed

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Memo:
        return cls(
            settings=dict(data["settings"]),
            length=int(data["length"]),
            digest=str(data["digest"]),
            confirmed=[(int(p), float(z)) for p, z in data["confirmed"]],
            described=list(data["described"]),
        )


@dataclass(frozen=True)
class Work:
    """What one update computed: for the cost table and the tests."""

    full: bool
    recomputed_from: int  # first position whose change was computed anew (0: all)
    described: int  # changes sized anew (the others reused)


def digest(levels: np.ndarray, errors: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(levels).tobytes() + np.ascontiguousarray(errors).tobytes()).hexdigest()


def _as_change(data: dict[str, Any]) -> segments.ChangePoint:
    return segments.ChangePoint(
        **{
            **data,
            "interval": tuple(data["interval"]),
            "before": tuple(data["before"]),
            "after": tuple(data["after"]),
            "location": tuple(data["location"]) if data.get("location") else None,
        }
    )


def update(
    levels: np.ndarray, errors: np.ndarray, memo: Memo | None, settings: dict[str, Any], find, describe
) -> tuple[list[segments.ChangePoint], Memo, Work]:
    """The change points of ``levels`` (all commits so far), from ``memo`` where it still holds.

    ``find(levels, published) -> [Confirmed]`` (``published``: the positions the memo holds) and
    ``describe(levels, errors, confirmed, only) -> [ChangePoint | None]`` are the full computation's two halves
    (harness.changepoints.detect_growing binds them to the settings).
    """
    n = len(levels)
    settings = {**settings, "version": VERSION}
    start = 0 if memo is None else memo.length - REACH
    # What was published holds where the data allow (segments.hold) when it was computed the same way on the same
    # commits; a re-measured old commit, another method or other settings start afresh.
    same = (
        memo is not None
        and memo.settings == settings
        and memo.length <= n
        and digest(levels[: memo.length], errors[: memo.length]) == memo.digest
    )
    published = [p for p, _ in memo.confirmed] if same and memo is not None else []
    if not (same and start > 0):
        confirmed = find(levels, published)
        changes = describe(levels, errors, confirmed, None)
        return changes, _memo(settings, levels, errors, confirmed, changes), Work(True, 0, len(changes))
    assert memo is not None
    origin = (start - REACH) // scan.ALIGN * scan.ALIGN if start > REACH else 0
    shifted = [p - origin for p in published if p >= origin]
    found = find(levels[origin:], shifted)
    tail = [segments.Confirmed(c.position + origin, c.z) for c in found if c.position + origin >= start]
    kept = [segments.Confirmed(p, z) for p, z in memo.confirmed if p < start]
    confirmed = kept + tail
    # A kept change keeps its size and interval when its neighbours are the same as before: both sides are bounded
    # by the neighbouring changes (and CONFIRM_WINDOW), and its levels did not change (the digest).
    old = {p: i for i, (p, _) in enumerate(memo.confirmed)}
    now = [(c.position, c.z) for c in confirmed]
    reused = {
        i: old[c.position]
        for i, c in enumerate(confirmed)
        if i < len(kept)
        and _neighbours(memo.confirmed, old[c.position]) == _neighbours(now, i)
        and c.position + segments.CONFIRM_WINDOW <= memo.length
    }
    fresh = describe(levels, errors, confirmed, set(range(len(confirmed))) - set(reused))
    changes = [_as_change(memo.described[reused[i]]) if i in reused else fresh[i] for i in range(len(confirmed))]
    grown = _memo(settings, levels, errors, confirmed, changes)
    return changes, grown, Work(False, start, len(confirmed) - len(reused))


def _neighbours(confirmed: list[tuple[int, float]], i: int) -> tuple[int | None, int | None]:
    before = confirmed[i - 1][0] if i > 0 else None
    after = confirmed[i + 1][0] if i + 1 < len(confirmed) else None
    return before, after


def _memo(settings: dict[str, Any], levels: np.ndarray, errors: np.ndarray, confirmed, changes) -> Memo:
    return Memo(
        settings=settings,
        length=len(levels),
        digest=digest(levels, errors),
        confirmed=[(c.position, c.z) for c in confirmed],
        described=[json.loads(json.dumps(c.to_json())) for c in changes],
    )
