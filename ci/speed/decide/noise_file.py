"""A runner's noise model file (which one: its profile, ci/speed_runners.json via ci.speed.profiles; the MI355X's
``ci/speed_noise.json``, an H200's ``ci/speed_noise_h200.json``): read, fit, its JSON.

It keeps the A/A rounds the model was fitted from, so a refresh refits from the data (:func:`refit`); a run must be
honestly A/A (:func:`run_of_record`). Schema and why: docs/SPEED_GATE.md, "Notes from the code".
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ci.common.errors import InputError
from ci.common.json_file import JsonFileError, checked_top, read_json
from ci.speed.decide.exclusion import ExclusionRule, exclusion
from harness.paired.noise import BenchmarkNoise, Spread, generation_sizes
from harness.paired.noise_fit import RunRounds, fit

NOISE_PATH = "ci/speed_noise.json"  # the MI355X's (none yet); each runner's is named by ci/speed_runners.json
NOISE_SCHEMA = "mxfp4-speed-noise/1"
MAX_RUNS = 8  # a refresh keeps the newest runs: the model follows the runner, not its history
IDENTITY_KEYS = ("gpu", "driver", "torch", "cuda", "rocm")
_TOP_KEYS = {
    "schema",
    "about",
    "runner",
    "fitted",
    "restart_every",
    "spread",
    "benchmarks",
    "notes",
    "runs",
    "between_pool",  # since issue 46: the between-to-within structure the benchmarks share (harness.paired.noise_pool)
    "skipped",  # since issue 46: benchmark id -> why the calibration could not measure it
}


class NoiseModelError(InputError, ValueError):
    """The noise model file (or a record to fit from) is malformed; the message names the file and the key."""


@dataclass(frozen=True)
class NoiseModel:
    benchmarks: Mapping[str, BenchmarkNoise]
    spread: Spread
    runner: Mapping[str, Any]
    fitted: str
    restart_every: int
    runs: tuple[Mapping[str, Any], ...] = ()
    source: str = ""
    notes: tuple[str, ...] = ()
    about: str = ""
    between_pool: Mapping[str, Any] | None = None  # harness.paired.noise_pool.Pool.to_json() of the fit
    skipped: Mapping[str, str] = field(default_factory=dict)  # benchmark id -> why the calibration could not measure it

    def entry(self, bench_id: str) -> BenchmarkNoise | None:
        return self.benchmarks.get(bench_id)

    def to_json(self) -> dict[str, Any]:
        data = {
            "schema": NOISE_SCHEMA,
            "about": self.about,
            "runner": dict(self.runner),
            "fitted": self.fitted,
            "restart_every": self.restart_every,
            "spread": self.spread.to_json(),
            "benchmarks": {k: v.to_json() for k, v in sorted(self.benchmarks.items())},
            "notes": list(self.notes),
            "runs": [dict(r) for r in self.runs],
        }
        if self.between_pool is not None:
            data["between_pool"] = dict(self.between_pool)
        if self.skipped:
            data["skipped"] = dict(sorted(self.skipped.items()))
        return data

    def used_json(self, bench_ids: Sequence[str]) -> dict[str, Any]:
        """What a gate record keeps of the model it decided with: enough to replay it (no raw runs)."""
        data = self.to_json()
        return {
            "source": self.source,
            **{k: data[k] for k in ("runner", "fitted", "restart_every", "spread")},
            "benchmarks": {k: data["benchmarks"][k] for k in sorted(bench_ids) if k in self.benchmarks},
        }


def parse_noise_model(data: Any, where: str, *, runs_required: bool = True) -> NoiseModel:
    """Validate a parsed noise model (a file's, or the part a gate record kept: ``runs_required=False``)."""
    if runs_required:  # a file's: its schema and keys; a record's part has the record's
        data = checked_top(data, where, NOISE_SCHEMA, _TOP_KEYS, NoiseModelError)
    elif not isinstance(data, dict):
        raise NoiseModelError(f"{where}: expected a JSON object at the top level")
    for key, kind in (("benchmarks", dict), ("spread", dict), ("runner", dict)):
        if not isinstance(data.get(key), kind):
            raise NoiseModelError(f"{where}: {key} is missing or not a {kind.__name__}")
    try:
        spread = Spread.from_json(data["spread"])
        if not (spread.run_df > 0 and spread.bench_df > 0):
            raise ValueError("run_df and bench_df must be > 0")
    except (KeyError, TypeError, ValueError) as exc:
        raise NoiseModelError(f"{where}: spread: {exc}") from None
    benchmarks = {}
    for bench_id, entry in data["benchmarks"].items():
        try:
            benchmarks[bench_id] = BenchmarkNoise.from_json(entry)
        except (KeyError, TypeError, ValueError) as exc:
            raise NoiseModelError(f"{where}: benchmarks[{bench_id!r}]: {exc}") from None
    restart = data.get("restart_every", 4)
    if isinstance(restart, bool) or not isinstance(restart, int) or restart < 1:
        raise NoiseModelError(f"{where}: restart_every: a whole number >= 1 (got {restart!r})")
    runs = data.get("runs", [])
    if not isinstance(runs, list) or not all(
        isinstance(r, dict) and isinstance(r.get("benchmarks"), dict) for r in runs
    ):
        raise NoiseModelError(f'{where}: runs: a list of runs, each with its "benchmarks" rounds')
    pool = data.get("between_pool")
    skipped = data.get("skipped", {})
    if pool is not None and not isinstance(pool, dict):
        raise NoiseModelError(f"{where}: between_pool: an object (the pooled between-to-within structure)")
    if not isinstance(skipped, dict) or not all(isinstance(v, str) for v in skipped.values()):
        raise NoiseModelError(f"{where}: skipped: an object of benchmark id -> why it was not measured")
    return NoiseModel(
        benchmarks,
        spread,
        data["runner"],
        str(data.get("fitted", "?")),
        restart,
        tuple(runs),
        data.get("source") or where,
        tuple(data.get("notes", [])),
        str(data.get("about", "")),
        pool,
        skipped,
    )


def load_noise_model(path: str | Path) -> NoiseModel:
    try:
        data = read_json(Path(path))
    except JsonFileError as exc:
        raise NoiseModelError(str(exc)) from None
    return parse_noise_model(data, str(path))


def runner_identity(environment: Mapping[str, Any]) -> dict[str, Any]:
    return {k: environment.get(k) for k in IDENTITY_KEYS}


def identity_check(model: NoiseModel, environment: Mapping[str, Any]) -> tuple[bool, list[str]]:
    """(usable, notes): a model of another GPU model is not used; another driver or torch is said."""
    here = runner_identity(environment)
    if model.runner.get("gpu") != here["gpu"]:
        return False, [
            f"the noise model ({model.source}) was measured on {model.runner.get('gpu')!r}; this runner is "
            f"{here['gpu']!r}: not used (each benchmark's own rounds decide)"
        ]
    notes = [
        f"the noise model ({model.source}) was measured with {key} {model.runner.get(key)!r}; this runner has "
        f"{here[key]!r}: used, and the guard checks the rounds against it"
        for key in IDENTITY_KEYS[1:]
        if model.runner.get(key) != here[key] and here[key] is not None
    ]
    return True, notes


def run_of_record(
    record: Mapping[str, Any], source: str, *, assume_aa: str | None = None
) -> tuple[dict[str, Any], list[str]]:
    """The A/A rounds of a gate or calibration record as a model run (usable rounds only, in time order, with the head
    worker's generations), and what was left out and why: a gate record's benchmark only with identical code at base and
    head, unless ``assume_aa`` gives the reason it is A/A anyway (kept in the run).
    """
    mode = record.get("mode")
    if mode not in ("gate", "calibrate", "experiment"):
        raise NoiseModelError(f"{source}: a {mode!r} record has no rounds of its own to fit a noise model from")
    try:
        rule = ExclusionRule.from_json(record["exclusion"])
        decisions = (record.get("code") or {}).get("decisions") or {}
        benchmarks, notes = {}, []
        for bench in record["benchmarks"]:
            if bench.get("status") != "gated":
                continue
            pair = f"{bench['kernel']}[{bench['config']}]"
            identical = str(decisions.get(pair, "")).startswith("unchanged (identical code)")
            if mode != "calibrate" and not identical and not assume_aa:
                why = decisions.get(pair, "no code decision")
                notes.append(f"{bench['id']}: its code differs at base and head ({why}): not A/A")
                continue
            ratios, gens = [], []
            for rnd in record["rounds"]:
                by_side = {p["side"]: p.get("records", {}) for p in rnd["processes"]}
                recs = {side: by_side.get(side, {}).get(bench["id"]) for side in ("base", "head")}
                if recs["base"] is None and recs["head"] is None:
                    continue
                reason, _ = exclusion(recs, rule)
                generation = (recs["head"] or {}).get("worker_generation")
                if reason is not None or not isinstance(generation, int):
                    continue
                ratio = float(recs["head"]["tflops"]) / float(recs["base"]["tflops"])
                ratios.append(round(math.log(ratio), 10))
                gens.append(int(generation))
            if ratios:
                benchmarks[bench["id"]] = {"log_ratios": ratios, "generations": gens}
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        raise NoiseModelError(f"{source}: malformed record ({type(exc).__name__}: {exc})") from None
    why = (
        "a --calibrate record: one commit against itself"
        if mode == "calibrate"
        else f"assumed A/A: {assume_aa}"
        if assume_aa
        else "identical code at base and head, measured with --measure-identical"
    )
    run = {
        "source": source,
        "created": record.get("created", "?"),
        "environment": runner_identity(record.get("environment") or {}),
        "why_aa": why,
        "benchmarks": benchmarks,
    }
    return run, notes


def runs_cadence(runs: Sequence[Mapping[str, Any]]) -> tuple[int | None, list[int]]:
    """(the rounds per worker generation the runs were measured at, the sizes common enough to be a cadence): the
    most common size of their generations (usable rounds; a generation cut short by an excluded round is rarer),
    the larger on a tie; None without any generation. A size of at least a quarter of the generations is common."""
    sizes: Counter[int] = Counter()
    for run in runs:
        for data in run["benchmarks"].values():
            sizes.update(generation_sizes(data["generations"]))
    if not sizes:
        return None, []
    total = sum(sizes.values())
    return max(sizes, key=lambda k: (sizes[k], k)), sorted(k for k, v in sizes.items() if 4 * v >= total)


def refit(
    runs: Sequence[Mapping[str, Any]],
    *,
    restart_every: int | None = None,
    max_runs: int = MAX_RUNS,
    skipped: Mapping[str, str] | None = None,
) -> NoiseModel:
    """The model from ``runs``: the newest ``max_runs`` of those on the newest run's GPU model (same source once);
    named after that GPU, not the machine fitting them (a --refit on a CPU keeps an H200's model an H200's).

    ``restart_every``: the cadence the model's generation means were measured at (the gate's model_prediction reads
    a generation mean's variance at it); None: the runs' own (:func:`runs_cadence`), never the gate's default, which
    may differ from the calibration's."""
    if not runs:
        raise NoiseModelError("no A/A runs to fit a noise model from")
    unique = {(r["source"], r.get("created")): r for r in runs}
    ordered = sorted(unique.values(), key=lambda r: str(r.get("created")))
    gpu = (ordered[-1].get("environment") or {}).get("gpu")
    kept = [r for r in ordered if (r.get("environment") or {}).get("gpu") == gpu][-max_runs:]
    by_bench: dict[str, list[RunRounds]] = {}
    for i, run in enumerate(kept):
        for bench_id, data in run["benchmarks"].items():
            by_bench.setdefault(bench_id, []).append(
                RunRounds(f"{i}:{run['source']}", tuple(data["log_ratios"]), tuple(data["generations"]))
            )
    fitted = fit(by_bench)
    dropped = len(ordered) - len(kept)
    notes = list(fitted.notes) + (
        [f"{dropped} older run(s) or run(s) of another GPU model left out"] if dropped else []
    )
    cadence, seen = runs_cadence(kept)
    if restart_every is None:
        restart_every = cadence or 1
        if len(seen) > 1:
            notes.append(
                f"the runs' worker generations have {seen} rounds (a restart cadence changed): restart_every "
                f"{restart_every}, the most common"
            )
    return NoiseModel(
        fitted.benchmarks,
        fitted.spread,
        dict(kept[-1].get("environment") or {}),
        time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        restart_every,
        tuple(kept),
        "",
        tuple(notes),
        f"the speed gate's noise model of the runner's {gpu or 'CPU'} (docs/SPEED_GATE.md, 'The noise model')",
        fitted.pool.to_json() if fitted.pool is not None else None,
        dict(skipped or {}),
    )


@dataclass
class ModelChoice:
    """Which noise model a run uses (None: each benchmark's own rounds), and what was said about it."""

    model: NoiseModel | None
    notes: list[str] = field(default_factory=list)
