"""Fitting a runner's noise model (harness.paired.noise) from its A/A runs: per benchmark its within and between-worker
SDs, and the runs' spread (held out, else from the log variances' moments, else assumed). docs/SPEED_GATE.md, "The
noise model", has the derivations and what the recorded H200 runs gave.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, special, stats

from harness.paired.noise import (
    DEFAULT_BENCH_DF,
    DEFAULT_RUN_DF,
    INFINITE_DF,
    BenchmarkNoise,
    Spread,
    clustering,
    df_for_log_variance,
    generation_sizes,
    log_chi2_bias,
    within_ss,
)
from harness.paired.noise_pool import BetweenParts, Pool, pool, shrink


@dataclass(frozen=True)
class RunRounds:
    """One A/A run of one benchmark: its usable rounds' log ratios and worker generations, in time order."""

    run: str  # which run (record) they came from
    log_ratios: tuple[float, ...]
    generations: tuple[int, ...]


@dataclass(frozen=True)
class Fit:
    benchmarks: dict[str, BenchmarkNoise]
    spread: Spread
    notes: tuple[str, ...] = field(default_factory=tuple)
    pool: Pool | None = None  # the between-to-within structure the benchmarks share (None: no between df at all)


# A benchmark fitted from fewer worker generations than this is marked weak: two generations give its between variance
# one df of its own, three the least that shows a spread at all; the pool carries the rest.
MIN_GENERATIONS = 3


@dataclass(frozen=True)
class _Sums:
    """One benchmark's sums of squares over its runs (within generations; generation means about their run's)."""

    ss_w: float
    df_w: int
    ss_b: float
    df_b: int
    k_sum: float  # E[SS_b] = df_b sigma_w^2 + tau^2 k_sum
    rounds: int
    runs: int
    generations: int

    def parts(self) -> BetweenParts:
        size = self.k_sum / self.df_b if self.df_b else 1.0
        between_ms = self.ss_b / self.df_b if self.df_b else 0.0
        return BetweenParts(self.ss_w / self.df_w, float(self.df_w), between_ms, float(self.df_b), size)


def _sums(runs: Sequence[RunRounds]) -> _Sums | None:
    ss_w = ss_b = k_sum = 0.0
    df_w = df_b = rounds = generations = 0
    for r in runs:
        x = np.asarray(r.log_ratios, dtype=float)
        if x.size == 0:
            continue
        rounds += int(x.size)
        ss, d = within_ss(x, r.generations)
        ss_w, df_w = ss_w + ss, df_w + d
        sizes = generation_sizes(r.generations)
        generations += len(sizes)
        if len(sizes) >= 2:
            means = [float(part.mean()) for part in np.split(x, np.cumsum(sizes)[:-1])]
            grand = float(x.mean())
            ss_b += sum(s * (m - grand) ** 2 for s, m in zip(sizes, means))
            df_b += len(sizes) - 1
            k_sum += x.size - sum(s * s for s in sizes) / x.size
    if df_w < 1 or ss_w <= 0:
        return None
    return _Sums(ss_w, df_w, ss_b, df_b, k_sum, rounds, len(runs), generations)


def _benchmark_fit(runs: Sequence[RunRounds]) -> BenchmarkNoise | None:
    """This benchmark's rounds alone (the held-out spread's model of the other runs): tau by the method of moments,
    ``E[SS_between] = df_b sigma_w^2 + tau^2 sum(n - sum n_g^2 / n)``."""
    sums = _sums(runs)
    if sums is None:
        return None
    sw2 = sums.ss_w / sums.df_w
    tau2 = max(0.0, (sums.ss_b - sw2 * sums.df_b) / sums.k_sum) if sums.df_b >= 1 else 0.0
    # between_df: the df of the generation means even when tau comes out 0 (a fitted 0 is an estimate, not a fact).
    return BenchmarkNoise(math.sqrt(sw2), sums.df_w, math.sqrt(tau2), sums.df_b, sums.rounds, sums.runs)


def _pooled_fit(sums: Mapping[str, _Sums]) -> tuple[dict[str, BenchmarkNoise], Pool | None]:
    """Each benchmark's within SD its own, its between SD from the pooled structure (harness.paired.noise_pool)."""
    parts = {b: s.parts() for b, s in sums.items()}
    structure = pool(parts)
    out = {}
    for bench_id, s in sums.items():
        shrunk = shrink(parts[bench_id], structure)
        out[bench_id] = BenchmarkNoise(
            math.sqrt(s.ss_w / s.df_w),
            s.df_w,
            math.sqrt(shrunk.between_var),
            float(f"{shrunk.between_df:.4g}"),
            s.rounds,
            s.runs,
            s.generations,
            s.generations < MIN_GENERATIONS,
        )
    return out, structure


def _spread_log_variances(cells: Mapping[tuple[str, str], tuple[float, int]]) -> tuple[Spread, str]:
    """run_df, bench_df from the (benchmark, run) cells' log variances: an additive fit, then moments (two runs)."""
    runs = sorted({run for _, run in cells})
    benches = sorted({b for b, _ in cells})
    if len(runs) < 2 or len(cells) < len(benches) + len(runs):
        return Spread(), (
            f"the runs' spread: {len(runs)} run(s) cannot show it; run_df {DEFAULT_RUN_DF:g}, bench_df "
            f"{DEFAULT_BENCH_DF:g} assumed (about the recorded H200 runs')"
        )
    z = {k: math.log(s2) - float(log_chi2_bias(d)) for k, (s2, d) in cells.items()}
    sampling = {k: float(special.polygamma(1, d / 2.0)) for k, (_, d) in cells.items()}
    bench_eff = {b: 0.0 for b in benches}
    run_eff = {r: 0.0 for r in runs}
    for _ in range(200):  # alternating means: an additive fit that tolerates missing cells
        for b in benches:
            bench_eff[b] = float(np.mean([z[k] - run_eff[k[1]] for k in z if k[0] == b]))
        for r in runs:
            run_eff[r] = float(np.mean([z[k] - bench_eff[k[0]] for k in z if k[1] == r]))
        centre = float(np.mean(list(run_eff.values())))
        run_eff = {r: v - centre for r, v in run_eff.items()}
    resid = [z[k] - bench_eff[k[0]] - run_eff[k[1]] for k in z]
    dof = len(cells) - len(benches) - len(runs) + 1
    mean_sampling = float(np.mean(list(sampling.values())))
    bench_excess = sum(r * r for r in resid) / dof - mean_sampling if dof > 0 else 0.0
    run_excess = float(np.var(list(run_eff.values()), ddof=1)) - mean_sampling * len(runs) / len(cells)
    spread = Spread(df_for_log_variance(run_excess), df_for_log_variance(bench_excess), True)
    return spread, (
        f"the runs' spread from {len(cells)} (benchmark, run) log variances over {len(runs)} runs: "
        f"run_df {spread.run_df:.3g}, bench_df {spread.bench_df:.3g}"
    )


HELD_OUT_ROUNDS = 2  # the gate's first look: the first two rounds from a worker generation's first round
MIN_WINDOWS = 30


def _tail_df(z: np.ndarray) -> float:
    """The df of a unit-variance t that fits ``z`` best (maximum likelihood); INFINITE_DF when no tail shows."""

    def loss(log_d: float) -> float:
        d = math.exp(log_d)
        scale = math.sqrt((d - 2.0) / d)
        return -float(np.sum(stats.t.logpdf(z / scale, d) - math.log(scale)))

    best = optimize.minimize_scalar(loss, bounds=(math.log(2.05), math.log(1e4)), method="bounded")
    return INFINITE_DF if math.exp(best.x) > 0.99e4 else math.exp(best.x)


def _spread_held_out(runs: Mapping[str, Sequence[RunRounds]], shares: Spread) -> tuple[Spread, str] | None:
    """The runs' spread as runs the model has not seen show it (three runs or more; else None): each run left out
    in turn, its first looks' ``z`` fitted by a t of ``d`` df, less the model's own error (its median within_df),
    split between run and benchmark as ``shares``. docs/SPEED_GATE.md, "How far a run strays from it"."""
    labels = sorted({r.run for rr in runs.values() for r in rr})
    if len(labels) < 3:
        return None
    z, nus = [], []
    for left in labels:
        for bench_runs in runs.values():
            model = _benchmark_fit([r for r in bench_runs if r.run != left])
            if model is None:
                continue
            for r in (r for r in bench_runs if r.run == left):
                x, g = r.log_ratios, r.generations
                starts = [i for i in range(len(x)) if i == 0 or g[i] != g[i - 1]]
                for start in (i for i in starts if i + HELD_OUT_ROUNDS <= len(x)):
                    window = g[start : start + HELD_OUT_ROUNDS]
                    variance = model.within_sd**2 / HELD_OUT_ROUNDS + model.between_sd**2 * clustering(window)
                    z.append(float(np.mean(x[start : start + HELD_OUT_ROUNDS])) / math.sqrt(variance))
                    nus.append(model.within_df)
    if len(z) < MIN_WINDOWS:
        return None
    total = _tail_df(np.asarray(z))
    own = float(np.median(nus))
    inverse = max(0.0, 1.0 / total - 1.0 / own) if total < INFINITE_DF else 0.0
    if inverse <= 0:
        spread, words = Spread(INFINITE_DF, INFINITE_DF, True), "no spread beyond the model's own error"
    else:
        run_share = (1.0 / shares.run_df) / (1.0 / shares.run_df + 1.0 / shares.bench_df) if shares.estimated else 0.5
        run_share = min(max(run_share, 0.05), 0.95)
        spread = Spread(1.0 / (inverse * run_share), 1.0 / (inverse * (1.0 - run_share)), True)
        words = f"prior df {1.0 / inverse:.3g} (run_df {spread.run_df:.3g}, bench_df {spread.bench_df:.3g})"
    return spread, (
        f"the runs' spread held out: {len(z)} two-round windows of {len(labels)} runs, each against the model "
        f"of the others: a t with {total:.3g} df fits them, the model's own error ~{own:.0f} df: {words}"
    )


def fit(runs: Mapping[str, Sequence[RunRounds]]) -> Fit:
    """The model from A/A runs: per benchmark its within SD, its between-worker SD pooled over the benchmarks
    (harness.paired.noise_pool), and the runs' spread.

    A benchmark whose runs have no generation with two usable rounds cannot be fitted (it is
    left out, with a note); one with fewer than :data:`MIN_GENERATIONS` worker generations is marked weak.
    The spread needs three runs held out (or two, from the log variances); otherwise
    :data:`DEFAULT_RUN_DF` and :data:`DEFAULT_BENCH_DF`.
    """
    notes = []
    sums: dict[str, _Sums] = {}
    cells: dict[tuple[str, str], tuple[float, int]] = {}
    for bench_id, bench_runs in sorted(runs.items()):
        own = _sums(bench_runs)
        if own is None:
            notes.append(f"{bench_id}: no generation with two usable rounds: not in the model")
            continue
        sums[bench_id] = own
        for r in bench_runs:
            ss, d = within_ss(r.log_ratios, r.generations)
            if d >= 1 and ss > 0:
                cells[(bench_id, r.run)] = (ss / d, d)
    benchmarks, structure = _pooled_fit(sums)
    notes.append(_pool_note(structure))
    weak = sorted(b for b, n in benchmarks.items() if n.weak)
    if weak:
        notes.append(
            f"{len(weak)} benchmark(s) weak (fewer than {MIN_GENERATIONS} worker generations: their between SD is "
            f"the pool's): {', '.join(weak)}"
        )
    # The runs' spread held out if three runs allow, else from the log variances, else assumed.
    moments, note = _spread_log_variances(cells)
    spread, note = _spread_held_out(runs, moments) or (moments, note)
    return Fit(benchmarks, spread, tuple(notes) + (note,), structure)


def _pool_note(structure: Pool | None) -> str:
    if structure is None:
        return "the between-worker variance: no benchmark has two worker generations in a run: none fitted"
    return (
        f"the between-worker variance pooled over {structure.benchmarks} benchmark(s) ({structure.df:.0f} between df): "
        f"tau^2 / sigma_w^2 averages {structure.ratio:.3g} (SE {math.sqrt(structure.ratio_var):.2g}), the "
        f"benchmarks' own ratios a gamma of shape {structure.shape:.3g} about it"
    )
