"""The run's guard: is this run noisier than the runner's noise model allows? (issue 29, deliver 3)

An e-process over the within-generation contrasts, so asking after every pair keeps its false-firing rate at ``level``
over the run (Ville's inequality); once fired it stays fired. docs/SPEED_GATE.md, "The noise model".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from scipy import special, stats

from harness.paired.noise import INFINITE_DF, BenchmarkNoise, Spread, combined_df, within_ss

# A run this many times the model's variance: the alternatives the guard weighs, equally. 5x is what the head's
# noise at 3x the model's makes of a round's variance ((1 + 9) / 2); 2x is a run that should make the model
# doubt itself; 16x a runner visibly disturbed.
VARIANCE_RATIOS = (2.0, 4.0, 8.0, 16.0)
# The run factor's quadrature: a grid in log u wide enough for run_df >= 2 (u from e^-5 to e^5).
_LOG_U = np.linspace(-5.0, 5.0, 501)


@dataclass(frozen=True)
class GuardTerm:
    """One benchmark's contribution: its within-generation SS and df so far, and its model."""

    ss: float
    df: int
    noise: BenchmarkNoise


@dataclass(frozen=True)
class GuardResult:
    ratio: float  # the run's pooled within variance over the model's (1: as the model says)
    df: int  # pooled within-generation df it rests on
    evidence: float  # the e-value: likelihood of "noisier than the model" over "as the model says" (1 with no df)
    p: float  # min(1, 1 / evidence): anytime-valid, so a run is judged on it however often it is asked
    fired: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _log_marginals(scales: np.ndarray, d: np.ndarray, q: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Sum over benchmarks of log p(contrasts | the run's variance ``scale`` times the model's), ``v_k`` integrated.

    ``scales``: shape (S,); ``d``, ``q`` (= SS / sigma^2), ``b`` (the benchmark's factor df): shape (K,). Terms that
    cancel in every ratio (2 pi sigma^2) are left out.
    """
    w = scales[:, None]
    known = b >= INFINITE_DF
    bb = np.where(known, 1.0, b)  # a placeholder where the factor is known (that branch is not used)
    constant = np.where(known, 0.0, special.gammaln((bb + d) / 2) - special.gammaln(bb / 2) + bb / 2 * np.log(bb / 2))
    tail = np.where(known, -q / (2 * w), -(bb + d) / 2 * np.log(bb / 2 + q / (2 * w)))
    return np.sum(-d / 2 * np.log(w) + tail, axis=1) + constant.sum()


@lru_cache(maxsize=16)
def _run_factor_grid(run_df: float) -> tuple[np.ndarray, np.ndarray]:
    """Nodes ``u`` and log weights (summing to 1) for the run factor ``u ~ run_df / chi2_{run_df}``."""
    if run_df >= INFINITE_DF:
        return np.ones(1), np.zeros(1)
    u = np.exp(_LOG_U)
    log_w = stats.invgamma.logpdf(u, run_df / 2, scale=run_df / 2) + _LOG_U  # the density of log u
    keep = log_w > log_w.max() - 50.0  # nodes e^-50 below the peak change no sum
    return u[keep], log_w[keep] - special.logsumexp(log_w[keep])


def guard(terms: Iterable[GuardTerm], spread: Spread, level: float) -> GuardResult:
    """Is this run noisier than the model allows? Fires when the e-value reaches ``1 / level``.

    Only runs *noisier* than the model fire it: a quieter run costs no validity, and its e-value falls below 1.
    """
    if not 0 < level < 1:
        raise ValueError(f"guard level must be in (0, 1) (got {level})")
    used = [t for t in terms if t.df >= 1]
    total = sum(t.df for t in used)
    if not total:
        return GuardResult(1.0, 0, 1.0, 1.0, False)
    d = np.array([t.df for t in used], dtype=float)
    q = np.array([t.ss / t.noise.within_sd**2 for t in used])
    b = np.array([combined_df(spread.bench_df, t.noise.within_df) for t in used])
    u, log_w = _run_factor_grid(spread.run_df)
    ratios = np.array((1.0, *VARIANCE_RATIOS))
    marginals = _log_marginals((ratios[:, None] * u).ravel(), d, q, b).reshape(len(ratios), -1)
    log_m = special.logsumexp(marginals + log_w, axis=1)  # log M(c): the null (c = 1), then each alternative
    log_e = special.logsumexp(log_m[1:] - log_m[0]) - math.log(len(VARIANCE_RATIOS))
    e = float(math.exp(min(log_e, 700.0)))
    return GuardResult(float(q.sum() / total), total, e, min(1.0, 1.0 / e), e >= 1.0 / level)


@dataclass(frozen=True)
class PairEvent:
    """One benchmark's round as it completed, in the run's time order (an excluded round has no ratio)."""

    benchmark: str
    log_ratio: float | None
    generation: int


class GuardState:
    """The run's guard, fed one completed pair at a time (the gate's order); it stays fired once it fires."""

    def __init__(self, models: Mapping[str, BenchmarkNoise], spread: Spread, level: float):
        self.models, self.spread, self.level = models, spread, level
        self._ratios: dict[str, list[float]] = {}
        self._gens: dict[str, list[int]] = {}
        self._terms: dict[str, GuardTerm] = {}
        self.last = GuardResult(1.0, 0, 1.0, 1.0, False)
        self.fired = False

    def add(self, event: PairEvent) -> GuardResult:
        model = self.models.get(event.benchmark)
        if model is not None and event.log_ratio is not None:
            self._ratios.setdefault(event.benchmark, []).append(event.log_ratio)
            self._gens.setdefault(event.benchmark, []).append(event.generation)
            ss, d = within_ss(self._ratios[event.benchmark], self._gens[event.benchmark])
            previous = self._terms.get(event.benchmark)
            self._terms[event.benchmark] = GuardTerm(ss, d, model)
            if previous is None or previous.df != d:  # a generation's first round adds no contrast: nothing new
                self.last = guard(self._terms.values(), self.spread, self.level)
                self.fired = self.fired or self.last.fired
        return self.last


def guard_timeline(
    events: Sequence[PairEvent], models: Mapping[str, BenchmarkNoise], spread: Spread, level: float
) -> tuple[list[GuardResult], int | None]:
    """The guard after each event, over every benchmark's usable rounds so far; and the first event that fired it.

    The gate asks this of its rounds in the order their pairs completed (a round, then the next), so a
    benchmark decided in the middle of a round is judged on exactly what had been measured by then; a
    replay of the record asks the same (ci.speed.decide.generations). Benchmarks without a model entry do not count.
    """
    state = GuardState(models, spread, level)
    results, first = [], None
    for i, event in enumerate(events):
        results.append(state.add(event))
        if first is None and state.fired:
            first = i
    return results, first
