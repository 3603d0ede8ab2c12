"""``python -m ci.speed.calibrate``: A/A rounds of the head against itself, the runner's noise model, the rounds to decide.

One command on a fresh runner (docs/SPEED_GATE.md, "Calibrating a new runner"):

    python -m ci.speed.calibrate --noise ci/speed_noise_h200.json --thresholds ci/speed_thresholds_h200.json --write

1. measures A/A rounds in the gate's warm workers (two worktrees of one commit), restarting them
   every 2 rounds (the between-worker SD needs generations), up to 16 rounds and never a round
   that would end after ``--max-minutes`` (default 9: the default selection within 10 minutes);
2. fits the noise model (harness.paired.noise.fit) from these rounds, the runs already in the
   model file (same GPU model; the newest ci.speed.decide.noise_file.MAX_RUNS) and any ``--aa-records``;
3. reads each benchmark's threshold from the thresholds file -- policy, the slowdown that matters;
   never written here (issue 37) -- and plans, under the model and the zone plan, the look by which
   any effect is decided, restarting every 1, 2 or 4 rounds, with the GPU seconds that costs at this
   run's timings; the benchmarks no look decides are named (measure more, or change the policy);
4. prints all of it and, with ``--write``, writes the model (the gate then reads it: ``--noise``, or
   the head's ``ci/speed_noise.json``).

``--refit`` measures nothing: the model is refit from the runs in the file and ``--aa-records``.
The per-benchmark figures of the t plan (harness.paired.calibrate) are kept in the record as before
(``calibrations``, ``suggested_overrides``).
"""
from __future__ import annotations

from typing import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ci.speed.calibrate``: the gate's front with the calibration's options (ci.speed.gate)."""
    from ci.speed.gate import main as front

    return front(argv, calibrate=True)


if __name__ == "__main__":
    import sys

    sys.exit(main())
