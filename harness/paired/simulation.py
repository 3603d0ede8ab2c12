"""Synthetic gate runs: rounds with a chosen noise and effect, and the verdict rates the gate gives on them."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from harness.paired.rates import Rates, rates_of
from harness.paired.rounds import Round
from harness.paired.sequential import WARM_PLAN, SequentialPlan, sequential_decision


def synthetic_rounds(
    n: int,
    ratio_sd: float,
    true_effect: float,
    rng: np.random.Generator,
    *,
    drift: float = 0.0,
    outlier_rate: float = 0.0,
    outlier_size: float = 0.05,
    exclude_rate: float = 0.0,
    level: float = 100.0,
    process_sd: float = 0.0,
    restart_every: int = 1,
) -> list[Round]:
    """``n`` rounds of interleaved timings (A B, B A, ...) with log-normal noise.

    Timing ``j`` (in time order) measures ``level * (1 + true_effect if head) * exp(drift * j + e_j)`` with
    ``e_j ~ N(0, ratio_sd^2 / 2)``, so a round's log ratio has SD ``ratio_sd``. With ``outlier_rate`` a timing is slowed
    by ``outlier_size`` (interference). With ``exclude_rate`` a round is marked excluded and its head is slowed by 20%,
    so an estimate that failed to drop excluded rounds would be visibly biased. ``process_sd`` with ``restart_every``
    models warm workers: each pair of worker processes, replaced every ``restart_every`` rounds, adds one offset
    ``N(0, process_sd^2)`` to the log ratio of all its rounds (allocation placement, code layout), so rounds of one
    generation are correlated, which an interval over rounds does not know.
    """
    sigma = ratio_sd / math.sqrt(2.0)
    j = np.arange(2 * n, dtype=float).reshape(n, 2)
    logs = math.log(level) + drift * j + rng.normal(0.0, sigma, size=(n, 2))
    if outlier_rate:
        logs += np.where(rng.random((n, 2)) < outlier_rate, math.log1p(-outlier_size), 0.0)
    # Column 0 ran first: A in even rounds, B in odd ones (A B, B A, ...).
    a_first = (np.arange(n) % 2) == 0
    base = np.where(a_first, logs[:, 0], logs[:, 1])
    head = np.where(a_first, logs[:, 1], logs[:, 0]) + math.log1p(true_effect)
    if process_sd:
        generation = np.arange(n) // max(1, restart_every)
        head = head + rng.normal(0.0, process_sd, size=int(generation[-1]) + 1)[generation]
    excluded = rng.random(n) < exclude_rate if exclude_rate else np.zeros(n, dtype=bool)
    head = np.where(excluded, head + math.log(0.8), head)
    return [
        Round(float(b), float(h), "synthetic: throttled" if x else None)
        for b, h, x in zip(np.exp(base), np.exp(head), excluded)
    ]


def simulate(
    ratio_sd: float,
    true_effect: float,
    threshold: float,
    plan: SequentialPlan = WARM_PLAN,
    trials: int = 2000,
    seed: int = 0,
    **noise: Any,
) -> Rates:
    """Rates of each verdict over ``trials`` synthetic gate runs (:func:`synthetic_rounds`).

    ``true_effect`` is head's TFLOPS change as a fraction (-0.005: 0.5% slower).
    ``noise`` passes ``drift``, ``outlier_rate``, ``outlier_size``, ``exclude_rate``, ``process_sd``, ``restart_every``.
    Every trial goes through :func:`sequential_decision`, the gate's own code.
    """
    rng = np.random.default_rng(seed)
    # Enough rounds that exclusions cannot starve a trial of its max_rounds usable ones.
    excl = float(noise.get("exclude_rate", 0.0))
    n = plan.max_rounds if not excl else int(math.ceil(1.5 * plan.max_rounds / (1.0 - excl))) + 10
    decisions = [
        sequential_decision(synthetic_rounds(n, ratio_sd, true_effect, rng, **noise), threshold, plan)
        for _ in range(trials)
    ]
    incomplete = sum(not d.complete for d in decisions)
    if incomplete:
        raise RuntimeError(f"{incomplete} simulated decisions ran out of rounds; raise the round supply")
    params = {
        "ratio_sd": ratio_sd,
        "true_effect": true_effect,
        "threshold": threshold,
        "plan": plan.look_points,
        "alpha": plan.alpha,
        "seed": seed,
        **noise,
    }
    return rates_of(decisions, params)
