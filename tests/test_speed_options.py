"""ci.speed.options: every option of python -m ci.speed checked into one frozen object before any work."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ci.speed import gate
from ci.speed.options import Mode, speed_options
from harness.paired import DEFAULT_PLAN
from harness.paired.sequential import WARM_PLAN

RECORD = "docs/data/h200_speed_gate_rounds.json"


def options_of(*argv: str):
    return speed_options(vars(gate._parser().parse_args(list(argv))), command=argv)


@pytest.mark.parametrize("argv, message", [
    (["--max-minutes", "nan"], "--max-minutes must be a finite number >= 0 (got nan)"),
    (["--max-minutes", "-1"], "--max-minutes must be a finite number >= 0"),
    (["--allow-throttle", "sw_powr_cap"], "--allow-throttle 'sw_powr_cap': not a slowdown reason; known: "),
    (["--allow-throttle", "gpu_idle"], "known: hw_power_brake_slowdown, hw_slowdown"),  # not a slowdown: allowing it does nothing
    (["--timing", "rep_ms=-1"], "--timing 'rep_ms=-1': rep_ms must be a finite number > 0"),
    (["--clock-floor-mhz", "-5"], "--clock-floor-mhz must be a finite number >= 0"),
    (["--rounds", "0"], "--rounds must be >= 1"),
    (["--round-budget", "2"], "--round-budget 2 is below the first look"),
    (["--alpha", "1.5"], "--alpha must be a number in (0, 1)"),
    (["--pr-alpha", "nan"], "--pr-alpha must be a number in (0, 1) (got nan)"),
    (["--pr-alpha", "0"], "--pr-alpha must be a number in (0, 1) (got 0.0)"),
    (["--miss-alpha", "nan"], "--miss-alpha must be a number in (0, 1) (got nan)"),
    (["--miss-alpha", "0"], "--miss-alpha must be a number in (0, 1) (got 0.0)"),
    (["--miss-alpha", "-0.01"], "--miss-alpha must be a number in (0, 1) (got -0.01)"),
    (["--miss-alpha", "1"], "--miss-alpha must be a number in (0, 1) (got 1.0)"),
    (["--alpha", "0.02", "--miss-alpha", "0.01"], "plan: miss_alpha 0.01 is below alpha 0.02: need miss_alpha >= alpha"),
    (["--engine", "fresh", "--miss-alpha", "0.05"], "plan: miss_alpha bounds one tail (a missed regression): it needs alpha_per_tail"),
    (["--engine", "fresh", "--min-rounds", "2", "--max-rounds", "2"], "plan: the first look at 2 rounds can never decide"),
    (["--min-rounds", "1", "--max-rounds", "1"], "plan: the first look at 1 rounds can never decide"),
    (["--calibrate", "--rounds", "2"], "--calibrate needs --rounds >= 3"),
    (["--calibrate", "--base", "main"], "--base does not apply to --calibrate"),
    (["--replay", RECORD, "--calibrate"], "--replay and --calibrate: choose one"),
    (["--sides", "base,head"], "--sides only applies to --replay"),
    (["--decisions", "3"], "--decisions only applies to --replay"),
    (["--replay", RECORD, "--resampled"], "--disjoint and --resampled only apply to --replay --decisions"),
    (["--replay", RECORD, "--decisions", "0"], "--decisions must be >= 1"),
    (["--replay", RECORD, "--sides", "base"], "--sides 'base': expected two different recorded side names"),
    (["--replay", RECORD, "--shape", "square_m08192_n08192_k08192"], "--shape does not apply to --replay"),
    (["--replay", "no-such-record.json"], "--replay no-such-record.json: no such file"),
    (["--working-tree", "--head", "main"], "--head and --working-tree: choose one"),
    (["--json", "/proc/no-such-dir/v.json"], "--json /proc/no-such-dir/v.json: cannot write there"),
    (["--max-minutes", "soon"], "argument --max-minutes: invalid float value: 'soon'"),
])
def test_a_bad_option_is_one_line_and_exit_2(capsys, argv, message):
    assert exit_code(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("speed_gate: error: ") and message in err[0], err


def exit_code(argv: list[str]) -> int:
    """gate.main's exit code; argparse's own errors (a value of the wrong type) exit through SystemExit."""
    try:
        return gate.main(argv)
    except SystemExit as exc:
        return int(exc.code)


def test_a_bad_thresholds_file_is_an_option_error(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": "mxfp4-speed-thresholds/1", "default_threshold": 2}))
    assert exit_code(["--thresholds", str(bad)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"speed_gate: error: --thresholds {bad}: default_threshold: must be a fraction in (0, 1)")


def test_the_options_are_one_frozen_object_with_the_rule_and_plan_asked_for():
    options = options_of("--allow-throttle", "sw_power_cap", "--clock-floor-mhz", "1000", "--max-rounds", "20",
                         "--timing", "rep_ms=200", "--max-minutes", "0")
    assert options.mode is Mode.GATE and options.head == "HEAD" and options.device == "auto"
    rule = options.exclusion_rule()
    assert "sw_power_cap" not in rule.slowdown_reasons and "hw_slowdown" in rule.slowdown_reasons and rule.clock_floor_mhz == 1000
    # A partial plan is completed from the engine's default plan: the warm engine's t plan, the fresh engine's signed-rank plan.
    assert options.the_plan().max_rounds == 20 and options.the_plan().min_rounds == WARM_PLAN.min_rounds
    assert options.the_plan().method == "t"
    fresh = options_of("--engine", "fresh", "--max-rounds", "20").the_plan()
    assert fresh.min_rounds == DEFAULT_PLAN.min_rounds and fresh.method == "signed_rank"
    assert options.round_limit() == 30 and options.timing_overrides == {"rep_ms": 200.0} and options.max_minutes is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.head = "main"  # type: ignore[misc]


def test_a_replay_keeps_the_recorded_plan_and_rule_unless_asked():
    options = options_of("--replay", RECORD, "--sides", "base,slow-1.0", "--decisions", "4")
    assert options.mode is Mode.REPLAY and options.sides == ("base", "slow-1.0") and options.resampled is False  # disjoint
    recorded = dataclasses.replace(DEFAULT_PLAN, alpha=0.2)
    assert options.the_plan(recorded) is recorded and options.plan is None


def test_the_miss_alpha_stays_per_benchmark_while_the_pr_alpha_is_shared():
    default = options_of().plan_for(10)
    assert default.alpha == pytest.approx(0.001) and default.miss_alpha == WARM_PLAN.miss_alpha == 0.01
    asked = options_of("--miss-alpha", "0.05").plan_for(10)
    assert asked.alpha == pytest.approx(0.001) and asked.miss_alpha == 0.05 and asked.look_points == WARM_PLAN.look_points
    # An alpha above the miss alpha takes it along: a per-benchmark --alpha, or the per-PR alpha over one benchmark.
    assert options_of("--alpha", "0.02").plan_for(10).miss_alpha == 0.02
    single = options_of("--pr-alpha", "0.05").plan_for(1)
    assert single.alpha == 0.05 and single.miss_alpha == 0.05
    assert options_of("--alpha", "0.02", "--miss-alpha", "0.03").plan_for(10).miss_alpha == 0.03
    assert options_of("--engine", "fresh").plan_for(10).miss_alpha is None  # the signed-rank plan: alpha bounds both
