"""Version 5b of the speed gate's plan, simulated (issue 29): the e-process guard, looks to 40, the tracked config at 0.14%.

    nice -n 5 .venv/bin/python docs/data/noise_model_rates_v5b.py 500 > docs/data/noise_model_rates_v5b.jsonl
    nice -n 5 .venv/bin/python docs/data/noise_model_rates_v5b.py 2000 --no-edge > docs/data/noise_model_rates_v5b_2000.jsonl
    .venv/bin/python docs/data/noise_model_rates_v5b.py --tables docs/data/noise_model_rates_v5b*.jsonl

A shorter companion of docs/data/noise_model_rates.py (whose full run takes ~50 minutes on two busy cores): the
rows the plan's change can move, through the same gate code (noise_model_rates.simulate_pr: model_interval,
sequential_decision, the guard), with the model the H200 gate reads (ci/speed_noise_h200.json, 6 runs) as both the
truth and the gate's model, and the thresholds file committed with it (ci/speed_thresholds_h200.json). One JSON
row per line, as each finishes (two processes). ``--no-edge`` leaves out the two rows of every benchmark at its
threshold (40 rounds each: ~4 minutes per 250 trials).
"""

import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

import noise_model_rates as R  # noqa: E402

from ci.speed.decide.noise_file import load_noise_model  # noqa: E402
from ci.speed.decide.thresholds import load_thresholds  # noqa: E402
from harness.paired.plan import MODEL_PLAN  # noqa: E402

MODEL = HERE.parents[1] / "ci" / "speed_noise_h200.json"
THRESHOLDS = HERE.parents[1] / "ci" / "speed_thresholds_h200.json"


def cell(task):
    label, trials, seed, kw = task
    thresholds = load_thresholds(THRESHOLDS)
    t = {b: thresholds.lookup(b)[0] for b in R.ORDER}
    if kw.pop("at_threshold", False):
        kw["effects"] = {b: -t[b] for b in R.ORDER}
    began = time.time()
    row = R.pr_rates(
        label, trials, seed, model=load_noise_model(MODEL), costs=R.timing_costs(), thresholds=t, use_model=True, **kw
    )
    return {**row, "tracked_threshold": t[R.TRACKED], "seconds": round(time.time() - began)}


def tables(paths):
    """The Markdown table of docs/SPEED_GATE.md ("Version 5b" under "Simulated rates") from the JSONL files."""
    print(
        "| case | trials | PR failed | fell back | regression / no change / inconclusive per benchmark | mean rounds "
        "| GPU-job wall median / p90 | tracked config (threshold 0.14%) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for path in paths:
        for line in Path(path).read_text().splitlines():
            r = json.loads(line)
            per = r["per_benchmark"]
            tracked = ", ".join(f"{k} {v:.3f}" for k, v in sorted(r["tracked"].items(), key=lambda kv: -kv[1]))
            print(
                f"| {r['label']} | {r['trials']} | {r['pr_failed']:.4f} | {r['fell_back']:.3f} | {per['regression']:.4f} / "
                f"{per['no change']:.4f} / {per['inconclusive']:.4f} | {r['mean_rounds']:.1f} | {r['wall_median_s']:.0f} / "
                f"{r['wall_p90_s']:.0f} s | {tracked} ({r['tracked_rounds']:.1f} rounds) |"
            )


def main():
    if sys.argv[1:2] == ["--tables"]:
        return tables(sys.argv[2:])
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    edge = "--no-edge" not in sys.argv[2:]
    gated = MODEL_PLAN.with_alpha(0.01 / len(R.ORDER))
    alone = replace(MODEL_PLAN, alpha=0.01, miss_alpha=0.01)
    tasks = [
        ("A/A", n, 11, dict(plan=gated, effects={})),
        ("one pass", n // 2, 11, dict(plan=gated, effects=R.ONE_PASS)),
        (
            "tracked alone (1 gated) at -0.25%",
            n,
            12,
            dict(plan=alone, effects={R.TRACKED: -0.0025}, order=[R.TRACKED], stop_failed=False),
        ),
        ("tracked alone (1 gated), A/A", n, 12, dict(plan=alone, effects={}, order=[R.TRACKED], stop_failed=False)),
        (
            "tracked -0.25%, others unchanged",
            n // 2,
            11,
            dict(plan=gated, effects={R.TRACKED: -0.0025}, stop_failed=False),
        ),
        ("A/A, head noise 3x", n // 2, 11, dict(plan=gated, effects={}, head_k=3.0)),
        ("every benchmark at -threshold", n // 2, 11, dict(plan=gated, at_threshold=True, stop_failed=False)),
        (
            "every benchmark at -threshold, head noise 3x",
            n // 2,
            11,
            dict(plan=gated, at_threshold=True, stop_failed=False, head_k=3.0),
        ),
    ]
    tasks = [t for t in tasks if edge or "threshold" not in t[0]]
    with ProcessPoolExecutor(2) as pool:
        for row in pool.map(cell, tasks):
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
