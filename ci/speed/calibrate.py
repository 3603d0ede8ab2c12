"""``python -m ci.speed.calibrate``: A/A rounds of the head against itself, the noise model, the rounds to decide.

    python -m ci.speed.calibrate --noise ci/speed_noise_h200.json --thresholds ci/speed_thresholds_h200.json --write

The gate's front with the calibration's options (ci.speed.gate); the procedure is ci.speed.modes.calibration,
its steps docs/SPEED_GATE.md, "Calibrating a new runner".
"""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ci.speed.calibrate``: the gate's front with the calibration's options (ci.speed.gate)."""
    from ci.speed.gate import CALIBRATE

    return CALIBRATE.main(argv)


if __name__ == "__main__":
    import sys

    sys.exit(main())
