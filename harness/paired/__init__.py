"""Paired-ratio statistics of the PR speed gate (``python -m ci.speed``): one plan, the t plan.

The gate times base (A) and head (B) in interleaved rounds (A B, B A, ...), each round
one timing per side and benchmark; a round's ratio is ``r_i = tflops_B_i / tflops_A_i``.
**Higher TFLOPS is better**: ``r < 1`` is a slowdown. Rounds the caller marks as excluded
never enter an estimate; they are counted and reported. docs/SPEED_GATE.md has the
derivations and the error rates. One module per concept (the names below are re-exported
for callers that write ``paired.<name>``): ``rounds`` (:class:`Round`), ``interval``
(:class:`Estimate`, :func:`look_interval`: a look's interval and its width), ``verdict``
(:class:`Verdict`, :func:`decide`), ``plan`` (:class:`SequentialPlan`, :data:`WARM_PLAN`, :data:`MODEL_PLAN`),
``sequential`` (:class:`Decision`, :class:`RoundsNoise`, :func:`sequential_decision`, :func:`next_look`),
``noise`` (a runner's noise model: the look's variance), ``noise_guard`` (the run's guard: :func:`guard`, :func:`guard_timeline`), ``noise_fit`` (:func:`fit`), ``calibration``
(:class:`Calibration`, :func:`calibrate`, :func:`threshold_for`, :func:`resolvable_effect`, :func:`model_threshold`,
:func:`model_resolvable_effect`),
``rates`` (:class:`Rates`, :func:`replay`), ``simulation`` (:func:`synthetic_rounds`,
:func:`simulate`; docs/data/warm_plan_rates.py tabulates them). numpy and scipy.stats only;
imports nothing from ``kernels/`` or ``ci/``.
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
