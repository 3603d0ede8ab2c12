"""The tuning PR's true effects (issue 37), from the H200 records of docs/data/h200_zone/ -- no GPU.

    PYTHONPATH=. .venv/bin/python docs/data/zone_tuning_effects.py

Per benchmark: the mean log ratio head/base of the fixed-round run (final/truth.json: every benchmark in every round, 5
rounds, 3 worker generations) with its 95% t interval, the same pooled with the three gate runs' rounds
(tuning/tuning_[123].json), the threshold, where the effect lies against the zone, and what each gate run decided.
Prints the Markdown table of docs/SPEED_GATE.md ("Version 6 on an H200").
"""

import json
import math
import sys
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from ci.speed.decide.thresholds import load_thresholds  # noqa: E402

DATA = ROOT / "docs" / "data" / "h200_zone"
TRUTH = DATA / "final" / "truth.json"
GATES = [DATA / "tuning" / f"tuning_{i}.json" for i in (1, 2, 3)]


def log_ratios(record: dict) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for bench in record["benchmarks"]:
        if bench["status"] == "gated":
            out[bench["id"]] = [
                math.log(r["ratio"]) for r in bench["rounds"] if r.get("excluded") is None and r.get("ratio")
            ]
    return out


def where(effect: float, t: float) -> str:
    if effect <= -t:
        return "regression"
    if effect > -t / 2:
        return "not a regression"
    return "in the zone"


def main() -> None:
    thresholds = load_thresholds(ROOT / "ci" / "speed_thresholds_h200.json")
    truth = log_ratios(json.loads(TRUTH.read_text()))
    gates = [json.loads(p.read_text()) for p in GATES]
    gate_ratios = [log_ratios(g) for g in gates]
    verdicts = [
        {b["id"]: (b["verdict"], b["decision"]["rounds_used"]) for b in g["benchmarks"] if b["status"] == "gated"}
        for g in gates
    ]
    print(
        "| benchmark | threshold | true effect (5 fixed rounds, 95% interval) | pooled with the gate runs | "
        "against the zone | gate runs 1 / 2 / 3 (rounds) |"
    )
    print("|---|---|---|---|---|---|")
    for bench, x in truth.items():
        t = thresholds.lookup(bench)[0]
        x = np.asarray(x)
        half = float(stats.t.ppf(0.975, x.size - 1)) * float(np.std(x, ddof=1)) / math.sqrt(x.size)
        pooled = np.concatenate([x] + [np.asarray(g.get(bench, [])) for g in gate_ratios])
        effect = math.expm1(float(np.mean(pooled)))
        runs = " / ".join(f"{v[bench][0]} ({v[bench][1]})" for v in verdicts)
        print(
            f"| `{bench}` | {t:.2%} | {math.expm1(x.mean()):+.2%} [{math.expm1(x.mean() - half):+.2%}, "
            f"{math.expm1(x.mean() + half):+.2%}] | {effect:+.2%} ({pooled.size} rounds) | {where(effect, t)} | {runs} |"
        )


if __name__ == "__main__":
    main()
