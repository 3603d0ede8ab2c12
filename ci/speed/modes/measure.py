"""The gate: the head against the merge-base of the head and --base, from one checked SpeedOptions.

Its phases: :func:`resolve_commits`, the identical code (ci.speed.scope.unchanged), :func:`measure`, :func:`report`.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ci.common import interrupts
from ci.common.commit_tree import REPO_ROOT, NotAKernelsTree, has_kernels
from ci.speed.decide.codes import Status
from ci.speed.decide.exclusion import ExclusionRule
from ci.speed.decide.generations import RunNoise
from ci.speed.decide.noise_file import ModelChoice, identity_check, load_noise_model
from ci.speed.decide.selection import Entry, Selection, check_selectors, select
from ci.speed.decide.thresholds import Thresholds
from ci.speed.decide.verdict import BenchmarkResult
from ci.speed.engine.rounds import Side, cost_summary
from ci.speed.engine.warm_engine import GATE_RESTART_EVERY
from ci.speed.modes.shared import (
    BASE_UNMEASURABLE,
    GateError,
    RoundsInterrupted,
    calibrations_for,
    engine_options,
    log,
    memory_check,
    noise_record,
    open_measurer,
    run_rounds,
    survey_both,
    thresholds_for,
)
from ci.speed.options import SpeedOptions
from ci.speed.profiles import RunnerProfile, runner_profile
from ci.speed.report.write import Context, finish
from ci.speed.scope import dependencies, unchanged
from harness.paired.sequential import SequentialPlan


@dataclass(frozen=True)
class Commits:
    """The comparison, resolved once: the repository (a git.Repo), both commits and what the log calls the head."""

    repo: Any
    head: str
    base: str
    base_ref: str | None
    label: str


@dataclass
class Measured:
    """What the measuring hands the report; nothing measured: no rounds, no environment, no noise model."""

    selection: Selection
    plan: SequentialPlan
    device: str
    results: list[BenchmarkResult]
    rounds: list[dict[str, Any]]
    environment: dict[str, Any]
    choice: ModelChoice
    thresholds: Thresholds
    view: RunNoise | None = None
    profile: RunnerProfile | None = None  # the runner's (ci.speed.profiles); None: nothing measured, no GPU named
    restart_every: int | None = None  # the cadence the rounds ran at (None: nothing measured)
    interrupted: str | None = None  # the signal that ended the rounds (their complete ones are the results')


@dataclass(frozen=True)
class Rules:
    """How this run decides, resolved once (the plan waits for the noise model, the thresholds for the runner's
    profile, known once its GPU is: :class:`Measured`): the options and the head's files."""

    rule: ExclusionRule
    limit: int
    thresholds: Thresholds | None  # --thresholds; None: the runner's, from its profile
    calibrations: Mapping[str, Any]


def run_gate(options: SpeedOptions) -> int:
    from ci.common import gitutil

    started = time.time()
    commits = resolve_commits(options.repo, options.head, options.base, options.working_tree)
    with ExitStack() as stack:
        head_tree = (
            Path(commits.repo.working_tree_dir or options.repo)
            if options.working_tree
            else stack.enter_context(gitutil.checkout(commits.repo, commits.head))
        )
        base_tree = stack.enter_context(gitutil.checkout(commits.repo, commits.base))
        if not has_kernels(head_tree):
            raise NotAKernelsTree(f"the head {commits.label} has no kernels/ package")
        rules = Rules(
            options.exclusion_rule(),
            options.round_limit(),
            options.thresholds,
            calibrations_for(options.calibrations, head_tree),
        )
        sides = {"head": Side("head", head_tree), "base": Side("base", base_tree) if has_kernels(base_tree) else None}
        # Before any child that touches the GPU: which (kernel, config)s have identical code at base and head.
        decision = unchanged.code_decision(
            options, commits.base, commits.head, base_tree if sides["base"] else None, head_tree
        )
        skipped = unchanged.unchanged_entries(decision, options.selector)
        pairs = unchanged.measured_pairs(decision, options.selector)
        # A survey narrowed to the changed pairs does not see kernels gone at head: the fingerprints list them.
        removed = unchanged.removed_entries(decision, options.selector) if skipped else []
        others = skipped + removed
        if skipped and pairs == []:  # nothing selected differs: no survey, no round, no GPU
            check_selectors(
                {"head": {"registered": decision.data.get("registered", []), "unknown_shapes": []}}, options.selector
            )
            log(
                f"speed_gate: all {len(skipped)} selected benchmark(s) have identical code at base and head: "
                "nothing to measure"
            )
            results = [BenchmarkResult(e.benchmark, e.status, e.note) for e in others]  # none is gated
            device = "cpu" if decision.arch == "cpu" else "cuda"
            thresholds = thresholds_for(options.thresholds, head_tree, runner_profile(None).thresholds)
            measured = Measured(
                Selection(others, []), options.the_plan(), device, results, [], {}, ModelChoice(None), thresholds
            )
        else:
            measured = measure(options, rules, sides, pairs if skipped else None, others, head_tree, started)
    context = report(options, rules, commits, decision, measured, skipped, removed, pairs if skipped else None, started)
    return finish(
        context,
        measured.results,
        measured.selection.correctness,
        measured.rounds,
        fail_on_inconclusive=options.fail_on_inconclusive,
        json_path=options.json,
        plot_path=options.plot,
        command=options.command,
        interrupted=measured.interrupted,
    )


def resolve_commits(path: Path, head: str, base_ref: str | None, working_tree: bool) -> Commits:
    """The head (or the working tree) and the merge-base of it and ``base_ref``; a warning for uncommitted files."""
    from ci.common import gitutil

    repo = gitutil.open_repo(path)
    head_sha = gitutil.resolve_commit(repo, "HEAD" if working_tree else head, None if working_tree else "--head")
    # An explicit base that names nothing: resolve_base's one line naming --base and what to try (ci.speed.changes'
    # words: tests/test_fronts_agree.py).
    base = gitutil.resolve_base(repo, head_sha, base_ref, head_may_be_base=working_tree)
    if base.sha is None:
        raise GateError(f"nothing to compare the head with: {base.note.split(';')[0]}")
    label = "working tree" if working_tree else f"{head} ({head_sha[:12]})"
    log(f"speed_gate: head {label}; base {base.sha[:12]} (merge-base of the head and {base.ref})")
    dirty = [] if working_tree else gitutil.uncommitted_files(repo)
    if dirty:
        shown = ", ".join(dirty[:5]) + (f" and {len(dirty) - 5} more" if len(dirty) > 5 else "")
        log(
            f"speed_gate: WARNING: {len(dirty)} uncommitted file(s) NOT measured (this run measures the committed "
            f"head {head_sha[:12]}; add --working-tree to measure them): {shown}"
        )
    return Commits(repo, head_sha, base.sha, base.ref, label)


def measure(
    options: SpeedOptions,
    rules: Rules,
    sides: dict[str, Side | None],
    pairs: list[tuple[str, str]] | None,
    others: list[Entry],
    head_tree: Path,
    started: float,
) -> Measured:
    """The warm workers survey ``pairs`` (None: every selected one) and measure each gated benchmark to its verdict
    (or the budget's end); ``others`` were decided without them."""
    stop_at = options.deadline(started)
    present = [side for side in (sides["base"], sides["head"]) if side is not None]
    with open_measurer(present, options, stop_at) as measurer:
        surveys = survey_both(sides, options.selector, measurer, pairs=pairs)
        base_note = "" if sides["base"] else "the base has no kernels/ package"
        if surveys["base"] is not None and BASE_UNMEASURABLE in surveys["base"]:  # a broken base: all new
            base_note, surveys["base"], sides["base"] = surveys["base"][BASE_UNMEASURABLE], None, None
        check_selectors(surveys, options.selector)
        head = surveys["head"]
        assert head is not None  # a head without kernels/ stopped above; one that cannot survey raises
        selection = select(head, surveys["base"], base_note, others=others)
        # A benchmark both sides' workers cannot hold on the device is n/a here, said so, never started: out of memory
        # mid-run it would cost its whole device (issue 46: an 80 GB card and the 70B gate_up shape in torch_dequant).
        memory_check(selection, surveys, list(measurer.devices))
        profile = runner_profile(head["environment"].get("gpu"))
        thresholds = thresholds_for(rules.thresholds, head_tree, profile.thresholds)
        choice = noise_model_for(options.use_noise, options.noise, head_tree, head["environment"], profile)
        for note in choice.notes:
            log(f"speed_gate: {note}")
        plan = options.plan_for(len(selection.gated), model=choice.model is not None)
        if "restart_every" not in options.plan_given:  # set once the surveys are done: their workers measure first
            measurer.restart_every = GATE_RESTART_EVERY
        both = [s for s in (sides["base"], sides["head"]) if s is not None] if sides["base"] else []
        interrupted = None
        try:
            rounds, results, view = run_rounds(
                both,
                selection,
                measurer,
                plan=plan,
                rule=rules.rule,
                thresholds=thresholds,
                limit=rules.limit,
                fixed=options.rounds is not None,
                calibrations=rules.calibrations,
                deadline=stop_at,
                stop_when_failed=not options.all_verdicts,
                model=choice.model,
            )
        except RoundsInterrupted as stop:  # the complete rounds are decided and recorded; the exit is 130/143
            rounds, results, view = stop.rounds, stop.results, stop.view
            interrupted = signal.Signals(stop.signum).name
        # The rounds are over: what is left (the workers' exit, the report, the record) takes seconds, and a signal
        # now would only lose the record (an H100 lease's timeout landed while the workers were ending).
        interrupts.ignore()
    return Measured(
        selection,
        plan,
        head["device"],
        results,
        rounds,
        head["environment"],
        choice,
        thresholds,
        view,
        profile,
        measurer.restart_every,
        interrupted,
    )


def report(
    options: SpeedOptions,
    rules: Rules,
    commits: Commits,
    decision: unchanged.CodeDecision,
    measured: Measured,
    skipped: list[Entry],
    removed: list[Entry],
    narrowed_to: list[tuple[str, str]] | None,
    started: float,
) -> Context:
    """What the record and the summary say besides the results: the code decision, the costs, how it was decided."""
    head_sha = None if options.working_tree else commits.head  # the working tree's pins are read from its files
    dependency_changes = dependencies.dependency_changes(commits.repo, commits.base, head_sha)
    costs = unchanged.cost_record(decision, skipped, measured.rounds, removed)
    return Context(
        mode="gate",
        plan=measured.plan,
        rule=rules.rule,
        thresholds=measured.thresholds,
        timing=options.timing_overrides,
        round_limit=rules.limit,
        base={"ref": commits.base_ref, "sha": commits.base},
        head={"ref": options.head, "sha": commits.head, "working_tree": options.working_tree},
        environment=measured.environment,
        device=measured.device,
        wall_s=time.time() - started,
        calibrations=dict(rules.calibrations),
        extra={
            **costs,
            "dependency_changes": dependency_changes,
            "engine": engine_options(measured.restart_every or options.restart_every, options.gpus),
            "cost": cost_summary(measured.rounds),
            **noise_record(measured.choice, measured.view, [b.id for b in measured.selection.gated]),
            **runner_record(measured.profile, measured.choice, measured.thresholds.source),
        },
        preface=unchanged.preface_lines(decision, narrowed_to, costs, dependency_changes),
        changes={
            r.id: decision.why_measured(r.benchmark.kernel, r.benchmark.config)
            for r in measured.results
            if r.status is not Status.UNCHANGED_IDENTICAL
        },
    )


def noise_model_for(
    use: bool, given: Path | None, head_tree: Path, environment: Mapping[str, Any], profile: RunnerProfile | None = None
) -> ModelChoice:
    """The noise model this run decides with: --noise, else the runner's (its profile's path: ci.speed.profiles) in the
    head, else in this checkout; None with why not."""
    if not use:
        return ModelChoice(None, ["--plan noise=off: each benchmark's own rounds decide (the plan before issue 29)"])
    profile = profile or runner_profile(environment.get("gpu"))
    name = profile.noise
    if given is not None:
        path, where = given, str(given)
    elif (head_tree / name).exists():
        path, where = head_tree / name, f"{name} of the head"
    elif (REPO_ROOT / name).exists():
        path, where = REPO_ROOT / name, f"{name} of this checkout (the head has none)"
    elif not profile.known:
        return ModelChoice(
            None, [f"unknown runner {profile.gpu}: no noise model ({name}): each benchmark's own rounds decide"]
        )
    else:
        return ModelChoice(
            None, [f"no noise model for this runner ({profile.name}: {name}): each benchmark's own rounds decide"]
        )
    model = replace(load_noise_model(path), source=where)
    usable, notes = identity_check(model, environment)
    return ModelChoice(model if usable else None, notes)


def runner_record(
    profile: RunnerProfile | None, choice: ModelChoice, thresholds_source: str | None = None
) -> dict[str, Any]:
    """The record's "runner_profile": which runner this was and where its files are; for a runner no profile names,
    the summary's ``first_line`` (ci.speed.report.write puts it first; ci.notify may too), naming the model and the
    thresholds that decided."""
    if profile is None:
        return {}
    has_model = choice.model is not None
    first_line = profile.first_line(choice.model.source if choice.model is not None else None, thresholds_source)
    return {"runner_profile": {**profile.to_json(), "has_model": has_model, "first_line": first_line}}
