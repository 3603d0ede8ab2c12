"""Paired-ratio statistics of the PR speed gate (``python -m ci.speed``): one module per concept, their main names
re-exported. A round's ratio is ``tflops_B / tflops_A`` (higher is better). docs/SPEED_GATE.md, "The statistics".
numpy and scipy.stats only; nothing from ``kernels/`` or ``ci/``.
"""

from harness.paired.calibration import (
    Calibration,
    calibrate,
    model_resolvable_effect,
    model_threshold,
    resolvable_effect,
    threshold_for,
)
from harness.paired.interval import Estimate, look_interval, model_interval
from harness.paired.noise import BenchmarkNoise, LookNoise, Spread
from harness.paired.noise_fit import RunRounds, fit
from harness.paired.noise_guard import guard, guard_timeline
from harness.paired.plan import MODEL_PLAN, WARM_PLAN, ZONE_PLAN, ZONE_WARM_PLAN, SequentialPlan
from harness.paired.rates import Rates, replay
from harness.paired.rounds import Round
from harness.paired.sequential import Decision, RoundsNoise, next_look, sequential_decision
from harness.paired.simulation import simulate, synthetic_rounds
from harness.paired.verdict import Verdict, decide

__all__ = [
    "MODEL_PLAN",
    "WARM_PLAN",
    "ZONE_PLAN",
    "ZONE_WARM_PLAN",
    "BenchmarkNoise",
    "Calibration",
    "LookNoise",
    "RoundsNoise",
    "RunRounds",
    "Spread",
    "fit",
    "guard",
    "guard_timeline",
    "model_interval",
    "model_resolvable_effect",
    "model_threshold",
    "Decision",
    "Estimate",
    "Rates",
    "Round",
    "SequentialPlan",
    "Verdict",
    "calibrate",
    "decide",
    "look_interval",
    "next_look",
    "replay",
    "resolvable_effect",
    "sequential_decision",
    "simulate",
    "synthetic_rounds",
    "threshold_for",
]
