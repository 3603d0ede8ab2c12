"""Issue 47, item 6: the detector on heavy tails with outlier commits, staircases, and steps beside an outlier.

    PYTHONPATH=. .venv/bin/python docs/data/changepoint_issue47.py --json docs/data/changepoint_issue47.json \
        [--otava /tmp/otava-venv/bin/python]

Every row's series are generated once from its own seed and given to harness.changepoints.find (and, with ``--otava``,
to Apache Otava's ``otava.analysis.compute_change_points`` with its defaults, window 50 and p 0.001, run by that
interpreter in a process of its own: Otava is not a dependency of this project). One level per commit, 1% commit
noise (SD) unless said:

* ``null``: no change; noise normal, Student's t with 5 or 3 degrees of freedom (scaled to SD 1%), and 5% of commits
  off by +-4% (outlier commits), and with t3 and outliers 5% of commits repeating the previous commit's value exactly
  (``+ repeats``). Reported: the share of series with any change point.
* ``staircase``: three lasting steps of 2-5% each, 12 commits apart, one direction, at a random commit; normal or t3
  noise. Reported: the share of steps with a change point within 5 commits (and within 2).
* ``split``: one lasting -4% step at a random commit, t5 noise, with one outlier commit (-4%, towards the new level)
  placed 1-3 commits before the step. Reported: the share of steps found at exactly their commit, and within 1.

Otava's answer is read as its change points' indices (the first commit at the new level).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from harness import changepoints as cp
from harness.report import write_json_atomic

SD = 0.01
OUTLIER = 0.04
NEAR = (5, 2)
REPEATS = 0.05  # share of commits whose value repeats the previous commit's exactly ("+ repeats")
# The runner given to Otava's interpreter: series (lists of positive values) on stdin, each series' indices on stdout.
OTAVA_RUNNER = """
import json, sys
from otava.analysis import compute_change_points
out = []
for values in json.load(sys.stdin):
    points, _ = compute_change_points(values)
    out.append([int(p.index) for p in points])
json.dump(out, sys.stdout)
"""


def noise(rng: np.random.Generator, n: int, kind: str) -> np.ndarray:
    if kind.startswith("t5"):
        e = SD * rng.standard_t(5, n) / np.sqrt(5 / 3)
    elif kind.startswith("t3"):
        e = SD * rng.standard_t(3, n) / np.sqrt(3)
    else:
        e = rng.normal(0, SD, n)
    if "+ outliers" in kind:
        e = e + (rng.random(n) < 0.05) * rng.choice((-1, 1), n) * OUTLIER
    if kind.endswith("+ repeats"):  # identical code: the previous commit's result copied, a stray one included
        for i in np.nonzero(rng.random(n) < REPEATS)[0]:
            if i:
                e[i] = e[i - 1]
    return e


def null_series(rng: np.random.Generator, n: int, kind: str) -> tuple[np.ndarray, list[int]]:
    return noise(rng, n, kind), []


def staircase_series(rng: np.random.Generator, n: int, kind: str) -> tuple[np.ndarray, list[int]]:
    start = int(rng.integers(max(4, n // 5), n - 24 - max(4, n // 5)))
    edges = [start, start + 12, start + 24]
    x = noise(rng, n, kind)
    sign = rng.choice((-1, 1))
    for edge in edges:
        x[edge:] += sign * np.log1p(rng.uniform(0.02, 0.05))
    return x, edges


def split_series(rng: np.random.Generator, n: int, kind: str) -> tuple[np.ndarray, list[int]]:
    at = int(rng.integers(n // 4, 3 * n // 4))
    x = noise(rng, n, kind)
    x[at:] += np.log1p(-0.04)
    x[at - int(rng.integers(1, 4))] += np.log1p(-OUTLIER)  # one stray commit low, as the new level is
    return x, [at]


ROWS = (
    [
        ("null", kind, n, trials)
        for kind in ("normal + outliers", "t5 + outliers", "t3 + outliers", "t5", "t3")
        for n, trials in ((50, 400), (1000, 200))
    ]
    + [("staircase", kind, n, trials) for kind in ("normal", "t3") for n, trials in ((50, 200), (1000, 100))]
    + [("split", "t5", 200, 200)]
    # Added after the rows above (their seeds, by row number, are unchanged): exact repeats on top of the outliers.
    + [("null", "t3 + outliers + repeats", n, trials) for n, trials in ((50, 400), (1000, 200))]
)
MAKE = {"null": null_series, "staircase": staircase_series, "split": split_series}


def ours(series: list[np.ndarray]) -> list[list[int]]:
    return [[c.position for c in cp.find(x)] for x in series]


def otava(python: str, series: list[np.ndarray]) -> list[list[int]]:
    values = [np.exp(x).tolist() for x in series]
    done = subprocess.run(
        [python, "-c", OTAVA_RUNNER], input=json.dumps(values), capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def score(what: str, truths: list[list[int]], found: list[list[int]]) -> dict[str, float]:
    if what == "null":
        return {"flagged": sum(bool(f) for f in found) / len(found)}
    out = {}
    steps = sum(len(t) for t in truths)
    for near in NEAR:
        hits = sum(any(abs(p - e) <= near for p in f) for t, f in zip(truths, found) for e in t)
        out[f"within {near}"] = hits / steps
    if what == "split":
        out["exact"] = sum(t[0] in f for t, f in zip(truths, found)) / len(found)
        out["within 1"] = sum(any(abs(p - t[0]) <= 1 for p in f) for t, f in zip(truths, found)) / len(found)
    reported = sum(len(f) for f in found)
    right = sum(any(abs(p - e) <= NEAR[0] for e in t) for t, f in zip(truths, found) for p in f)
    out["precision"] = right / reported if reported else 1.0
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path)
    parser.add_argument("--otava", help="a Python interpreter that has apache-otava installed")
    parser.add_argument("--scale", type=float, default=1.0, help="trials per row, times this")
    parser.add_argument("--seed", type=int, default=47, help="another seed: the same rows on other series")
    parser.add_argument("--only", choices=sorted(MAKE), help="only the rows of this kind")
    args = parser.parse_args(argv)
    rows = []
    for number, (what, kind, n, trials) in enumerate(ROWS):
        if args.only and what != args.only:
            continue
        rng = np.random.default_rng((args.seed, number))
        made = [MAKE[what](rng, n, kind) for _ in range(max(1, round(trials * args.scale)))]
        series = [x for x, _ in made]  # log levels
        truths = [t for _, t in made]
        started = time.process_time()
        row = {"what": what, "noise": kind, "commits": n, "series": len(series)}
        row["ours"] = score(what, truths, ours(series))
        row["ours_cpu_s"] = round(time.process_time() - started, 1)
        if args.otava:
            started = time.time()
            row["otava"] = score(what, truths, otava(args.otava, series))
            row["otava_wall_s"] = round(time.time() - started, 1)
        print(json.dumps(row), flush=True)
        rows.append(row)
    if args.json:
        write_json_atomic(args.json, {"command": " ".join(sys.argv), "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
