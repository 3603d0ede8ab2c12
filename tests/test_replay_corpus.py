"""The A/A replay corpus and the replayed PRs (docs/data/replay_lib.py, aa_corpus.py; issue 37, deliver 3).

The corpus keeps a record's worker generations and drops the rounds the gate's own exclusion rule drops; the
resampler hands out whole recorded generations; a shifted head moves the mean log ratio by exactly log(1 - x);
and the error tallies can fail: a decision that always says "regression" is all false alarms, one that never
does is all misses. Seconds on a busy CPU (no GPU, no subprocess).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

PROJECT = Path(__file__).resolve().parents[1]
DATA = PROJECT / "docs" / "data"
sys.path.insert(0, str(DATA))

import aa_corpus  # noqa: E402
import replay_lib as L  # noqa: E402

from ci.speed.decide.exclusion import ExclusionRule  # noqa: E402
from ci.speed.decide.noise_file import load_noise_model, run_of_record  # noqa: E402
from harness.paired.plan import MODEL_PLAN  # noqa: E402
from harness.paired.verdict import Verdict  # noqa: E402

BENCH = "triton_dot_scaled[m128_n128_k128_w8_s3]/square_m08192_n08192_k08192"
OTHER = "triton_dot_scaled[m128_n128_k128_w8_s3]/square_m16384_n16384_k16384"
STATE = {"sm_clock_mhz": 1980, "max_sm_clock_mhz": 1980, "throttle_reasons": ["sw_power_cap"]}


def _record(rounds, decision="unchanged (identical code)", mode="gate"):
    """A gate record of BENCH: ``rounds`` is [(base TFLOPS, head TFLOPS, generation, throttled)], in time order."""
    out = []
    for i, (base, head, gen, throttled) in enumerate(rounds):
        state = dict(STATE, throttle_reasons=["hw_slowdown"]) if throttled else STATE
        recs = {
            side: {
                BENCH: {
                    "tflops": value,
                    "worker_generation": gen,
                    "steady": True,
                    "gpu_before": state,
                    "gpu_after": STATE,
                }
            }
            for side, value in (("base", base), ("head", head))
        }
        out.append(
            {
                "index": i,
                "order": ["base", "head"],
                "processes": [{"side": side, "records": recs[side]} for side in ("base", "head")],
            }
        )
    return {
        "mode": mode,
        "created": "2026-11-28T09:14:03+0000",
        "exclusion": ExclusionRule().to_json(),
        "code": {"decisions": {"triton_dot_scaled[m128_n128_k128_w8_s3]": decision}},
        "benchmarks": [
            {"id": BENCH, "kernel": "triton_dot_scaled", "config": "m128_n128_k128_w8_s3", "status": "gated"}
        ],
        "rounds": out,
    }


# Heavy-tailed A/A rounds as an H200 gives them: repeats of a value, one round off by 0.6%, a throttled round.
ROUNDS = [
    (1102.31, 1101.87, 0, False),
    (1102.31, 1102.31, 0, False),
    (1101.02, 1107.64, 0, True),
    (1101.55, 1102.94, 0, False),
    (1099.87, 1100.12, 1, False),
    (1100.40, 1100.40, 1, False),
    (1103.77, 1097.15, 2, False),
    (1102.10, 1101.64, 2, False),
]


def test_the_corpus_keeps_generations_in_time_order_and_drops_what_the_gate_excludes():
    per_bench, notes = L.record_generations(_record(ROUNDS), "fixture.json", None)
    data = per_bench[BENCH]
    assert notes == []
    assert [g["generation"] for g in data["generations"]] == [0, 1, 2]
    assert [g["round_index"] for g in data["generations"]] == [[0, 1, 3], [4, 5], [6, 7]]  # round 2 throttled: dropped
    assert data["excluded"] == {"throttled: hw_slowdown": 1}
    for g in data["generations"]:
        for i, x, base, head in zip(g["round_index"], g["log_ratios"], g["base_tflops"], g["head_tflops"]):
            assert (base, head) == ROUNDS[i][:2]
            assert x == pytest.approx(math.log(head / base), abs=1e-10)


def test_a_gate_record_whose_code_differs_joins_only_with_a_reason():
    record = _record(ROUNDS, decision="changed: launch path: kernels/triton_mxfp4.py")
    per_bench, notes = L.record_generations(record, "fixture.json", None)
    assert per_bench == {} and "not A/A" in notes[0]
    per_bench, _ = L.record_generations(record, "fixture.json", "a speed-neutral rename")
    assert sum(len(g["log_ratios"]) for g in per_bench[BENCH]["generations"]) == 7
    with pytest.raises(L.CorpusError, match="neither"):
        L.record_generations(_record(ROUNDS, mode="replay"), "fixture.json", None)


def test_the_corpus_of_a_real_record_is_the_noise_models_run_of_it():
    """The same rounds and generations as ci.speed.decide.noise_file.run_of_record (the model's own reader)."""
    import json

    record = json.loads((DATA / "h200_gpu_cost_v4/aa_ten.json").read_text())
    per_bench, _ = L.record_generations(record, "aa_ten.json", None)
    run, _ = run_of_record(record, "aa_ten.json")
    assert set(per_bench) == set(run["benchmarks"])
    for bench_id, data in per_bench.items():
        gens = data["generations"]
        assert [x for g in gens for x in g["log_ratios"]] == run["benchmarks"][bench_id]["log_ratios"]
        assert [g["generation"] for g in gens for _ in g["log_ratios"]] == run["benchmarks"][bench_id]["generations"]


def test_the_builder_takes_new_records_on_the_command_line(tmp_path):
    extra = tmp_path / "new_aa.json"
    extra.write_text(__import__("json").dumps(_record(ROUNDS)))
    corpus = aa_corpus.build([(DATA / "h200_gpu_cost_v4/aa_ten.json", None), (extra, None)])
    assert str(extra) in corpus["benchmarks"][BENCH]
    row = next(r for r in corpus["summary"] if r["benchmark"] == BENCH)
    recorded = corpus["benchmarks"][BENCH]["docs/data/h200_gpu_cost_v4/aa_ten.json"]["generations"]
    assert row["runs"] == 2 and row["rounds"] == 7 + sum(len(g["log_ratios"]) for g in recorded)
    assert row["short_rounds"] == max(0, 40 - row["rounds"])
    assert aa_corpus.main(["--out", str(tmp_path / "c.json"), "--record", str(tmp_path / "missing.json")]) == 2


def _blocks():
    # Log ratios distinct per (run, generation, position): 1e-5 * (1000 run + 10 generation + position).
    return {
        BENCH: [
            L.Block(f"r{r}", g, tuple(1e-5 * (1000 * r + 10 * g + i) for i in range(n)))
            for r, g, n in ((1, 0, 4), (1, 1, 3), (2, 0, 2), (2, 1, 4), (3, 0, 1))
        ],
        OTHER: [
            L.Block(f"r{r}", g, tuple(-1e-5 * (1000 * r + 10 * g + i) for i in range(n)))
            for r, g, n in ((1, 0, 4), (1, 1, 3), (4, 0, 4))
        ],
    }


def test_the_resampler_hands_out_whole_generations_in_their_order():
    blocks = _blocks()
    whole = {b: {blk.log_ratios for blk in v} for b, v in blocks.items()}
    sampler = L.BlockResampler(blocks)
    rng = np.random.default_rng(5)
    for _ in range(200):
        truth = sampler.draw(rng, [BENCH, OTHER], 40)
        for b, (x, g, v) in truth.items():
            assert len(x) == len(g) == len(v) == 40 and np.isnan(v).all()  # these blocks hold no sampling variance
            labels = sorted(set(g.tolist()))
            assert list(g) == sorted(g)  # a generation's rounds are adjacent
            for label in labels:
                part = tuple(x[g == label].tolist())
                if label != labels[-1]:
                    assert part in whole[b]
                else:  # the last one may be cut at the 40th round
                    assert any(p[: len(part)] == part for p in whole[b])


def test_benchmarks_measured_in_the_same_generations_are_drawn_together():
    keys = ((1, 0, 4), (1, 1, 3), (2, 0, 2), (2, 1, 4))
    blocks = {
        BENCH: [L.Block(f"r{r}", g, tuple(1e-4 * (100 * r + 10 * g + i) for i in range(n))) for r, g, n in keys],
        OTHER: [L.Block(f"r{r}", g, tuple(-1e-4 * (100 * r + 10 * g + i) for i in range(n))) for r, g, n in keys],
    }
    sampler = L.BlockResampler(blocks)
    rng = np.random.default_rng(6)
    for _ in range(50):
        truth = sampler.draw(rng, [BENCH, OTHER], 40)
        assert np.array_equal(truth[OTHER][0], -truth[BENCH][0])
        assert np.array_equal(truth[OTHER][1], truth[BENCH][1])


def test_each_benchmarks_draw_stays_uniform_over_its_own_generations():
    sampler = L.BlockResampler(_blocks())
    rng = np.random.default_rng(11)
    firsts = [sampler.draw(rng, [BENCH, OTHER], 1)[OTHER][0][0] for _ in range(3000)]
    counts = np.array([firsts.count(blk.log_ratios[0]) for blk in _blocks()[OTHER]])
    assert counts.sum() == 3000 and np.all(np.abs(counts / 3000 - 1 / 3) < 0.04)


class _Recorder:
    """A decision that keeps what it was shown and never completes (so every round reaches it)."""

    def __init__(self):
        self.seen = {}

    def __call__(self, rounds, threshold, plan, noise):
        self.seen[threshold] = [math.log(r.ratio) for r in rounds]
        return SimpleNamespace(complete=False)


def _setup(order, thresholds, plan=MODEL_PLAN):
    model = load_noise_model(PROJECT / "ci/speed_noise_h200.json")
    return L.Setup(L.gated_plan(plan, len(order)), thresholds, model, {b: (1.2, 0.5) for b in order}, tuple(order), 4)


@pytest.mark.parametrize("x", [0.0014, 0.005, 0.02])
def test_a_shifted_head_moves_the_mean_log_ratio_by_exactly_log_1_minus_x(x):
    setup = _setup([BENCH], {BENCH: x})
    truth = L.BlockResampler(_blocks()).draw(np.random.default_rng(2), [BENCH], 40)
    seen = {}
    for shift in (0.0, 1.0):
        rec = _Recorder()
        L.run_shifts(truth, setup, [shift], decide=rec)
        seen[shift] = np.array(rec.seen[x])
    moved = seen[1.0] - seen[0.0]
    assert np.mean(moved) == pytest.approx(math.log(1 - x), abs=1e-9)
    assert np.ptp(moved) < 1e-9  # every round by the same amount
    assert L.shift_log(x) == pytest.approx(math.log(1 - x), rel=1e-12)


def _always(verdict):
    def decide(rounds, threshold, plan, noise):
        return SimpleNamespace(complete=True, verdict=verdict, rounds_used=len(rounds), variance="model", reason="stub")

    return decide


def test_the_tallies_can_fail_a_decision_that_always_or_never_says_regression():
    order = [BENCH, OTHER]
    setup = _setup(order, {BENCH: 0.0014, OTHER: 0.005})
    sampler = L.BlockResampler(_blocks())
    rng = np.random.default_rng(3)
    truths = [sampler.draw(rng, order, 40) for _ in range(20)]
    always = [L.run_shifts(t, setup, [0.0, 0.5], decide=_always(Verdict.REGRESSION)) for t in truths]
    for s in (0.0, 0.5):
        cell = L.tally([r[s] for r in always], order, "false alarm")
        assert cell["pr_false_alarm"]["rate"] == 1.0 and cell["benchmark_false_alarm"]["rate"] == 1.0
        assert cell["pr_false_alarm"]["ci95"][0] > 0.8
    never = [L.run_shifts(t, setup, [1.0], decide=_always(Verdict.NO_CHANGE))[1.0] for t in truths]
    cell = L.tally(never, order, "miss")
    assert cell["benchmark_miss"]["rate"] == 1.0 and cell["benchmark_inconclusive"]["rate"] == 0.0
    assert all(cell["per_benchmark"][b]["miss"]["rate"] == 1.0 for b in order)
    unsure = L.tally(
        [L.run_shifts(t, setup, [1.0], decide=_always(Verdict.INCONCLUSIVE))[1.0] for t in truths], order, "miss"
    )
    assert unsure["benchmark_miss"]["rate"] == 0.0 and unsure["benchmark_inconclusive"]["rate"] == 1.0
    assert unsure["detected"]["rate"] == 1.0


def test_the_gates_own_decision_sees_a_clear_slowdown_and_passes_a_quiet_head():
    """The wiring to harness.paired.sequential: the model's noise, no departure, the head 5x its threshold slower."""
    import misspecification_rates as M

    order = [BENCH, OTHER]
    setup = _setup(order, {BENCH: 0.004, OTHER: 0.005})
    rng = np.random.default_rng(4)
    truth = M.draw_truth(rng, setup.model, order, 40, 4, "none")
    quiet = L.run_shifts(truth, setup, [0.0])[0.0]
    assert quiet.first_regression is None and all(v[0] == "no change" for v in quiet.verdicts.values())
    slow = L.run_shifts(truth, setup, [5.0])[5.0]
    assert slow.first_regression == BENCH and all(v[0] == "regression" for v in slow.verdicts.values())
    assert slow.stop_wall_s <= slow.wall_s


def test_the_departures_change_the_truth_as_named():
    model = load_noise_model(PROJECT / "ci/speed_noise_h200.json")
    import misspecification_rates as M

    def sd(departure, **kw):
        rng = np.random.default_rng(9)
        xs = [M.draw_truth(rng, model, [BENCH], 40, 4, departure, **kw)[BENCH][0] for _ in range(400)]
        return np.array(xs)

    base = sd("none")
    first = sd("first_round_slow")
    assert np.mean(first[:, ::4]) - np.mean(base[:, ::4]) == pytest.approx(math.log(1 - 0.005), abs=3e-4)
    assert np.mean(first[:, 1::4]) == pytest.approx(np.mean(base[:, 1::4]), abs=1e-12)  # same draws elsewhere
    noisy = sd("head_3x_one")
    assert np.std(noisy) / np.std(base) == pytest.approx(math.sqrt(5), rel=0.1)  # (1 + 9) / 2 of a round's variance
    ar = sd("ar1")
    lag1 = np.mean([np.corrcoef(r[:-1], r[1:])[0, 1] for r in ar])
    assert 0.35 < lag1 < 0.6 and abs(np.mean([np.corrcoef(r[:-1], r[1:])[0, 1] for r in base])) < 0.1
    with pytest.raises(ValueError, match="departure"):
        M.draw_truth(np.random.default_rng(0), model, [BENCH], 4, 4, "gaussian")


def test_a_version_7_replay_draws_generations_at_the_gates_cadence():
    """Version 7 starts new workers every round: a simulated generation is one round, a recorded generation's first,
    and no generation is drawn twice before all are used. Whole recorded generations (2-4 rounds) would give the
    replayed gate fewer generations than the real one; a repeated one-round generation, an exact tie no run has."""
    from ci.speed.engine.warm_engine import GATE_RESTART_EVERY
    from harness.paired.plan import ZONE_PLAN

    setup = _setup([BENCH, OTHER], {BENCH: 0.007, OTHER: 0.007}, plan=ZONE_PLAN)
    setup = L.Setup(setup.plan, setup.thresholds, setup.model, setup.costs, setup.order, L.restart_every(setup.plan))
    assert setup.restart == GATE_RESTART_EVERY == 1
    firsts = {b: {blk.log_ratios[0] for blk in v} for b, v in _blocks().items()}
    truth = L.BlockResampler(_blocks()).draw(np.random.default_rng(4), [BENCH, OTHER], 40, L.generation_rounds(setup))
    for b, (x, g, _) in truth.items():
        assert list(g) == list(range(40))  # one round a generation
        assert set(x.tolist()) <= firsts[b]
        # A real run never measures one worker generation twice: each is drawn once before any repeats.
        n = len(firsts[b])
        for start in range(0, 40 - n + 1, n):
            assert sorted(x[start : start + n].tolist()) == sorted(firsts[b])
    assert L.generation_rounds(_setup([BENCH], {BENCH: 0.007})) is None  # versions 5-6: whole generations, as tabled
    assert L.restart_every(MODEL_PLAN) == 2
