"""Version 7's error rates in simulation whose truth departs from the gate's model (issue 46, deliver 5).

    PYTHONPATH=. nice .venv/bin/python docs/data/learned_variance_rates.py --out docs/data/learned_variance_rates.json
    PYTHONPATH=. .venv/bin/python docs/data/learned_variance_rates.py --tables docs/data/learned_variance_rates.json

One benchmark of a 20-benchmark PR (per-benchmark alpha 0.01/20, miss alpha 1%), new workers every round (the gate's
cadence; ``--restart-every``), a model calibrated at every 2 rounds, threshold
0.7%, within-generation SD 0.05% (the recorded Triton benchmarks' 0.02-0.15%). Truth: a round's log ratio is
``effect + g_gen + e``, ``g`` the worker generation's offset (SD ``tau``), ``e`` the round's (SD ``sigma_w``). What
departs from the gate's model, row by row:

- ``tau / sigma_w`` of 0, 1 and 3 (the H200's own n256 configs are 1.2-3.2; version 6 assumed 0.5 everywhere);
- heavy tails: ``e`` and ``g`` Student-t with 3 df (scaled to the same SD);
- a run-level shift: the run's variances 2.5x what its model says (both parts), as a runner on a bad day;
- a quantized timer (``--departures quantized ...``): each round's log ratio rounded to a grid of ``sigma_w / 4``
  (plus 1e-8 of jitter: the recorded near-ties differ by ~1e-7), so that generations repeat a log ratio as the H100's
  recorded rounds do; a round's sampling variance (``(0.6 sigma_w)^2``, the H100's ratio of sampling to round SD)
  given to the gate ("quantized, floor": the gate's rule since the fourth H100 lease) or not ("quantized, no floor");
- the model (where there is one): the truth ("right"), ``tau`` fitted as ~0 from 3 generations ("tau 0"), ``tau``
  3x the truth's ("tau 3x"), ``tau`` exactly 0 as a calibration where no benchmark's generations differ writes it:
  with the benchmark's own generation means' 3 df ("known 0", the committed rule) or with the pool's 78 df ("pool 0",
  the rule tried first and rejected on these cells: the H100's second calibration), or none at all (the no-model
  rule).

Each trial goes through harness.paired.sequential.sequential_decision (the gate's code) over 40 rounds; the whole
record and a growing prefix give the same decision. Counted: at 0 and -t/2 any "regression" (a false alarm); at -t
anything but "regression" (a miss; "inconclusive" shown apart); forced last-look calls; mean rounds. Intervals: 95%
Clopper-Pearson.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from scipy import stats

from harness.paired import Round, Verdict, sequential_decision
from harness.paired.noise import BenchmarkNoise, Spread
from harness.paired.plan import ZONE_PLAN, ZONE_WARM_PLAN
from harness.paired.sequential import RoundsNoise

THRESHOLD, WITHIN, ROUNDS, GATED = 0.007, 0.0005, 40, 20
CALIBRATION_CADENCE = 2  # the model's generations (python -m ci.speed.calibrate restarts every 2)
SPREAD = Spread(40.0, 17.0, True)
RATIOS = (0.0, 1.0, 3.0)
MODELS = ("none", "right", "tau 0", "tau 3x", "known 0", "pool 0")
ADDED = ("known 0", "pool 0")  # models added after the first table: their own seeds
# The H100's second calibration: 4 generations a benchmark (3 between df), 26 benchmarks (the pool's 78).
ZERO_DF = {"known 0": 3.0, "pool 0": 78.0}
DEPARTURES = ("normal", "t3 tails", "run x2.5")
QUANTIZED = ("quantized, floor", "quantized, no floor")  # their own seeds, run with --departures
GRID, SAMPLING_SD = WITHIN / 4, 0.6 * WITHIN
EFFECTS = (0.0, -THRESHOLD / 2, -THRESHOLD)


def model_of(kind: str, tau: float) -> BenchmarkNoise | None:
    """The model the gate is given: 30 within df, 12 between df (a short calibration's pooled figure)."""
    if kind == "none":
        return None
    if kind in ZERO_DF:
        return BenchmarkNoise(WITHIN, 30, 0.0, ZERO_DF[kind])
    fitted = {"right": tau, "tau 0": 1e-4 * WITHIN, "tau 3x": 3 * max(tau, WITHIN)}[kind]
    return BenchmarkNoise(WITHIN, 30, fitted, 12 if kind != "tau 0" else 2)


def draw(rng: np.random.Generator, n: int, heavy: bool) -> np.ndarray:
    if not heavy:
        return rng.normal(0.0, 1.0, n)
    return rng.standard_t(3, n) / math.sqrt(3.0)  # unit variance


def cell(task: tuple) -> dict:
    ratio, model_kind, departure, effect, trials, seed, restart, conflict_level = task
    rng = np.random.default_rng(seed)
    tau = ratio * WITHIN
    scale = math.sqrt(2.5) if departure == "run x2.5" else 1.0
    heavy = departure == "t3 tails"
    model = model_of(model_kind, tau)
    plan = (ZONE_WARM_PLAN if model is None else ZONE_PLAN).with_alpha(0.01 / GATED)
    if conflict_level is not None:
        plan = dataclasses.replace(plan, conflict_level=conflict_level)
    gens = np.arange(ROUNDS) // restart
    labels = tuple(int(g) for g in gens)
    counts = {"regression": 0, "not regression": 0, "inconclusive": 0, "forced": 0, "no change": 0}
    rounds_used = 0
    for _ in range(trials):
        x = math.log1p(effect) + scale * (
            tau * draw(rng, int(gens[-1]) + 1, heavy)[gens] + WITHIN * draw(rng, ROUNDS, heavy)
        )
        if departure in QUANTIZED:  # a timer's grid; the near-ties of the recorded rounds, not exact ones
            x = np.round(x / GRID) * GRID + 1e-8 * rng.normal(0.0, 1.0, ROUNDS)
        sampling = SAMPLING_SD**2 if departure == "quantized, floor" else None
        rounds = [Round(100.0, 100.0 * math.exp(v), sampling_var=sampling) for v in x]
        d = sequential_decision(rounds, THRESHOLD, plan, RoundsNoise(model, SPREAD, labels, None, CALIBRATION_CADENCE))
        rounds_used += d.rounds_used
        if d.verdict is Verdict.REGRESSION:
            counts["regression"] += 1
        elif d.verdict is Verdict.INCONCLUSIVE:
            counts["inconclusive"] += 1
        else:
            counts["not regression"] += 1
        counts["no change"] += d.verdict is Verdict.NO_CHANGE
        counts["forced"] += d.forced_error is not None
    wrong = counts["regression"] if effect > -THRESHOLD else counts["not regression"]
    low, high = clopper_pearson(wrong, trials)
    return {
        "tau_over_within": ratio,
        "model": model_kind,
        "departure": departure,
        "effect": effect,
        "trials": trials,
        **counts,
        "wrong": wrong,
        "wrong_rate": wrong / trials,
        "wrong_ci95": [low, high],
        "mean_rounds": rounds_used / trials,
    }


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    low = 0.0 if k == 0 else float(stats.beta.ppf(0.025, k, n - k + 1))
    high = 1.0 if k == n else float(stats.beta.ppf(0.975, k + 1, n - k))
    return low, high


def tables(data: dict) -> str:
    rows = data["cells"]
    out = [
        "| tau / sigma_w | departure | model | false regressions at 0 | at -t/2 | misses at -t (inconclusive) | "
        "forced calls at -t/2 / -t | mean rounds at 0 / -t/2 / -t |",
        "|---|---|---|---|---|---|---|---|",
    ]
    key = lambda r: (r["tau_over_within"], r["departure"], r["model"])  # noqa: E731
    groups: dict[tuple, dict[float, dict]] = {}
    for r in rows:
        groups.setdefault(key(r), {})[r["effect"]] = r
    for (ratio, departure, model), by in sorted(
        groups.items(), key=lambda kv: (kv[0][0], (DEPARTURES + QUANTIZED).index(kv[0][1]), MODELS.index(kv[0][2]))
    ):
        z, h, t = by[EFFECTS[0]], by[EFFECTS[1]], by[EFFECTS[2]]
        out.append(
            f"| {ratio:g} | {departure} | {model} | {z['wrong']}/{z['trials']} | {h['wrong']}/{h['trials']} "
            f"(<= {h['wrong_ci95'][1]:.2%}) | {t['wrong']}/{t['trials']} ({t['inconclusive']}) | "
            f"{h['forced']} / {t['forced']} | {z['mean_rounds']:.1f} / {h['mean_rounds']:.1f} / {t['mean_rounds']:.1f} |"
        )
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--tables", type=Path)
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--restart-every", type=int, default=1, help="the gate's cadence (1: the gate's since issue 46)")
    ap.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS), help="only these models' cells")
    ap.add_argument(
        "--departures",
        nargs="+",
        choices=DEPARTURES + QUANTIZED,
        default=list(DEPARTURES),
        help="only these departures' cells (the quantized ones draw seeds of their own)",
    )
    ap.add_argument(
        "--conflict-level",
        type=float,
        help="the prior-data conflict test's level instead of the plan's (0.01): a what-if, not the gate's rule",
    )
    args = ap.parse_args()
    if args.tables:
        print(tables(json.loads(args.tables.read_text())))
        return 0
    tasks = []
    seed, added = 46, 100046  # a model added later draws its own seeds: the earlier cells keep theirs
    quantized = 200046  # and so do the quantized departures
    for ratio in RATIOS:
        for departure in DEPARTURES + QUANTIZED:
            for model in MODELS:
                for effect in EFFECTS:
                    if departure in QUANTIZED:
                        quantized += 1
                        task_seed = quantized
                    elif model in ADDED:
                        added += 1
                        task_seed = added
                    else:
                        seed += 1
                        task_seed = seed
                    if model in args.models and departure in args.departures:
                        task = (ratio, model, departure, effect, args.trials, task_seed)
                        tasks.append((*task, args.restart_every, args.conflict_level))
    t0 = time.process_time()
    with ProcessPoolExecutor(args.workers) as pool:
        cells = list(pool.map(cell, tasks))
    data = {
        "command": " ".join(["docs/data/learned_variance_rates.py", *sys.argv[1:]]),
        "threshold": THRESHOLD,
        "within_sd": WITHIN,
        "restart_every": args.restart_every,
        "conflict_level": args.conflict_level if args.conflict_level is not None else ZONE_PLAN.conflict_level,
        "model_cadence": CALIBRATION_CADENCE,
        "gated": GATED,
        "plans": {"model": ZONE_PLAN.to_json(), "none": ZONE_WARM_PLAN.to_json()},
        "cells": cells,
        "cpu_s_parent": time.process_time() - t0,
    }
    if args.out:
        tmp = args.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1) + "\n")
        tmp.replace(args.out)
    print(tables(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
