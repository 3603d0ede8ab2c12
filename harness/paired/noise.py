"""A runner's noise model: what each benchmark's rounds vary by, learned from A/A rounds (issue 29).

A round's log ratio ``d = log(head / base)`` of one benchmark, measured by worker
generation ``g`` (the warm workers are replaced every few rounds), is modelled as

    d_i = mu + g_{gen(i)} + e_i,    e_i ~ N(0, sigma_w^2),   g ~ N(0, tau^2)

``sigma_w`` is the round-to-round SD within one worker generation, ``tau`` the SD of a
generation's offset (allocation placement, code layout: the reason workers are restarted).
The mean of ``n`` rounds in generations of sizes ``n_g`` then has variance

    sigma_w^2 / n + tau^2 * sum(n_g^2) / n^2                                   (:func:`mean_variance`)

A run's variance is not the model's: runs differ (the recorded H200 runs: a benchmark's
within-generation variance varied ~2x between runs, partly common to every benchmark of a
run, partly its own). So each benchmark's model variance is a *prior* worth ``prior_df``
degrees of freedom (limma's empirical Bayes moderation, Smyth 2004): the look's within
variance is ``(prior_df sigma_w^2 + SS_w) / (prior_df + d_w)`` with ``d_w`` the run's own
within-generation degrees of freedom, and the interval's t has
``prior_df + d_w`` degrees of freedom (Satterthwaite when ``tau`` adds its own). ``prior_df``
combines how far a run strays from the model as a whole (``run_df``), how far one benchmark
strays on its own (``bench_df``) and how well the model knows the benchmark
(``within_df``), each a ~2/d relative variance of log sigma^2 (:func:`combined_df`).

:func:`fit` estimates all of these from A/A runs (method of moments, as limma's fitFDist):
``sigma_w`` pooled within generations, ``tau`` from the generation means (truncated at 0),
``run_df`` and ``bench_df`` from how runs the model has not seen stray from it (three runs or
more: each run left out in turn, the tail of its first looks' standardized means; :func:`_spread_held_out`),
else from the dispersion of each (benchmark, run)'s log variance about an additive benchmark + run
fit beyond what sampling (trigamma) explains (docs/SPEED_GATE.md, "The noise model").

:func:`guard` is the per-run check of deliver 3: the run's pooled within variances against
the model's, an F test whose reference df is the model's own dispersion: a run noisier
than the model allows (a disturbed runner, a new driver, another GPU) fires it, and the
gate then falls back to each benchmark's own rounds. numpy and scipy.special/stats only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
from scipy import optimize, special, stats

# When the runs cannot show how much they differ (one or two runs), the prior dfs of the run and benchmark parts:
# a little below what the five recorded H200 runs showed held out (run_df 39, bench_df 11.5; docs/SPEED_GATE.md).
DEFAULT_RUN_DF, DEFAULT_BENCH_DF = 30.0, 10.0
INFINITE_DF = 1e6  # "no excess dispersion seen": the term drops out of combined_df


def _trigamma(x: float | np.ndarray) -> float | np.ndarray:
    return special.polygamma(1, x)


def log_chi2_bias(df: float | np.ndarray) -> float | np.ndarray:
    """``E[log(chi2_df / df)]``: a sample variance's log is biased by this much (negative)."""
    return special.digamma(np.asarray(df) / 2.0) - np.log(np.asarray(df) / 2.0)


def df_for_log_variance(excess: float) -> float:
    """The df whose ``log(chi2_df / df)`` has variance ``excess`` (trigamma(df/2) = excess); INFINITE_DF when <= 0."""
    if not excess > 1e-9:
        return INFINITE_DF
    return float(optimize.brentq(lambda d: float(_trigamma(d / 2.0)) - excess, 1e-3, 1e7))


def combined_df(*dfs: float) -> float:
    """Degrees of freedom of a product of independent scaled-chi2 factors: relative variances (~2/d) add."""
    inv = sum(1.0 / d for d in dfs if 0 < d < INFINITE_DF)  # INFINITE_DF: that part is known, it adds nothing
    return 1.0 / inv if inv > 0 else INFINITE_DF


def generation_sizes(generations: Sequence[int]) -> list[int]:
    """Sizes of the runs of equal generation labels, in order (rounds of one worker generation are adjacent)."""
    sizes: list[int] = []
    last = object()
    for g in generations:
        if g == last:
            sizes[-1] += 1
        else:
            sizes.append(1)
            last = g
    return sizes


def within_ss(log_ratios: Sequence[float], generations: Sequence[int]) -> tuple[float, int]:
    """(sum of squares about each generation's mean, its df = rounds - generations)."""
    x = np.asarray(log_ratios, dtype=float)
    if x.size != len(generations):
        raise ValueError(f"{x.size} log ratios but {len(generations)} generation labels")
    ss, start = 0.0, 0
    for size in generation_sizes(generations):
        part = x[start:start + size]
        ss += float(np.sum((part - part.mean()) ** 2))
        start += size
    return ss, int(x.size) - len(generation_sizes(generations))


def clustering(generations: Sequence[int]) -> float:
    """``sum(n_g^2) / n^2``: the share of tau^2 that stays in the mean of these rounds."""
    n = len(generations)
    return sum(s * s for s in generation_sizes(generations)) / (n * n) if n else 1.0


@dataclass(frozen=True)
class BenchmarkNoise:
    """One benchmark's noise on one runner (fractions on the log scale: 0.001 is 0.1%)."""

    within_sd: float  # sigma_w: a round's log-ratio SD within one worker generation
    within_df: int  # the df it was estimated with
    between_sd: float = 0.0  # tau: SD of one worker generation's offset
    between_df: int = 0  # df of the generation means it was estimated from (0: none)
    rounds: int = 0
    runs: int = 0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.within_sd) and self.within_sd > 0 and self.within_df >= 1):
            raise ValueError(f"within_sd must be > 0 with within_df >= 1 (got {self.within_sd}, {self.within_df})")
        if not (math.isfinite(self.between_sd) and self.between_sd >= 0 and self.between_df >= 0):
            raise ValueError(f"between_sd must be >= 0 with between_df >= 0 (got {self.between_sd}, {self.between_df})")
        if self.between_sd > 0 and self.between_df < 1:
            raise ValueError("a between-worker SD needs between_df >= 1")

    def to_json(self) -> dict[str, Any]:
        return {"within_sd": self.within_sd, "within_df": self.within_df, "between_sd": self.between_sd,
                "between_df": self.between_df, "rounds": self.rounds, "runs": self.runs}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "BenchmarkNoise":
        return cls(float(data["within_sd"]), int(data["within_df"]), float(data.get("between_sd", 0.0)),
                   int(data.get("between_df", 0)), int(data.get("rounds", 0)), int(data.get("runs", 0)))


@dataclass(frozen=True)
class Spread:
    """How far a run's variances stray from the model: prior dfs of the run-wide and the benchmark's own part."""

    run_df: float = DEFAULT_RUN_DF
    bench_df: float = DEFAULT_BENCH_DF
    estimated: bool = False  # False: the defaults (the runs could not show it)

    def to_json(self) -> dict[str, Any]:
        return {"run_df": self.run_df, "bench_df": self.bench_df, "estimated": self.estimated}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Spread":
        return cls(float(data["run_df"]), float(data["bench_df"]), bool(data.get("estimated", False)))


@dataclass(frozen=True)
class LookNoise:
    """What a look's interval needs from the model for one benchmark (interval.model_interval)."""

    noise: BenchmarkNoise
    spread: Spread
    fallback: bool = False  # the guard fired: the within variance is this run's own, not moderated

    @property
    def prior_df(self) -> float:
        """How many df of within variance the model is worth in one run (limma's d0)."""
        return combined_df(self.spread.run_df, self.spread.bench_df, self.noise.within_df)

    @property
    def between_df(self) -> float:
        """df of tau^2 in one run: its estimate's and the runs' spread."""
        return combined_df(self.noise.between_df, self.spread.run_df, self.spread.bench_df) if self.noise.between_df else 0.0


def mean_variance(log_ratios: Sequence[float], generations: Sequence[int], look: LookNoise) -> tuple[float, float]:
    """(variance of the mean log ratio, its degrees of freedom) for these rounds under the model.

    Within part: the moderated within variance over ``n`` (or, after the guard fired, this run's own
    within variance, ``d_w`` df; none at all when no generation has two rounds: returns df 0).
    Between part: tau^2 times :func:`clustering`. Degrees of freedom: Welch-Satterthwaite.
    """
    n = len(log_ratios)
    ss, d_w = within_ss(log_ratios, generations)
    sw2 = look.noise.within_sd ** 2
    if look.fallback:
        if d_w < 1:
            return math.inf, 0.0
        within, within_df = ss / d_w, float(d_w)
    else:
        d0 = look.prior_df
        within, within_df = (d0 * sw2 + ss) / (d0 + d_w), d0 + d_w
    a = within / n
    b = look.noise.between_sd ** 2 * clustering(generations)
    if b <= 0:
        return a, within_df
    return a + b, (a + b) ** 2 / (a * a / within_df + b * b / look.between_df)


def planned_variance(n: int, restart_every: int, look: LookNoise) -> tuple[float, float]:
    """:func:`mean_variance` of an unchanged run with the model's own spread: ``n`` rounds, a restart every ``restart_every``."""
    generations = [i // restart_every for i in range(n)]
    d_w = n - len(generation_sizes(generations))
    d0 = look.prior_df
    a = look.noise.within_sd ** 2 / n
    within_df = d0 + d_w
    b = look.noise.between_sd ** 2 * clustering(generations)
    if b <= 0:
        return a, within_df
    return a + b, (a + b) ** 2 / (a * a / within_df + b * b / look.between_df)


# ---------------------------------------------------------------------------
# the guard
# ---------------------------------------------------------------------------


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
    reference_df: float  # the model's: how far the ratio may stray by the runs' spread and its own error
    p: float  # the chance of a ratio this large if the model holds (1 when no df yet)
    fired: bool

    def to_json(self) -> dict[str, Any]:
        return {"ratio": self.ratio, "df": self.df, "reference_df": self.reference_df, "p": self.p, "fired": self.fired}


def guard(terms: Iterable[GuardTerm], spread: Spread, level: float) -> GuardResult:
    """Is this run noisier than the model allows? A one-sided F test at ``level``.

    The pooled ratio ``R = sum_k SS_k / sigma_k^2 / D`` (``D = sum_k d_k``): under the model each
    ``SS_k / sigma_k^2`` is ``chi2_{d_k}`` times a run factor (``run_df``, common to all) and the
    benchmark's own factors (``bench_df``, ``within_df``), so ``R`` is ``chi2_D / D`` over a factor whose
    relative variance is ``2 / run_df + sum_k w_k^2 (2 / bench_df + 2 / within_df_k)`` (``w_k = d_k / D``):
    ``R ~ F(D, d_ref)`` with ``d_ref`` that relative variance's df. Only runs *noisier* than the model fire
    it: a quieter run costs no validity.
    """
    if not 0 < level < 1:
        raise ValueError(f"guard level must be in (0, 1) (got {level})")
    used = [t for t in terms if t.df >= 1]
    total = sum(t.df for t in used)
    if not total:
        return GuardResult(1.0, 0, INFINITE_DF, 1.0, False)
    inverse = 1.0 / spread.run_df if spread.run_df < INFINITE_DF else 0.0
    for t in used:
        w = t.df / total
        inverse += w * w * sum(1.0 / d for d in (spread.bench_df, t.noise.within_df) if d < INFINITE_DF)
    reference = 1.0 / inverse if inverse > 0 else INFINITE_DF
    ratio = sum(t.ss / t.noise.within_sd ** 2 for t in used) / total
    p = float(stats.f.sf(ratio, total, reference)) if reference < INFINITE_DF else float(stats.chi2.sf(ratio * total, total))
    return GuardResult(ratio, total, reference, p, p < level)


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
        self.last = GuardResult(1.0, 0, INFINITE_DF, 1.0, False)
        self.fired = False

    def add(self, event: PairEvent) -> GuardResult:
        model = self.models.get(event.benchmark)
        if model is not None and event.log_ratio is not None:
            self._ratios.setdefault(event.benchmark, []).append(event.log_ratio)
            self._gens.setdefault(event.benchmark, []).append(event.generation)
            ss, d = within_ss(self._ratios[event.benchmark], self._gens[event.benchmark])
            self._terms[event.benchmark] = GuardTerm(ss, d, model)
            self.last = guard(self._terms.values(), self.spread, self.level)
            self.fired = self.fired or self.last.fired
        return self.last


def guard_timeline(events: Sequence[PairEvent], models: Mapping[str, BenchmarkNoise], spread: Spread,
                   level: float) -> tuple[list[GuardResult], int | None]:
    """:func:`guard` after each event, over every benchmark's usable rounds so far; and the first event that fired it.

    The gate asks this of its rounds in the order their pairs completed (a round, then the next), so a
    benchmark decided in the middle of a round is judged on exactly what had been measured by then; a
    replay of the record asks the same (ci.speed.noise_run). Benchmarks without a model entry do not count.
    """
    state = GuardState(models, spread, level)
    results, first = [], None
    for i, event in enumerate(events):
        results.append(state.add(event))
        if first is None and state.fired:
            first = i
    return results, first


# ---------------------------------------------------------------------------
# fitting
# ---------------------------------------------------------------------------


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


def _benchmark_fit(runs: Sequence[RunRounds]) -> BenchmarkNoise | None:
    ss_w = df_w = ss_b = df_b = k_sum = 0.0
    rounds = 0
    for r in runs:
        x = np.asarray(r.log_ratios, dtype=float)
        if x.size == 0:
            continue
        rounds += int(x.size)
        ss, d = within_ss(x, r.generations)
        ss_w, df_w = ss_w + ss, df_w + d
        sizes = generation_sizes(r.generations)
        if len(sizes) >= 2:
            start, means = 0, []
            for s in sizes:
                means.append(float(x[start:start + s].mean()))
                start += s
            grand = float(x.mean())
            ss_b += sum(s * (m - grand) ** 2 for s, m in zip(sizes, means))
            df_b += len(sizes) - 1
            k_sum += x.size - sum(s * s for s in sizes) / x.size
    if df_w < 1:
        return None
    sw2 = ss_w / df_w
    # Method of moments: E[SS_between] = df_b sigma_w^2 + tau^2 sum(n - sum n_g^2 / n).
    tau2 = max(0.0, (ss_b - sw2 * df_b) / k_sum) if df_b >= 1 else 0.0
    return BenchmarkNoise(math.sqrt(sw2), int(df_w), math.sqrt(tau2), int(df_b) if tau2 > 0 else 0, rounds, len(runs))


def _spread_log_variances(cells: Mapping[tuple[str, str], tuple[float, int]]) -> tuple[Spread, str]:
    """run_df, bench_df from the (benchmark, run) cells' log variances: an additive fit, then moments (two runs)."""
    runs = sorted({run for _, run in cells})
    benches = sorted({b for b, _ in cells})
    if len(runs) < 2 or len(cells) < len(benches) + len(runs):
        return Spread(), (f"the runs' spread: {len(runs)} run(s) cannot show it; run_df {DEFAULT_RUN_DF:g}, bench_df "
                          f"{DEFAULT_BENCH_DF:g} assumed (about the recorded H200 runs')")
    z = {k: math.log(s2) - float(log_chi2_bias(d)) for k, (s2, d) in cells.items()}
    sampling = {k: float(_trigamma(d / 2.0)) for k, (_, d) in cells.items()}
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
    return spread, (f"the runs' spread from {len(cells)} (benchmark, run) log variances over {len(runs)} runs: "
                    f"run_df {spread.run_df:.3g}, bench_df {spread.bench_df:.3g}")


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
    """The runs' spread as runs the model has not seen show it (three runs or more; else None).

    Each run in turn is left out and the model fitted on the others; the mean of each of the left-out
    run's first looks (the first two rounds from a worker generation's first round) over the model's
    standard error is ``z``. If a run's variance strays from the model's by ``lam^2 ~ d / chi2_d``, z is a
    t with ``d`` df (unit variance: the model's variance is the runs' average): ``d`` by maximum likelihood,
    less the model's own estimation error (its median within_df), is the spread, split between the run and
    the benchmark parts as ``shares`` (the log variances' moments) split it. It is the intervals' tail that
    matters, and the tail is what this fits: a variance's log also spreads with the rounds' own heavy tails.
    """
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
                    window = g[start:start + HELD_OUT_ROUNDS]
                    variance = model.within_sd ** 2 / HELD_OUT_ROUNDS + model.between_sd ** 2 * clustering(window)
                    z.append(float(np.mean(x[start:start + HELD_OUT_ROUNDS])) / math.sqrt(variance))
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
    return spread, (f"the runs' spread held out: {len(z)} two-round windows of {len(labels)} runs, each against the model "
                    f"of the others: a t with {total:.3g} df fits them, the model's own error ~{own:.0f} df: {words}")


def _spread(runs: Mapping[str, Sequence[RunRounds]], cells: Mapping[tuple[str, str], tuple[float, int]]) -> tuple[Spread, str]:
    """How far a run strays from the model: held out when three runs allow, else from the log variances, else assumed."""
    moments, note = _spread_log_variances(cells)
    return _spread_held_out(runs, moments) or (moments, note)


def fit(runs: Mapping[str, Sequence[RunRounds]]) -> Fit:
    """The model from A/A runs: per benchmark its within and between-worker SDs, and the runs' spread.

    A benchmark whose runs have no generation with two usable rounds cannot be fitted (it is
    left out, with a note). The spread needs three runs held out (or two, from the log variances);
    otherwise :data:`DEFAULT_RUN_DF` and :data:`DEFAULT_BENCH_DF`.
    """
    benchmarks, notes = {}, []
    cells: dict[tuple[str, str], tuple[float, int]] = {}
    for bench_id, bench_runs in sorted(runs.items()):
        noise = _benchmark_fit(bench_runs)
        if noise is None:
            notes.append(f"{bench_id}: no generation with two usable rounds: not in the model")
            continue
        benchmarks[bench_id] = noise
        for r in bench_runs:
            ss, d = within_ss(r.log_ratios, r.generations)
            if d >= 1 and ss > 0:
                cells[(bench_id, r.run)] = (ss / d, d)
    spread, note = _spread(runs, cells)
    return Fit(benchmarks, spread, tuple(notes) + (note,))
