"""Detection quality of harness.changepoints on generated series: writes docs/data/changepoint_quality.json.

    PYTHONPATH=. python docs/data/changepoint_quality.py [--trials 200] [--out docs/data/changepoint_quality.json]
    PYTHONPATH=. python docs/data/changepoint_quality.py --table docs/data/changepoint_quality.json   # Markdown

A benchmark of the detector, not a timed test: run it when the method changes and put its
tables in docs/CHANGE_POINTS.md. A series is one log level per commit, commit noise sigma
(0.3% unless said), and something of known size put in:

* ``noise``: nothing (normal; Student's t with 5 degrees of freedom; 5% of commits off by
  +-4 sigma; a runner's slow AR(1) wander of SD 0.25% over 0.1% commit noise). Reported: the
  share of series with any change point (false alarms per series), and change points per
  1000 commits.
* ``step``: one lasting drop of k sigma at a random commit. Recall: found within 2 commits.
* ``bump``: a drop of 3% (10 sigma) or 1.5% (5 sigma) lasting L commits, then back: a
  regression fixed L commits later. Recall: both edges found, each within 2 commits.

Precision: the share of reported change points within 2 commits of a real edge, over the step
and bump series.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from harness import changepoints as cp

SIGMA = 0.003
NEAR = 2


def noise(rng: np.random.Generator, n: int, kind: str) -> np.ndarray:
    if kind == "normal":
        return rng.normal(0, SIGMA, n)
    if kind == "t5":
        return SIGMA * rng.standard_t(5, n) / np.sqrt(5 / 3)
    if kind == "outliers":
        e = rng.normal(0, SIGMA, n)
        hit = rng.random(n) < 0.05
        return e + hit * rng.choice((-4, 4), n) * SIGMA
    if kind == "drift":  # AR(1) wander, stationary SD 0.25%, phi 0.97, over 0.1% white commit noise
        phi, sd = 0.97, 0.0025
        shocks = rng.normal(0, sd * np.sqrt(1 - phi**2), n)
        wander = np.empty(n)
        value = rng.normal(0, sd)
        for i in range(n):
            value = phi * value + shocks[i]
            wander[i] = value
        return wander + rng.normal(0, 0.001, n)
    raise ValueError(kind)


def found(levels: np.ndarray, threshold: float) -> list[int]:
    return [c.position for c in cp.find(levels, threshold)]


def _near(points: list[int], edge: int) -> bool:
    return any(abs(p - edge) <= NEAR for p in points)


def noise_rate(trials: int, n: int, kind: str, threshold: float, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    flagged = total = 0
    for _ in range(trials):
        points = found(np.log1p(noise(rng, n, kind)), threshold)
        flagged += bool(points)
        total += len(points)
    return {"flagged": flagged / trials, "per_1000_commits": 1000 * total / (trials * n)}


def edge_rate(trials: int, n: int, size: float, length: int | None, threshold: float, seed: int) -> dict[str, float]:
    """A drop of ``size`` (relative) lasting ``length`` commits (None: for good) at a random commit."""
    rng = np.random.default_rng(seed)
    hits = reported = correct = 0
    for _ in range(trials):
        span = length or 0
        start = int(rng.integers(max(4, n // 5), n - span - max(4, n // 5)))
        x = noise(rng, n, "normal")
        end = start + span if length else n
        x[start:end] += np.log1p(-size)
        edges = [start, end] if length else [start]
        points = found(x, threshold)
        hits += all(_near(points, e) for e in edges)
        reported += len(points)
        correct += sum(any(abs(p - e) <= NEAR for e in edges) for p in points)
    return {"recall": hits / trials, "precision": correct / reported if reported else 1.0}


def run(trials: int, threshold: float) -> list[dict]:
    rows = []
    seed = 0

    def add(row: dict) -> None:
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)

    for kind in ("normal", "t5", "outliers", "drift"):
        for n in (50, 200, 1000, 5000):
            count = trials if n <= 1000 else max(20, trials // 10)
            seed += 1
            add({"scenario": "noise", "kind": kind, "commits": n, "trials": count, **noise_rate(count, n, kind, threshold, seed)})
    for sigmas in (2.0, 3.0, 5.0, 10.0):
        for n in (50, 1000):
            seed += 1
            add({"scenario": "step", "size_sigma": sigmas, "commits": n, "trials": trials,
                 **edge_rate(trials, n, sigmas * SIGMA, None, threshold, seed)})
    for size in (0.03, 0.015):
        for length in (2, 3, 5, 10, 20, 50):
            for n in (50, 1000):
                if 2 * max(4, n // 5) + length >= n:
                    continue
                seed += 1
                add({"scenario": "bump", "size": size, "length": length, "commits": n, "trials": trials,
                     **edge_rate(trials, n, size, length, threshold, seed)})
    return rows


def markdown(document: dict) -> str:
    rows = document["rows"]
    out = ["| noise | commits | series with a false change point | false change points per 1000 commits |", "|---|---|---|---|"]
    out += [f"| {r['kind']} | {r['commits']} | {r['flagged']:.1%} | {r['per_1000_commits']:.3f} |"
            for r in rows if r["scenario"] == "noise"]
    out += ["", "| lasting drop | commits | found (within 2) | precision |", "|---|---|---|---|"]
    out += [f"| {r['size_sigma']:g} sigma ({r['size_sigma'] * SIGMA:.1%}) | {r['commits']} | {r['recall']:.1%} | {r['precision']:.1%} |"
            for r in rows if r["scenario"] == "step"]
    out += ["", "| drop, then fixed | lasting | commits | both edges found (within 2) | precision |", "|---|---|---|---|---|"]
    out += [f"| {r['size']:.1%} | {r['length']} commits | {r['commits']} | {r['recall']:.1%} | {r['precision']:.1%} |"
            for r in rows if r["scenario"] == "bump"]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--threshold", type=float, default=cp.DEFAULT_THRESHOLD)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("changepoint_quality.json"))
    parser.add_argument("--table", type=Path, metavar="JSON", help="print the Markdown tables of a written file and stop")
    args = parser.parse_args(argv)
    if args.table:
        print(markdown(json.loads(args.table.read_text())))
        return 0
    started = time.monotonic()
    rows = run(args.trials, args.threshold)
    document = {"what": "harness.changepoints.find on generated series (docs/data/changepoint_quality.py)",
                "threshold": args.threshold, "min_change": cp.DEFAULT_MIN_CHANGE, "sigma": SIGMA, "near": NEAR,
                "trials": args.trials, "seconds": round(time.monotonic() - started, 1), "rows": rows}
    args.out.write_text(json.dumps(document, indent=1) + "\n")
    print(markdown(document))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
