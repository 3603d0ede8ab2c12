"""The gate's error rates on recorded A/A rounds (issue 37, deliver 3): the corpus resampled, the head shifted.

    PYTHONPATH=. nice .venv/bin/python docs/data/replay_rates.py --plan-object harness.paired.plan:MODEL_PLAN --out docs/data/replay_rates_v5b.json
    PYTHONPATH=. .venv/bin/python docs/data/replay_rates.py --tables docs/data/replay_rates_v5b.json
    PYTHONPATH=. nice .venv/bin/python docs/data/replay_rates.py --out docs/data/replay_rates_v6.json   # the gate's plan (ZONE_PLAN)

Each simulated PR (docs/data/replay_lib.py): every benchmark of the selection takes whole recorded worker
generations from docs/data/aa_corpus.json, resampled with replacement (benchmarks share a drawn (run, generation)
where both were measured in it), long enough for the plan's last look; the head is then shifted slower by 0, t/2
and t (t: the benchmark's threshold in --thresholds) and the PR goes through the gate's loop: the run's guard fed
pair by pair, each benchmark decided at the plan's looks by harness.paired.sequential.sequential_decision with the
noise model of --noise. Counted as wrong: at 0 and t/2 any "regression" (a false alarm, per PR and per benchmark);
at t anything but "regression" ("no change"/"improvement": a miss; "inconclusive" apart). Every benchmark runs to
its decision, so per-benchmark rates are not censored by the PR's stop; the PR's status ("any regression") is the
same whether it stops at its first regression or not, and the wall shown is the gate's (stopped there).
Intervals: 95% Clopper-Pearson. GPU-job wall: the recorded timing costs (noise_model_rates.timing_costs).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import replay_lib as L  # noqa: E402

# Version 5b's run: ~4-5 CPU-minutes in two processes (1593 s of wall on this 2-core machine at a load average of
# 12-15 from other jobs; ~3 minutes on two idle cores). A PR at t costs ~10x one at 0 (every benchmark runs to its
# 40th round). Precision: 0 of 600 PRs bounds a rate below 0.61% (95% Clopper-Pearson), 0 of 100 below 3.6%.
TRIALS, MISS_TRIALS, SEED = 600, 100, 37
_SETUP: dict = {}


def _setup(args: tuple) -> tuple[L.Setup, L.BlockResampler]:
    """Per process, once: the corpus, the plan, the thresholds, the model."""
    if args not in _SETUP:
        plan_spec, thresholds, noise, corpus_path, sel, runs = args
        corpus = json.loads(Path(corpus_path).read_text())
        ids = [r["benchmark"] for r in corpus["summary"]]
        order = L.selection(sel, ids)
        blocks = L.corpus_blocks(corpus, order, runs)
        setup = L.load_setup(plan_spec, thresholds, noise, order)
        _SETUP[args] = (setup, L.BlockResampler(blocks))
    return _SETUP[args]


def chunk(task: tuple) -> dict[float, list[L.PrResult]]:
    """``n`` drawn PRs at the false-alarm shifts; the first ``m`` of them at the miss shifts too."""
    args, (n, m), seed, shifts = task
    setup, sampler = _setup(args)
    rng = np.random.default_rng(seed)
    out: dict[float, list[L.PrResult]] = {s: [] for s in shifts}
    for i in range(max(n, m)):
        truth = sampler.draw(rng, setup.order, int(setup.plan.max_rounds), L.generation_rounds(setup))
        wanted = [s for s in shifts if (i < m if s >= 1.0 else i < n)]
        for s, r in L.run_shifts(truth, setup, wanted).items():
            out[s].append(r)
    return out


def rates(args: argparse.Namespace) -> dict:
    key = (
        args.plan_object,
        str(args.thresholds),
        str(args.noise),
        str(args.corpus),
        args.selection,
        tuple(args.runs) if args.runs else None,
    )
    setup, sampler = _setup(key)
    began = time.time()
    tasks = [
        (key, sizes, seed, tuple(args.shifts)) for sizes, seed in L.chunks((args.trials, args.miss_trials), args.seed)
    ]
    parts = L.in_processes(chunk, tasks, args.workers)
    cells = []
    for s in args.shifts:
        results = [r for p in parts for r in p[s]]
        kind = "miss" if s >= 1.0 else "false alarm"
        cells.append({"shift_of_threshold": s, "kind": kind, **L.tally(results, setup.order, kind)})
    return {
        "what": "the gate's error rates on recorded H200 A/A rounds, block-resampled by worker generation",
        "command": " ".join(["docs/data/replay_rates.py", *sys.argv[1:]]),
        "plan_object": args.plan_object,
        "plan": L.plan_summary(setup.plan),
        "thresholds_file": str(args.thresholds),
        "noise_file": str(args.noise),
        "corpus": str(args.corpus),
        "runs": args.runs or "all",
        "selection": args.selection,
        "benchmarks": list(setup.order),
        "thresholds": dict(setup.thresholds),
        "restart_every": setup.restart,
        "trials": args.trials,
        "miss_trials": args.miss_trials,
        "seed": args.seed,
        "workers": args.workers,
        "seconds": round(time.time() - began),
        "cells": cells,
    }


def tables(data: dict) -> str:
    """The Markdown of docs/SPEED_GATE.md, "Error rates on recorded rounds"."""
    lines = [
        f"Plan `{data['plan_object']}` (looks {data['plan'].get('look_points')}), {data['selection']} selection "
        f"({len(data['benchmarks'])} benchmarks), {data['trials']} PRs at 0 and t/2, {data['miss_trials']} at t, "
        f"seed {data['seed']}:",
        "",
        "| head slower by | PRs with a false regression | benchmarks: false regression | benchmarks: miss (no change / "
        "improvement) | inconclusive | guard fired | mean rounds | GPU-job wall median / p90 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in data["cells"]:
        s = c["shift_of_threshold"]
        shift = "0" if s == 0 else "t/2" if s == 0.5 else "t" if s == 1 else f"{s:g} t"
        if c["kind"] == "false alarm":
            cols = [L.pct(c["pr_false_alarm"]), L.pct(c["benchmark_false_alarm"]), "-", "-"]
        else:
            cols = ["-", "-", L.pct(c["benchmark_miss"]), L.pct(c["benchmark_inconclusive"])]
        lines.append(
            f"| {shift} | " + " | ".join(cols) + f" | {L.pct(c['guard_fired'])} | {c['mean_rounds']:.1f} | "
            f"{c['wall_s']['median']:.0f} / {c['wall_s']['p90']:.0f} s |"
        )
    lines += [
        "",
        "| benchmark | t | false regression at 0 | at t/2 | miss at t | inconclusive at t | mean rounds at 0 / t |",
        "|---|---|---|---|---|---|---|",
    ]
    by = {c["shift_of_threshold"]: c for c in data["cells"]}
    for b in data["benchmarks"]:

        def fa(s, b=b):
            return L.pct(by[s]["per_benchmark"][b]["false_alarm"]) if s in by else "-"

        miss = L.pct(by[1.0]["per_benchmark"][b]["miss"]) if 1.0 in by else "-"
        inc = L.pct(by[1.0]["per_benchmark"][b]["inconclusive"]) if 1.0 in by else "-"
        r0 = by[0.0]["per_benchmark"][b]["mean_rounds"] if 0.0 in by else float("nan")
        r1 = by[1.0]["per_benchmark"][b]["mean_rounds"] if 1.0 in by else float("nan")
        lines.append(
            f"| `{b}` | {data['thresholds'][b]:.2%} | {fa(0.0)} | {fa(0.5)} | {miss} | {inc} | {r0:.1f} / {r1:.1f} |"
        )
    return "\n".join(lines)


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--plan-object", default=L.DEFAULT_PLAN, help="module:NAME of the plan to evaluate")
    p.add_argument("--thresholds", type=Path, default=L.ROOT / "ci/speed_thresholds_h200.json")
    p.add_argument("--noise", type=Path, default=L.ROOT / "ci/speed_noise_h200.json", help="the gate's noise model")
    p.add_argument("--corpus", type=Path, default=HERE / "aa_corpus.json", help="docs/data/aa_corpus.py's output")
    p.add_argument("--runs", nargs="+", help="only these corpus runs (record paths as the corpus names them)")
    p.add_argument(
        "--selection",
        choices=L.SELECTIONS,
        default="default",
        help="default: the 30 benchmarks of the default selection; triton: its 20 Triton ones",
    )
    L.add_run_arguments(p, TRIALS, MISS_TRIALS, SEED)
    return L.checked_run_arguments(p, argv)


def main(argv: list[str] | None = None) -> int:
    return L.script_main("replay_rates", parse(argv), rates, tables)


if __name__ == "__main__":
    sys.exit(main())
