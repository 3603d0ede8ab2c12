"""Which worker-restart cadence decides a PR's benchmarks in the fewest GPU seconds (issue 37, deliver 2) -- no GPU.

    PYTHONPATH=. .venv/bin/python docs/data/zone_restart_cadence.py

Per Triton benchmark of the H200's default selection: the look by which the zone plan decides any effect at the
benchmark's policy threshold under the runner's model (ci.speed.modes.calibration_plan.plan_rounds, the per-PR alpha shared by 20),
restarting the workers every 1, 2 or 4 rounds, and what those rounds cost in GPU seconds at the recorded timing
costs (the v4 records' first-of-generation and repeat timings, both sides, 7.5 s a new generation). The worst case
(an effect in the zone's middle): an A/A benchmark or a clear slowdown is decided far earlier. Prints a Markdown table
and the totals; docs/SPEED_GATE.md ("Version 6: the zone") quotes them.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

import noise_model_rates as R  # noqa: E402

from ci.speed.decide.noise_file import load_noise_model  # noqa: E402
from ci.speed.decide.thresholds import load_thresholds  # noqa: E402
from ci.speed.modes.calibration_plan import CADENCES, plan_rounds  # noqa: E402
from harness.paired.plan import ZONE_PLAN  # noqa: E402

ROOT = HERE.parents[1]


def main() -> None:
    model = load_noise_model(ROOT / "ci" / "speed_noise_h200.json")
    thresholds = load_thresholds(ROOT / "ci" / "speed_thresholds_h200.json")
    planned = plan_rounds(model, R.ORDER, ZONE_PLAN, thresholds, len(R.ORDER), 2, R.timing_costs())
    print("| benchmark | threshold | " + " | ".join(f"restart every {r}" for r in CADENCES) + " |")
    print("|---|---|" + "---|" * len(CADENCES))
    totals = {r: [0, 0.0, 0] for r in CADENCES}
    for bench in R.ORDER:
        p = planned[bench]
        cells = []
        for r in CADENCES:
            n, sec = p.rounds[r], p.seconds[r]
            if n is None:
                totals[r][2] += 1
                cells.append("cannot")
            else:
                totals[r][0] += n
                totals[r][1] += sec or 0.0
                cells.append(f"{n} rounds, {sec:.0f} s")
        print(f"| `{bench}` | {p.threshold:.2%} | " + " | ".join(cells) + " |")
    print()
    for r, (n, sec, cannot) in totals.items():
        print(
            f"- restart every {r}: {cannot} cannot be decided by 40 rounds; the others {n} rounds, {sec:.0f} GPU s in all"
        )


if __name__ == "__main__":
    main()
