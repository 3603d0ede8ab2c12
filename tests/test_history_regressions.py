"""ci.history.trends.regressions: series read from asv results + records (through
ci.history.asv_results.store), change points as commits, the drift guard."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from asv_bench import records
from ci.history.asv_results import store
from ci.history.trends import regressions

ENV = "virtualenv-py3.11"
KEY = "bench_gemm.GemmOnCpu.track_time"
PARAMS = [["'torch_dequant:bf16'"], ["'cpu_m00128_n00128_k02048'"]]
BENCH = f"{KEY}('torch_dequant:bf16', 'cpu_m00128_n00128_k02048')"
FLOPS = 2 * 128 * 128 * 2048


def machine_series(results_dir: Path, machine: str, commits_oldest_first: list[str]) -> dict:
    """benchmark key -> its series on ``machine`` over ``commits_oldest_first`` (commits without a value left out)."""
    order = {commit: i for i, commit in enumerate(commits_oldest_first)}
    return regressions.series_of(store.read_history(results_dir, order), machine)


def write_commit(results_dir: Path, machine: str, commit: str, times: list[float], **record_extra) -> None:
    """One commit's results file (asv's own Results.save) and its records sidecar."""
    from asv.results import Results
    from asv.runner import BenchmarkResult

    results = Results({"machine": machine}, {}, commit, 0, "3.11", ENV, {})
    benchmark = {"name": KEY, "params": PARAMS, "version": "1/kc"}
    result = BenchmarkResult(
        result=[float(np.median(times))], samples=[list(times)], number=[1], errcode=0, stderr="", profile=None
    )
    results.add_result(benchmark, result, record_samples=True)
    results.save(str(results_dir))
    (results_dir / machine / "machine.json").write_text(json.dumps({"machine": machine, "version": 1}))
    sidecar = results_dir / machine / (records.results_file_stem(commit, ENV) + records.SUFFIX)
    records.save(
        sidecar,
        {
            BENCH: {
                "status": "measured",
                "job": "j",
                "median_s": float(np.median(times)),
                "tflops": FLOPS / float(np.median(times)) / 1e12,
                "flops": FLOPS,
                "flags": [],
                "samples_s": None,
                **record_extra,
            }
        },
    )


def commit(i: int) -> str:
    return f"{i:02x}" * 20


def history(tmp_path: Path, tflops_levels: list[float], machine: str = "h200-a", seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    shas = [commit(i) for i in range(len(tflops_levels))]
    for sha, level in zip(shas, tflops_levels):
        tflops = level * (1 + rng.normal(0, 0.002)) * (1 + rng.normal(0, 0.003, 8))
        write_commit(tmp_path, machine, sha, list(FLOPS / (tflops * 1e12)))
    return shas


def test_series_holds_every_sample_as_tflops_and_never_mixes_machines(tmp_path):
    shas = history(tmp_path, [100.0] * 4, machine="h200-a")
    history(tmp_path, [50.0] * 4, machine="h200-b")
    [series] = machine_series(tmp_path, "h200-a", shas).values()
    assert series.benchmark == BENCH and series.commits == shas
    # Each commit's level is the median over its 8 samples; their spread (0.3%) gives its standard error.
    assert np.allclose(series.medians(), 100.0, rtol=0.02)
    assert np.all(series.errors > 0) and np.all(series.errors < 0.003)
    one = history(tmp_path / "one", [100.0] * 3)
    write_commit(tmp_path / "one", "h200-a", commit(7), [FLOPS / 100e12])  # a single sample: no error estimate
    assert machine_series(tmp_path / "one", "h200-a", [*one, commit(7)])[BENCH].errors[-1] == 0.0


def test_copied_identical_code_results_are_not_counted_twice(tmp_path):
    shas = history(tmp_path, [100.0] * 3)
    write_commit(tmp_path, "h200-a", commit(9), [FLOPS / 100e12] * 4, identical_to=shas[-1], copied_by="j")
    [series] = machine_series(tmp_path, "h200-a", [*shas, commit(9)]).values()
    assert series.commits == shas


def test_a_change_point_names_the_commits_around_it(tmp_path):
    shas = history(tmp_path, [100.0] * 6 + [97.0] * 6)
    [series] = machine_series(tmp_path, "h200-a", shas).values()
    [change], _ = regressions.change_points(series)
    assert (change.last_before, change.first_after) == (shas[5], shas[6])
    assert change.change.direction == "regression"
    assert "regression -3." in change.line() and shas[5][:12] in change.line()


def test_the_drift_guard_fires_on_small_steps_that_add_up(tmp_path):
    # Four 1% steps: none over the 2% floor alone, 4% together.
    levels = [100.0] * 4 + [99.0, 98.0, 97.0, 96.0]
    shas = history(tmp_path, levels)
    report = regressions.drift(machine_series(tmp_path, "h200-a", shas)[BENCH])
    assert report.failed and report.drop == pytest.approx(0.04, abs=0.01)
    assert report.best in shas[:4] and report.newest == shas[-1]
    assert "FAILS" in report.line() and report.best[:12] in report.line()


def test_the_drift_guard_passes_a_flat_history_and_a_drop_inside_its_threshold(tmp_path):
    shas = history(tmp_path, [100.0] * 9 + [98.8])
    report = regressions.drift(machine_series(tmp_path, "h200-a", shas)[BENCH])
    assert not report.failed and report.threshold == pytest.approx(regressions.DRIFT_FLOOR)


def test_the_drift_threshold_grows_with_the_benchmarks_noise():
    rng = np.random.default_rng(1)
    noisy = regressions.Series("m", "b", [commit(i) for i in range(10)], np.log(100 * (1 + rng.normal(0, 0.03, 10))))
    found = regressions.drift(noisy)
    assert found.threshold > regressions.DRIFT_FLOOR
    assert found.threshold == pytest.approx(1 - np.exp(-regressions.DRIFT_K * found.noise))


def test_the_drift_guard_looks_only_at_its_window():
    series = regressions.Series("m", "b", [commit(i) for i in range(15)], np.log([200.0] * 3 + [100.0] * 12))
    assert not regressions.drift(series, window=10).failed
    assert regressions.drift(series, window=15).failed


def checks_of(results_dir: Path, machine: str, shas: list[str], timed_on_gpu: bool = True) -> dict:
    order = {sha: i for i, sha in enumerate(shas)}
    return regressions.history_checks(store.read_history(results_dir, order), machine, timed_on_gpu=timed_on_gpu)


def test_the_main_jobs_history_checks_report_change_points_and_drift_per_machine(tmp_path):
    shas = history(tmp_path, [100.0] * 6 + [99.0, 98.0, 97.0, 96.0, 96.0, 96.0])
    history(tmp_path, [50.0] * 12, machine="h200-b")  # another machine: never in h200-a's checks
    checks = checks_of(tmp_path, "h200-a", shas)
    assert checks["machine"] == "h200-a" and checks["benchmarks"] == 1 and checks["commits"] == 12
    assert checks["change_points"] and all(c["machine"] == "h200-a" for c in checks["change_points"])
    assert len(checks["drift_failed"]) == 1 and "FAILS" in checks["drift_failed"][0]
    text = "\n".join(regressions.history_markdown(checks))
    assert "change point:" in text and "**drift**" in text
    flat = checks_of(tmp_path, "h200-b", shas)
    assert flat["change_points"] == [] and flat["drift_failed"] == []
    assert "no change point" in "\n".join(regressions.history_markdown(flat))


def test_a_cpu_machines_timings_and_a_short_history_never_fail_the_drift_guard(tmp_path):
    shas = history(tmp_path, [100.0] * 6 + [90.0] * 6)  # a 10% drop: fails on a GPU machine
    assert checks_of(tmp_path, "h200-a", shas)["drift_failed"]
    cpu = checks_of(tmp_path, "h200-a", shas, timed_on_gpu=False)
    assert cpu["drift_failed"] == [] and cpu["change_points"] == [] and cpu["not_checked"]
    assert "not checked" in "\n".join(regressions.history_markdown(cpu))
    short = history(tmp_path / "short", [100.0, 100.0, 95.0, 90.0])  # 4 commits: no noise estimate yet
    assert checks_of(tmp_path / "short", "h200-a", short)["drift"] == []


def _gpu_machine(results_dir: Path, machine: str, gpu: str) -> None:
    """The asv machine file as the main job writes it (ci.history.measure.machine_info.machine_fields), with its GPU."""
    (results_dir / machine / "machine.json").write_text(json.dumps({"machine": machine, "gpu": gpu, "version": 1}))


def test_two_machines_of_one_kind_2pct_apart_are_a_spread_not_a_change_point(tmp_path):
    from ci.history.trends import machine_spread

    shas = history(tmp_path, [100.0] * 12, machine="h200-a", seed=1)
    history(tmp_path, [98.0] * 12, machine="h200-b", seed=2)  # 2% slower, the same commits, no step
    history(tmp_path, [300.0] * 12, machine="mi355x-a", seed=3)  # another kind: compared with nobody
    _gpu_machine(tmp_path, "h200-a", "NVIDIA H200 x1")
    _gpu_machine(tmp_path, "h200-b", "NVIDIA H200 x8")
    _gpu_machine(tmp_path, "mi355x-a", "AMD Instinct MI355X x8")
    assert machine_spread.machines_by_kind(tmp_path) == {
        "NVIDIA H200": ["h200-a", "h200-b"],
        "AMD Instinct MI355X": ["mi355x-a"],
    }
    for machine in ("h200-a", "h200-b"):  # each compared only with itself: the offset is no change
        checks = checks_of(tmp_path, machine, shas)
        assert checks["change_points"] == [] and checks["drift_failed"] == [], checks
    [row] = machine_spread.spread(tmp_path, store.read_history(tmp_path, {sha: i for i, sha in enumerate(shas)}))
    assert row["kind"] == "NVIDIA H200" and row["machines"] == ["h200-a", "h200-b"] and row["commits"] == 12
    assert row["ratio"] == pytest.approx(0.98, abs=0.004) and row["tflops"][0] == pytest.approx(100.0, rel=0.01)
    text = "\n".join(machine_spread.spread_markdown([row]))
    assert "Machine-to-machine spread" in text and f"{(row['ratio'] - 1) * 100:+.1f}%" in text and "h200-b" in text

    # Commits only one machine measured are not compared; a CPU machine has no kind.
    later = [commit(i) for i in range(12, 15)]
    for sha in later:
        write_commit(tmp_path, "h200-a", sha, [FLOPS / 50e12] * 4)  # half the TFLOPS, measured on one machine only
    _gpu_machine(tmp_path, "h200-a", "NVIDIA H200 x1")
    [row] = machine_spread.spread(
        tmp_path, store.read_history(tmp_path, {sha: i for i, sha in enumerate(shas + later)}), newest=15
    )
    assert row["commits"] == 12 and row["ratio"] == pytest.approx(0.98, abs=0.004)
    (tmp_path / "cpu-box").mkdir()
    _gpu_machine(tmp_path, "cpu-box", "none")
    assert "cpu-box" not in str(machine_spread.machines_by_kind(tmp_path))
    assert machine_spread.spread_markdown([]) == []


def test_the_recorded_h200_history_gives_its_two_real_steps_and_nothing_else():
    """docs/data/h200_history: 9 measured commits of the tracked Triton config on the H200, a +0.94% and a +3.09%
    slowdown put in at c4 and c9 among six speed-neutral edits (docs/CHANGE_POINTS.md). Its commit order is the
    branch's (exp_history.txt, newest first): the results files' dates tie."""
    data = Path(__file__).resolve().parents[1] / "docs" / "data" / "h200_history"
    shas = [line.split()[0] for line in (data / "exp_history.txt").read_text().splitlines() if line.strip()][::-1]
    results = data / "asv" / "results"
    full = {c[:7]: c for c in store.read_history(results).commits}
    checks = regressions.history_checks(
        store.read_history(results, {full[s]: i for i, s in enumerate(shas) if s in full}),
        "vm-nvidia-h200",
        timed_on_gpu=True,
    )
    found = [(c["first_after"][:7], round(c["change"]["relative_change"], 4)) for c in checks["change_points"]]
    assert found == [("853c0bb", -0.0094), ("9e6c5d1", -0.0309)], found  # c4 and c9
