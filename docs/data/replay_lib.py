"""The A/A replay corpus and simulated PRs through the gate's own decision code (issue 37, deliver 3).

Shared by docs/data/aa_corpus.py (builds the corpus), docs/data/replay_rates.py (PRs resampled from it) and
docs/data/misspecification_rates.py (PRs drawn from the committed model with departures it does not know).

- The corpus: per benchmark, per recorded run, per worker generation, the usable rounds' log ratios in time
  order (ci.speed.decide.exclusion.paired_rounds with the record's own rule: excluded rounds dropped).
- :class:`BlockResampler`: a simulated PR's benchmark is whole recorded generations, drawn with replacement,
  each keeping its internal order; benchmarks share the draw of a (run, generation) where both have it.
- :func:`run_pr`: the gate's loop (noise_model_rates.simulate_pr's order): a round is every undecided benchmark's
  pair in turn, the run's guard (GuardState) fed pair by pair, each benchmark decided at the plan's look points by
  the decision passed in (the gate's ``sequential_decision`` unless a test plugs another).

The plan is an object read generically (``look_points``, ``max_rounds``, ``variance``, ``guard_level``,
``with_alpha``, and ``restart_every`` when it has one), so any plan the gate accepts evaluates here.
"""

from __future__ import annotations

import importlib
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ci.speed.decide.exclusion import ExclusionRule, paired_rounds  # noqa: E402
from ci.speed.engine.warm_engine import DEFAULT_RESTART_EVERY, GATE_RESTART_EVERY  # noqa: E402
from harness.paired.noise_guard import GuardState, PairEvent  # noqa: E402
from harness.paired.rounds import Round  # noqa: E402
from harness.paired.sequential import RoundsNoise, sequential_decision  # noqa: E402

CORPUS_SCHEMA = "mxfp4-aa-corpus/1"
# What noise_model_rates.simulate_pr charges outside the per-benchmark timings (its constants, one source).
OVERHEAD_S, FIRST_ROUND_STARTUP_S, RESTART_S = 8.0, 12.0, 3.5
PR_ALPHA = 0.01  # the gate's per-PR false-alarm alpha, shared by the gated benchmarks (ci.speed.options)
SIDES = ("base", "head")


class CorpusError(ValueError):
    """A record cannot join the corpus (not A/A, malformed); the message names the file."""


# ---------------------------------------------------------------------------
# the corpus
# ---------------------------------------------------------------------------


def record_generations(record: Mapping[str, Any], source: str, why_aa: str | None) -> tuple[dict[str, Any], list[str]]:
    """One record's A/A rounds: ``{bench_id: {"generations": [...], "excluded": {reason: n}}}``, and notes.

    A calibration record is A/A by construction; a gate record's benchmark is A/A when its code was identical at
    base and head, or when ``why_aa`` says why it is anyway (a speed-neutral edit). A round is kept when both
    sides measured the benchmark and the record's exclusion rule (ci.speed.decide.exclusion) lets it count; its worker
    generation is the head worker's (as ci.speed.decide.noise_file.run_of_record takes it).
    """
    mode = record.get("mode")
    if mode not in ("gate", "calibrate"):
        raise CorpusError(f"{source}: a {mode!r} record is neither a gate nor a calibration record")
    try:
        rule = ExclusionRule.from_json(record["exclusion"])
        decisions = (record.get("code") or {}).get("decisions") or {}
        gated = [b for b in record["benchmarks"] if b.get("status") == "gated"]
        rounds = sorted(record["rounds"], key=lambda r: int(r["index"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise CorpusError(f"{source}: malformed record ({type(exc).__name__}: {exc})") from None
    out: dict[str, Any] = {}
    notes: list[str] = []
    for bench in gated:
        pair = f"{bench['kernel']}[{bench['config']}]"
        identical = str(decisions.get(pair, "")).startswith("unchanged (identical code)")
        if mode == "gate" and not identical and not why_aa:
            notes.append(
                f"{bench['id']}: code differs at base and head ({decisions.get(pair, 'no code decision')}): not A/A"
            )
            continue
        by_index = {int(r["index"]): r for r in rounds}
        gens: list[dict[str, Any]] = []
        excluded: dict[str, int] = {}
        for paired in paired_rounds(rounds, bench["id"], "base", "head", rule):
            if paired.round.excluded is not None:
                excluded[paired.round.excluded] = excluded.get(paired.round.excluded, 0) + 1
                continue
            head = {p["side"]: p.get("records", {}) for p in by_index[paired.round_index]["processes"]}["head"][
                bench["id"]
            ]
            generation = head.get("worker_generation")
            if not isinstance(generation, int):
                excluded["no worker generation"] = excluded.get("no worker generation", 0) + 1
                continue
            if not gens or gens[-1]["generation"] != generation:
                gens.append(
                    {
                        "generation": generation,
                        "round_index": [],
                        "log_ratios": [],
                        "base_tflops": [],
                        "head_tflops": [],
                        "sampling_var": [],
                    }
                )
            g = gens[-1]
            g["round_index"].append(paired.round_index)
            g["log_ratios"].append(round(math.log(paired.round.head / paired.round.base), 10))
            g["base_tflops"].append(paired.round.base)
            g["head_tflops"].append(paired.round.head)
            g["sampling_var"].append(paired.round.sampling_var)  # the timings' own variance (None: no samples)
        if gens:
            out[bench["id"]] = {"generations": gens, "excluded": excluded}
        else:
            notes.append(f"{bench['id']}: no usable round")
    return out, notes


@dataclass(frozen=True)
class Block:
    """One recorded worker generation of one benchmark: its usable log ratios in time order."""

    run: str
    generation: int
    log_ratios: tuple[float, ...]
    # Each round's variance from its timings' samples (harness.paired.rounds.timing_variance); NaN where unknown.
    sampling: tuple[float, ...] = ()

    @property
    def key(self) -> tuple[str, int]:
        return (self.run, self.generation)


def corpus_blocks(
    corpus: Mapping[str, Any], benchmarks: Sequence[str] | None = None, runs: Sequence[str] | None = None
) -> dict[str, list[Block]]:
    """The corpus as blocks per benchmark (``runs``: only these record paths; None: all)."""
    out: dict[str, list[Block]] = {}
    wanted = set(runs) if runs is not None else None
    for bench_id, per_run in corpus["benchmarks"].items():
        if benchmarks is not None and bench_id not in benchmarks:
            continue
        blocks = [
            Block(
                run,
                int(g["generation"]),
                tuple(float(x) for x in g["log_ratios"]),
                tuple(math.nan if v is None else float(v) for v in g.get("sampling_var") or []),
            )
            for run, data in per_run.items()
            if wanted is None or run in wanted
            for g in data["generations"]
            if g["log_ratios"]
        ]
        if blocks:
            out[bench_id] = blocks
    return out


class BlockResampler:
    """Simulated PRs' rounds by block resampling over worker generations.

    A benchmark's rounds in one PR are whole recorded generations drawn with replacement from that benchmark's
    own, concatenated in draw order (each keeps its internal order; each is a worker generation of its own in the
    PR). To keep what benchmarks measured in the same rounds share (a disturbed GPU, a worker placement), the PR
    draws one sequence of keys (run, generation) uniformly from the union of every benchmark's keys; a benchmark
    takes the keyed generation where it has it and otherwise a uniform draw of its own. Each benchmark's draw is
    still uniform over its own generations (P = 1/U + (1 - n_b/U)/n_b = 1/n_b), and two benchmarks measured in the
    same recorded generations get the same ones together.
    """

    def __init__(self, blocks: Mapping[str, Sequence[Block]]):
        if not blocks:
            raise CorpusError("no benchmark has a recorded generation to resample")
        self.blocks = {b: list(v) for b, v in blocks.items()}
        self.by_key = {b: {blk.key: blk for blk in v} for b, v in self.blocks.items()}
        self.keys = sorted({blk.key for v in self.blocks.values() for blk in v})

    def draw(
        self, rng: np.random.Generator, order: Sequence[str], rounds: int, generation_rounds: int | None = None
    ) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per benchmark: ``rounds`` log ratios, their generation labels (0, 1, ...: one per drawn block) and each
        round's variance from its timings' samples (NaN where the corpus has none).

        ``generation_rounds``: a drawn generation keeps at most its first that many rounds -- the gate's cadence
        when it is shorter than the recorded one (version 7 starts new workers every round: each of its generations
        is one round, a worker generation's first) -- and a PR draws a benchmark's recorded generations without
        replacement until it has used them all: a real run never measures one worker generation twice, and with one
        round a generation a repeat is an exact tie the generations' variance would count as agreement (the
        H200's torch_dequant benchmarks have 8 recorded generations: 1 PR in 8 repeated one by its second round).
        None: whole recorded generations, with replacement (the tables of versions 5-6).
        """
        missing = [b for b in order if b not in self.blocks]
        if missing:
            raise CorpusError(f"no recorded generation for {missing}")
        out: dict[str, tuple[list[float], list[int], list[float]]] = {b: ([], [], []) for b in order}
        pick = self._picker(rng, order) if generation_rounds is not None else None
        block_no = 0
        while any(len(out[b][0]) < rounds for b in order):
            key = self.keys[int(rng.integers(len(self.keys)))]
            for b in order:
                x, g, v = out[b]
                if len(x) >= rounds:
                    continue
                if pick is not None:
                    blk = pick(b, key)
                else:
                    blk = self.by_key[b].get(key)
                    if blk is None:
                        pool = self.blocks[b]
                        blk = pool[int(rng.integers(len(pool)))]
                taken = blk.log_ratios if generation_rounds is None else blk.log_ratios[:generation_rounds]
                sampling = blk.sampling if len(blk.sampling) == len(blk.log_ratios) else (math.nan,) * len(taken)
                x.extend(taken)
                g.extend([block_no] * len(taken))
                v.extend(sampling[: len(taken)])
            block_no += 1
        return {
            b: (np.asarray(x[:rounds]), np.asarray(g[:rounds]), np.asarray(v[:rounds])) for b, (x, g, v) in out.items()
        }

    def _picker(self, rng: np.random.Generator, order: Sequence[str]) -> Callable[[str, tuple[str, int]], Block]:
        """One PR's draws without replacement: the keyed generation where the benchmark has it unused, else the next
        of its own generations in a random order; once all are used, they may all be drawn again."""
        unused = {b: list(rng.permutation(len(self.blocks[b]))) for b in order}

        def pick(bench: str, key: tuple[str, int]) -> Block:
            pool = self.blocks[bench]
            if not unused[bench]:
                unused[bench] = list(rng.permutation(len(pool)))
            keyed = self.by_key[bench].get(key)
            index = pool.index(keyed) if keyed is not None else None
            if index is None or index not in unused[bench]:
                index = unused[bench][0]
            unused[bench].remove(index)
            return pool[index]

        return pick


def shift_log(x: float) -> float:
    """The log-ratio shift of a head slower by ``x`` (its TFLOPS times 1 - x)."""
    if not 0 <= x < 1:
        raise ValueError(f"a slowdown must be in [0, 1) (got {x})")
    return math.log1p(-x)


# ---------------------------------------------------------------------------
# the plan, the thresholds, the model
# ---------------------------------------------------------------------------


def load_plan(spec: str) -> Any:
    """``module:NAME`` -> the plan object (harness.paired.plan:MODEL_PLAN)."""
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"--plan-object wants module:NAME (got {spec!r})")
    try:
        obj = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"--plan-object {spec}: {exc}") from None
    for attr in ("look_points", "max_rounds"):
        if not hasattr(obj, attr):
            raise ValueError(f"--plan-object {spec}: {type(obj).__name__} has no {attr!r}: not a plan")
    return obj


def gated_plan(plan: Any, gated: int, pr_alpha: float = PR_ALPHA) -> Any:
    """The plan as the gate runs it: the per-PR alpha shared by the gated benchmarks (ci.speed.options)."""
    share = getattr(plan, "with_alpha", None)
    return share(pr_alpha / max(1, gated)) if callable(share) else plan


def restart_every(plan: Any) -> int:
    """Rounds per worker generation in the gate: the plan's if it says; version 7's (a plan that learns from its
    generations) new workers every round, as the gate runs it; else the engine's default (versions 5-6)."""
    value = getattr(plan, "restart_every", None)
    if isinstance(value, int) and value > 0:
        return value
    return GATE_RESTART_EVERY if getattr(plan, "learn", False) else DEFAULT_RESTART_EVERY


def generation_rounds(setup: Setup) -> int | None:
    """How many rounds of a drawn recorded generation a simulated one keeps: the gate's cadence for version 7 (its
    generations are shorter than the recorded 2-4 rounds); None, whole recorded generations, for versions 5-6 (their
    tables were made so)."""
    return setup.restart if getattr(setup.plan, "learn", False) else None


def plan_summary(plan: Any) -> dict[str, Any]:
    to_json = getattr(plan, "to_json", None)
    return to_json() if callable(to_json) else {"look_points": list(plan.look_points), "max_rounds": plan.max_rounds}


# ---------------------------------------------------------------------------
# one simulated PR through the gate's loop
# ---------------------------------------------------------------------------

Decide = Callable[..., Any]


@dataclass
class PrResult:
    """One simulated PR: per benchmark (verdict, rounds used, variance, reason), the guard, the walls."""

    verdicts: dict[str, tuple[str, int, str, str]]
    guard_fired: bool
    wall_s: float  # every benchmark run to its decision (per-benchmark rates come from this run)
    stop_wall_s: float  # the gate's wall: the PR ends at its first regression
    first_regression: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def run_pr(
    truth: Mapping[str, tuple[np.ndarray, np.ndarray]],
    order: Sequence[str],
    plan: Any,
    thresholds: Mapping[str, float],
    model: Any,
    costs: Mapping[str, tuple[float, float]],
    *,
    decide: Decide = sequential_decision,
    restart: int = DEFAULT_RESTART_EVERY,
) -> PrResult:
    """The gate's loop over ``truth`` (per benchmark: log ratios and worker generations, time order).

    As noise_model_rates.simulate_pr: each round, every undecided benchmark's pair in the gate's order; the
    guard fed each pair; a benchmark decided when its round count is a look point; the wall charged with the
    recorded timing costs (a worker generation's first timing, then repeats; a restart every ``restart`` rounds).
    Every benchmark runs to its decision (so per-benchmark rates are not censored); ``stop_wall_s`` is the wall
    at the PR's first regression, where the gate stops (the PR's status cannot change after it).
    """
    n_max = int(plan.max_rounds)
    looks = set(int(p) for p in plan.look_points)
    use_model = getattr(plan, "variance", "model") == "model" and model is not None
    state = (
        GuardState(model.benchmarks, model.spread, float(getattr(plan, "guard_level", 0.05)))
        if model is not None
        else None
    )
    rounds: dict[str, list[Round]] = {b: [] for b in order}
    gens_seen: dict[str, list[int]] = {b: [] for b in order}
    fired_from: dict[str, int | None] = {b: None for b in order}
    done: dict[str, Any] = {}
    wall = OVERHEAD_S + FIRST_ROUND_STARTUP_S
    stop_wall = None
    first_regression = None
    for r in range(n_max):
        active = [b for b in order if b not in done]
        if not active:
            break
        if r % restart == 0 and r:
            wall += RESTART_S
        for b in active:
            first, rep = costs[b]
            wall += 2 * (first if r % restart == 0 else rep)
            x, gens, *sampled = truth[b]  # (log ratios, generations[, each round's timings' variance])
            i = len(rounds[b])
            v = float(sampled[0][i]) if sampled else math.nan
            rounds[b].append(Round(100.0, 100.0 * math.exp(float(x[i])), sampling_var=v if math.isfinite(v) else None))
            gens_seen[b].append(int(gens[i]))
            if state is not None:
                state.add(PairEvent(b, float(x[i]), int(gens[i])))
                if state.fired and fired_from[b] is None:
                    fired_from[b] = i
            if len(rounds[b]) not in looks:
                continue
            entry = model.entry(b) if use_model else None
            noise = RoundsNoise(entry, model.spread, tuple(gens_seen[b]), fired_from[b]) if entry is not None else None
            d = decide(rounds[b], thresholds[b], plan, noise)
            if d.complete:
                done[b] = d
                if d.verdict.value == "regression" and first_regression is None:
                    first_regression, stop_wall = b, wall
    verdicts = {
        b: (done[b].verdict.value, int(done[b].rounds_used), str(done[b].variance), str(done[b].reason))
        if b in done
        else ("undecided", len(rounds[b]), "-", "the last look was not reached")
        for b in order
    }
    return PrResult(
        verdicts,
        bool(state is not None and state.fired),
        wall,
        wall if stop_wall is None else stop_wall,
        first_regression,
    )


# ---------------------------------------------------------------------------
# tallies
# ---------------------------------------------------------------------------


def proportion(k: int, n: int) -> dict[str, Any]:
    """k of n with its 95% Clopper-Pearson interval (scipy.stats.binomtest, exact)."""
    if n <= 0:
        return {"k": k, "n": n, "rate": None, "ci95": [None, None]}
    ci = stats.binomtest(k, n).proportion_ci(0.95, method="exact")
    return {"k": int(k), "n": int(n), "rate": k / n, "ci95": [float(ci.low), float(ci.high)]}


def detected(result: PrResult) -> bool:
    """The gate said the run was off: a decision's variance says the run is noisier than the model, or a verdict
    is inconclusive (which, under an indifference-zone plan, only a failed measurement gives)."""
    return any("noisier" in v or verdict == "inconclusive" for verdict, _, v, _ in result.verdicts.values())


def tally(results: Sequence[PrResult], order: Sequence[str], kind: str) -> dict[str, Any]:
    """Rates over simulated PRs. ``kind``: "false alarm" (any regression is wrong) or "miss" (anything but a
    regression is wrong; "inconclusive" and "undecided" counted apart from "no change"/"improvement")."""
    n = len(results)
    per_bench: dict[str, Any] = {}
    for b in order:
        verdicts = [r.verdicts[b][0] for r in results]
        counts = {v: verdicts.count(v) for v in sorted(set(verdicts))}
        used = [r.verdicts[b][1] for r in results]
        row: dict[str, Any] = {"verdicts": counts, "mean_rounds": float(np.mean(used))}
        if kind == "false alarm":
            row["false_alarm"] = proportion(counts.get("regression", 0), n)
        else:
            row["miss"] = proportion(counts.get("no change", 0) + counts.get("improvement", 0), n)
            row["inconclusive"] = proportion(counts.get("inconclusive", 0) + counts.get("undecided", 0), n)
        per_bench[b] = row
    out: dict[str, Any] = {
        "prs": n,
        "per_benchmark": per_bench,
        "mean_rounds": float(np.mean([r.verdicts[b][1] for r in results for b in order])),
        "guard_fired": proportion(sum(r.guard_fired for r in results), n),
        "detected": proportion(sum(detected(r) for r in results), n),
        "wall_s": {
            "median": float(np.median([r.stop_wall_s for r in results])),
            "p90": float(np.percentile([r.stop_wall_s for r in results], 90)),
            "every_benchmark_decided_median": float(np.median([r.wall_s for r in results])),
        },
    }
    if kind == "false alarm":
        out["pr_false_alarm"] = proportion(sum(r.first_regression is not None for r in results), n)
        out["benchmark_false_alarm"] = proportion(
            sum(r.verdicts[b][0] == "regression" for r in results for b in order), n * len(order)
        )
    else:
        out["benchmark_miss"] = proportion(
            sum(r.verdicts[b][0] in ("no change", "improvement") for r in results for b in order), n * len(order)
        )
        out["benchmark_inconclusive"] = proportion(
            sum(r.verdicts[b][0] in ("inconclusive", "undecided") for r in results for b in order), n * len(order)
        )
        out["pr_any_miss"] = proportion(
            sum(any(r.verdicts[b][0] in ("no change", "improvement") for b in order) for r in results), n
        )
    return out


def pct(p: dict[str, Any]) -> str:
    """A proportion as Markdown: rate [low, high] (k/n)."""
    if p["rate"] is None:
        return "-"
    return f"{p['rate']:.2%} [{p['ci95'][0]:.2%}, {p['ci95'][1]:.2%}] ({p['k']}/{p['n']})"


# ---------------------------------------------------------------------------
# what both scripts share: the setup, the shifts, the processes
# ---------------------------------------------------------------------------

SELECTIONS = ("default", "triton")
SHIFTS = (0.0, 0.5, 1.0)  # the head slower by 0, t/2 and t (t: each benchmark's threshold)


@dataclass(frozen=True)
class Setup:
    """What a simulated PR is decided with: the gated plan, thresholds, the gate's noise model, timing costs."""

    plan: Any
    thresholds: Mapping[str, float]
    model: Any
    costs: Mapping[str, tuple[float, float]]
    order: tuple[str, ...]
    restart: int


def selection(name: str, corpus_or_model_ids: Sequence[str]) -> tuple[str, ...]:
    """The gate's order of the selection: the calibration's (registry, config, shape); "triton": its Triton part."""
    if name not in SELECTIONS:
        raise ValueError(f"selection must be one of {SELECTIONS} (got {name!r})")
    order = [b for b in corpus_or_model_ids]
    return tuple(b for b in order if name == "default" or b.startswith("triton"))


def load_setup(
    plan_spec: str,
    thresholds_path: str | Path,
    noise_path: str | Path,
    order: Sequence[str],
    pr_alpha: float = PR_ALPHA,
) -> Setup:
    from ci.speed.decide.noise_file import load_noise_model
    from ci.speed.decide.thresholds import load_thresholds

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import noise_model_rates  # the recorded timing costs (one source)

    plan = gated_plan(load_plan(plan_spec), len(order), pr_alpha)
    thresholds = load_thresholds(thresholds_path)
    model = load_noise_model(noise_path)
    costs = noise_model_rates.timing_costs()
    missing = [b for b in order if b not in costs]
    if missing:
        raise ValueError(f"no recorded timing cost for {missing}")
    return Setup(plan, {b: thresholds.lookup(b)[0] for b in order}, model, costs, tuple(order), restart_every(plan))


def run_shifts(
    truth: Mapping[str, tuple[np.ndarray, np.ndarray]],
    setup: Setup,
    shifts: Sequence[float],
    decide: Decide = sequential_decision,
) -> dict[float, PrResult]:
    """One drawn truth decided at each shift (the head slower by ``s * t`` per benchmark): common random numbers."""
    out = {}
    for s in shifts:
        moved = {b: (x + shift_log(s * setup.thresholds[b]), *rest) for b, (x, *rest) in truth.items()}
        out[s] = run_pr(
            moved,
            setup.order,
            setup.plan,
            setup.thresholds,
            setup.model,
            setup.costs,
            decide=decide,
            restart=setup.restart,
        )
    return out


def in_processes(fn: Callable[[Any], Any], tasks: Sequence[Any], workers: int) -> list[Any]:
    """``map(fn, tasks)`` in at most two processes (this machine's share)."""
    workers = max(1, min(2, workers))
    if workers == 1 or len(tasks) == 1:
        return [fn(t) for t in tasks]
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(fn, tasks))


def chunks(trials: Sequence[int], seed: int) -> list[tuple[tuple[int, ...], np.random.SeedSequence]]:
    """Trial counts (one per kind of cell) in four parts, each with its own seed (from ``seed``): the parts do not
    depend on how many processes run them, so a run's figures are the same on one or two."""
    parts = 4

    def split(total: int) -> list[int]:
        return [total // parts + (i < total % parts) for i in range(parts)]

    sizes = list(zip(*(split(t) for t in trials)))
    return [(n, s) for n, s in zip(sizes, np.random.SeedSequence(seed).spawn(parts)) if any(n)]


def result_json(r: PrResult) -> dict[str, Any]:
    return {
        "verdicts": {b: list(v) for b, v in r.verdicts.items()},
        "guard_fired": r.guard_fired,
        "wall_s": r.wall_s,
        "stop_wall_s": r.stop_wall_s,
        "first_regression": r.first_regression,
    }


# ---------------------------------------------------------------------------
# the two scripts' common front (replay_rates.py, misspecification_rates.py)
# ---------------------------------------------------------------------------

DEFAULT_PLAN = "harness.paired.plan:ZONE_PLAN"  # the gate's plan; version 5b's figures: harness.paired.plan:MODEL_PLAN


def add_run_arguments(p: Any, trials: int, miss_trials: int, seed: int) -> None:
    """The options both scripts take after their own: shifts, trial counts, seed, processes, output."""
    p.add_argument(
        "--shifts",
        type=float,
        nargs="+",
        default=list(SHIFTS),
        help="head slower by these fractions of each threshold (>= 1 counts misses, else false alarms)",
    )
    p.add_argument("--trials", type=int, default=trials, help=f"simulated PRs per false-alarm shift ({trials})")
    p.add_argument(
        "--miss-trials", type=int, default=miss_trials, help=f"simulated PRs per miss shift (>= 1; {miss_trials})"
    )
    p.add_argument("--seed", type=int, default=seed)
    p.add_argument("--workers", type=int, default=2, help="processes (at most 2)")
    p.add_argument("--out", type=Path, help="the JSON (written atomically); without it, printed")
    p.add_argument("--tables", type=Path, metavar="JSON", help="print the Markdown tables of a written JSON and exit")


def checked_run_arguments(p: Any, argv: list[str] | None) -> Any:
    args = p.parse_args(argv)
    if args.trials < 1 or args.miss_trials < 1:
        p.error("--trials and --miss-trials must be >= 1")
    if not all(s >= 0 for s in args.shifts):
        p.error("--shifts are slowdowns: each >= 0")
    return args


def script_main(
    name: str, args: Any, rates: Callable[[Any], dict[str, Any]], tables: Callable[[dict[str, Any]], str]
) -> int:
    """--tables, or the rates computed, written atomically (or printed) and tabled on stderr; exit 2 on bad input."""
    import json

    from harness.report import write_json_atomic

    try:
        if args.tables:
            print(tables(json.loads(args.tables.read_text())))
            return 0
        data = rates(args)
    except (ValueError, OSError, KeyError) as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 2
    if args.out:
        write_json_atomic(args.out, data)
    else:
        print(json.dumps(data, indent=1))
    print(tables(data), file=sys.stderr)
    return 0
