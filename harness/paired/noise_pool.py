"""The between-worker variance pooled over a runner's benchmarks (issue 46): one benchmark's few worker generations
cannot estimate its own ``tau^2``; together the benchmarks show how large it is against their within variance.

Per benchmark ``j`` the fit (harness.paired.noise_fit) hands over the within variance ``s_j^2`` (``d_j`` df) and the
generation means' mean square ``M_j`` (``b_j`` df): ``F_j = M_j / s_j^2`` is ``(1 + kappa_j rho_j)`` times an
F(b_j, d_j) variate whatever the benchmark's scale, ``rho_j = tau_j^2 / sigma_j^2`` the ratio pooled here. The
ratios are drawn from a gamma distribution (mean ``rho_0``, shape ``a``) fitted to every ``F_j`` by maximum marginal
likelihood; each ``rho_j`` is then its posterior mean, and ``tau_j^2 = rho_j s_j^2`` with the df of that estimate's
sampling variability. The formulas and why: docs/SPEED_GATE.md, "The between-worker
variance, pooled".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

# The ratios' support: 0 (no between variance) and tau^2 / sigma_w^2 from 1e-3 to 1e3 (the H200's n256 configs: ~40).
RATIO_GRID = np.concatenate([[0.0], np.geomspace(1e-3, 1e3, 241)])
MEAN_BOUNDS = (1e-4, 1e3)  # the pooled ratio's range (1e-4: "no between variance seen", without a log of 0)
SHAPE_BOUNDS = (0.1, 1e3)  # gamma shape: 0.1 lets ratios range over decades; 1e3 is one ratio for all
STEP = 0.05  # relative step of the numerical derivatives (the pooled mean's information, the posteriors' slopes)


@dataclass(frozen=True)
class BetweenParts:
    """One benchmark's sums of squares as the pool needs them."""

    within_var: float  # s^2: the pooled within-generation variance
    within_df: float  # d: its df
    between_ms: float  # M: the generation means' mean square about their run's mean, SS_b / b
    between_df: float  # b: generations less runs (0: no run had two generations)
    size: float  # kappa: E[M] = sigma^2 (1 + kappa rho); the generations' size (2 for pairs of rounds)

    @property
    def f_ratio(self) -> float | None:
        """``M / s^2``; None without between df."""
        return self.between_ms / self.within_var if self.between_df >= 1 and self.within_var > 0 else None


@dataclass(frozen=True)
class Pool:
    """The runner's between-to-within structure, from every benchmark with between df."""

    ratio: float  # rho_0: the mean of the benchmarks' tau^2 / sigma_w^2
    shape: float  # a: the gamma's shape (large: one ratio for all; small: ratios spread over decades)
    ratio_var: float  # the variance of rho_0 as estimated (the marginal likelihood's curvature in rho_0)
    benchmarks: int  # how many benchmarks it was estimated from
    df: float  # their between df, summed

    def to_json(self) -> dict[str, float | int]:
        return {
            "ratio": round(self.ratio, 6),
            "shape": round(self.shape, 4),
            "ratio_se": round(math.sqrt(self.ratio_var), 6),
            "benchmarks": self.benchmarks,
            "between_df": round(self.df, 3),
        }


@dataclass(frozen=True)
class Shrunk:
    """One benchmark's ratio after pooling, and what it makes of its between variance."""

    ratio: float  # rho_j, posterior mean (>= 0)
    ratio_var: float  # its estimate's sampling variance from the pool's mean (its own F's is in between_df)
    between_var: float  # tau_j^2 = rho_j s_j^2
    between_df: float  # the df of tau_j^2 as an estimate (its own generation means' when the pool puts it at 0)


def _prior(mean: float, shape: float) -> np.ndarray:
    """The gamma's probabilities on :data:`RATIO_GRID` (each point takes the mass up to the midpoints beside it)."""
    edges = np.concatenate([[0.0], (RATIO_GRID[1:] + RATIO_GRID[:-1]) / 2.0, [np.inf]])
    mass = np.diff(stats.gamma.cdf(edges, shape, scale=mean / shape))
    return mass / mass.sum()


def _likelihoods(parts: list[BetweenParts]) -> np.ndarray:
    """``L[j, g]``: the density of ``F_j`` when the ratio is ``RATIO_GRID[g]``, ``f_F(F / phi) / phi``."""
    rows = []
    for p in parts:
        phi = 1.0 + p.size * RATIO_GRID
        f = p.f_ratio
        assert f is not None
        rows.append(stats.f.pdf(f / phi, p.between_df, p.within_df) / phi)
    return np.maximum(np.asarray(rows), 1e-300)


def _log_marginal(likelihoods: np.ndarray, mean: float, shape: float) -> float:
    return float(np.sum(np.log(likelihoods @ _prior(mean, shape))))


def pool(parts: Mapping[str, BetweenParts]) -> Pool | None:
    """The gamma of the ratios that best explains every benchmark's ``F`` (maximum marginal likelihood over its mean
    and shape); None when no benchmark has between df."""
    usable = [p for p in parts.values() if p.f_ratio is not None]
    if not usable:
        return None
    like = _likelihoods(usable)
    lo, hi = (math.log(b) for b in MEAN_BOUNDS)
    slo, shi = (math.log(b) for b in SHAPE_BOUNDS)

    def loss(x: np.ndarray) -> float:
        return -_log_marginal(like, math.exp(min(max(x[0], lo), hi)), math.exp(min(max(x[1], slo), shi)))

    starts = [np.array([m, a]) for m in np.linspace(lo, hi, 8) for a in (slo, 0.0, shi)]
    best = min(starts, key=loss)
    found = optimize.minimize(loss, best, method="Nelder-Mead", options={"xatol": 1e-3, "fatol": 1e-6})
    log_mean = min(max(float(found.x[0]), lo), hi)
    shape = math.exp(min(max(float(found.x[1]), slo), shi))
    # The curvature in rho_0 at the optimum (shape held): how well the benchmarks together know the pool's mean. On
    # the linear scale: a log-scale variance near rho_0 = 0 is large and its linearization overstates the error of
    # a small tau^2 many times. At a bound (no curvature) rho_0 is taken as known to within itself.
    mean = math.exp(log_mean)
    at = [-loss(np.array([math.log(mean * (1.0 + d)), math.log(shape)])) for d in (-STEP, 0.0, STEP)]
    curvature = -(at[0] - 2.0 * at[1] + at[2]) / (mean * STEP) ** 2
    ratio_var = 1.0 / curvature if curvature > 0 else mean * mean
    return Pool(mean, shape, ratio_var, len(usable), sum(p.between_df for p in usable))


def _posterior_mean(part: BetweenParts, mean: float, shape: float, f_ratio: float | None) -> float:
    """``E[rho_j | F_j = f_ratio]`` under the gamma (the gamma's own mean without between df)."""
    weights = _prior(mean, shape)
    if f_ratio is not None:
        phi = 1.0 + part.size * RATIO_GRID
        weights = weights * np.maximum(stats.f.pdf(f_ratio / phi, part.between_df, part.within_df) / phi, 1e-300)
        weights = weights / weights.sum()
    return float(weights @ RATIO_GRID)


def shrink(part: BetweenParts, structure: Pool | None) -> Shrunk:
    """``rho_j``: its posterior mean under the pool; then ``tau_j^2 = rho_j s_j^2`` and the df of that estimate.

    The df is the estimate's sampling variability, as Welch-Satterthwaite reads a variance part's df (a scaled
    chi-square's: relative variance ``2 / df``). ``tau_j^2 = g(M_j / s_j^2) s_j^2`` with ``g`` the posterior mean, so
    with ``e = d log g / d log F`` (1 when the pool holds the ratio; near ``F / (F - 1)`` when the benchmark's own
    generations decide it, 0 when the pool alone does) and ``M_j``, ``s_j^2`` independent chi-squares:
    ``Var(log tau_j^2) = e^2 2 / b_j + (1 - e)^2 2 / d_j + (d g / d rho_0)^2 Var(rho_0) / g^2`` (the last: the pool's
    mean, itself estimated), and ``between_df = 2 / Var(log tau_j^2)``."""
    if structure is None:  # no benchmark has two generations in a run: nothing is known of tau
        return Shrunk(0.0, math.inf, 0.0, 0.0)
    f = part.f_ratio
    mean, shape = structure.ratio, structure.shape
    ratio = _posterior_mean(part, mean, shape, f)
    if ratio <= 0:
        # The pool puts every benchmark's ratio at 0 (its gamma's mass below the grid's first step): a zero estimated
        # from this benchmark's own generation means, with their df -- not an unknown (df 0 left the runner with no
        # between-worker variance, the best case, a model that never decides: H100, 2026-12-07), and not the pool's
        # df (a benchmark of its own with tau = 3 sigma_w then hid behind the others' zero: 5% false regressions at
        # t/2 and 12% misses in docs/data/learned_variance_rates.py's "known 0" cells).
        return Shrunk(0.0, 0.0, 0.0, part.between_df)
    elasticity = 0.0
    if f is not None:
        up, down = (_posterior_mean(part, mean, shape, f * math.exp(s)) for s in (STEP, -STEP))
        elasticity = (up - down) / (2.0 * STEP * ratio)
    up, down = (_posterior_mean(part, mean * (1.0 + s), shape, f) for s in (STEP, -STEP))
    pool_var = ((up - down) / (2.0 * STEP * mean)) ** 2 * structure.ratio_var
    relative = (
        (elasticity**2 * 2.0 / part.between_df if f is not None else 0.0)
        + (1.0 - elasticity) ** 2 * 2.0 / max(part.within_df, 1.0)
        + pool_var / (ratio * ratio)
    )
    return Shrunk(ratio, pool_var, ratio * part.within_var, 2.0 / relative)


def generation_mean_df(within_sd: float, within_df: float, between_sd: float, between_df: float, cadence: int) -> float:
    """The df of a generation mean's variance at ``cadence`` rounds, ``B = sigma_w^2 / k0 + tau^2``, from a model
    entry's two parts (Welch-Satterthwaite; version 7's model_prediction reads a df of ``B``). ``between_df`` is the
    df of ``tau^2`` alone (:func:`shrink`): where ``tau`` is small ``B`` is mostly the within part and keeps its df."""
    within = within_sd**2 / cadence
    between = between_sd**2
    if between <= 0 or between_df <= 0:
        return float(within_df)
    return (within + between) ** 2 / (within**2 / within_df + between**2 / between_df)
