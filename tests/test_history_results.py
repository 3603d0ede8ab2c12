"""Results files validated before they join the history, and records that travel with each measurement.

Fast: temporary results directories with files asv's own code wrote (asv.results.Results.save),
then truncated or corrupted; and the GEMM benchmark run in this process on a CPU with a faked GPU
monitor, to see the idle-check override land on exactly one measurement.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asv_bench import bench_gemm, common, records
from ci.history.asv_results import folder as history_results
from ci.history.measure import summary as history_summary
from harness import gpu_state

COMMIT_A = "a" * 40
COMMIT_B = "b" * 40
MACHINE = "ci-test"
ENV = "virtualenv-py3.11"
KEY = "bench_gemm.GemmOnCpu.track_time"
PARAMS = [["'torch_dequant:bf16'", "'torch_dequant:fp32'"], ["'cpu_m00128_n00128_k02048'"]]


def write_results(results_dir: Path, commit: str, values: list[float | None], env: str = ENV) -> Path:
    """A results file written by asv's own Results.save, one value per parameter set of KEY."""
    from asv.results import Results
    from asv.runner import BenchmarkResult

    results = Results({"machine": MACHINE}, {}, commit, 0, "3.11", env, {})
    benchmark = {"name": KEY, "params": PARAMS, "version": "1/kc"}
    samples = [None if v is None else [v, v] for v in values]
    result = BenchmarkResult(
        result=[v is not None or None for v in values],
        samples=samples,
        number=[1] * len(values),
        errcode=0,
        stderr="",
        profile=None,
    )
    results.add_result(benchmark, result, record_samples=True)
    results.save(str(results_dir))
    (results_dir / MACHINE / "machine.json").write_text(json.dumps({"machine": MACHINE, "version": 1}))
    return results_dir / MACHINE / f"{commit[:8]}-{env}.json"


def test_a_truncated_and_an_invalid_results_file_are_moved_aside_with_a_message_and_the_rest_stays(tmp_path):
    results_dir = tmp_path / "results"
    good = write_results(results_dir, COMMIT_A, [0.01, 0.02])
    truncated = write_results(results_dir, COMMIT_B, [0.03, 0.04])
    truncated.write_bytes(truncated.read_bytes()[: len(truncated.read_bytes()) // 2])  # a kill mid-write
    invalid = results_dir / MACHINE / f"{'c' * 8}-{ENV}.json"
    invalid.write_text('{"version": 2, "commit_hash": "' + "c" * 40 + '", "results": [1, 2]}')
    sidecar = results_dir / MACHINE / f"{'d' * 8}-{ENV}{records.SUFFIX}"
    sidecar.write_text("{not json")

    messages = []
    moved = history_results.validate_tree(results_dir, tmp_path / "quarantine", messages.append)

    assert sorted(Path(q.path).name for q in moved) == sorted([truncated.name, invalid.name, sidecar.name])
    by_name = {Path(q.path).name: q for q in moved}
    assert "not valid JSON" in by_name[truncated.name].reason
    assert "missing" in by_name[invalid.name].reason
    for q in moved:
        assert Path(q.moved_to).is_file() and not (results_dir / q.path).exists()
        assert any(str(results_dir / q.path) in m and q.moved_to in m for m in messages), messages
    assert good.is_file() and (results_dir / MACHINE / "machine.json").is_file()
    # What is left is what asv reads without a warning: the history goes on from it.
    from asv.results import iter_results

    assert [r.commit_hash for r in iter_results(str(results_dir))] == [COMMIT_A]


@pytest.mark.parametrize(
    "mutate, reason",
    [
        (lambda d: d.update(commit_hash="e" * 40), "does not match the file name"),
        (lambda d: d["params"].update(machine="other"), "machine 'other'"),
        (lambda d: d.update(version=1), "format version 1"),
        (lambda d: d["results"][KEY].__setitem__(0, [0.1]), "1 values for 2 parameter sets"),
    ],
)
def test_results_that_parse_but_would_mislead_asv_are_refused(tmp_path, mutate, reason):
    path = write_results(tmp_path, COMMIT_A, [0.01, 0.02])
    data = json.loads(path.read_text())
    mutate(data)
    path.write_text(json.dumps(data))
    with pytest.raises(history_results.InvalidFile, match=reason):
        history_results.check_file(path, tmp_path)


def measured(median: float, job: str = "job-1", **extra) -> dict:
    return {
        "status": "measured",
        "job": job,
        "method_version": "1",
        "median_s": median,
        "tflops": 1.0,
        "flags": [],
        "samples_s": [median, median],
        **extra,
    }


def test_reconcile_resumes_what_asv_never_saved_and_compacts_what_it_did(tmp_path):
    results_file = write_results(tmp_path, COMMIT_A, [0.01, None])
    sidecar = records.sidecar_for_results_file(results_file)
    saved_key = f"{KEY}('torch_dequant:bf16', 'cpu_m00128_n00128_k02048')"
    lost_key = f"{KEY}('torch_dequant:fp32', 'cpu_m00128_n00128_k02048')"
    records.save(sidecar, {saved_key: measured(0.01), lost_key: measured(0.05)})

    report = history_results.reconcile(tmp_path, MACHINE)

    after = records.load(sidecar)
    assert report.resumable == [f"{COMMIT_A[:8]} {lost_key}"] and report.compacted == 1
    assert after[lost_key]["resume"] is True and after[lost_key]["samples_s"] == [0.05, 0.05]
    assert after[saved_key]["samples_s"] is None and not after[saved_key].get("resume")


@pytest.fixture
def asv_process_env(tmp_path, monkeypatch):
    """What asv sets for a benchmark process, plus the main job's machine and tag."""
    monkeypatch.setenv("ASV_CONF_DIR", str(tmp_path))
    monkeypatch.setenv("ASV_COMMIT", COMMIT_A)
    monkeypatch.setenv("ASV_ENV_NAME", ENV)
    monkeypatch.setenv(records.MACHINE_ENV, MACHINE)
    monkeypatch.setenv(records.JOB_ENV, f"{tmp_path}::job-1")
    monkeypatch.delenv(records.RESULTS_DIR_ENV, raising=False)
    monkeypatch.delenv(gpu_state.ALLOW_BUSY_ENV, raising=False)
    fast = common.timing.TimingBudget(warmup_ms=5.0, max_warmup_ms=50.0, rep_ms=20.0, min_reps=3, max_reps=20)
    monkeypatch.setattr(bench_gemm.GemmOnCpu, "budget", fast)
    return tmp_path / ".asv" / "results" / MACHINE / f"{COMMIT_A[:8]}-{ENV}{records.SUFFIX}"


class _FakeMonitor:
    """A GPU that another process is using: the idle check fails unless overridden."""

    backend = "fake"

    def snapshot(self):
        return gpu_state.GpuState("fake", 0, "Fake GPU", 1000.0, 2000.0, 1000.0, 50.0, 300.0, 700.0, 80.0, (), (4242,))

    def close(self):
        pass


def _measure(kernel_config: str, shape: str) -> None:
    bench = bench_gemm.GemmOnCpu()
    bench.setup(kernel_config, shape)
    bench.track_time(kernel_config, shape)


def test_an_idle_override_labels_only_the_measurement_it_was_given_to(asv_process_env, monkeypatch):
    monkeypatch.setattr(gpu_state, "open_monitor", lambda device: _FakeMonitor())
    monkeypatch.setattr(
        gpu_state.IdlePolicy, "from_environment", classmethod(lambda cls, environ=None: cls(wait_s=0.0))
    )
    shape = "cpu_m00128_n00128_k02048"
    monkeypatch.setenv(gpu_state.ALLOW_BUSY_ENV, "1")
    _measure("torch_dequant:bf16", shape)
    monkeypatch.delenv(gpu_state.ALLOW_BUSY_ENV)
    with pytest.raises(gpu_state.GpuBusyError):  # the same busy GPU, without the override: refused
        _measure("torch_dequant:fp32", shape)

    saved = records.load(asv_process_env)
    overridden = saved[f"{KEY}('torch_dequant:bf16', '{shape}')"]
    refused = saved[f"{KEY}('torch_dequant:fp32', '{shape}')"]
    assert overridden["status"] == "measured" and records.FLAG_IDLE_OVERRIDDEN in overridden["flags"]
    assert overridden["idle"]["status"] == "overridden" and "PIDs [4242]" in overridden["idle"]["problems"][0]
    assert refused == {"job": "job-1", "status": "failed", "failure": "harness", "reason": refused["reason"]}
    assert refused["reason"].startswith("GpuBusyError")

    # The summary marks that one measurement, and blames the refused one on the harness, not the kernel
    # (asv's bare failure for it is not counted a second time).
    write_results(asv_process_env.parents[1], COMMIT_A, [None, None])
    run = history_summary.collect_commit(asv_process_env.parents[1], MACHINE, COMMIT_A, "job-1", 0.0)
    assert [line.split(": ")[0] for line in history_summary.flagged([run])] == [
        f"{COMMIT_A[:8]} GemmOnCpu torch_dequant:bf16 {shape}"
    ]
    assert any("GpuBusyError" in f for f in run.harness_failures) and not run.failures


def test_records_say_why_a_benchmark_is_na(asv_process_env):
    with pytest.raises(NotImplementedError):
        _measure("triton_dot_scaled:m128_n128_k128_w8_s3", "cpu_m00128_n00128_k02048")
    (record,) = records.load(asv_process_env).values()
    assert record["status"] == "n/a" and "interpreter" in record["reason"]


def test_a_corrupt_sidecar_is_kept_aside_not_overwritten_by_the_next_record(tmp_path):
    sidecar = tmp_path / f"{COMMIT_A[:8]}-{ENV}{records.SUFFIX}"
    sidecar.write_text('{"records": {"x": ')
    records.update(sidecar, {"k": {"status": "n/a", "reason": "r"}})
    assert records.load(sidecar) == {"k": {"status": "n/a", "reason": "r"}}
    (kept,) = tmp_path.glob(f"{sidecar.name}.corrupt-*")
    assert kept.read_text() == '{"records": {"x": '


def test_a_commit_whose_only_benchmark_was_wrong_is_failed_for_that_reason_not_a_build_failure(
    asv_process_env, monkeypatch
):
    """Seen on the H200: a kernel wrong only at 8192^3 was reported as "build failed" by the main job."""
    from kernels.torch_dequant import TorchDequantGemm

    shape = "cpu_m00128_n00128_k02048"
    prepare = TorchDequantGemm._prepare

    def wrong_at_the_timed_shape(self, *args, **kwargs):
        launch = prepare(self, *args, **kwargs)
        out = args[2] if len(args) > 2 else kwargs["out"]

        def run():
            launch()
            out[0].zero_()

        return run

    monkeypatch.setattr(TorchDequantGemm, "_prepare", wrong_at_the_timed_shape)
    with pytest.raises(Exception, match="wrong result at 128x128x2048"):
        _measure("torch_dequant:bf16", shape)
    write_results(asv_process_env.parents[1], COMMIT_A, [None, None])  # asv's bare failure for it
    run = history_summary.collect_commit(asv_process_env.parents[1], MACHINE, COMMIT_A, "job-1", 0.0)
    assert run.status == history_summary.FAILED, run.status
    assert any("wrong result at 128x128x2048" in f for f in run.failures), run.failures
    assert not any("build" in f for f in run.failures) and not run.gemm
    # Without the record (asv built nothing), the same bare failure is the build's.
    records.save(asv_process_env, {})
    assert (
        history_summary.collect_commit(asv_process_env.parents[1], MACHINE, COMMIT_A, "job-1", 0.0).status
        == history_summary.BUILD_FAILED
    )
