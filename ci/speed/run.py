"""What the speed gate's modes share: option checks, both surveys, the round loop.

ci.speed.gate is the command line; this module runs the rounds
(ci.speed.rounds) until every gated benchmark is decided and decides each one
(ci.speed.verdict); ci.speed.modes writes the outputs and holds --calibrate
and --replay.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from ci.common.commit_tree import REPO_ROOT
from ci.speed.exclusion import ExclusionRule
from ci.speed.rounds import Side, measure_round, rotating_order, survey_side
from ci.speed.selection import Entry, Selection
from ci.speed.thresholds import THRESHOLDS_PATH, Thresholds, load_thresholds
from ci.speed.verdict import CALIBRATION_PATH, BenchmarkResult, decide_entry, load_calibrations
from harness.paired.sequential import DEFAULT_PLAN, SequentialPlan


# ---------------------------------------------------------------------------
# options
# ---------------------------------------------------------------------------


class GateError(RuntimeError):
    """The gate cannot decide; the message says why (exit 2)."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def plan_from(args: argparse.Namespace, default: SequentialPlan = DEFAULT_PLAN) -> SequentialPlan:
    given = {k: getattr(args, k) for k in ("min_rounds", "max_rounds", "looks", "alpha") if getattr(args, k) is not None}
    if not given:
        return default
    base = {"min_rounds": DEFAULT_PLAN.min_rounds, "max_rounds": DEFAULT_PLAN.max_rounds, "looks": DEFAULT_PLAN.looks, "alpha": DEFAULT_PLAN.alpha}
    if "max_rounds" in given and "min_rounds" not in given:
        base["min_rounds"] = min(base["min_rounds"], given["max_rounds"])
    try:
        return SequentialPlan(**{**base, **given})
    except ValueError as exc:
        raise GateError(f"plan: {exc}") from None


def rule_from(args: argparse.Namespace, default: ExclusionRule | None = None) -> ExclusionRule:
    if args.clock_floor_mhz is None and not args.allow_throttle and default is not None:
        return default
    if args.clock_floor_mhz is not None and args.clock_floor_mhz < 0:
        raise GateError(f"--clock-floor-mhz must be >= 0 (got {args.clock_floor_mhz})")
    rule = default or ExclusionRule()
    if args.clock_floor_mhz is not None:
        rule = replace(rule, clock_floor_mhz=args.clock_floor_mhz)
    return replace(rule, slowdown_reasons=rule.slowdown_reasons - set(args.allow_throttle))


def timing_overrides(items: Sequence[str]) -> dict[str, Any]:
    """``FIELD=VALUE`` items as TimingBudget field overrides, checked here, before anything is measured."""
    if not items:
        return {}
    from harness.timing import TimingBudget  # imports torch: only when there is something to check

    defaults = TimingBudget()
    out: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not hasattr(defaults, name):
            raise GateError(f"--timing {item!r}: expected FIELD=VALUE with FIELD one of {sorted(vars(defaults))}")
        kind = type(getattr(defaults, name))
        try:
            out[name] = kind(text) if kind is float else int(text)
        except ValueError:
            raise GateError(f"--timing {item!r}: {name} must be a{'n integer' if kind is int else ' number'}") from None
    return out


def check_outputs(args: argparse.Namespace) -> None:
    """Fail before any measuring when --json or --plot cannot be written."""
    from harness.report import check_writable

    for flag, path in (("--json", args.json), ("--plot", args.plot)):
        if path:
            try:
                check_writable(path, flag)
            except OSError as exc:
                raise GateError(str(exc)) from None


# The PR workflow's GPU job has 120 minutes (.github/workflows/pr-checks.yml), correctness gates and set-up included:
# a gate that is still measuring then is killed with no verdict at all.
DEFAULT_MAX_MINUTES = 90.0


def deadline(args: argparse.Namespace, started: float) -> float | None:
    if args.max_minutes is not None and args.max_minutes < 0:
        raise GateError(f"--max-minutes must be >= 0 (got {args.max_minutes})")
    return started + 60.0 * args.max_minutes if args.max_minutes else None


def round_budget(args: argparse.Namespace, plan: SequentialPlan) -> int:
    """Rounds the gate may attempt: --rounds exactly, else --round-budget, else 1.5 x the plan's max rounds."""
    if args.rounds is not None:
        if args.rounds < 1:
            raise GateError(f"--rounds must be >= 1 (got {args.rounds})")
        return args.rounds
    if args.round_budget is not None:
        if args.round_budget < plan.min_rounds:
            raise GateError(f"--round-budget {args.round_budget} is below the first look ({plan.min_rounds} rounds)")
        return args.round_budget
    # Room for a third of the rounds to be excluded before the last look is out of reach.
    return -(-3 * plan.max_rounds // 2)


# ---------------------------------------------------------------------------
# measuring
# ---------------------------------------------------------------------------


def survey_both(sides: dict[str, Side | None], args: argparse.Namespace, check: bool = True) -> dict[str, dict[str, Any] | None]:
    """Both surveys at once (nothing is timed yet); a side without kernels/ surveys as None."""
    def one(side: Side | None) -> dict[str, Any] | None:
        if side is None:
            return None
        return survey_side(side, device=args.device, kernels=args.kernel, configs=args.config, shapes=args.shape, check=check, log=log)

    with ThreadPoolExecutor(max_workers=len(sides)) as pool:
        futures = {name: pool.submit(one, side) for name, side in sides.items()}
        surveys = {name: f.result() for name, f in futures.items()}
    devices = {s["device"] for s in surveys.values() if s is not None}
    if len(devices) > 1:
        raise GateError(f"the sides resolved different devices: {sorted(devices)}")
    return surveys


def run_rounds(
    sides: Sequence[Side],
    selection: Selection,
    *,
    device: str,
    plan: SequentialPlan,
    rule: ExclusionRule,
    thresholds: Thresholds,
    timing: dict[str, Any],
    limit: int,
    fixed: bool,
    calibrations: dict[str, Any] | None = None,
    deadline: float | None = None,
) -> tuple[list[dict[str, Any]], list[BenchmarkResult]]:
    """Rounds until every gated benchmark is decided (or all ``limit`` of them when ``fixed``); then decide each.

    No round starts after ``deadline`` (time.time()): what is undecided then is inconclusive.
    """
    rounds: list[dict[str, Any]] = []
    active = selection.gated
    names = [s.name for s in sides]
    out_of_time = False
    while active and len(rounds) < limit:
        if deadline is not None and time.time() >= deadline:
            out_of_time = True
            log(f"speed_gate: the time budget is spent after {len(rounds)} rounds; {len(active)} benchmark(s) undecided")
            break
        i = len(rounds)
        order = rotating_order(names, i)
        log(f"speed_gate: round {i + 1}/{limit} ({' '.join(order)}): {len(active)} benchmark(s)")
        record = measure_round(sides, order, active, device=device, round_index=i, budget=timing, log=log).to_json()
        for proc in record["processes"]:
            for bench_id, rec in proc["records"].items():
                if "error" in rec and not rec.get("busy"):
                    raise GateError(f"{bench_id} failed at {proc['side']} in round {i + 1}: {rec['error']}")
        rounds.append(record)
        still = []
        for bench in active:
            result = decide_entry(Entry(bench, "gated"), rounds, thresholds, plan, rule)
            d = result.decision
            est = d.estimate
            interval = f"[{est.low:.4f}, {est.high:.4f}]" if est.bounded else "[unbounded]"
            state = f"{d.verdict.value.upper()}" if d.complete else f"next look at {d.next_look} usable rounds"
            log(f"speed_gate:   {bench.id}: head/base {est.point:.4f} {interval}, {d.rounds_used} usable, "
                f"{d.rounds_excluded} excluded -> {state}")
            if fixed or not d.complete:
                still.append(bench)
        active = still
    ran_out = "time budget" if out_of_time else "fixed rounds" if fixed else "round budget"
    results = [decide_entry(e, rounds, thresholds, plan, rule, calibrations or {}, ran_out=ran_out) for e in selection.entries]
    return rounds, results


def thresholds_for(args: argparse.Namespace, head_tree: Path) -> Thresholds:
    """--thresholds, else the head's file (a threshold change is reviewed in the PR), else this checkout's."""
    if args.thresholds:
        return load_thresholds(args.thresholds)
    path = head_tree / THRESHOLDS_PATH
    if path.exists():
        return replace(load_thresholds(path), source=f"{THRESHOLDS_PATH} of the head")
    return replace(load_thresholds(REPO_ROOT / THRESHOLDS_PATH), source=f"{THRESHOLDS_PATH} of this checkout (the head has none)")


def calibrations_for(args: argparse.Namespace, head_tree: Path) -> dict[str, Any]:
    if args.calibration:
        return load_calibrations(args.calibration)
    path = head_tree / CALIBRATION_PATH
    return load_calibrations(path) if path.exists() else {}


