"""The speed gate's three modes, each run from one checked ci.speed.options.SpeedOptions.

measure.py the gate; replay.py ``--replay`` and ``--replay --judge``; calibration.py ``python -m ci.speed.calibrate``;
shared.py what they share: both surveys, the round loop, the thresholds, calibrations and noise model to use.
"""

from ci.speed.modes.calibration import run_calibrate
from ci.speed.modes.measure import run_gate
from ci.speed.modes.replay import run_replay

__all__ = ["run_calibrate", "run_gate", "run_replay"]
