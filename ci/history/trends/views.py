"""Views of a long history for what must stay light: the newest commits, and every line thinned.

A kernel page of 10,000 commits with every point of every line is tens of MB and slow to draw; these cut a
:class:`~ci.history.asv_results.store.History` down without hiding what a reader looks for (a drop, a spike, a flagged
measurement, a change point). Imports ci.history.asv_results.store only.
"""

from __future__ import annotations

from ci.history.asv_results.store import History, lines


def newest(full: History, count: int) -> History:
    """The newest ``count`` commits of ``full`` (all of it when it has no more)."""
    if len(full.commits) <= count:
        return full
    kept = set(full.commit_axis()[-count:])
    return History(
        points=[p for p in full.points if p.commit in kept],
        missing=[m for m in full.missing if m.commit in kept],
        resources={k: [v for v in values if v[1] in kept] for k, values in full.resources.items()},
        commits={c: o for c, o in full.commits.items() if c in kept},
    )


def thinned(full: History, per_line: int, keep: set[str]) -> History:
    """Each line down to about ``per_line`` points: per bucket of commits its lowest and highest TFLOPS (a drop or a
    spike is never averaged away), and always every flagged point, the newest one, and those at ``keep`` (the
    commits either side of each change point). Resource counts keep the commits where a count changes."""
    points = []
    for line in lines(full.points).values():
        if len(line) <= per_line:
            points += line
            continue
        bucket = -(-2 * len(line) // per_line)
        chosen = {id(line[-1])}
        for start in range(0, len(line), bucket):
            part = line[start : start + bucket]
            chosen |= {id(min(part, key=lambda p: p.tflops)), id(max(part, key=lambda p: p.tflops))}
        chosen |= {id(p) for p in line if p.flags or p.commit in keep}
        points += [p for p in line if id(p) in chosen]
    resources = {}
    for key, values in full.resources.items():
        ordered = sorted(values)
        resources[key] = [
            v
            for i, v in enumerate(ordered)
            if i in (0, len(ordered) - 1) or v[2] != ordered[i - 1][2] or v[2] != ordered[i + 1][2]
        ]
    used = {p.commit for p in points} | {v[1] for values in resources.values() for v in values} | keep
    return History(
        points=points,
        missing=[m for m in full.missing if m.commit in used],
        resources=resources,
        commits={c: o for c, o in full.commits.items() if c in used},
    )
