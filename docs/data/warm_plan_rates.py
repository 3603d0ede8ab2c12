"""Simulated verdict rates of the warm engine's t plan (docs/SPEED_GATE.md, "A verdict in seconds").

    python docs/data/warm_plan_rates.py > docs/data/warm_plan_rates.json

Noise from the H200 (issue 21): per-round SD of the log ratio 0.055% in one process (0.091% with
a fresh process per round, so about 0.07% between processes); torch_dequant under its power cap 1.4%.
Each trial goes through harness.paired.sequential.sequential_decision, the gate's own code, with
rounds correlated within a worker generation (process_sd, restart_every 2).

Three plans side by side: "before" (looks at 5/10/20, alpha two-sided, no futility stop: the plan
measured on the H200 on 2026-12-02), "v3" (the same looks, alpha per tail, futility stop at the
threshold edge) and "now" (WARM_PLAN, version 4: looks at 5/7/10/14/20 and a miss alpha of 1% per
benchmark that "no change" is decided on). The false-alarm alpha is shared by the gated benchmarks
(ci.speed.options plan_for); the miss alpha is not.
"""

import json
import sys
from dataclasses import replace

from harness.paired.sequential import WARM_PLAN
from harness.paired.simulation import simulate

V3 = replace(WARM_PLAN, looks=(5, 10, 20), miss_alpha=None)

TRIALS = 4000
CASES = [  # (name, round SD, process SD, threshold)
    ("triton in-process SD", 0.00055, 0.0, 0.003),
    ("triton + process SD 0.07%", 0.00055, 0.0007, 0.003),
    ("triton fresh-process SD", 0.00091, 0.0007, 0.003),
    ("torch_dequant power-capped", 0.014, 0.005, 0.10),
]
PLANS = {"before": replace(V3, alpha_per_tail=False, futility=False), "v3": V3, "now": WARM_PLAN}
rows = []
for plan_name, warm_plan in PLANS.items():
    for gated in (1, 10, 30):
        plan = warm_plan.with_alpha(warm_plan.alpha / gated)  # the per-PR alpha shared by the gated benchmarks
        print(f"{plan_name}, {gated} gated", file=sys.stderr)  # progress: a run takes minutes
        for name, sd, process_sd, threshold in CASES:
            for effect in sorted(
                {0.0, -0.0074, -threshold, -1.17 * threshold, -1.33 * threshold, -1.67 * threshold, -2 * threshold}
            ):
                rates = simulate(
                    sd, effect, threshold, plan, trials=TRIALS, seed=7, process_sd=process_sd, restart_every=2
                )
                counts = dict(rates.counts)
                rows.append(
                    {
                        "plan": plan_name,
                        "gated": gated,
                        "case": name,
                        "round_sd": sd,
                        "process_sd": process_sd,
                        "threshold": threshold,
                        "effect": effect,
                        "alpha_per_benchmark": plan.alpha,
                        "miss_alpha_per_benchmark": plan.miss_side_alpha,
                        "look_points": list(plan.look_points),
                        "trials": TRIALS,
                        **{k.replace(" ", "_"): v / TRIALS for k, v in counts.items()},
                        "mean_rounds": rates.mean_rounds,
                    }
                )
print(json.dumps(rows, indent=1))
