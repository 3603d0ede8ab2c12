"""The calibration (``python -m ci.speed.calibrate``): A/A rounds of the head against itself, the noise model refit.

:func:`run_calibrate` measures A/A rounds in the gate's warm workers (or, with ``--refit``, none), refits the
runner's noise model (ci.speed.decide.noise_file), plans per benchmark the rounds a decision takes at each
restart cadence (:func:`plan_rounds`) and, with ``--write``, writes the model. The steps and why:
docs/SPEED_GATE.md, "Calibrating a new runner".
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ci.common.files import append_step_summary_or_fallback, write_json_atomic
from ci.speed.decide.codes import Status
from ci.speed.decide.noise_file import NOISE_PATH, NoiseModel, load_noise_model, refit, run_of_record, write_noise_model
from ci.speed.decide.selection import check_selectors, select
from ci.speed.decide.thresholds import THRESHOLDS_PATH, Thresholds, load_thresholds
from ci.speed.decide.verdict import BenchmarkResult
from ci.speed.engine.rounds import Side, cost_summary
from ci.speed.engine.warm_engine import DEFAULT_RESTART_EVERY
from ci.speed.modes.shared import deadline, engine_options, log, open_measurer, run_rounds, survey_both, thresholds_for
from ci.speed.options import SpeedOptions
from ci.speed.report.markdown import calibration_markdown, correctness_lines, excluded_rows, noise_markdown, plan_text
from ci.speed.report.write import Context, record_json
from harness import paired
from harness.paired.noise import LookNoise
from harness.paired.sequential import SequentialPlan
from harness.paired.zone import planned_rounds
from harness.report import markdown_table

MAX_CALIBRATION_ROUNDS = 16  # at most; --max-minutes usually ends it first on a GPU
# A new worker generation on the H200: a spare's promotion (~3.5 s) and both sides' first warm-up (2 s each).
RESTART_S = 7.5


def calibrate_results(
    results: Sequence[BenchmarkResult], plan: SequentialPlan, where: str
) -> tuple[dict[str, paired.Calibration], list[dict[str, Any]], list[str]]:
    """Per gated benchmark of an A/A run: its calibration under the plan without the model, the override that plan
    would suggest (threshold rounded up), or why not."""
    calibrations, overrides, notes = {}, [], []
    for r in results:
        if r.status is not Status.GATED:
            continue
        try:
            cal = paired.calibrate([p.round for p in r.rounds], plan, alpha=plan.alpha)
        except ValueError as exc:
            notes.append(f"{r.id}: no calibration: {exc}")
            continue
        calibrations[r.id] = cal
        if cal.threshold >= 1:
            notes.append(f"{r.id}: too noisy for any threshold below 100% with this plan ({cal.summary()})")
            continue
        overrides.append(
            {
                "match": r.id,
                "threshold": math.ceil(cal.threshold * 1e4) / 1e4,
                "why": f"--calibrate on {where}: {cal.summary()}",
            }
        )
    return calibrations, overrides, notes


@dataclass(frozen=True)
class Planned:
    """One benchmark under the noise model and the zone plan: its policy threshold and the rounds it needs."""

    threshold: float  # the thresholds file's (policy; the calibration never writes one)
    rounds: dict[int, int | None]  # restart every R rounds -> the look by which any effect is decided (None: none)
    seconds: dict[int, float | None]  # the same in GPU seconds of this benchmark (both sides), from this run's timings
    restart_every: int  # the gate's cadence

    @property
    def decidable(self) -> bool:
        return self.rounds.get(self.restart_every) is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "restart_every": self.restart_every,
            "decidable": self.decidable,
            "rounds_to_decide": {str(k): v for k, v in self.rounds.items()},
            "seconds_to_decide": {str(k): v for k, v in self.seconds.items()},
        }


CADENCES = (1, 2, 4)  # restart every R rounds: the between-worker variance averages over generations, each start costs


def timing_costs(rounds: Sequence[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """Per benchmark the median seconds of one timing: a generation's first, and a repeat (this run's records)."""
    first: dict[str, list[float]] = {}
    repeat: dict[str, list[float]] = {}
    seen: set[tuple[str, str, Any]] = set()
    for rnd in rounds:
        for proc in rnd.get("processes", []):
            for bench_id, rec in proc.get("records", {}).items():
                if not isinstance(rec, dict) or not isinstance(rec.get("measure_s"), (int, float)):
                    continue
                key = (bench_id, proc.get("side"), rec.get("worker_generation"))
                (repeat if key in seen else first).setdefault(bench_id, []).append(float(rec["measure_s"]))
                seen.add(key)
    return {b: (statistics.median(v), statistics.median(repeat.get(b, v))) for b, v in first.items()}


def _seconds(n: int | None, every: int, cost: tuple[float, float] | None, restart_s: float) -> float | None:
    if n is None or cost is None:
        return None
    generations = -(-n // every)
    return round(2 * (generations * cost[0] + (n - generations) * cost[1]) + (generations - 1) * restart_s, 1)


def plan_rounds(
    model: NoiseModel,
    bench_ids: Sequence[str],
    plan: SequentialPlan,
    thresholds: Thresholds,
    gated: int,
    restart_every: int,
    costs: dict[str, tuple[float, float]],
    restart_s: float = RESTART_S,
    pr_alpha: float = 0.01,
) -> dict[str, Planned]:
    """Per benchmark: the rounds (and GPU seconds) by which the zone plan decides any effect at its policy threshold."""
    shared = plan.with_alpha(pr_alpha / max(1, gated))
    out = {}
    for bench_id in bench_ids:
        entry = model.entry(bench_id)
        if entry is None:
            continue
        look = LookNoise(entry, model.spread)
        threshold = thresholds.lookup(bench_id)[0]
        rounds = {r: planned_rounds(look, threshold, shared, r) for r in sorted({*CADENCES, restart_every})}
        seconds = {r: _seconds(n, r, costs.get(bench_id), restart_s) for r, n in rounds.items()}
        out[bench_id] = Planned(threshold, rounds, seconds, restart_every)
    return out


def _source_name(path: Path, repo: Path) -> str:
    """How the model names a run's record: repository-relative when it lies in the checkout (a runner's /tmp path
    would name nothing a reader can open), else as given."""
    try:
        return Path(path).resolve().relative_to(Path(repo).resolve()).as_posix()
    except ValueError:
        return str(path)


def _prior_runs(options: SpeedOptions) -> tuple[list[Any], str, NoiseModel | None]:
    """The runs already in the model file, the file's path, and the model (None: no file yet)."""
    path = options.noise or Path(NOISE_PATH)
    if not path.exists():
        return [], str(path), None
    model = load_noise_model(path)
    return list(model.runs), str(path), model


def _record_runs(options: SpeedOptions) -> tuple[list[Any], list[str]]:
    from ci.speed.decide.verdict import load_record

    runs, notes = [], []
    for path in options.aa_records:
        run, left = run_of_record(load_record(path), str(path), assume_aa=options.assume_aa)
        runs.append(run)
        notes += [f"{path}: {n}" for n in left]
    return runs, notes


def run_calibrate(options: SpeedOptions) -> int:
    from ci.common import gitutil

    plan, rule, timing = options.the_plan(), options.exclusion_rule(), options.timing_overrides
    model_plan = options.the_plan(model=True)
    n = options.rounds if options.rounds is not None else MAX_CALIBRATION_ROUNDS
    started = time.time()
    stop_at = deadline(options.max_minutes, started)
    prior, model_path, old_model = _prior_runs(options)
    record_runs, notes = _record_runs(options)
    thresholds_path = options.thresholds_path or Path(THRESHOLDS_PATH)
    thresholds = options.thresholds or (load_thresholds(thresholds_path) if thresholds_path.exists() else None)
    results: list[BenchmarkResult] = []
    rounds: list[dict[str, Any]] = []
    correctness, env, device, sha, record = [], {}, "?", None, None
    if not options.refit:
        repo = gitutil.open_repo(options.repo)
        sha = gitutil.resolve_commit(repo, "HEAD" if options.working_tree else options.head)
        with ExitStack() as stack:
            if options.working_tree:
                tree_a = tree_b = Path(repo.working_tree_dir or options.repo)
            else:  # two worktrees, as the gate has: per-path effects (caches, paths in kernels) land in the noise
                tree_a, tree_b = (stack.enter_context(gitutil.checkout(repo, sha)) for _ in range(2))
            thresholds = thresholds or thresholds_for(options.thresholds, tree_b)
            sides = {"base": Side("base", tree_a), "head": Side("head", tree_b)}
            # The workers that survey the head (and its second tree) are the ones that measure the A/A rounds.
            measurer = stack.enter_context(open_measurer(list(sides.values()), options, stop_at))
            survey = survey_both(sides, options.selector, measurer)["head"]
            assert survey is not None  # the head's survey failing raises (ci.speed.modes.shared)
            check_selectors({"head": survey}, options.selector)
            selection = select(survey, survey)
            correctness = [c for c in selection.correctness if c["side"] == "head"]
            log(
                f"speed_gate: calibrating {sha[:12]} against itself: up to {n} A/A rounds, a restart every "
                f"{options.restart_every}, within {options.max_minutes or 'no limit'} minutes"
            )
            finish_by = started + 60.0 * options.max_minutes if options.max_minutes and options.rounds is None else None
            rounds, results, _ = run_rounds(
                list(sides.values()),
                selection,
                measurer,
                plan=plan,
                rule=rule,
                thresholds=thresholds,
                limit=n,
                fixed=True,
                deadline=stop_at,
                finish_by=finish_by,
            )
        env, device = survey["environment"], survey["device"]
    elif thresholds is None:
        from ci.speed.decide.thresholds import ThresholdsError

        raise ThresholdsError(
            f"{thresholds_path}: no such thresholds file (--thresholds names the file --write updates)"
        )
    gpu = env.get("gpu") or (old_model.runner.get("gpu") if old_model else None) or "CPU"
    where = f"{gpu}, {time.strftime('%Y-%m-%d')}"
    if options.refit:  # nothing measured here: the thresholds come from the runs already recorded
        where = f"{where} (--refit of the recorded runs, nothing measured)"
    calibrations, overrides, cal_notes = calibrate_results(results, plan, f"{where} at {(sha or '?')[:12]}")
    code = 1 if any(r.status is Status.WRONG_RESULT for r in results) else 0

    def context(extra: dict[str, Any]) -> Context:
        return Context(
            mode="calibrate",
            plan=plan,
            rule=rule,
            thresholds=thresholds,
            base={"ref": options.head, "sha": sha},
            head={"ref": options.head, "sha": sha, "working_tree": options.working_tree},
            environment=env,
            device=device,
            timing=timing,
            round_limit=n,
            wall_s=time.time() - started,
            extra=extra,
        )

    base_extra = {
        "calibrations": {k: dict(c.to_json(), device=env.get("gpu") or "cpu") for k, c in calibrations.items()},
        "suggested_overrides": overrides,
        "engine": engine_options(options.restart_every, options.gpus),
        "cost": cost_summary(rounds),
        "refit": options.refit,
    }
    if not options.refit:
        record = record_json(
            context(base_extra), results, correctness, rounds, code, options.fail_on_inconclusive, options.command
        )
        run, left = run_of_record(
            record,
            _source_name(options.json, options.repo)
            if options.json
            else f"--calibrate at {(sha or '?')[:12]}, {record['created']}",
        )
        notes += left
        record_runs.append(run)
    model = refit(prior + record_runs, restart_every=DEFAULT_RESTART_EVERY)
    # Named after the runs' GPU, not the machine fitting them (a --refit on a CPU keeps an H200's model an H200's).
    model = replace(
        model,
        source=model_path,
        about=f"the speed gate's noise model of the runner's {model.runner.get('gpu') or 'CPU'} "
        "(docs/SPEED_GATE.md, 'The noise model')",
    )
    ids = [r.id for r in results if r.status is Status.GATED] if not options.refit else sorted(model.benchmarks)
    gated = len(ids)
    planned = plan_rounds(model, ids, model_plan, thresholds, gated, DEFAULT_RESTART_EVERY, timing_costs(rounds))
    cannot = sorted(b for b, p in planned.items() if not p.decidable)
    files = []
    if options.write:  # the thresholds are policy: the calibration reports, it never writes one
        write_noise_model(model_path, model)
        files = [model_path]
        log(f"speed_gate: wrote the noise model to {model_path}")
    if cannot:
        log(
            f"speed_gate: {len(cannot)} benchmark(s) cannot be decided at their threshold by the plan's last look "
            f"under this model: {', '.join(cannot)} (measure more worker generations, or change the policy in "
            f"{thresholds_path})"
        )
    markdown = noise_markdown(
        model,
        planned,
        [
            (
                f"commit `{(sha or '?')[:12]}` against itself "
                f"({'the working tree, one tree' if options.working_tree else 'two worktrees'}) on {where} · "
                f"{len(rounds)} rounds, a restart every {options.restart_every} · "
                if not options.refit
                else "refit from the runs in the model file and --aa-records (nothing measured) · "
            )
            + f"model plan: {plan_text(model_plan)}",
            f"thresholds: policy, from `{thresholds.source}` (never written here); "
            "rounds: the look by which the zone plan "
            f"decides any effect under the model ({gated} gated), restarting every 1, 2 or 4 rounds (the gate: every "
            f"{DEFAULT_RESTART_EVERY}); seconds: both sides' GPU time for those rounds"
            + (", from this run's timings" if rounds else " (no timings: --refit)"),
            ("**written**: " + ", ".join(f"`{f}`" for f in files))
            if files
            else "not written (add --write to write the model)",
            *(
                [
                    f"**cannot be decided** at their threshold by the last look ({model_plan.max_rounds} rounds): "
                    + ", ".join(f"`{b}`" for b in cannot)
                ]
                if cannot
                else []
            ),
        ],
        notes + list(model.notes),
    )
    if results:
        markdown += "\n" + calibration_markdown(
            calibrations,
            {k: thresholds.lookup(k)[0] for k in calibrations},
            [],
            [f"Without the noise model (the t plan: {plan_text(plan)}): per benchmark from these rounds alone."],
        )
        markdown += "\n".join(f"- {n}" for n in cal_notes)
        markdown += "\n\n**Correctness before timing** (ci.common.correctness.check_kernel):\n" + "\n".join(
            correctness_lines(correctness)
        )
        excluded = excluded_rows(results)
        if excluded:
            markdown += f"\n\n**Excluded rounds** ({len(excluded)}): not used.\n\n{markdown_table(excluded)}"
    print(markdown)
    append_step_summary_or_fallback(markdown, log)
    if options.json is not None:
        extra = {
            **base_extra,
            "noise_model": {k: v for k, v in model.to_json().items() if k != "runs"},
            "noise_runs": [r["source"] for r in model.runs],
            "model_plan": model_plan.to_json(),
            "planned_rounds": {k: p.to_json() for k, p in planned.items()},
            "cannot_decide": cannot,
            "files_written": files,
        }
        write_json_atomic(
            options.json,
            record_json(
                context(extra), results, correctness, rounds, code, options.fail_on_inconclusive, options.command
            ),
        )
    return code
