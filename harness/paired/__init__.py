"""Paired-ratio statistics of the PR speed gate (``python -m ci.speed``).

The gate measures base (A) and head (B) in interleaved rounds of fresh
processes (A B, B A, A B, ...). Each process yields, per benchmark, one TFLOPS
figure. A *round* is one A process and one B process adjacent in time; its
ratio is ``r_i = tflops_B_i / tflops_A_i``. **Higher TFLOPS is better**:
``r < 1`` is a slowdown. Rounds the caller marks as excluded (throttled, below a
clock floor) never enter an estimate; they are counted and reported.
docs/SPEED_GATE.md has the derivations and the simulated error rates.

Which module holds what (import from these; the names below are re-exported
for callers that write ``paired.<name>``):

* :mod:`~harness.paired.rounds` -- :class:`Round`, a round's two figures or its exclusion.
* :mod:`~harness.paired.signed_rank` -- the exact Wilcoxon signed-rank null
  distribution and the rank of the Walsh averages that bound the interval.
* :mod:`~harness.paired.hodges_lehmann` -- :class:`Estimate`, :func:`estimate`: the
  Hodges-Lehmann ratio with its distribution-free interval.
* :mod:`~harness.paired.verdict` -- :class:`Verdict`, :func:`decide`: one interval
  against the band ``[1 - t, 1 + t]``.
* :mod:`~harness.paired.sequential` -- :class:`SequentialPlan`, :data:`DEFAULT_PLAN`,
  :class:`Decision`, :func:`sequential_decision`, :func:`next_look`: planned
  looks with Bonferroni-split error.
* :mod:`~harness.paired.calibration` -- :class:`Calibration`, :func:`calibrate`,
  :func:`suggest_threshold`, :func:`threshold_for`, :func:`resolvable_effect`:
  what A/A rounds say about a benchmark's noise.
* :mod:`~harness.paired.rates` -- :class:`Rates`, :func:`replay`: verdict rates
  over many decisions, and the gate replayed over recorded rounds.
* :mod:`~harness.paired.simulation` -- :func:`synthetic_rounds`, :func:`simulate`:
  error rates from synthetic gate runs.
* :mod:`~harness.paired.scenarios` -- :data:`SCENARIOS`, :func:`rate_table`: the docs'
  table of simulated verdict rates (``python -m harness.paired``).

numpy and scipy.stats only; imports nothing from ``kernels/`` or ``ci/``.
"""

from harness.paired.calibration import Calibration, calibrate, resolvable_effect, suggest_threshold, threshold_for
from harness.paired.hodges_lehmann import Estimate, estimate
from harness.paired.scenarios import SCENARIOS, rate_table
from harness.paired.rates import Rates, replay
from harness.paired.rounds import Round
from harness.paired.sequential import DEFAULT_PLAN, Decision, SequentialPlan, next_look, sequential_decision
from harness.paired.signed_rank import signed_rank_pmf
from harness.paired.simulation import simulate, synthetic_rounds
from harness.paired.verdict import Verdict, decide

__all__ = [
    "DEFAULT_PLAN",
    "SCENARIOS",
    "Calibration",
    "Decision",
    "Estimate",
    "Rates",
    "Round",
    "SequentialPlan",
    "Verdict",
    "calibrate",
    "decide",
    "estimate",
    "next_look",
    "rate_table",
    "replay",
    "resolvable_effect",
    "sequential_decision",
    "signed_rank_pmf",
    "simulate",
    "suggest_threshold",
    "synthetic_rounds",
    "threshold_for",
]
