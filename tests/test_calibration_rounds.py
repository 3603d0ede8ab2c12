"""Issue 46, deliver 2: the calibration's rounds-needed report (ci.speed.modes.calibration_plan.plan_rounds) is
monotone in the restart cadence for a given model. The calibration asks harness.paired.zone.planned_rounds the same
question at every cadence (one model entry, one plan, one shared alpha); what planned_rounds answers is the zone's."""

from __future__ import annotations

import math

import pytest

from ci.speed.decide.noise_file import NoiseModel
from ci.speed.decide.thresholds import Thresholds
from ci.speed.modes.calibration_plan import CADENCES, plan_rounds
from harness.paired.noise import BenchmarkNoise, LookNoise, Spread
from harness.paired.plan import ZONE_PLAN
from harness.paired.zone import planned_rounds

SPREAD = Spread(38.8, 16.9, True)  # the H200 model's


def _model(ratios: dict[str, float], within_df: int = 40, between_df: float = 7.0) -> NoiseModel:
    """One entry per benchmark, within SD 0.1%, between SD ``ratio`` times it."""
    entries = {b: BenchmarkNoise(0.001, within_df, r * 0.001, between_df if r else 0.0) for b, r in ratios.items()}
    return NoiseModel(entries, SPREAD, {"gpu": "test"}, "now", 2)


def _monotone(values: list[int | None]) -> bool:
    """Non-decreasing or non-increasing, None (no look decides) counting as infinitely many rounds."""
    x = [math.inf if v is None else v for v in values]
    return all(a <= b for a, b in zip(x, x[1:])) or all(a >= b for a, b in zip(x, x[1:]))


def _planned(model: NoiseModel, threshold: float):
    ids = sorted(model.benchmarks)
    return plan_rounds(model, ids, ZONE_PLAN, Thresholds(threshold, (), "t"), len(ids), 2, {})


def test_the_calibration_asks_every_cadence_the_same_question():
    model = _model({"a": 1.0, "b": 0.25})
    planned = _planned(model, 0.007)
    shared = ZONE_PLAN.with_alpha(0.01 / 2)
    for bench_id, p in planned.items():
        look = LookNoise(model.benchmarks[bench_id], SPREAD)
        assert p.rounds == {r: planned_rounds(look, 0.007, shared, r) for r in CADENCES}


@pytest.mark.parametrize("ratio", [1.0, 2.0, 3.0])
@pytest.mark.parametrize("threshold", [0.005, 0.007, 0.01])
def test_where_workers_differ_restarting_less_often_never_needs_fewer_rounds(ratio, threshold):
    # The between-worker part dominates: each restart averages more of it away, so rounds grow with the cadence.
    p = _planned(_model({"x": ratio}), threshold)["x"]
    values = [math.inf if p.rounds[r] is None else p.rounds[r] for r in CADENCES]
    assert values == sorted(values), p.rounds


def test_the_rounds_to_decide_are_monotone_in_the_cadence_for_any_model():
    # Version 6's planned_rounds dipped at a restart every 2 (e.g. 40, 20, 30 for a between SD half the within SD at
    # t = 0.5%: a cadence of 1 left the run no within df, one of 4 clustered the between part); version 7's pools
    # the model's generation-mean variance with the run's generations and is monotone.
    bumps = []
    for ratio in (0.0, 0.25, 0.5):
        for threshold in (0.005, 0.007, 0.01):
            for within_df in (8, 40):
                p = _planned(_model({"x": ratio}, within_df=within_df), threshold)["x"]
                if not _monotone([p.rounds[r] for r in CADENCES]):
                    bumps.append((ratio, threshold, within_df, p.rounds))
    assert not bumps


def test_the_model_keeps_the_cadence_its_runs_were_measured_at():
    from ci.speed.decide.noise_file import refit, runs_cadence

    def run(source, created, every, rounds=12):
        gens = [i // every for i in range(rounds)]
        data = {"log_ratios": [0.001 * ((i * 7) % 5 - 2) for i in range(rounds)], "generations": gens}
        return {"source": source, "created": created, "environment": {"gpu": "G"}, "benchmarks": {"b": data}}

    assert runs_cadence([run("a", "1", 2)]) == (2, [2])
    assert refit([run("a", "1", 2)]).restart_every == 2  # not the gate's default stamped on it
    mixed = refit([run("a", "1", 4), run("b", "2", 2, rounds=16)])
    assert mixed.restart_every == 2 and any("a restart cadence changed" in n for n in mixed.notes)
    assert refit([run("a", "1", 4)], restart_every=4).restart_every == 4  # given: as before
