"""The options of ``python -m ci.speed``, checked whole before any work.

:func:`speed_options` turns the front's parsed values into one frozen :class:`SpeedOptions`, or raises
ci.common.options.OptionsError naming the option (exit 2 before any worktree); nothing below the front sees ``argv``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ci.common.options import (
    OptionsError,
    arch_value,
    minutes_value,
    names_value,
    output_value,
    positive_int_value,
    timing_value,
)
from ci.speed.decide.exclusion import ExclusionRule
from ci.speed.decide.selection import Selector
from ci.speed.decide.thresholds import Thresholds, ThresholdsError, load_thresholds
from ci.speed.engine.grace import DEFAULT_GRACE_S, grace_value
from ci.speed.engine.warm_engine import DEFAULT_RESTART_EVERY
from ci.speed.plan_keys import DEFAULT_PR_ALPHA, PLAN_KEYS, build_plan, plan_value
from ci.speed.scope.arch import ARCH_CHOICES
from harness.paired.plan import MODEL_PLAN, WARM_PLAN, ZONE_PLAN, ZONE_WARM_PLAN, SequentialPlan

# The PR workflow's GPU job has 120 minutes (.github/workflows/pr-checks.yml), correctness gates and set-up included:
# a gate that is still measuring then is killed with no verdict at all.
DEFAULT_MAX_MINUTES = 90.0
CALIBRATION_MIN_ROUNDS = 3  # harness.paired.calibrate needs an SD over at least this many rounds
# Options that choose what is measured and how (by dest; the flag is --dest with dashes): a --replay refuses them.
MEASURING_ONLY = "base head working_tree kernel config shape device timing arch changes measure_identical".split()
# The gate's plan by --plan rule (version 6's zone, version 5's band): (without, with a noise model).
PLANS = {"zone": (ZONE_WARM_PLAN, ZONE_PLAN), "band": (WARM_PLAN, MODEL_PLAN)}
CALIBRATION_MAX_MINUTES = 9.0  # the calibration's default time budget: the default selection within 10 minutes
CALIBRATION_RESTART_EVERY = 2  # the calibration's restarts: more worker generations for the between-worker SD


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
    selector: Selector = field(default_factory=Selector.of)  # --kernel, --config, --shape compiled
    device: str = "auto"
    gpus: tuple[int, ...] | None = None  # --device cuda:LIST: the GPUs to spread benchmarks over; None: every one
    arch: str = "auto"  # the fingerprints' arch (ci.speed.scope.arch)
    changes: Path | None = None  # a ci.speed.changes JSON to decide by, instead of computing the fingerprints
    changes_data: Mapping[str, Any] | None = None  # its content, read and checked
    measure_identical: bool = False  # measure benchmarks with identical code too
    thresholds: Thresholds | None = None  # None: the head's file (or the record's, in a replay)
    thresholds_path: Path | None = None  # --thresholds as given (ci.speed.calibrate --write writes it)
    noise: Path | None = None  # --noise: the runner's noise model file (None: its profile's, ci.speed.profiles)
    write: bool = False  # --calibrate: write the noise model and the thresholds files
    refit: bool = False  # --calibrate: measure nothing; refit from the model's runs and --aa-records
    aa_records: tuple[Path, ...] = ()  # --calibrate: A/A records to fit from besides the rounds measured
    assume_aa: str | None = None  # --calibrate: why --aa-records whose code differed are A/A anyway
    calibrations: Mapping[str, Any] | None = None  # None: the head's calibration file if any (or the record's)
    plan_keys: tuple[tuple[str, Any], ...] = ()  # --plan KEY=VALUE, checked (PLAN_KEYS)
    max_minutes: float | None = DEFAULT_MAX_MINUTES  # None: no limit
    grace_s: float = DEFAULT_GRACE_S  # $MXFP4_SPEED_GRACE_S: a worker's least time to answer, even past the deadline
    fail_on_inconclusive: bool = False
    all_verdicts: bool = False  # measure on after the PR has failed, until every benchmark has its verdict
    timing: tuple[tuple[str, Any], ...] = ()  # harness.timing.TimingBudget overrides
    replay: Path | None = None
    decisions: int | None = None
    judge: bool = False  # --replay --judge: this checkout's plan, rule, thresholds and model; the record's rounds only
    json: Path | None = None
    plot: Path | None = None
    command: tuple[str, ...] = ()  # the arguments as given, for the record

    @property
    def timing_overrides(self) -> dict[str, Any]:
        return dict(self.timing)

    @property
    def plan_given(self) -> dict[str, Any]:
        return dict(self.plan_keys)

    @property
    def rounds(self) -> int | None:
        """--plan rounds=N: exactly N rounds, no early stop."""
        return self.plan_given.get("rounds")

    @property
    def restart_every(self) -> int:
        default = CALIBRATION_RESTART_EVERY if self.mode is Mode.CALIBRATE else DEFAULT_RESTART_EVERY
        return self.plan_given.get("restart_every", default)

    @property
    def use_noise(self) -> bool:
        """--plan noise (default on): decide with the runner's noise model when one applies."""
        return self.plan_given.get("noise", True)

    @property
    def rule(self) -> str:
        """--plan rule (default zone): version 6's decision, or version 5's band."""
        return self.plan_given.get("rule", "zone")

    def the_plan(self, recorded: SequentialPlan | None = None, model: bool = False) -> SequentialPlan:
        """The gate's plan (:data:`PLANS`; in a replay the ``recorded`` one) with the --plan keys given."""
        if recorded is not None and self.plan_given.get("rule", recorded.rule) != recorded.rule:
            recorded = None  # --plan rule=...: a record of the other rule is decided under today's plan of that rule
        if recorded is not None and not self.use_noise and recorded.variance == "model":
            # --plan noise=off: the same looks, each benchmark's own rounds
            recorded = replace(recorded, variance="rounds")
        return build_plan(recorded or PLANS[self.rule][model and self.use_noise], self.plan_given)

    def plan_for(self, gated: int, model: bool = False) -> SequentialPlan:
        """The plan for a run gating ``gated`` benchmarks: the per-PR alpha shared among them (Bonferroni), unless
        ``--plan alpha=A`` set a per-benchmark alpha; the miss alpha stays per benchmark (docs: "The plan")."""
        plan = self.the_plan(model=model)
        if "alpha" in self.plan_given or gated < 1:
            return plan
        return plan.with_alpha(self.plan_given.get("pr_alpha", DEFAULT_PR_ALPHA) / gated)

    def exclusion_rule(self, recorded: ExclusionRule | None = None) -> ExclusionRule:
        """The rule asked for: the recorded one (or the default) with the plan's clock floor and allowed throttles."""
        rule = recorded or ExclusionRule()
        given = self.plan_given
        if "clock_floor_mhz" in given:
            rule = replace(rule, clock_floor_mhz=given["clock_floor_mhz"])
        allowed = given.get("allow_throttle", frozenset())
        return replace(rule, slowdown_reasons=rule.slowdown_reasons - allowed) if allowed else rule

    def deadline(self, started: float) -> float | None:
        """When the last round may start (time.time(): --max-minutes after ``started``), or None for no limit."""
        return started + 60.0 * self.max_minutes if self.max_minutes else None

    def round_limit(self) -> int:
        """Rounds the gate may attempt: --plan rounds exactly, else round_budget, else 1.5 x the plan's max rounds."""
        # Room for a third of the rounds to be excluded before the last look is out of reach.
        return self.rounds or self.plan_given.get("round_budget") or -(-3 * self.the_plan().max_rounds // 2)


def speed_options(given: Mapping[str, Any], command: Sequence[str] = ()) -> SpeedOptions:
    """Check every option of ``python -m ci.speed`` (parsed values by dest, $MXFP4_SPEED_GRACE_S) into one object."""
    if given["replay"] and given["calibrate"]:
        raise OptionsError("--replay and a calibration: choose one")
    mode = Mode.REPLAY if given["replay"] else Mode.CALIBRATE if given["calibrate"] else Mode.GATE
    keys = plan_value(given.get("plan"))
    _check_mode(given, keys, mode)
    # Checked now, before any work (a replay checks again on the recorded plan). Which plan decides is known only
    # once the run finds (or not) a noise model: keys that fit one plan pass here, and the other, if it is the one
    # needed, is refused then (exit 2, the same message). noise=off: only the t plan can decide.
    without_model, with_model = PLANS[keys.get("rule", "zone")]
    try:
        plan = build_plan(without_model, keys)
    except OptionsError:
        if keys.get("noise") is False:
            raise
        plan = build_plan(with_model, keys)
    rounds = keys.get("rounds")
    if mode is Mode.CALIBRATE and rounds is not None and rounds < CALIBRATION_MIN_ROUNDS:
        raise OptionsError(f"a calibration needs --plan rounds >= {CALIBRATION_MIN_ROUNDS} (got rounds={rounds})")
    if keys.get("round_budget") is not None and keys["round_budget"] < plan.min_rounds:
        raise OptionsError(
            f"--plan round_budget={keys['round_budget']} is below the first look ({plan.min_rounds} rounds)"
        )
    device, gpus = _device(given.get("device"))
    return SpeedOptions(
        mode=mode,
        repo=Path(given["repo"]),
        base=given["base"],
        head=given["head"] or "HEAD",
        working_tree=given["working_tree"],
        selector=Selector.of(
            names_value(given["kernel"], "--kernel"), names_value(given["config"], "--config"), given["shape"]
        ),
        device=device,
        gpus=gpus,
        arch=(arch_value(given["arch"], ARCH_CHOICES, most=1) or ("auto",))[0],
        changes=Path(given["changes"]) if given["changes"] else None,
        changes_data=_changes(given["changes"]),
        measure_identical=bool(given["measure_identical"]),
        thresholds=_read(given["thresholds"], "--thresholds", load_thresholds, ThresholdsError),
        thresholds_path=Path(given["thresholds"]) if given.get("thresholds") else None,
        noise=_noise_path(given.get("noise"), mode),
        write=bool(given.get("write")),
        refit=bool(given.get("refit")),
        aa_records=tuple(_record_file(p, "--aa-records") for p in given.get("aa_records") or []),
        assume_aa=(given.get("assume_aa") or "").strip() or None,
        calibrations=_calibrations(given["calibration"]),
        plan_keys=tuple(keys.items()),
        max_minutes=minutes_value(given["max_minutes"]),  # each front's parser has its mode's default
        grace_s=grace_value(),
        fail_on_inconclusive=given["fail_on_inconclusive"],
        all_verdicts=bool(given.get("all_verdicts")),
        timing=tuple(timing_value(given["timing"]).items()),
        replay=_replay(given["replay"]),
        decisions=positive_int_value(given["decisions"], "--decisions"),
        judge=bool(given.get("judge")),
        json=output_value(given["json"], "--json"),
        plot=output_value(given["plot"], "--plot"),
        command=tuple(command),
    )


def _device(text: str | None) -> tuple[str, tuple[int, ...] | None]:
    """``--device``: auto, cpu, cuda (every visible GPU) or cuda:LIST (these GPUs, e.g. cuda:0,2)."""
    if text in (None, "auto", "cpu", "cuda"):
        return text or "auto", None
    kind, _, listed = text.partition(":")
    items = [t.strip() for t in listed.split(",")]
    if kind != "cuda" or not all(t.isdigit() for t in items):
        raise OptionsError(f"--device {text!r}: expected auto, cpu, cuda, or cuda:LIST of GPU indices (cuda:0,2)")
    indices = tuple(int(t) for t in items)
    if len(set(indices)) != len(indices):
        raise OptionsError(f"--device {text!r}: a GPU is named twice")
    return "cuda", indices


def _check_mode(given: Mapping[str, Any], keys: Mapping[str, Any], mode: Mode) -> None:
    """Options that do nothing in the mode asked for are refused, not silently ignored."""
    if mode is not Mode.REPLAY:
        if given["decisions"] is not None:
            raise OptionsError("--decisions only applies to --replay")
        if given.get("judge"):
            raise OptionsError("--judge only applies to --replay (it judges a recorded run's rounds)")
    elif given.get("judge") and given["decisions"] is not None:
        raise OptionsError("--judge and --decisions: choose one (--judge gives one verdict of the whole record)")
    else:
        refused = [f"--{dest.replace('_', '-')}" for dest in MEASURING_ONLY if given[dest] not in (None, False, [])]
        refused += [f"--plan {key}" for key in keys if PLAN_KEYS[key].measuring]
        if refused:
            raise OptionsError(
                f"{refused[0]} does not apply to --replay (nothing is measured; the record says what was)"
            )
    # The calibration's own options (--write, --refit, ...) and the gate's (--base, --changes, ...) are each on
    # their front's parser only (ci.speed.gate): a plan key is the one thing both take.
    if given.get("assume_aa") and not given.get("aa_records"):
        raise OptionsError("--assume-aa says why --aa-records are A/A: give the records")
    if given["working_tree"] and given["head"] is not None:
        raise OptionsError("--head and --working-tree: choose one (the working tree is the head)")


def _calibrations(path: str | None) -> Mapping[str, Any] | None:
    from ci.speed.decide.verdict import RecordError, load_calibrations

    return _read(path, "--calibration", lambda p: MappingProxyType(load_calibrations(p)), RecordError)


def _changes(path: str | None) -> Mapping[str, Any] | None:
    from ci.speed.scope.summary import ChangesFileError, load_changes

    return _read(path, "", lambda p: MappingProxyType(load_changes(Path(p))), ChangesFileError)


def _read(path: str | None, flag: str, read: Callable[[str], Any], errors: type[Exception]) -> Any:
    """The file an option names, read and checked; its reader's error, prefixed with the option, exits 2."""
    if not path:
        return None
    try:
        return read(path)
    except errors as exc:
        raise OptionsError(f"{flag} {exc}".strip()) from None


def _noise_path(path: str | None, mode: Mode) -> Path | None:
    """--noise: for the gate and a replay, an existing file that reads as a noise model, checked now (a run whose
    code is identical never reads it, and passed with a malformed one); the calibration may name a file it will
    create."""
    if not path:
        return None
    if mode is not Mode.CALIBRATE:
        if not Path(path).is_file():
            raise OptionsError(f"--noise {path}: no such file")
        from ci.speed.decide.noise_file import NoiseModelError, load_noise_model

        _read(path, "--noise", load_noise_model, NoiseModelError)
    return Path(path)


def _replay(path: str | None) -> Path | None:
    """--replay: a record that reads as one (JSON, capped, of the gate's schema), checked now: the error names the
    option, as every other file's; the replay reads it again (a record is at most a few MB)."""
    if not path:
        return None
    from ci.speed.decide.verdict import RecordError, load_record

    _read(str(_record_file(path, "--replay")), "--replay", load_record, RecordError)
    return Path(path)


def _record_file(path: str, flag: str) -> Path:
    if not Path(path).is_file():
        raise OptionsError(f"{flag} {path}: no such file")
    return Path(path)
