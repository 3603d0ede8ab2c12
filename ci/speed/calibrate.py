"""``python -m ci.speed.calibrate``: A/A rounds of the head against itself, the noise model, the rounds to decide.

The gate's front with the calibration's options (ci.speed.gate); the procedure is ci.speed.modes.calibration.
"""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    from ci.speed.gate import CALIBRATE

    return CALIBRATE.main(argv)


if __name__ == "__main__":
    import sys

    sys.exit(main())
