"""The scenarios of docs/SPEED_GATE.md and their table of simulated verdict rates (``python -m harness.paired``)."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

import numpy as np

from harness.paired.calibration import Calibration, calibrate, suggest_threshold
from harness.paired.sequential import DEFAULT_PLAN, SequentialPlan
from harness.paired.simulation import simulate, synthetic_rounds
from harness.paired.verdict import Verdict
from harness.report import markdown_table

# The scenarios of docs/SPEED_GATE.md: (label, ratio_sd, true_effect, threshold or None for the
# suggested one, extra noise). 0.1% is the H200 Triton kernel's round-ratio SD rounded up
# (8 fresh processes: CV 0.043%, so a ratio of two has ~0.06%); 3% is torch_dequant's.
SCENARIOS: tuple[tuple[str, float, float, float | None, dict[str, float]], ...] = (
    ("A/A, SD 0.1%", 0.001, 0.0, None, {}),
    ("-0.5%, SD 0.1%", 0.001, -0.005, None, {}),
    ("-1%, SD 0.1%", 0.001, -0.01, None, {}),
    ("+1%, SD 0.1%", 0.001, +0.01, None, {}),
    ("A/A, SD 0.1%, drift + 5% outliers + 10% excluded", 0.001, 0.0, None, {"drift": 2e-4, "outlier_rate": 0.05, "exclude_rate": 0.1}),
    ("-0.5%, SD 0.1%, drift + 5% outliers + 10% excluded", 0.001, -0.005, None, {"drift": 2e-4, "outlier_rate": 0.05, "exclude_rate": 0.1}),
    ("effect on the band edge, SD 0.1%", 0.001, None, None, {}),  # true effect = -threshold
    ("A/A, SD 3%, t=1%", 0.03, 0.0, 0.01, {}),
    ("-0.5%, SD 3%, t=1%", 0.03, -0.005, 0.01, {}),
    ("-5%, SD 3%, t=1%", 0.03, -0.05, 0.01, {}),
    ("A/A, SD 3%", 0.03, 0.0, None, {}),
    ("-10%, SD 3%", 0.03, -0.10, None, {}),
)


def rate_table(trials: int = 2000, seed: int = 0, plan: SequentialPlan = DEFAULT_PLAN, calibration_rounds: int = 16) -> str:
    """Markdown table of simulated verdict rates for :data:`SCENARIOS`.

    Thresholds marked "suggested" come from :func:`calibrate` on ``calibration_rounds``
    synthetic A/A rounds of the scenario's noise (seeded), as the gate's ``--calibrate`` would.
    """
    rows = []
    thresholds: dict[float, Calibration] = {}
    for i, (label, sd, effect, threshold, noise) in enumerate(SCENARIOS):
        if threshold is None:
            if sd not in thresholds:
                aa = synthetic_rounds(calibration_rounds, sd, 0.0, np.random.default_rng(seed + 10_000))
                thresholds[sd] = calibrate(aa, plan)
            threshold = suggest_threshold(thresholds[sd])
            source = "suggested"
        else:
            source = "fixed"
        if effect is None:
            effect = -threshold
        r = simulate(sd, effect, threshold, plan, trials=trials, seed=seed + i, **noise)
        rows.append(
            {"scenario": label, "true effect": f"{effect:+.3%}", "threshold": f"{threshold:.3%} ({source})"}
            | {v.value: f"{r.rate(v):.2%}" for v in Verdict}
            | {"mean rounds": f"{r.mean_rounds:.1f}", "stopped early": f"{r.stopped_early / r.decisions:.0%}"}
        )
    head = (
        f"Plan: looks at {list(plan.look_points)} usable rounds, alpha {plan.alpha} (per look {plan.per_look_alpha:.5f}); "
        f"{trials} seeded trials per row (seed {seed}).\n\n"
    )
    cal = "\n".join(f"- SD {sd:.1%}: {c.summary()}" for sd, c in thresholds.items())
    return head + markdown_table(rows) + "\n\nCalibrations used for the suggested thresholds:\n" + cal + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.paired", description="Print the speed gate's simulated verdict rates (docs/SPEED_GATE.md).")
    parser.add_argument("--trials", type=int, default=2000, help="simulated gate decisions per scenario (default 2000)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    sys.stdout.write(rate_table(trials=args.trials, seed=args.seed))
    return 0

