"""The calibration (``python -m ci.speed.calibrate``): A/A rounds of the head against itself, the noise model refit.

Its steps and why: docs/SPEED_GATE.md, "Calibrating a new runner".
"""

from __future__ import annotations

import math
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ci.common import interrupts
from ci.common.errors import WriteError
from ci.common.files import append_step_summary_or_fallback, write_json_atomic, write_or_fallback
from ci.speed.decide.codes import Status
from ci.speed.decide.exclusion import ExclusionRule
from ci.speed.decide.noise_file import (
    NoiseModelError,
    load_noise_model,
    refit,
    run_of_record,
    runner_identity,
)
from ci.speed.decide.selection import check_selectors, select
from ci.speed.decide.thresholds import Thresholds, ThresholdsError, load_thresholds
from ci.speed.decide.verdict import BenchmarkResult, load_record
from ci.speed.engine.rounds import Side, cost_summary
from ci.speed.engine.warm_engine import GATE_RESTART_EVERY
from ci.speed.modes.calibration_plan import plan_rounds, timing_costs
from ci.speed.modes.shared import (
    SKIPPED,
    STOPPED,
    RoundsInterrupted,
    engine_options,
    log,
    memory_check,
    open_measurer,
    run_rounds,
    survey_both,
    thresholds_for,
)
from ci.speed.options import SpeedOptions
from ci.speed.profiles import RUNNERS_PATH, runner_profile
from ci.speed.report.markdown import calibration_markdown, correctness_lines, excluded_rows, noise_markdown, plan_text
from ci.speed.report.write import Context, record_json
from harness import paired
from harness.paired.noise_fit import MIN_GENERATIONS
from harness.paired.sequential import SequentialPlan
from harness.report import fallback_path, json_text, markdown_table

MAX_CALIBRATION_ROUNDS = 16  # at most; --max-minutes usually ends it first on a GPU


def calibrate_results(
    results: Sequence[BenchmarkResult], plan: SequentialPlan, where: str
) -> tuple[dict[str, paired.Calibration], list[dict[str, Any]], list[str]]:
    """Per gated benchmark of an A/A run: its calibration under the t plan, the override it suggests, or why not."""
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


def _source_name(path: Path, repo: Path) -> str:
    """Repository-relative when in the checkout (a runner's temporary path names nothing a reader can open)."""
    try:
        return Path(path).resolve().relative_to(Path(repo).resolve()).as_posix()
    except ValueError:
        return str(path)


@dataclass(frozen=True)
class AARun:
    """What the A/A rounds gave; a --refit measures nothing (the defaults)."""

    thresholds: Thresholds
    sha: str | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    device: str = "?"
    correctness: list[dict[str, Any]] = field(default_factory=list)  # the head's checks before timing
    rounds: list[dict[str, Any]] = field(default_factory=list)
    results: list[BenchmarkResult] = field(default_factory=list)
    interrupted: str | None = None  # the signal that ended the rounds (SIGINT, SIGTERM): the complete ones are kept

    @property
    def skipped(self) -> dict[str, str]:
        """Benchmark id -> why it could not be calibrated: left out before it started (its memory), taken off when it
        failed, or a wrong result (never a speed)."""
        out = {}
        for r in self.results:
            if r.status is Status.WRONG_RESULT:
                out[r.id] = f"wrong result: {r.note}"
            elif r.status is Status.NOT_APPLICABLE and r.note.startswith(SKIPPED):
                out[r.id] = r.note[len(SKIPPED) :].strip()
        return out

    @property
    def stopped(self) -> dict[str, str]:
        """Benchmark id -> why it was measured no more after a failure; the rounds before it are in the model."""
        return {r.id: r.note for r in self.results if r.status is Status.GATED and r.note.startswith(STOPPED)}


def refuse_another_runners_model(path: Path | None, environment: Mapping[str, Any]) -> None:
    """A calibration only ever refits its own runner's model: ``--noise`` naming another GPU's file (the H200's
    committed one, calibrated on a CPU or an H100) is refused before any round, the file untouched (issue 49)."""
    if path is None or not Path(path).exists():
        return
    model = load_noise_model(path)
    theirs, ours = model.runner.get("gpu"), runner_identity(environment)["gpu"]
    if theirs != ours:
        raise NoiseModelError(
            f"--noise {path} is the noise model of {theirs or 'no GPU'!r}; this calibration runs on "
            f"{ours or 'no GPU (the CPU)'!r}: it would replace that runner's model with this one's. Give --noise a "
            "new path (or this runner's own file)"
        )


def measure_aa(
    options: SpeedOptions,
    thresholds: Thresholds | None,
    plan: SequentialPlan,
    rule: ExclusionRule,
    n: int,
    started: float,
    open_engine: Callable[[list[Side], SpeedOptions, float | None], Any] = open_measurer,
) -> AARun:
    """Up to ``n`` A/A rounds of the head against itself in the gate's warm workers, within --max-minutes.

    A benchmark the device cannot hold twice, or that fails or computes a wrong result, is skipped with its reason
    (:attr:`AARun.skipped`); the others are measured. ``open_engine``: the warm workers (a test's fake)."""
    from ci.common import gitutil

    repo = gitutil.open_repo(options.repo)
    sha = gitutil.resolve_commit(repo, "HEAD" if options.working_tree else options.head)
    stop_at = options.deadline(started)
    with ExitStack() as stack:
        if options.working_tree:
            tree_a = tree_b = Path(repo.working_tree_dir or options.repo)
        else:  # two worktrees, as the gate has: per-path effects (caches, paths in kernels) land in the noise
            tree_a, tree_b = (stack.enter_context(gitutil.checkout(repo, sha)) for _ in range(2))
        sides = {"base": Side("base", tree_a), "head": Side("head", tree_b)}
        # The workers that survey the head (and its second tree) are the ones that measure the A/A rounds.
        measurer = stack.enter_context(open_engine(list(sides.values()), options, stop_at))
        surveys = survey_both(sides, options.selector, measurer)
        survey = surveys["head"]
        assert survey is not None  # the head's survey failing raises (ci.speed.modes.shared)
        refuse_another_runners_model(options.noise, survey["environment"])
        # --thresholds, else the policy of the runner's profile (ci.speed.profiles) in the head.
        policy = runner_profile(survey["environment"].get("gpu")).thresholds
        thresholds = thresholds or thresholds_for(None, tree_b, policy)
        check_selectors({"head": survey}, options.selector)
        selection = select(survey, survey)
        memory_check(selection, surveys, list(getattr(measurer, "devices", None) or [0]))
        correctness = [c for c in selection.correctness if c["side"] == "head"]
        log(
            f"speed_gate: calibrating {sha[:12]} against itself: up to {n} A/A rounds, a restart every "
            f"{options.restart_every}, within {options.max_minutes or 'no limit'} minutes"
        )
        interrupted = None
        try:
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
                finish_by=stop_at if options.rounds is None else None,  # --plan rounds=N: none refused for its end
                skip_failed=True,
            )
        except RoundsInterrupted as stop:  # the complete rounds go to the record (run_calibrate), not to a model
            rounds, results, interrupted = stop.rounds, stop.results, signal.Signals(stop.signum).name
        interrupts.ignore()  # the rounds are over: a signal now would only lose them
    return AARun(thresholds, sha, survey["environment"], survey["device"], correctness, rounds, results, interrupted)


def _refit_gpu(noise: Path | None, recorded: Sequence[Mapping[str, Any]]) -> str | None:
    """The GPU whose runs a --refit fits: --noise's model's runner, else the newest --aa-records run's."""
    if noise is not None and noise.exists():
        return load_noise_model(noise).runner.get("gpu")
    newest = sorted(recorded, key=lambda r: str(r.get("created")))
    return (newest[-1].get("environment") or {}).get("gpu") if newest else None


def run_calibrate(
    options: SpeedOptions, open_engine: Callable[[list[Side], SpeedOptions, float | None], Any] = open_measurer
) -> int:
    """Exit 0 when the model was fitted (written with --write), benchmarks that could not run skipped and said so; 2
    (an exception) when nothing could be fitted."""
    started = time.time()
    plan, rule, model_plan = options.the_plan(), options.exclusion_rule(), options.the_plan(model=True)
    n = options.rounds if options.rounds is not None else MAX_CALIBRATION_ROUNDS
    recorded, notes = [], []
    for path in options.aa_records:
        run, left = run_of_record(load_record(path), str(path), assume_aa=options.assume_aa)
        recorded.append(run)
        notes += [f"{path}: {note}" for note in left]
    if options.refit:
        gpu = _refit_gpu(options.noise, recorded)
        profile = runner_profile(gpu)
        thresholds_path = options.thresholds_path or Path(options.repo) / profile.thresholds
        if options.thresholds is None and not thresholds_path.exists():
            raise ThresholdsError(
                f"{thresholds_path}: no such thresholds file (--thresholds names one; it is only read)"
            )
        aa = AARun(options.thresholds or load_thresholds(thresholds_path))
    else:
        aa = measure_aa(options, options.thresholds, plan, rule, n, started, open_engine)
        gpu = aa.environment.get("gpu")
        profile = runner_profile(gpu)
    # The model goes where the runner's profile keeps it (--noise wins); an unknown runner's at its own name.
    model_path = options.noise or Path(options.repo) / profile.noise
    old_model = load_noise_model(model_path) if model_path.exists() else None
    runs = list(old_model.runs if old_model else ()) + recorded
    sha = (aa.sha or "?")[:12]
    gpu = gpu or (old_model.runner.get("gpu") if old_model else None) or "CPU"
    refit_note = " (--refit of the recorded runs, nothing measured)" if options.refit else ""
    where = f"{gpu}, {time.strftime('%Y-%m-%d')}{refit_note}"
    calibrations, overrides, cal_notes = calibrate_results(aa.results, plan, f"{where} at {sha}")
    # A benchmark that cannot run here (its memory, a failure, a wrong result) is skipped and said so; the others'
    # model is still fitted and written: exit 0 (issue 46: one benchmark lost the whole calibration).
    skipped = aa.skipped
    code = 0
    context = Context(
        mode="calibrate",
        plan=plan,
        rule=rule,
        thresholds=aa.thresholds,
        base={"ref": options.head, "sha": aa.sha},
        head={"ref": options.head, "sha": aa.sha, "working_tree": options.working_tree},
        environment=aa.environment,
        device=aa.device,
        timing=options.timing_overrides,
        round_limit=n,
        extra={
            "calibrations": {
                k: dict(c.to_json(), device=aa.environment.get("gpu") or "cpu") for k, c in calibrations.items()
            },
            "suggested_overrides": overrides,
            "engine": engine_options(options.restart_every, options.gpus),
            "cost": cost_summary(aa.rounds),
            "refit": options.refit,
            "runner_profile": profile.to_json(),
        },
    )
    record = record_json(
        context, aa.results, aa.correctness, aa.rounds, code, options.fail_on_inconclusive, options.command
    )
    if aa.interrupted is not None:
        return _keep_interrupted(options, record, aa.interrupted, model_path)
    if not options.refit:
        source = (
            _source_name(options.json, options.repo) if options.json else f"--calibrate at {sha}, {record['created']}"
        )
        run, left = run_of_record(record, source)
        notes += left
        runs.append(run)
    # The model's cadence is its runs' (the calibration restarts every 2; older runs may differ), not the gate's.
    model = replace(refit(runs, skipped=skipped), source=str(model_path))
    if not model.benchmarks:
        why = "; ".join(f"{b}: {w}" for b, w in sorted(skipped.items())[:5]) or "no usable A/A rounds"
        raise NoiseModelError(f"no benchmark could be calibrated, nothing to fit or write ({why})")
    ids = sorted(model.benchmarks) if options.refit else [r.id for r in aa.results if r.status is Status.GATED]
    planned = plan_rounds(model, ids, model_plan, aa.thresholds, len(ids), GATE_RESTART_EVERY, timing_costs(aa.rounds))
    cannot = sorted(b for b, p in planned.items() if not p.decidable)
    files: list[str] = []
    model_refused = None
    if options.write:  # the thresholds are policy: the calibration reports, it never writes one
        try:
            write_json_atomic(model_path, model.to_json())
            files = [str(model_path)]
            log(f"speed_gate: wrote the noise model to {model_path}")
        except WriteError as exc:  # the rounds are still written below (a fallback file if need be), then exit 2
            model_refused = str(exc)
    if cannot:
        log(
            f"speed_gate: {len(cannot)} benchmark(s) cannot be decided at their threshold by the plan's last look "
            f"under this model: {', '.join(cannot)} (measure more worker generations, or change the policy in "
            f"{aa.thresholds.source})"
        )
    trees = "the working tree, one tree" if options.working_tree else "two worktrees"
    how = (
        "refit from the runs in the model file and --aa-records (nothing measured) · "
        if options.refit
        else f"commit `{sha}` against itself ({trees}) on {where} · {len(aa.rounds)} rounds, a restart every "
        f"{options.restart_every} · "
    )
    header = [
        f"{how}model plan: {plan_text(model_plan)}",
        f"thresholds: policy, from `{aa.thresholds.source}` (never written here); rounds: the look by which the zone "
        f"plan decides any effect under the model ({len(ids)} gated), restarting every 1, 2 or 4 rounds (the gate: "
        f"every {GATE_RESTART_EVERY}); seconds: both sides' GPU time for those rounds"
        + (", from this run's timings" if aa.rounds else " (no timings: --refit)"),
        ("**written**: " + ", ".join(f"`{f}`" for f in files))
        if files
        else "not written (add --write to write the model)",
    ]
    if not profile.known:
        header.insert(
            0,
            f"**Unknown runner {profile.gpu}**: no profile in `{RUNNERS_PATH}`: its model is `{model_path}`, its "
            f"thresholds the default `{aa.thresholds.source}`; add a runner there to give it a policy of its own",
        )
    if cannot:
        header.append(
            f"**cannot be decided** at their threshold by the last look ({model_plan.max_rounds} rounds): "
            + ", ".join(f"`{b}`" for b in cannot)
        )
    if skipped:
        header.append(
            f"**skipped** ({len(skipped)}: not measured, not in this run's fit; the model "
            + ("was still written" if files else "fitted")
            + " from the others): "
            + "; ".join(f"`{b}`: {why}" for b, why in sorted(skipped.items()))
        )
        log(f"speed_gate: {len(skipped)} benchmark(s) skipped, the model fitted from the others: {', '.join(skipped)}")
    stopped = aa.stopped
    if stopped:
        header.append(
            f"**stopped** ({len(stopped)}: a failure ended their rounds; the rounds before it are in the fit): "
            + "; ".join(f"`{b}`: {why}" for b, why in sorted(stopped.items()))
        )
    weak = sorted(b for b in ids if (e := model.entry(b)) is not None and e.weak)
    if weak:
        header.append(
            f"**weak** ({len(weak)}: fewer than {MIN_GENERATIONS} worker generations; their between-worker SD is "
            "the pool's): " + ", ".join(f"`{b}`" for b in weak)
        )
    markdown = noise_markdown(model, planned, header, notes + list(model.notes))
    if aa.results:
        markdown += "\n" + calibration_markdown(
            calibrations,
            {k: aa.thresholds.lookup(k)[0] for k in calibrations},
            [f"Without the noise model (the t plan: {plan_text(plan)}): per benchmark from these rounds alone."],
        )
        markdown += "\n".join(f"- {n}" for n in cal_notes)
        markdown += "\n\n**Correctness before timing** (ci.common.correctness.check_kernel):\n" + "\n".join(
            correctness_lines(aa.correctness)
        )
        excluded = excluded_rows(aa.results)
        if excluded:
            markdown += f"\n\n**Excluded rounds** ({len(excluded)}): not used.\n\n{markdown_table(excluded)}"
    print(markdown)
    append_step_summary_or_fallback(markdown, log)
    if options.json is not None:
        record.update(
            wall_s=round(time.time() - started, 1),
            noise_model={k: v for k, v in model.to_json().items() if k != "runs"},
            noise_runs=[r["source"] for r in model.runs],
            model_plan=model_plan.to_json(),
            planned_rounds={k: p.to_json() for k, p in planned.items()},
            cannot_decide=cannot,
            skipped=skipped,
            stopped=stopped,
            files_written=files,
        )
    if options.json is not None or model_refused is not None:
        kept = _write_rounds(options.json, record)
        if model_refused is not None:
            raise WriteError(f"{model_refused}; {_refit_hint(kept, model_path)}")
    return code


def _write_rounds(path: Path | None, record: dict[str, Any]) -> Path:
    """The record (every measured round) at ``path``, or where harness.report's fallback put it when ``path`` refused
    it (a full disk) or there is none; never lost (issue 49)."""
    data = json_text(record).encode("utf-8")
    target = path if path is not None else fallback_path("calibration.json", "calibration rounds")
    return write_or_fallback(target, data, "--json" if path is not None else "the calibration's rounds", log)


def _refit_hint(kept: Path, model_path: Path) -> str:
    return (
        f"the rounds are kept in {kept}: `python -m ci.speed.calibrate --refit --aa-records {kept} --noise "
        f"{model_path} --write` fits them"
    )


def _keep_interrupted(options: SpeedOptions, record: dict[str, Any], name: str, model_path: Path) -> int:
    """SIGINT/SIGTERM during the rounds: the complete rounds are written (--json, else a named file), no model is
    fitted or written, and the exit is 128 + the signal (130, 143)."""
    record.update(interrupted=name, exit_code=128 + int(signal.Signals[name]))
    kept = _write_rounds(options.json, record)
    rounds = len(record["rounds"])
    log(f"speed_gate: calibration interrupted by {name} after {rounds} round(s); {_refit_hint(kept, model_path)}")
    return 128 + int(signal.Signals[name])
