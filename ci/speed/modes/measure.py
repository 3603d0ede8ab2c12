"""The gate: the head against the merge-base of the head and --base, from one checked SpeedOptions.

Identical code is decided first (ci.speed.scope.unchanged), then the warm workers survey and measure
(ci.speed.modes.shared) and ci.speed.report.write writes what they found.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from ci.common.commit_tree import NotAKernelsTree, has_kernels
from ci.speed.decide.codes import Status
from ci.speed.decide.noise_file import ModelChoice
from ci.speed.decide.selection import Selection, check_selectors, select
from ci.speed.decide.verdict import BenchmarkResult, decide_entry
from ci.speed.engine.rounds import Side, cost_summary
from ci.speed.modes.shared import (
    BASE_UNMEASURABLE,
    GateError,
    calibrations_for,
    deadline,
    engine_options,
    log,
    noise_model_for,
    noise_record,
    open_measurer,
    run_rounds,
    survey_both,
    thresholds_for,
)
from ci.speed.options import SpeedOptions
from ci.speed.report.write import Context, finish
from ci.speed.scope import dependencies, unchanged


def run_gate(options: SpeedOptions) -> int:
    from ci.common import gitutil

    plan, rule = options.the_plan(), options.exclusion_rule()
    timing, limit = options.timing_overrides, options.round_limit()
    started = time.time()
    stop_at = deadline(options, started)
    repo = gitutil.open_repo(options.repo)
    head_sha = gitutil.resolve_commit(repo, "HEAD" if options.working_tree else options.head)
    if options.base is not None:
        gitutil.resolve_commit(repo, options.base)  # an explicit base that names nothing: one clear line, exit 2
    base = gitutil.resolve_base(repo, head_sha, options.base, head_may_be_base=options.working_tree)
    if base.sha is None:
        raise GateError(f"nothing to compare the head with: {base.note.split(';')[0]}")
    head_label = "working tree" if options.working_tree else f"{options.head} ({head_sha[:12]})"
    log(f"speed_gate: head {head_label}; base {base.sha[:12]} (merge-base of the head and {base.ref})")
    dirty = [] if options.working_tree else gitutil.uncommitted_files(repo)
    if dirty:
        shown = ", ".join(dirty[:5]) + (f" and {len(dirty) - 5} more" if len(dirty) > 5 else "")
        log(
            f"speed_gate: WARNING: {len(dirty)} uncommitted file(s) NOT measured (this run measures the committed "
            f"head {head_sha[:12]}; add --working-tree to measure them): {shown}"
        )
    with ExitStack() as stack:
        head_tree = (
            Path(repo.working_tree_dir or options.repo)
            if options.working_tree
            else stack.enter_context(gitutil.checkout(repo, head_sha))
        )
        base_tree = stack.enter_context(gitutil.checkout(repo, base.sha))
        if not has_kernels(head_tree):
            raise NotAKernelsTree(f"the head {head_label} has no kernels/ package")
        thresholds, calibrations = thresholds_for(options, head_tree), calibrations_for(options, head_tree)
        sides = {"head": Side("head", head_tree), "base": Side("base", base_tree) if has_kernels(base_tree) else None}
        # Before any child that touches the GPU: which (kernel, config)s have identical code at base and head.
        decision = unchanged.code_decision(
            options, base.sha, head_sha, base_tree if sides["base"] else None, head_tree, log
        )
        skipped = unchanged.unchanged_entries(decision, options.kernels, options.configs, options.shapes)
        pairs = unchanged.measured_pairs(decision, options.kernels, options.configs)
        # A survey narrowed to the changed pairs does not see kernels gone at head: the fingerprints list them.
        removed = (
            unchanged.removed_entries(decision, options.kernels, options.configs, options.shapes) if skipped else []
        )
        rounds: list[dict[str, Any]]
        if skipped and pairs == []:  # nothing selected differs: no survey, no round, no GPU
            check_selectors(
                {"head": {"registered": decision.data.get("registered", []), "unknown_shapes": []}},
                options.kernels,
                options.configs,
            )
            selection, rounds, environment = Selection(skipped + removed, []), [], {}
            choice, view = ModelChoice(None), None
            device = "cpu" if decision.arch == "cpu" else "cuda"
            results = [decide_entry(e, rounds, thresholds, plan, rule) for e in selection.entries]
            log(
                f"speed_gate: all {len(skipped)} selected benchmark(s) have identical code at base and head: "
                "nothing to measure"
            )
        else:
            # The warm engine's workers answer the surveys and then measure: one start per side.
            present = [side for side in (sides["base"], sides["head"]) if side is not None]
            measurer = stack.enter_context(open_measurer(present, options, stop_at))
            surveys = survey_both(sides, options, measurer, pairs=pairs if skipped else None)
            base_note = "" if sides["base"] else "the base has no kernels/ package"
            if surveys["base"] is not None and BASE_UNMEASURABLE in surveys["base"]:  # a broken base: all new
                base_note, surveys["base"], sides["base"] = surveys["base"][BASE_UNMEASURABLE], None, None
            check_selectors(surveys, options.kernels, options.configs)
            head = surveys["head"]
            assert head is not None  # a head without kernels/ stopped above; one that cannot survey raises
            selection = select(head, surveys["base"], base_note, others=skipped + removed)
            device, environment = head["device"], head["environment"]
            choice = noise_model_for(options, head_tree, environment)
            for note in choice.notes:
                log(f"speed_gate: {note}")
            plan = options.plan_for(len(selection.gated), model=choice.model is not None)
            both = [s for s in (sides["base"], sides["head"]) if s is not None] if sides["base"] else []
            rounds, results, view = run_rounds(
                both,
                selection,
                measurer,
                plan=plan,
                rule=rule,
                thresholds=thresholds,
                limit=limit,
                fixed=options.rounds is not None,
                calibrations=calibrations,
                deadline=stop_at,
                stop_when_failed=not options.all_verdicts,
                model=choice.model,
            )
    costs = unchanged.cost_record(decision, skipped, rounds, removed)
    dependency_changes = dependencies.dependency_changes(repo, base.sha, None if options.working_tree else head_sha)
    context = Context(
        mode="gate",
        plan=plan,
        rule=rule,
        thresholds=thresholds,
        timing=timing,
        round_limit=limit,
        base={"ref": base.ref, "sha": base.sha},
        head={"ref": options.head, "sha": head_sha, "working_tree": options.working_tree},
        environment=environment,
        device=device,
        wall_s=time.time() - started,
        calibrations=dict(calibrations),
        extra={
            **costs,
            "dependency_changes": dependency_changes,
            "engine": engine_options(options),
            "cost": cost_summary(rounds),
            **noise_record(choice, view, [b.id for b in selection.gated]),
        },
        preface=unchanged.preface_lines(decision, pairs if skipped else None, costs, dependency_changes),
        changes={
            r.id: decision.why_measured(r.benchmark.kernel, r.benchmark.config)
            for r in results
            if r.status is not Status.UNCHANGED_IDENTICAL
        },
    )
    return _finish(options, context, results, selection.correctness, rounds)


def _finish(options: SpeedOptions, context: Context, results: Sequence[BenchmarkResult], correctness, rounds) -> int:
    return finish(
        context,
        results,
        correctness,
        rounds,
        fail_on_inconclusive=options.fail_on_inconclusive,
        json_path=options.json,
        plot_path=options.plot,
        command=options.command,
    )
