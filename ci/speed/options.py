"""The options of ``python -m ci.speed`` and ``python -m ci.speed.experiment``, checked whole before any work.

Each command's front (ci.speed.gate, ci.speed.experiment) parses ``argv`` and
hands the parsed values, as a mapping (``vars(namespace)``), to
:func:`speed_options` or :func:`experiment_options`. They return one frozen
object, or raise ci.common.options.OptionsError naming the option: the front
prints that one line and exits 2 before any git worktree or measurement. Nothing
below the fronts sees ``argv`` or a parser; it takes these objects.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping, Sequence

from ci.common.options import OptionsError, minutes_value, output_value, positive_int_value, timing_value
from ci.speed.exclusion import ExclusionRule
from ci.speed.thresholds import Thresholds, ThresholdsError, load_thresholds
from harness.gpu_state import SLOWDOWN_REASONS
from harness.paired import DEFAULT_PLAN, SequentialPlan
from harness.paired.sequential import WARM_PLAN

# The PR workflow's GPU job has 120 minutes (.github/workflows/pr-checks.yml), correctness gates and set-up included:
# a gate that is still measuring then is killed with no verdict at all.
DEFAULT_MAX_MINUTES = 90.0
CALIBRATION_MIN_ROUNDS = 3  # harness.paired.calibrate needs an SD over at least this many rounds
# Options that choose what is measured and how: a --replay measures nothing, so it refuses them.
MEASURING_ONLY = {"base": "--base", "head": "--head", "working_tree": "--working-tree", "kernel": "--kernel",
                  "config": "--config", "shape": "--shape", "device": "--device", "timing": "--timing",
                  "rounds": "--rounds", "round_budget": "--round-budget", "engine": "--engine",
                  "restart_every": "--restart-every", "gpus": "--gpus", "arch": "--arch", "changes": "--changes",
                  "measure_identical": "--measure-identical"}
# Options of the gate's change-aware selection only (ci.speed.unchanged): an A/A calibration compares nothing.
GATE_ONLY = {"changes": "--changes", "measure_identical": "--measure-identical"}


class Mode(enum.Enum):
    GATE = "gate"  # head against the merge-base
    CALIBRATE = "calibrate"  # A/A: the head against itself
    REPLAY = "replay"  # decide again from a recorded JSON


@dataclass(frozen=True)
class SpeedOptions:
    """Everything ``python -m ci.speed`` was asked, checked; defaults that depend on a tree or record are None."""

    mode: Mode
    repo: Path = Path(".")
    base: str | None = None  # None: origin/main, else main
    head: str = "HEAD"
    working_tree: bool = False
    kernels: tuple[str, ...] = ()
    configs: tuple[str, ...] = ()
    shapes: tuple[str, ...] = ()
    device: str = "auto"
    arch: str = "auto"  # the fingerprints' arch (ci.speed.arch)
    changes: Path | None = None  # a ci.speed.changes JSON to decide by, instead of computing the fingerprints
    changes_data: Mapping[str, Any] | None = None  # its content, read and checked
    measure_identical: bool = False  # measure benchmarks with identical code too
    thresholds: Thresholds | None = None  # None: the head's file (or the record's, in a replay)
    calibrations: Mapping[str, Any] | None = None  # None: the head's calibration file if any (or the record's)
    plan: SequentialPlan | None = None  # None: harness.paired.DEFAULT_PLAN (or the record's)
    clock_floor_mhz: float | None = None  # None: the rule's default fraction of the max SM clock
    allow_throttle: frozenset[str] = frozenset()
    rounds: int | None = None  # exactly this many rounds, no early stop
    round_budget: int | None = None
    max_minutes: float | None = DEFAULT_MAX_MINUTES  # None: no limit
    fail_on_inconclusive: bool = False
    all_verdicts: bool = False  # measure on after the PR has failed, until every benchmark has its verdict
    timing: tuple[tuple[str, Any], ...] = ()  # harness.timing.TimingBudget overrides
    pr_alpha: float = 0.01  # the chance that an unchanged head fails anywhere in the PR (split over the gated benchmarks)
    plan_alpha_given: bool = False  # --alpha given: a per-benchmark alpha, used as it is
    engine: str = "warm"  # "warm": long-lived workers (ci.speed.warm); "fresh": a fresh process per side and round
    restart_every: int = 4  # warm workers are replaced every this many rounds (between-process variation is sampled)
    gpus: tuple[int, ...] | None = None  # devices to spread benchmarks over; None: every visible GPU
    replay: Path | None = None
    sides: tuple[str, str] = ("base", "head")
    decisions: int | None = None
    resampled: bool = False
    seed: int = 0
    json: Path | None = None
    plot: Path | None = None
    traceback: bool = False
    command: tuple[str, ...] = ()  # the arguments as given, for the record

    @property
    def timing_overrides(self) -> dict[str, Any]:
        return dict(self.timing)

    def the_plan(self, recorded: SequentialPlan | None = None) -> SequentialPlan:
        """--min-rounds/--max-rounds/--looks/--alpha/--miss-alpha as given, else the recorded plan (a replay), else the engine's default."""
        if self.plan is not None:
            return self.plan
        if recorded is not None:
            return recorded
        return WARM_PLAN if self.engine == "warm" else DEFAULT_PLAN

    def plan_for(self, gated: int) -> SequentialPlan:
        """The plan for a run gating ``gated`` benchmarks: the per-PR alpha shared among them (Bonferroni).

        With --alpha (a per-benchmark alpha) or a signed-rank plan (whose first look needs more rounds as
        alpha falls) the plan is used as it is; the summary then states the per-PR bound, ``gated x alpha``.
        Only the false-alarm alpha is shared: the miss alpha bounds one benchmark's missed regression and
        stays per benchmark (raised to the alpha where below it: SequentialPlan.with_alpha).
        """
        plan = self.the_plan()
        if self.plan_alpha_given or plan.method != "t" or gated < 1:
            return plan
        return plan.with_alpha(self.pr_alpha / gated)

    def exclusion_rule(self, recorded: ExclusionRule | None = None) -> ExclusionRule:
        """The rule asked for: the recorded one (or the default) with --clock-floor-mhz and --allow-throttle applied."""
        rule = recorded or ExclusionRule()
        if self.clock_floor_mhz is not None:
            rule = replace(rule, clock_floor_mhz=self.clock_floor_mhz)
        return replace(rule, slowdown_reasons=rule.slowdown_reasons - self.allow_throttle) if self.allow_throttle else rule

    def round_limit(self) -> int:
        """Rounds the gate may attempt: --rounds exactly, else --round-budget, else 1.5 x the plan's max rounds."""
        if self.rounds is not None:
            return self.rounds
        if self.round_budget is not None:
            return self.round_budget
        # Room for a third of the rounds to be excluded before the last look is out of reach.
        return -(-3 * self.the_plan().max_rounds // 2)


def speed_options(given: Mapping[str, Any], command: Sequence[str] = ()) -> SpeedOptions:
    """Check every option of ``python -m ci.speed`` (the parsed values by dest) and return them as one object."""
    if given["replay"] and given["calibrate"]:
        raise OptionsError("--replay and --calibrate: choose one")
    mode = Mode.REPLAY if given["replay"] else Mode.CALIBRATE if given["calibrate"] else Mode.GATE
    _check_mode(given, mode)
    plan = _plan(given)
    rounds = positive_int_value(given["rounds"], "--rounds")
    if mode is Mode.CALIBRATE and rounds is not None and rounds < CALIBRATION_MIN_ROUNDS:
        raise OptionsError(f"--calibrate needs --rounds >= {CALIBRATION_MIN_ROUNDS} (got --rounds {rounds})")
    round_budget = positive_int_value(given["round_budget"], "--round-budget")
    first_look = (plan or (DEFAULT_PLAN if given.get("engine") == "fresh" else WARM_PLAN)).min_rounds
    if round_budget is not None and round_budget < first_look:
        raise OptionsError(f"--round-budget {round_budget} is below the first look ({first_look} rounds)")
    return SpeedOptions(
        mode=mode,
        repo=Path(given["repo"]),
        base=given["base"],
        head=given["head"] or "HEAD",
        working_tree=given["working_tree"],
        kernels=tuple(given["kernel"]),
        configs=tuple(given["config"]),
        shapes=tuple(given["shape"]),
        device=given["device"] or "auto",
        arch=given["arch"] or "auto",
        changes=Path(given["changes"]) if given["changes"] else None,
        changes_data=_changes(given["changes"]),
        measure_identical=bool(given["measure_identical"]),
        thresholds=_thresholds(given["thresholds"]),
        calibrations=_calibrations(given["calibration"]),
        plan=plan,
        clock_floor_mhz=_clock_floor(given["clock_floor_mhz"]),
        allow_throttle=allowed_throttle(given["allow_throttle"]),
        rounds=rounds,
        round_budget=round_budget,
        max_minutes=minutes_value(given["max_minutes"]),
        fail_on_inconclusive=given["fail_on_inconclusive"],
        all_verdicts=bool(given.get("all_verdicts")),
        timing=tuple(timing_value(given["timing"]).items()),
        engine=given.get("engine") or "warm",
        pr_alpha=_pr_alpha(given.get("pr_alpha")),
        plan_alpha_given=given.get("alpha") is not None,
        restart_every=positive_int_value(given.get("restart_every"), "--restart-every") or 4,
        gpus=_gpus(given.get("gpus")),
        replay=_replay_file(given["replay"]),
        sides=_sides(given["sides"]),
        decisions=positive_int_value(given["decisions"], "--decisions"),
        resampled=bool(given["resampled"]),
        seed=given["seed"] or 0,
        json=output_value(given["json"], "--json"),
        plot=output_value(given["plot"], "--plot"),
        traceback=given["traceback"],
        command=tuple(command),
    )


def _pr_alpha(value: float | None) -> float:
    return 0.01 if value is None else _probability(value, "--pr-alpha")


def _probability(value: float | None, flag: str) -> float | None:
    """An error probability as given: None (not given) or a number in (0, 1)."""
    if value is not None and not (math.isfinite(value) and 0 < value < 1):
        raise OptionsError(f"{flag} must be a number in (0, 1) (got {value})")
    return value


def _gpus(text: str | None) -> tuple[int, ...] | None:
    """``--gpus``: "all" (None: every visible GPU), a count ``N`` (the first N) or a list ``0,2,3``."""
    if text is None or text.strip() == "all":
        return None
    items = [t.strip() for t in text.split(",")]
    if not all(t.isdigit() for t in items):
        raise OptionsError(f"--gpus {text!r}: expected 'all', a count N, or device indices like 0,1")
    if len(items) == 1:
        count = int(items[0])
        if count < 1:
            raise OptionsError(f"--gpus {text!r}: the count must be >= 1")
        return tuple(range(count))
    indices = tuple(int(t) for t in items)
    if len(set(indices)) != len(indices):
        raise OptionsError(f"--gpus {text!r}: a device is named twice")
    return indices


def _check_mode(given: Mapping[str, Any], mode: Mode) -> None:
    """Options that do nothing in the mode asked for are refused, not silently ignored."""
    if mode is not Mode.REPLAY:
        for dest, flag in (("sides", "--sides"), ("decisions", "--decisions")):
            if given[dest] is not None:
                raise OptionsError(f"{flag} only applies to --replay")
    else:
        for dest, flag in MEASURING_ONLY.items():
            if given[dest] not in (None, False, []):
                raise OptionsError(f"{flag} does not apply to --replay (nothing is measured; the record says what was)")
    if given["resampled"] is not None and given["decisions"] is None:
        raise OptionsError("--disjoint and --resampled only apply to --replay --decisions")
    if given["seed"] is not None and not given["resampled"]:
        raise OptionsError("--seed only applies to --resampled")
    if mode is Mode.CALIBRATE:
        for dest, flag in GATE_ONLY.items():
            if given[dest] not in (None, False):
                raise OptionsError(f"{flag} does not apply to --calibrate (the head is measured against itself)")
    if mode is Mode.CALIBRATE and given["base"] is not None:
        raise OptionsError("--base does not apply to --calibrate (the head is measured against itself)")
    if given["working_tree"] and given["head"] is not None:
        raise OptionsError("--head and --working-tree: choose one (the working tree is the head)")


def _plan(given: Mapping[str, Any]) -> SequentialPlan | None:
    """The plan asked for, completed by harness.paired.DEFAULT_PLAN's values; None when no part of it was given."""
    names = ("min_rounds", "max_rounds", "looks", "alpha", "miss_alpha")
    chosen = {k: given.get(k) for k in names if given.get(k) is not None}
    if not chosen:
        return None
    for k in ("alpha", "miss_alpha"):
        _probability(chosen.get(k), "--" + k.replace("_", "-"))
    for k in ("min_rounds", "max_rounds", "looks"):
        positive_int_value(chosen.get(k), "--" + k.replace("_", "-"))
    default = DEFAULT_PLAN if given.get("engine") == "fresh" or given.get("replay") else WARM_PLAN
    start = {"min_rounds": default.min_rounds, "max_rounds": default.max_rounds, "looks": default.looks,
             "alpha": default.alpha, "method": default.method, "alpha_per_tail": default.alpha_per_tail,
             "futility": default.futility, "miss_alpha": default.miss_alpha}
    if "looks" in chosen or "min_rounds" in chosen or "max_rounds" in chosen:
        start["looks"] = chosen.get("looks", 3 if isinstance(default.looks, tuple) else default.looks)
    if "max_rounds" in chosen and "min_rounds" not in chosen:
        start["min_rounds"] = min(start["min_rounds"], chosen["max_rounds"])
    if "alpha" in chosen and "miss_alpha" not in chosen and start["miss_alpha"] is not None:
        # --alpha above the default miss alpha takes it along; --miss-alpha below --alpha, both given, is refused.
        start["miss_alpha"] = max(start["miss_alpha"], chosen["alpha"])
    try:
        return SequentialPlan(**{**start, **chosen})
    except ValueError as exc:
        raise OptionsError(f"plan: {exc}") from None


def _clock_floor(mhz: float | None) -> float | None:
    if mhz is not None and not (math.isfinite(mhz) and mhz >= 0):
        raise OptionsError(f"--clock-floor-mhz must be a finite number >= 0 (got {mhz})")
    return mhz


def allowed_throttle(names: Sequence[str]) -> frozenset[str]:
    """--allow-throttle names: each must be a slowdown reason a round can be excluded for."""
    for name in names:
        if name not in SLOWDOWN_REASONS:
            raise OptionsError(f"--allow-throttle {name!r}: not a slowdown reason; known: {', '.join(sorted(SLOWDOWN_REASONS))}")
    return frozenset(names)


def _thresholds(path: str | None) -> Thresholds | None:
    if not path:
        return None
    try:
        return load_thresholds(path)
    except ThresholdsError as exc:
        raise OptionsError(f"--thresholds {exc}") from None


def _calibrations(path: str | None) -> Mapping[str, Any] | None:
    if not path:
        return None
    from ci.speed.verdict import RecordError, load_calibrations  # the statistics: only when there is a file to read

    try:
        return MappingProxyType(load_calibrations(path))
    except RecordError as exc:
        raise OptionsError(f"--calibration {exc}") from None


def _changes(path: str | None) -> Mapping[str, Any] | None:
    if not path:
        return None
    from ci.speed.unchanged import ChangesFileError, load_changes

    try:
        return MappingProxyType(load_changes(Path(path)))
    except ChangesFileError as exc:
        raise OptionsError(str(exc)) from None


def _replay_file(path: str | None) -> Path | None:
    if not path:
        return None
    if not Path(path).is_file():
        raise OptionsError(f"--replay {path}: no such file")
    return Path(path)


def _sides(text: str | None) -> tuple[str, str]:
    if text is None:
        return ("base", "head")
    names = tuple(text.split(","))
    if len(names) != 2 or not all(names) or names[0] == names[1]:
        raise OptionsError(f"--sides {text!r}: expected two different recorded side names, as BASE,HEAD")
    return names  # type: ignore[return-value]


# ---------------------------------------------------------------------------
# python -m ci.speed.experiment
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ExperimentOptions:
    sides: tuple[tuple[str, str], ...]  # (name, git ref), at least two, names distinct
    kernels: tuple[str, ...]
    shapes: tuple[str, ...]
    seconds: float  # start no round after this many seconds
    json: Path
    repo: Path = Path(".")
    configs: tuple[str, ...] = ()
    device: str = "cuda"
    rounds: int = 10_000
    timing: tuple[tuple[str, Any], ...] = ()

    @property
    def timing_overrides(self) -> dict[str, Any]:
        return dict(self.timing)


def experiment_options(given: Mapping[str, Any]) -> ExperimentOptions:
    """Check every option of ``python -m ci.speed.experiment`` and return them as one object."""
    sides = []
    for text in given["side"]:
        name, sep, ref = text.partition("=")
        if not sep or not name or not ref:
            raise OptionsError(f"--side {text!r}: expected NAME=REF")
        sides.append((name, ref))
    names = [n for n, _ in sides]
    if len(sides) < 2 or len(set(names)) != len(names):
        raise OptionsError(f"--side: need at least two, with distinct names (got {names})")
    seconds = given["seconds"]
    if not (math.isfinite(seconds) and seconds > 0):
        raise OptionsError(f"--seconds must be a finite number > 0 (got {seconds})")
    if given["json"] is None:
        raise OptionsError("--json is required (the record, rewritten after every round)")
    return ExperimentOptions(
        sides=tuple(sides), kernels=tuple(given["kernel"]), shapes=tuple(given["shape"]), seconds=seconds,
        json=output_value(given["json"], "--json"), repo=Path(given["repo"]), configs=tuple(given["config"]),
        device=given["device"], rounds=positive_int_value(given["rounds"], "--rounds"),
        timing=tuple(timing_value(given["timing"]).items()),
    )
