"""Issue 47: which change points of a short history the regression-issue filer would open an issue for, in pure noise
and for real steps early in a history (the data behind ``SHORT_HISTORY`` in ci/notify/regression_issues/matching.py).

    PYTHONPATH=. .venv/bin/python docs/data/short_history_filing.py null --first 0 --series 1500 --json OUT.json
    PYTHONPATH=. .venv/bin/python docs/data/short_history_filing.py merge A.json B.json --json OUT.json
    PYTHONPATH=. .venv/bin/python docs/data/short_history_filing.py steps --series 40 --json OUT.json

Each series is tests/issue_growth.py's noise for one benchmark (Student's t with 5 degrees of freedom scaled to SD
``--noise``, 5% of commits repeating the previous commit's value exactly), START commits, then grown one commit at a
time to ``--commits`` as the site build grows it (harness.changepoints.detect_growing with its memo). After each commit
every regression change point is put to the filer's opening rules (matching.py's MIN_SIZE, MIN_SURE, SETTLE, LOCATED,
recent: :func:`opens`), once as they were before ``SHORT_HISTORY`` and once with it; the first commit at which a change
point passes is recorded (one issue per change point: a later pass within NEAR commits of an earlier one is the same).

* ``null``: no change at all; every change point that passes is a false issue. Recorded: every pass (its ``index``,
  the commits measured before its new level; the series' length then; its size and its interval's end nearer zero),
  which the rule does not change, and the false issues left for several SHORT_HISTORY and SHORT_Z (``merge`` sums
  records of other ``--first`` and summarizes them again with this checkout's rule).
* ``steps``: one lasting step of each ``--sizes`` at each ``--at`` index; recorded: the series' length at which a change
  point within NEAR commits of the step first passes, without and with the rule (the filing delay it adds), or None.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from ci.notify.regression_issues import matching
from harness import changepoints as cp
from harness.report import write_json_atomic

START = 20  # commits before the first run (tests/issue_growth.py's Scenario.start)
NEAR = 3
RECENT = 50  # the publish's "recent": the new level starts in the newest 50 commits


def noise_of(rng: np.random.Generator, n: int, sd: float) -> np.ndarray:
    """tests/issue_growth.py's commit noise for one series (log units)."""
    e = sd * rng.standard_t(5, size=n) / np.sqrt(5 / 3)
    for i in range(1, n):
        if rng.random() < 0.05:
            e[i] = e[i - 1]
    return e


def opens(c: cp.ChangePoint, n: int) -> bool:
    """Whether the filer would open (or join) an issue for change point ``c`` of a series of ``n`` commits by
    matching.plan's rules on a new finding as they were before ``SHORT_HISTORY`` (:func:`first_passes` adds it)."""
    width = None if c.location is None else c.location[1] - (c.location[0] - 1)
    return (
        c.direction == cp.REGRESSION
        and n - c.index <= RECENT
        and abs(c.relative_change) >= matching.MIN_SIZE
        and c.interval[1] <= -matching.MIN_SURE
        and c.after[1] - c.after[0] >= matching.SETTLE
        and (width is None or width <= matching.LOCATED)
    )


def grow(x: np.ndarray) -> list[dict]:
    """Grow ``x`` from START commits: every change point that passes :func:`opens`, at every length it passes at."""
    memo = None
    passes = []
    for n in range(START + 1, len(x) + 1):
        found, memo, _ = cp.detect_growing(x[:n], np.full(n, 0.001), memo, higher_is_better=True)
        passes += [
            {"n": n, "index": c.index, "size": round(c.relative_change, 5), "high": round(c.interval[1], 5)}
            for c in found
            if opens(c, n)
        ]
    return passes


def first_passes(passes: list[dict], short_history: int | None, z: float | None = None) -> list[dict]:
    """The issues ``passes`` (of one series) open: each change point's first pass (a pass within NEAR commits of an
    earlier one is the same change point), with matching.too_early at ``short_history`` and ``z`` (None: the filer's)
    or without it (``short_history`` None)."""
    out: list[dict] = []
    for p in passes:
        if short_history is not None and matching.too_early(p["index"], p["size"], p["high"], short_history, z):
            continue
        if not any(abs(p["index"] - q["index"]) <= NEAR for q in out):
            out.append(p)
    return out


def null(args: argparse.Namespace) -> dict:
    passes = []
    for k in range(args.series):
        rng = np.random.default_rng(10_000 + args.first * 100_000 + k)
        passes += [{"series": k, **p} for p in grow(np.log(500.0) + noise_of(rng, args.commits, args.noise))]
    series_commits = args.series * (args.commits - START)
    return {"series_commits": series_commits, **summary(passes, series_commits, args.commits), "passes": passes}


def summary(passes: list[dict], series_commits: int, commits: int) -> dict:
    """False issues by where they start (without the rule), and how many are left for each SHORT_HISTORY and bar."""
    by_series: dict[object, list[dict]] = {}
    for p in passes:
        by_series.setdefault(p["series"], []).append(p)
    series = series_commits // (commits - START)
    without = [p for ps in by_series.values() for p in first_passes(ps, None)]
    early = [p for p in without if p["index"] < matching.SHORT_HISTORY]
    late_positions = commits - matching.SHORT_HISTORY
    grid = {
        f"{n} {z}": sum(len(first_passes(ps, n, z)) for ps in by_series.values())
        for z in (0.0, 1.96, 3.0, matching.SHORT_Z, 6.0, 1e9)
        for n in (20, 25, 28, 30, 35, 40)
    }
    return {
        "false_issues_without": len(without),
        "per_1000_commits_per_36_without": round(36_000 * len(without) / series_commits, 2),
        "by_index_without": sorted((p["index"], p["n"], p["size"], p["high"]) for p in without),
        "rate_per_position_before_short_history": len(early) / (series * (matching.SHORT_HISTORY - 3)),
        "rate_per_position_from_short_history": (len(without) - len(early)) / (series * late_positions),
        "false_issues_with": grid[f"{matching.SHORT_HISTORY} {matching.SHORT_Z}"],
        "per_1000_commits_per_36_with": round(
            36_000 * grid[f"{matching.SHORT_HISTORY} {matching.SHORT_Z}"] / series_commits, 2
        ),
        "left_by_short_history_and_bar": grid,
    }


def merge(files: list[Path]) -> dict:
    """``null`` records (of other --first) as one: their passes, each series named by its file, summarized again."""
    records = [json.loads(f.read_text()) for f in files]
    passes = [{**p, "series": f"{r['first']}/{p['series']}"} for r in records for p in r["passes"]]
    series_commits = sum(r["series_commits"] for r in records)
    return {
        "merged": [r["command"] for r in records],
        "cpu_seconds_each": [r["cpu_seconds"] for r in records],
        "series": sum(r["series"] for r in records),
        "commits": records[0]["commits"],
        "noise": records[0]["noise"],
        "series_commits": series_commits,
        **summary(passes, series_commits, records[0]["commits"]),
        "passes": passes,
    }


def steps(args: argparse.Namespace) -> dict:
    rows = []
    for size in args.sizes:
        for at in args.at:
            delays = []
            for k in range(args.series):
                rng = np.random.default_rng(20_000 + args.first * 100_000 + k)
                x = np.log(500.0) + noise_of(rng, args.commits, args.noise)
                x[at:] += np.log1p(size)
                passes = grow(x)
                delays.append(
                    [
                        next((p["n"] for p in first_passes(passes, rule) if abs(p["index"] - at) <= NEAR), None)
                        for rule in (None, matching.SHORT_HISTORY)
                    ]
                )
            rows.append({"size": size, "at": at, "filed_at": delays})
    return {"steps": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=("null", "steps", "merge"))
    parser.add_argument("records", type=Path, nargs="*", help="merge: the null records to merge")
    parser.add_argument("--first", type=int, default=0, help="seed offset")
    parser.add_argument("--series", type=int, default=1500)
    parser.add_argument("--commits", type=int, default=80)
    parser.add_argument("--noise", type=float, default=0.01)
    parser.add_argument("--sizes", type=float, nargs="+", default=[-0.015, -0.02, -0.03, -0.05])
    parser.add_argument("--at", type=int, nargs="+", default=[10, 15, 20, 25])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    started = time.process_time()
    out = {"null": null, "steps": steps, "merge": lambda a: merge(a.records)}[args.kind](args)
    record = {
        "command": " ".join(["docs/data/short_history_filing.py", *(argv if argv is not None else sys.argv[1:])]),
        "kind": args.kind,
        **(
            {}
            if args.kind == "merge"
            else {"first": args.first, "series": args.series, "commits": args.commits, "noise": args.noise}
        ),
        "start": START,
        "short_history": matching.SHORT_HISTORY,
        "short_z": matching.SHORT_Z,
        "cpu_seconds": round(time.process_time() - started, 1),
        **out,
    }
    if args.json:
        write_json_atomic(args.json, record)
    print(json.dumps(record)[:2000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
