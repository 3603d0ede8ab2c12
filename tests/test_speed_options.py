"""ci.speed.options: every option of python -m ci.speed checked into one frozen object before any work."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from ci.speed import gate
from ci.speed.decide.verdict import plan_of
from ci.speed.engine.grace import GRACE_ENV
from ci.speed.options import PLAN_KEYS, Mode
from harness.paired.plan import ZONE_PLAN
from harness.paired.plan import ZONE_WARM_PLAN as WARM_PLAN  # the gate's plan without a noise model (version 6)

RECORD = "docs/data/h200_gpu_cost_v4/slow_one.json"  # a gate record of the plan in use
RETIRED = "docs/data/h200_speed_gate_rounds.json"  # decided with the retired signed-rank plan


def options_of(*argv: str):
    """The options object of ``python -m ci.speed ARGV``, or of ``python -m ci.speed.calibrate`` when ARGV starts
    with ``--calibrate`` (the calibration's own front)."""
    calibrate = argv[:1] == ("--calibrate",)
    rest = list(argv[1:] if calibrate else argv)
    return (gate.CALIBRATE if calibrate else gate.GATE).checked(rest)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--max-minutes", "nan"], "--max-minutes must be a finite number >= 0 (got nan)"),
        (["--max-minutes", "-1"], "--max-minutes must be a finite number >= 0"),
        (
            ["--plan", "allow_throttle=sw_powr_cap"],
            "--plan allow_throttle=sw_powr_cap: 'sw_powr_cap' is not a slowdown reason; known: ",
        ),
        (
            ["--plan", "allow_throttle=gpu_idle"],
            "known: hw_power_brake_slowdown, hw_slowdown",
        ),  # not a slowdown: allowing it does nothing
        (["--timing", "rep_ms=-1"], "--timing 'rep_ms=-1': rep_ms must be a finite number > 0"),
        (["--plan", "clock_floor_mhz=-5"], "--plan clock_floor_mhz=-5: must be a finite number >= 0"),
        (["--plan", "rounds=0"], "--plan rounds=0: must be >= 1"),
        (["--plan", "rounds=many"], "--plan rounds=many: expected a whole number"),
        (["--plan", "round_budget=1"], "--plan round_budget=1 is below the first look (2 rounds)"),
        (["--plan", "alpha=1.5"], "--plan alpha=1.5: must be a number in (0, 1)"),
        (["--plan", "pr_alpha=nan"], "--plan pr_alpha=nan: must be a number in (0, 1)"),
        (["--plan", "pr_alpha=0"], "--plan pr_alpha=0: must be a number in (0, 1)"),
        (["--plan", "miss_alpha=nan"], "--plan miss_alpha=nan: must be a number in (0, 1)"),
        (["--plan", "miss_alpha=-0.01"], "--plan miss_alpha=-0.01: must be a number in (0, 1)"),
        (["--plan", "miss_alpha=1"], "--plan miss_alpha=1: must be a number in (0, 1)"),
        (
            ["--plan", "alpha=0.02", "--plan", "miss_alpha=0.01"],
            "plan: miss_alpha 0.01 is below alpha 0.02: need miss_alpha >= alpha",
        ),
        (["--plan", "min_rounds=1", "--plan", "max_rounds=1"], "plan: the first look at 1 rounds can never decide"),
        (
            ["--plan", "method=signed_rank"],
            "--plan 'method=signed_rank': expected KEY=VALUE with KEY one of",
        ),  # not a knob any more
        (["--plan", "looks"], "--plan 'looks': expected KEY=VALUE"),
        (["--calibrate", "--plan", "rounds=2"], "a calibration needs --plan rounds >= 3"),
        (
            ["--calibrate", "--base", "main"],
            "unrecognized arguments: --base main (python -m ci.speed.calibrate --help)",
        ),
        (["--replay", RECORD, "--calibrate"], "unrecognized arguments: --calibrate (python -m ci.speed --help)"),
        (["--decisions", "3"], "--decisions only applies to --replay"),
        (["--replay", RECORD, "--decisions", "0"], "--decisions must be >= 1"),
        (["--replay", RECORD, "--shape", "square_m08192_n08192_k08192"], "--shape does not apply to --replay"),
        (["--replay", RECORD, "--plan", "rounds=10"], "--plan rounds does not apply to --replay"),
        (["--replay", RECORD, "--plan", "restart_every=1"], "--plan restart_every does not apply to --replay"),
        (["--replay", "no-such-record.json"], "--replay no-such-record.json: no such file"),
        (["--working-tree", "--head", "main"], "--head and --working-tree: choose one"),
        (["--json", "/proc/no-such-dir/v.json"], "--json /proc/no-such-dir/v.json: cannot write there"),
        (["--max-minutes", "soon"], "argument --max-minutes: invalid float value: 'soon'"),
        (["--device", "cuda:0,0"], "--device 'cuda:0,0': a GPU is named twice"),
        (["--device", "rocm"], "--device 'rocm': expected auto, cpu, cuda, or cuda:LIST of GPU indices"),
        (["--arch", "sm_90,gfx950"], "--arch 'sm_90,gfx950': expected one of auto, sm_90, gfx950, cpu"),
        (["--kernel", "a/b"], "--kernel 'a/b': expected a name or a pattern"),
        (["--engine", "fresh"], "unrecognized arguments: --engine fresh"),  # retired with the fresh-process engine
        (["--write"], "unrecognized arguments: --write"),  # the calibration's own options are on its front only
        (["--calibrate", "--changes", "c.json"], "unrecognized arguments: --changes c.json"),
        (["--replay", RECORD, "--refit"], "unrecognized arguments: --refit"),
        (["--calibrate", "--assume-aa", "why"], "--assume-aa says why --aa-records are A/A: give the records"),
        (["--calibrate", "--aa-records", "no-such.json"], "--aa-records no-such.json: no such file"),
        (["--noise", "no-such-model.json"], "--noise no-such-model.json: no such file"),
        (["--plan", "noise=maybe"], "--plan noise=maybe: expected on or off"),
        (["--plan", "spending=4,0,1"], "--plan spending=4,0,1: must be a list of numbers > 0"),
        (
            ["--plan", "pass_rounds=3"],
            "--plan 'pass_rounds=3': expected KEY=VALUE with KEY one of",
        ),  # retired in issue 37
        (["--plan", "rule=maybe"], "--plan rule=maybe: expected zone (version 6, the default) or band"),
        (
            ["--plan", "spending=1,1"],
            "plan: spending (1.0, 1.0) needs one share per look (11 looks)",
        ),  # fits neither plan
        (
            ["--plan", "noise=off", "--plan", "spending=1,1,1,1,1,2"],
            "needs one share per look (11 looks)",
        ),  # the t plan decides
    ],
)
def test_a_bad_option_is_one_line_and_exit_2(capsys, argv, message):
    assert exit_code(argv) == 2
    err = capsys.readouterr().err.splitlines()
    prog = "python -m ci.speed.calibrate" if argv[:1] == ["--calibrate"] else "python -m ci.speed"
    assert len(err) == 1 and err[0].startswith(f"{prog}: error: ") and message in err[0], err


def exit_code(argv: list[str]) -> int:
    """gate.main's exit code; argparse's own errors (a value of the wrong type) exit through SystemExit."""
    calibrate = argv[:1] == ["--calibrate"]  # the calibration's front: python -m ci.speed.calibrate
    try:
        return gate.main(argv[1:] if calibrate else argv, calibrate=calibrate)
    except SystemExit as exc:
        return int(exc.code)


@pytest.mark.parametrize(
    "value, message",
    [
        ("soon", "expected a number of seconds"),
        ("0", "must be a finite number of seconds > 0"),
        ("-5", "must be a finite number of seconds > 0"),
        ("nan", "must be a finite number"),
    ],
)
def test_a_bad_grace_is_refused_naming_the_variable(monkeypatch, capsys, value, message):
    monkeypatch.setenv(GRACE_ENV, value)
    assert exit_code([]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"python -m ci.speed: error: ${GRACE_ENV}={value!r}: {message}"), line


def test_the_grace_is_30_s_unless_the_variable_says_otherwise(monkeypatch):
    monkeypatch.delenv(GRACE_ENV, raising=False)
    assert options_of().grace_s == 30.0
    monkeypatch.setenv(GRACE_ENV, " 2.5 ")
    assert options_of().grace_s == 2.5 and options_of("--calibrate").grace_s == 2.5


def test_a_bad_thresholds_file_is_an_option_error(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": "mxfp4-speed-thresholds/1", "default_threshold": 2}))
    assert exit_code(["--thresholds", str(bad)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(
        f"python -m ci.speed: error: --thresholds {bad}: default_threshold: must be a fraction in (0, 1)"
    )


def test_the_options_are_one_frozen_object_with_the_rule_and_plan_asked_for():
    options = options_of(
        "--plan",
        "allow_throttle=sw_power_cap",
        "--plan",
        "clock_floor_mhz=1000",
        "--plan",
        "max_rounds=30",
        "--timing",
        "rep_ms=200",
        "--max-minutes",
        "0",
        "--device",
        "cuda:0,2",
    )
    assert options.mode is Mode.GATE and options.head == "HEAD" and options.device == "cuda" and options.gpus == (0, 2)
    rule = options.exclusion_rule()
    assert (
        "sw_power_cap" not in rule.slowdown_reasons
        and "hw_slowdown" in rule.slowdown_reasons
        and rule.clock_floor_mhz == 1000
    )
    # A partial plan is completed from the gate's plan: its first look, its number of looks, its rules.
    plan = options.the_plan()
    assert (
        plan.max_rounds == 30
        and plan.min_rounds == WARM_PLAN.min_rounds
        and len(plan.look_points) == len(WARM_PLAN.look_points)
    )
    assert (plan.alpha_per_tail, plan.futility, plan.miss_alpha) == (
        WARM_PLAN.alpha_per_tail,
        WARM_PLAN.futility,
        WARM_PLAN.miss_alpha,
    )
    assert options.round_limit() == 45 and options.timing_overrides == {"rep_ms": 200.0} and options.max_minutes is None
    assert options_of("--plan", "looks=5,10,20").the_plan().look_points == (5, 10, 20)
    assert options_of("--plan", "rounds=7").round_limit() == 7 and options_of().restart_every == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.head = "main"  # type: ignore[misc]


def test_every_plan_key_is_in_the_help_and_the_docs():
    text = gate.GATE.parser().format_help()
    documented = (Path(__file__).resolve().parents[1] / "docs" / "SPEED_GATE.md").read_text()
    for key, spec in PLAN_KEYS.items():
        assert f"  {key}: {spec.means}" in text and f"`{key}`" in documented, key
    options = sum(1 for action in gate.GATE.parser()._actions if action.option_strings)
    # --help included: what a person uses, the knobs of the statistics under --plan; the 26th is --replay's --judge
    # (issue 37: the PR comment's judge), which the publishing workflow needs and a person may run.
    assert options <= 26, options


def test_a_replay_completes_a_partial_plan_from_the_recorded_plan_not_another():
    options = options_of("--replay", RECORD, "--decisions", "4", "--plan", "max_rounds=14")
    assert options.mode is Mode.REPLAY and options.decisions == 4
    first = plan_of(json.load(open("docs/data/h200_gpu_cost/slow_one.json"))["plan"])  # version 2: no rule of version 3
    replanned = options.the_plan(first)
    assert (
        replanned.max_rounds == 14
        and not replanned.alpha_per_tail
        and not replanned.futility
        and replanned.alpha == first.alpha
    )
    recorded = WARM_PLAN.with_alpha(0.2)
    assert options_of("--replay", RECORD).the_plan(recorded) == recorded  # no key given: the record's own plan


def test_the_miss_alpha_stays_per_benchmark_while_the_pr_alpha_is_shared():
    default = options_of().plan_for(10)
    assert default.alpha == pytest.approx(0.001) and default.miss_alpha == WARM_PLAN.miss_alpha == 0.01
    asked = options_of("--plan", "miss_alpha=0.05").plan_for(10)
    assert (
        asked.alpha == pytest.approx(0.001) and asked.miss_alpha == 0.05 and asked.look_points == WARM_PLAN.look_points
    )
    # An alpha above the miss alpha takes it along: a per-benchmark alpha, or the per-PR alpha over one benchmark.
    assert options_of("--plan", "alpha=0.02").plan_for(10).miss_alpha == 0.02
    single = options_of("--plan", "pr_alpha=0.05").plan_for(1)
    assert single.alpha == 0.05 and single.miss_alpha == 0.05
    assert options_of("--plan", "alpha=0.02", "--plan", "miss_alpha=0.03").plan_for(10).miss_alpha == 0.03


def test_a_record_of_the_retired_plan_is_refused_with_the_reason(capsys):
    assert exit_code(["--replay", RETIRED]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert (
        line.startswith(f"python -m ci.speed: error: {RETIRED} was decided with the signed-rank plan")
        and "retired in issue 28" in line
    )
    assert exit_code(["--replay", RETIRED, "--plan", "max_rounds=30"]) == 2  # a plan given does not re-judge it either
    assert "signed-rank plan" in capsys.readouterr().err


def test_calibrate_has_its_own_time_budget_and_restarts_and_the_gate_its_own():
    """--calibrate: 9 minutes (the default selection within 10 minutes of GPU time) and a restart every 2 rounds
    (generations for the between-worker SD); the gate keeps 90 minutes and starts at 2 (4 before issue 37; once its
    surveys are done it measures at GATE_RESTART_EVERY, 1, unless --plan restart_every is given); either given wins."""
    cal, gate_options = options_of("--calibrate"), options_of()
    assert (cal.max_minutes, cal.restart_every) == (9.0, 2)
    assert (gate_options.max_minutes, gate_options.restart_every, gate_options.use_noise) == (90.0, 2, True)
    given = options_of("--calibrate", "--max-minutes", "3", "--plan", "restart_every=1")
    assert (given.max_minutes, given.restart_every) == (3.0, 1)
    assert options_of("--plan", "noise=off").use_noise is False
    # The model plan takes the plan keys too; new looks drop the shares that fitted the old ones.
    model = options_of("--plan", "looks=2,5,20").the_plan(model=True)
    assert model.variance == "model" and model.look_points == (2, 5, 20) and model.spending is None
    spent = options_of("--plan", "spending=1,1,1,1,1,1,1,1,1,1,2").the_plan(model=True)
    assert spent.shares()[-1] == pytest.approx(2 / 12)
    # Version 6 is the default; --plan rule=band gives version 5's plans for a before/after.
    assert options_of().the_plan(model=True).rule == ZONE_PLAN.rule == "zone" and options_of().the_plan() == WARM_PLAN
    assert options_of("--plan", "rule=band").the_plan(model=True).rule == "band"
