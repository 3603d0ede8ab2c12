"""Measured rates of harness.changepoints on synthetic TFLOPS histories: writes docs/data/changepoint_rates.json.

    PYTHONPATH=. python docs/data/changepoint_rates.py [--trials 500] [--out docs/data/changepoint_rates.json]
    PYTHONPATH=. python docs/data/changepoint_rates.py --table docs/data/changepoint_rates.json   # the Markdown table

A synthetic history: ``n`` commits, each measured once with ``SAMPLES`` samples.
A commit's level is 100 TFLOPS x (1 + step + e_commit), e_commit ~ N(0, sigma) with
sigma = 1%: sigma is the commit-to-commit noise (a run's build, clocks, placement),
the noise a change point has to stand out of. Each sample adds its own N(0, 1%).
Scenarios (each over both significance tests):

* ``flat``: no step: any change point is a false positive.
* ``flat+outliers``: no step; 5% of commits are off by +-4 sigma (a bad runner) and 2% of
  samples are 30% slow (a preempted launch).
* ``trend``: no step; a linear decline of 3 sigma over the history (what a change point
  detector cuts into steps: reported as "flagged", it is a real decline).
* ``step``: a drop of 0.5 to 5 sigma at the middle commit. Detected: a regression within
  one commit of it; exact: at it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from harness import changepoints as cp

SIGMA = 0.01
WITHIN = 0.01
SAMPLES = 10
LENGTHS = (12, 24, 50)
STEPS_SIGMA = (0.5, 1.0, 2.0, 3.0, 5.0)


def history(rng: np.random.Generator, n: int, *, step_sigma: float = 0.0, outliers: bool = False,
            trend_sigma: float = 0.0) -> list[np.ndarray]:
    at = n // 2
    out = []
    for i in range(n):
        level = 1.0 + rng.normal(0, SIGMA) - (step_sigma * SIGMA if i >= at else 0.0) - trend_sigma * SIGMA * i / (n - 1)
        if outliers and rng.random() < 0.05:
            level += rng.choice((-4, 4)) * SIGMA
        samples = 100.0 * level * (1 + rng.normal(0, WITHIN, SAMPLES))
        if outliers:
            samples[rng.random(SAMPLES) < 0.02] *= 0.7
        out.append(samples)
    return out


def rate(trials: int, test: str, n: int, seed: int, **kind) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    flagged = detected = exact = 0
    for trial in range(trials):
        series = history(rng, n, **kind)
        changes = cp.detect(series, test=test, seed=trial, with_intervals=False)
        flagged += bool(changes)
        near = [c for c in changes if abs(c.index - n // 2) <= 1 and c.direction == cp.REGRESSION]
        detected += bool(near)
        exact += any(c.index == n // 2 for c in near)
    return {"flagged": flagged / trials, "detected": detected / trials, "exact": exact / trials}


def markdown_table(document: dict) -> str:
    """Rows: scenario; columns: each test x length, the share flagged (detected for a step: within one commit)."""
    rows = document["rows"]
    tests = list(dict.fromkeys(r["test"] for r in rows))
    lengths = list(dict.fromkeys(r["commits"] for r in rows))
    cell = {(r["test"], r["scenario"], r["commits"]): r for r in rows}
    head = ["scenario", "reported"] + [f"{t}, n={n}" for t in tests for n in lengths]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for scenario in dict.fromkeys(r["scenario"] for r in rows):
        what = "detected (exact)" if scenario.startswith("step") else "flagged"
        values = []
        for t in tests:
            for n in lengths:
                r = cell[(t, scenario, n)]
                values.append(f"{r['detected']:.1%} ({r['exact']:.1%})" if scenario.startswith("step") else f"{r['flagged']:.1%}")
        lines.append("| " + " | ".join([scenario, what, *values]) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("changepoint_rates.json"))
    parser.add_argument("--table", type=Path, metavar="JSON", help="print the Markdown table of a written file and stop")
    args = parser.parse_args(argv)
    if args.table:
        print(markdown_table(json.loads(args.table.read_text())))
        return 0
    rows = []
    started = time.monotonic()
    scenarios = [("flat", {}), ("flat+outliers", {"outliers": True}), ("trend", {"trend_sigma": 3.0})]
    scenarios += [(f"step {s:g} sigma", {"step_sigma": s}) for s in STEPS_SIGMA]
    for test in (cp.T_TEST, cp.PERMUTATION):
        for name, kind in scenarios:
            for n in LENGTHS:
                result = rate(args.trials, test, n, seed=len(rows), **kind)
                rows.append({"test": test, "scenario": name, "commits": n, **result})
                print(f"{test:12s} {name:16s} n={n:3d} {result}", file=sys.stderr, flush=True)
    document = {
        "what": "harness.changepoints.detect on synthetic histories (docs/data/changepoint_rates.py)",
        "alpha": cp.DEFAULT_ALPHA, "permutations": cp.DEFAULT_PERMUTATIONS, "min_size": cp.DEFAULT_MIN_SIZE,
        "trials_per_row": args.trials, "sigma_commit": SIGMA, "sigma_within": WITHIN, "samples_per_commit": SAMPLES,
        "seconds": round(time.monotonic() - started, 1), "rows": rows,
    }
    args.out.write_text(json.dumps(document, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
