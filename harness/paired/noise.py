"""A runner's noise model: what each benchmark's rounds vary by, learned from A/A rounds (issue 29).

``d_i = mu + g_gen(i) + e_i`` (``sigma_w`` within a worker generation, ``tau`` between them), a prior worth ``prior_df``
in one run (limma's moderation); fitted by :mod:`.noise_fit`, checked per run by :mod:`.noise_guard`.
docs/SPEED_GATE.md, "The noise model".
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import optimize, special

# When the runs cannot show how much they differ (one or two runs), the prior dfs of the run and benchmark parts:
# a little below what the five recorded H200 runs showed held out (run_df 39, bench_df 11.5; docs/SPEED_GATE.md).
DEFAULT_RUN_DF, DEFAULT_BENCH_DF = 30.0, 10.0
INFINITE_DF = 1e6  # "no excess dispersion seen": the term drops out of combined_df


def log_chi2_bias(df: float | np.ndarray) -> float | np.ndarray:
    """``E[log(chi2_df / df)]``: a sample variance's log is biased by this much (negative)."""
    return special.digamma(np.asarray(df) / 2.0) - np.log(np.asarray(df) / 2.0)


def df_for_log_variance(excess: float) -> float:
    """The df whose ``log(chi2_df / df)`` has variance ``excess`` (trigamma(df/2) = excess); INFINITE_DF when <= 0."""
    if not excess > 1e-9:
        return INFINITE_DF
    return float(optimize.brentq(lambda d: float(special.polygamma(1, d / 2.0)) - excess, 1e-3, 1e7))


def combined_df(*dfs: float) -> float:
    """Degrees of freedom of a product of independent scaled-chi2 factors: relative variances (~2/d) add."""
    inv = sum(1.0 / d for d in dfs if 0 < d < INFINITE_DF)  # INFINITE_DF: that part is known, it adds nothing
    return 1.0 / inv if inv > 0 else INFINITE_DF


def generation_sizes(generations: Sequence[int]) -> list[int]:
    """Sizes of the runs of equal generation labels, in order (rounds of one worker generation are adjacent)."""
    return [len(list(run)) for _, run in itertools.groupby(generations)]


def within_ss(log_ratios: Sequence[float] | np.ndarray, generations: Sequence[int]) -> tuple[float, int]:
    """(sum of squares about each generation's mean, its df = rounds - generations)."""
    x = np.asarray(log_ratios, dtype=float)
    if x.size != len(generations):
        raise ValueError(f"{x.size} log ratios but {len(generations)} generation labels")
    sizes = generation_sizes(generations)
    parts = np.split(x, np.cumsum(sizes)[:-1]) if sizes else []
    return sum((float(np.sum((part - part.mean()) ** 2)) for part in parts), 0.0), int(x.size) - len(sizes)


def clustering(generations: Sequence[int]) -> float:
    """``sum(n_g^2) / n^2``: the share of tau^2 that stays in the mean of these rounds."""
    n = len(generations)
    return sum(s * s for s in generation_sizes(generations)) / (n * n) if n else 1.0


@dataclass(frozen=True)
class BenchmarkNoise:
    """One benchmark's noise on one runner (fractions on the log scale: 0.001 is 0.1%).

    ``between_df`` is the degrees of freedom of ``between_sd**2`` as an estimate (a scaled chi-square's: relative
    variance ``2 / df``): since issue 46 the fit pools the between-to-within structure over the benchmarks
    (harness.paired.noise_pool), so it is an effective, fractional df -- its own generation means', what the pool
    lends, and the error of ``within_sd**2`` it is scaled by. A file fitted before reads as the count of generation
    means. ``weak``: fitted from fewer worker generations than the fit's minimum (its
    between part leans on the pool; docs/SPEED_GATE.md, "The between-worker variance, pooled").
    """

    within_sd: float  # sigma_w: a round's log-ratio SD within one worker generation
    within_df: int  # the df it was estimated with
    between_sd: float = 0.0  # tau: SD of one worker generation's offset
    between_df: float = 0.0  # df of between_sd**2 as an estimate (0: none fitted)
    rounds: int = 0
    runs: int = 0
    generations: int = 0  # worker generations with usable rounds, over all runs (0: not recorded, a file before 46)
    weak: bool = False  # fewer generations than the fit's minimum: use with care

    def __post_init__(self) -> None:
        if not (math.isfinite(self.within_sd) and self.within_sd > 0 and self.within_df >= 1):
            raise ValueError(f"within_sd must be > 0 with within_df >= 1 (got {self.within_sd}, {self.within_df})")
        if not (math.isfinite(self.between_sd) and self.between_sd >= 0 and self.between_df >= 0):
            raise ValueError(f"between_sd must be >= 0 with between_df >= 0 (got {self.between_sd}, {self.between_df})")
        if self.between_sd > 0 and not self.between_df > 0:
            raise ValueError("a between-worker SD needs between_df > 0")

    def to_json(self) -> dict[str, Any]:
        """The file's entry: the fields of a model before issue 46 always; ``generations`` when known and ``weak``
        only when set, so an entry without them reads as before."""
        data = asdict(self)
        if not self.generations:
            del data["generations"]
        if not self.weak:
            del data["weak"]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BenchmarkNoise:
        weak = data.get("weak", False)
        if not isinstance(weak, bool):
            raise ValueError(f"weak must be true or false (got {weak!r})")
        return cls(
            float(data["within_sd"]),
            int(data["within_df"]),
            float(data.get("between_sd", 0.0)),
            float(data.get("between_df", 0)),
            int(data.get("rounds", 0)),
            int(data.get("runs", 0)),
            int(data.get("generations", 0)),
            weak,
        )


@dataclass(frozen=True)
class Spread:
    """How far a run's variances stray from the model: prior dfs of the run-wide and the benchmark's own part."""

    run_df: float = DEFAULT_RUN_DF
    bench_df: float = DEFAULT_BENCH_DF
    estimated: bool = False  # False: the defaults (the runs could not show it)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Spread:
        return cls(float(data["run_df"]), float(data["bench_df"]), bool(data.get("estimated", False)))


@dataclass(frozen=True)
class LookNoise:
    """What a look's interval needs from the model for one benchmark (interval.model_interval)."""

    noise: BenchmarkNoise
    spread: Spread
    fallback: bool = False  # the guard fired: the within variance is this run's own, not moderated
    cadence: int = 4  # the calibration's rounds per worker generation (its generation means' variance: version 7)

    @property
    def prior_df(self) -> float:
        """How many df of within variance the model is worth in one run (limma's d0)."""
        return combined_df(self.spread.run_df, self.spread.bench_df, self.noise.within_df)

    @property
    def between_df(self) -> float:
        """df of tau^2 in one run: its estimate's and the runs' spread."""
        if not self.noise.between_df:
            return 0.0
        return combined_df(self.noise.between_df, self.spread.run_df, self.spread.bench_df)

    def within(self, ss: float, d_w: int) -> tuple[float, float]:
        """The look's within variance and its df from its rounds' within-generation SS with ``d_w`` df: the model's
        moderated by them, or after the guard fired their own (infinite, df 0, when they have none)."""
        if self.fallback:
            return (ss / d_w, float(d_w)) if d_w >= 1 else (math.inf, 0.0)
        d0 = self.prior_df
        return (d0 * self.noise.within_sd**2 + ss) / (d0 + d_w), d0 + d_w


def mean_variance(
    log_ratios: Sequence[float] | np.ndarray, generations: Sequence[int], look: LookNoise
) -> tuple[float, float]:
    """(variance of the mean log ratio, its degrees of freedom) for these rounds under the model.

    Within part: the moderated within variance over ``n`` (or, after the guard fired, this run's own
    within variance, ``d_w`` df; none at all when no generation has two rounds: returns df 0).
    Between part: tau^2 times :func:`clustering`. Degrees of freedom: Welch-Satterthwaite.
    """
    n = len(log_ratios)
    ss, d_w = within_ss(log_ratios, generations)
    within, within_df = look.within(ss, d_w)
    if not math.isfinite(within):
        return math.inf, 0.0
    return satterthwaite(within / n, within_df, look.noise.between_sd**2 * clustering(generations), look.between_df)


def satterthwaite(a: float, a_df: float, b: float, b_df: float) -> tuple[float, float]:
    """(``a + b``, its Welch-Satterthwaite df) of two independent variance parts; ``a``'s df when ``b`` is 0."""
    if b <= 0:
        return a, a_df
    return a + b, (a + b) ** 2 / (a * a / a_df + b * b / b_df)
