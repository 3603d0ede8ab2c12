"""``python -m ci.speed.calibrate``: A/A rounds of the head against itself, the runner's noise model and thresholds.

One command on a fresh runner (docs/SPEED_GATE.md, "Calibrating a new runner"):

    python -m ci.speed.calibrate --noise ci/speed_noise_h200.json --thresholds ci/speed_thresholds_h200.json --write

1. measures A/A rounds in the gate's warm workers (two worktrees of one commit), restarting them
   every 2 rounds (the between-worker SD needs generations), up to 16 rounds and never a round
   that would end after ``--max-minutes`` (default 9: the default selection within 10 minutes);
2. fits the noise model (harness.paired.noise.fit) from these rounds, the runs already in the
   model file (same GPU model; the newest ci.speed.noise_model.MAX_RUNS) and any ``--aa-records``;
3. plans each benchmark's threshold with the model (harness.paired.model_threshold): the one at
   which an unchanged head says "no change" by ``pass_rounds`` (2) rounds w.p. 99%, or, for a
   benchmark a thresholds-file target matches, the target, raised to the smallest threshold the
   noise supports by the plan's last look; and its minimum detectable effect (95% power by the last
   look, the per-PR alpha shared by the benchmarks calibrated);
4. prints all of it and, with ``--write``, writes both files (the gate then reads them: ``--noise``
   and ``--thresholds``, or the head's ``ci/speed_noise.json`` and ``ci/speed_thresholds.json``).

``--refit`` measures nothing: the model is refit from the runs in the file and ``--aa-records``.
The per-benchmark figures of the plan without the model (harness.paired.calibrate: the t plan's
suggested thresholds) are kept in the record as before (``calibrations``, ``suggested_overrides``).
"""

from __future__ import annotations

import math
import time
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from ci.speed.cost import cost_summary
from ci.speed.noise_model import NOISE_PATH, NoiseModel, load_noise_model, refit, run_of_record, write_noise_model
from ci.speed.options import SpeedOptions
from ci.speed.outputs import Context, record_json
from ci.speed.reasons import Status
from ci.speed.report import calibration_markdown, correctness_lines, excluded_rows, noise_markdown, plan_text
from ci.speed.rounds import Side
from ci.speed.run import deadline, log, open_measurer, run_rounds, survey_both, thresholds_for
from ci.speed.selection import check_selectors, select
from ci.speed.thresholds import THRESHOLDS_PATH, Override, Thresholds, load_thresholds
from ci.speed.verdict import BenchmarkResult
from ci.speed.warm import DEFAULT_RESTART_EVERY
from harness import paired
from harness.paired.noise import LookNoise
from harness.paired.sequential import SequentialPlan
from harness.report import append_step_summary, markdown_table, write_json_atomic

MAX_CALIBRATION_ROUNDS = 16  # at most; --max-minutes usually ends it first on a GPU
PASS_PROBABILITY = 0.99  # an unchanged head says "no change" by pass_rounds w.p. this at the threshold written
MDE_POWER = 0.95


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
        overrides.append({"match": r.id, "threshold": math.ceil(cal.threshold * 1e4) / 1e4,
                          "why": f"--calibrate on {where}: {cal.summary()}"})
    return calibrations, overrides, notes


@dataclass(frozen=True)
class Planned:
    """One benchmark's thresholds under the noise model, and the one written."""

    two_round: float  # "no change" by pass_rounds w.p. 99%
    floor: float  # "no change" by the last look w.p. 99%: the smallest the noise supports
    threshold: float  # written: the target (raised to the floor) or two_round, rounded up to 0.01%
    target: Override | None
    mde: float  # slowdown flagged as regression w.p. 95% by the last look, at ``threshold``

    def to_json(self) -> dict[str, Any]:
        return {"two_round": self.two_round, "floor": self.floor, "threshold": self.threshold, "mde": self.mde,
                "target": None if self.target is None else {"match": self.target.match, "threshold": self.target.threshold}}


def _up(x: float) -> float:
    return math.ceil(x * 1e4 - 1e-9) / 1e4


def plan_thresholds(model: NoiseModel, bench_ids: Sequence[str], plan: SequentialPlan, thresholds: Thresholds,
                    pass_rounds: int, gated: int, pr_alpha: float = 0.01) -> dict[str, Planned]:
    """Each benchmark's thresholds under ``model`` and ``plan`` (MODEL_PLAN), the written one by the rule of the module doc."""
    shared = plan.with_alpha(pr_alpha / max(1, gated))
    out = {}
    for bench_id in bench_ids:
        entry = model.entry(bench_id)
        if entry is None:
            continue
        look = LookNoise(entry, model.spread)
        two = paired.model_threshold(look, plan, pass_rounds, model.restart_every, 1 - PASS_PROBABILITY)
        floor = paired.model_threshold(look, plan, plan.max_rounds, model.restart_every, 1 - PASS_PROBABILITY)
        target = thresholds.target(bench_id)
        wanted = max(target.threshold, floor) if target is not None else two
        if not wanted < 1:
            continue  # too noisy for any band below 100%: the report names it, no threshold is written
        chosen = _up(wanted)
        mde = paired.model_resolvable_effect(look, chosen, shared, model.restart_every, MDE_POWER)
        out[bench_id] = Planned(two, floor, chosen, target, mde)
    return out


def thresholds_with(thresholds: Thresholds, planned: dict[str, Planned], model: NoiseModel, pass_rounds: int,
                    gated: int, where: str) -> Thresholds:
    """The thresholds file to write: one calibrated override per benchmark first, then the overrides kept
    (hand-written ones, and calibrated ones of benchmarks this calibration did not cover)."""
    calibrated = []
    for bench_id, p in sorted(planned.items()):
        noise = model.benchmarks[bench_id]
        rule = (f"target {p.target.threshold:.2%} ({p.target.why})" + (f", raised to the noise's floor {p.floor:.3%}"
                if p.floor > p.target.threshold else "") if p.target is not None
                else f"'no change' by {pass_rounds} rounds w.p. {PASS_PROBABILITY:.0%}")
        calibrated.append(Override(bench_id, p.threshold, (
            f"--calibrate --write on {where}: within-worker SD {noise.within_sd:.3%} ({noise.within_df} df), between-worker "
            f"SD {noise.between_sd:.3%} ({noise.between_df} df); {rule}; smallest the noise supports {p.floor:.3%}; "
            f"detects {p.mde:.3%} w.p. {MDE_POWER:.0%} ({gated} gated)")))
    kept = [o for o in thresholds.overrides
            if not (o.why.startswith("--calibrate") and o.match in planned)]
    return replace(thresholds, overrides=tuple(calibrated + kept))


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
    from ci.speed.verdict import load_record

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
    stop_at = deadline(options, started)
    prior, model_path, old_model = _prior_runs(options)
    record_runs, notes = _record_runs(options)
    thresholds_path = options.thresholds_path or Path(THRESHOLDS_PATH)
    thresholds = options.thresholds or (load_thresholds(thresholds_path) if thresholds_path.exists() else None)
    results, rounds, correctness, env, device, sha, record = [], [], [], {}, "?", None, None
    if not options.refit:
        repo = gitutil.open_repo(options.repo)
        sha = gitutil.resolve_commit(repo, "HEAD" if options.working_tree else options.head)
        with ExitStack() as stack:
            if options.working_tree:
                tree_a = tree_b = Path(repo.working_tree_dir)
            else:  # two worktrees, as the gate has: per-path effects (caches, paths in kernels) land in the noise
                tree_a, tree_b = (stack.enter_context(gitutil.checkout(repo, sha)) for _ in range(2))
            thresholds = thresholds or thresholds_for(options, tree_b)
            sides = {"base": Side("base", tree_a), "head": Side("head", tree_b)}
            # The workers that survey the head (and its second tree) are the ones that measure the A/A rounds.
            measurer = stack.enter_context(open_measurer(list(sides.values()), options, stop_at))
            survey = survey_both(sides, options, measurer)["head"]
            check_selectors({"head": survey}, options.kernels, options.configs)
            selection = select(survey, survey)
            correctness = [c for c in selection.correctness if c["side"] == "head"]
            log(f"speed_gate: calibrating {sha[:12]} against itself: up to {n} A/A rounds, a restart every "
                f"{options.restart_every}, within {options.max_minutes or 'no limit'} minutes")
            finish_by = started + 60.0 * options.max_minutes if options.max_minutes and options.rounds is None else None
            rounds, results, _ = run_rounds(list(sides.values()), selection, measurer, plan=plan, rule=rule,
                                            thresholds=thresholds, limit=n, fixed=True, deadline=stop_at, finish_by=finish_by)
        env, device = survey["environment"], survey["device"]
    elif thresholds is None:
        from ci.speed.thresholds import ThresholdsError

        raise ThresholdsError(f"{thresholds_path}: no such thresholds file (--thresholds names the file --write updates)")
    where = f"{env.get('gpu') or (old_model.runner.get('gpu') if old_model else None) or 'CPU'}, {time.strftime('%Y-%m-%d')}"
    if options.refit:  # nothing measured here: the thresholds come from the runs already recorded
        where = f"{where} (--refit of the recorded runs, nothing measured)"
    calibrations, overrides, cal_notes = calibrate_results(results, plan, f"{where} at {(sha or '?')[:12]}")
    code = 1 if any(r.status is Status.WRONG_RESULT for r in results) else 0

    def context(extra: dict[str, Any]) -> Context:
        return Context(mode="calibrate", plan=plan, rule=rule, thresholds=thresholds, base={"ref": options.head, "sha": sha},
                       head={"ref": options.head, "sha": sha, "working_tree": options.working_tree}, environment=env,
                       device=device, timing=timing, round_limit=n, wall_s=time.time() - started, extra=extra)

    base_extra = {"calibrations": {k: dict(c.to_json(), device=env.get("gpu") or "cpu") for k, c in calibrations.items()},
                  "suggested_overrides": overrides, "engine": engine_options(options), "cost": cost_summary(rounds),
                  "refit": options.refit}
    if not options.refit:
        record = record_json(context(base_extra), results, correctness, rounds, code, options.fail_on_inconclusive, options.command)
        run, left = run_of_record(record, _source_name(options.json, options.repo) if options.json
                                  else f"--calibrate at {sha[:12]}, {record['created']}")
        notes += left
        record_runs.append(run)
    model = refit(prior + record_runs, restart_every=DEFAULT_RESTART_EVERY)
    # Named after the runs' GPU, not the machine fitting them (a --refit on a CPU keeps an H200's model an H200's).
    model = replace(model, source=model_path, about=f"the speed gate's noise model of the runner's {model.runner.get('gpu') or 'CPU'} "
                                                    "(docs/SPEED_GATE.md, 'The noise model')")
    ids = [r.id for r in results if r.status is Status.GATED] if not options.refit else sorted(model.benchmarks)
    gated = len(ids)
    planned = plan_thresholds(model, ids, model_plan, thresholds, options.pass_rounds, gated)
    written = thresholds_with(thresholds, planned, model, options.pass_rounds, gated, where)
    files = []
    if options.write:
        write_noise_model(model_path, model)
        write_json_atomic(thresholds_path, written.file_json())
        files = [model_path, str(thresholds_path)]
        log(f"speed_gate: wrote the noise model to {model_path} and the thresholds to {thresholds_path}")
    markdown = noise_markdown(model, planned, {k: thresholds.lookup(k)[0] for k in planned}, [
        (f"commit `{sha[:12]}` against itself ({'the working tree, one tree' if options.working_tree else 'two worktrees'}) on "
         f"{where} · {len(rounds)} rounds, a restart every {options.restart_every} · " if not options.refit else
         "refit from the runs in the model file and --aa-records (nothing measured) · ")
        + f"model plan: {plan_text(model_plan)}",
        f"thresholds: 'no change' by {options.pass_rounds} rounds w.p. {PASS_PROBABILITY:.0%}, or a target raised to the "
        f"smallest the noise supports (by the last look); detectable: w.p. {MDE_POWER:.0%} by the last look, {gated} gated",
        ("**written**: " + ", ".join(f"`{f}`" for f in files)) if files else "not written (add --write to write both files)",
    ], notes + list(model.notes))
    if results:
        markdown += "\n" + calibration_markdown(calibrations, {k: thresholds.lookup(k)[0] for k in calibrations}, [], [
            f"Without the noise model (the t plan: {plan_text(plan)}): per benchmark from these rounds alone."])
        markdown += "\n".join(f"- {n}" for n in cal_notes)
        markdown += ("\n\n**Correctness before timing** (ci.common.correctness.check_kernel):\n"
                     + "\n".join(correctness_lines(correctness)))
        excluded = excluded_rows(results)
        if excluded:
            markdown += f"\n\n**Excluded rounds** ({len(excluded)}): not used.\n\n{markdown_table(excluded)}"
    print(markdown)
    append_step_summary(markdown)
    if options.json is not None:
        extra = {**base_extra, "noise_model": {k: v for k, v in model.to_json().items() if k != "runs"},
                 "noise_runs": [r["source"] for r in model.runs], "model_plan": model_plan.to_json(),
                 "planned_thresholds": {k: p.to_json() for k, p in planned.items()}, "pass_rounds": options.pass_rounds,
                 "thresholds_written": written.file_json(), "files_written": files}
        write_json_atomic(options.json, record_json(context(extra), results, correctness, rounds, code,
                                                    options.fail_on_inconclusive, options.command))
    return code


def engine_options(options: SpeedOptions) -> dict[str, Any]:
    from ci.speed.modes import engine_options as options_of

    return options_of(options)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ci.speed.calibrate``: the gate's front with the calibration's options (ci.speed.gate)."""
    from ci.speed.gate import main as front

    return front(argv, calibrate=True)


if __name__ == "__main__":
    import sys

    sys.exit(main())
