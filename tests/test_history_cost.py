"""The history job's GPU cost (issue 21 item 3): tracks split by where they run, identical code not measured.

Fast: which asv benchmarks and machine each ``--tracks`` choice gives (the asv command line, not a
run); the identical-code plan and the copy of results on temporary results directories written by
asv's own code. Slow: the main job end to end on the CPU (GemmOnCpu stands in for the GPU timings):
a docs-only commit is not measured and shows as identical, ``--remeasure`` measures it, a changed
kernel is measured.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import history_job
import pytest
from test_asv_suite import commit_change
from test_history_results import COMMIT_A, COMMIT_B, ENV, MACHINE, write_results

from asv_bench import records
from ci.common.errors import UsageError
from ci.history import main_job
from ci.history.measure import asv_driver, copies, identical, tracks
from ci.history.measure import summary as history_summary

NAMES = [
    "bench_gemm.GemmOnGpu.track_time('triton_dot_scaled:m128_n128_k128_w8_s3', 'square_m08192_n08192_k08192')",
    "bench_gemm.GemmOnCpu.track_time('torch_dequant:bf16', 'cpu_m00128_n00128_k02048')",
    "bench_resources.CompiledResources.track_registers('triton_dot_scaled', 'sm_90')",
]


def selected(run: tracks.TrackRun) -> list[str]:
    return [n for n in NAMES if re.search(run.bench, n)]


# ---------------------------------------------------------------------------
# --tracks: what each choice selects, and under which machine
# ---------------------------------------------------------------------------


def test_tracks_gpu_selects_only_the_timings_of_this_machine_and_cpu_only_the_compile_tracks():
    (gpu,) = tracks.plan("gpu", True, "host-h200", (), NAMES)
    assert gpu.machine == "host-h200" and selected(gpu) == [NAMES[0]]
    (cpu,) = tracks.plan("cpu", True, "host-h200", (), NAMES)
    assert cpu.machine == tracks.COMPILE_MACHINE == "compile-only" and selected(cpu) == [NAMES[2]]
    both = tracks.plan("all", True, "host-h200", (), NAMES)
    assert [(r.kind, r.machine) for r in both] == [("gpu", "host-h200"), ("cpu", "compile-only")]
    # Without a GPU the timing track is the CPU stand-in.
    (stand_in,) = tracks.plan("gpu", False, "host-cpu", (), NAMES)
    assert selected(stand_in) == [NAMES[1]]


def test_bench_narrows_each_track_and_a_track_it_selects_nothing_of_is_not_run():
    runs = tracks.plan("all", True, "m", ["triton_dot_scaled"], NAMES)
    assert [selected(r) for r in runs] == [[NAMES[0]], [NAMES[2]]]
    assert [r.kind for r in tracks.plan("all", True, "m", ["track_registers"], NAMES)] == ["cpu"]
    assert tracks.plan("gpu", True, "m", ["track_registers"], NAMES) == []


def test_the_asv_command_line_carries_the_tracks_machine_and_one_bench_regex():
    options = main_job.COMMAND.checked(["--tracks=gpu", "--bench=torch_dequant"])
    assert options.tracks == "gpu" and not options.remeasure
    (run,) = tracks.plan(options.tracks, False, "host-cpu", options.bench, NAMES)
    args = asv_driver.asv_run_args(run, "forkserver")
    assert "--machine=host-cpu" in args and "--launch-method=forkserver" in args
    (bench,) = [a.removeprefix("--bench=") for a in args if a.startswith("--bench=")]
    assert [n for n in NAMES if re.search(bench, n)] == [NAMES[1]]
    (compile_run,) = tracks.plan("cpu", False, "host-cpu", (), NAMES)
    assert "--machine=compile-only" in asv_driver.asv_run_args(compile_run, "forkserver")
    assert main_job.COMMAND.checked(["--remeasure"]).remeasure
    with pytest.raises(UsageError):
        main_job.COMMAND.checked(["--tracks=gpus"])


# ---------------------------------------------------------------------------
# identical code: the plan, the copy, the summary
# ---------------------------------------------------------------------------

KEYS = [f"bench_gemm.GemmOnCpu.track_time('torch_dequant:{c}', 'cpu_m00128_n00128_k02048')" for c in ("bf16", "fp32")]
PRINT = {"launch path": "l" * 64, "device code": "none (cpu)", "environment": "e" * 64}


def measured_commit(results_dir: Path, commit: str, values: list[float], job: str) -> None:
    """``commit`` measured by ``job``: asv's results file and the records, as a run leaves them."""
    write_results(results_dir, commit, values)
    sidecar = results_dir / MACHINE / f"{commit[:8]}-{ENV}{records.SUFFIX}"
    records.save(
        sidecar, {k: {"status": "measured", "job": job, "median_s": v, "tflops": 1.0} for k, v in zip(KEYS, values)}
    )


def test_a_commit_with_identical_fingerprints_is_not_measured_and_gets_the_measured_commits_results(tmp_path):
    results_dir = tmp_path / "results"
    measured_commit(results_dir, COMMIT_A, [0.01, 0.02], job="j1")
    assert identical.stamp(results_dir, MACHINE, COMMIT_A, {k: PRINT for k in KEYS}, "j1") == 2
    known = identical.recorded(results_dir, MACHINE)
    assert list(known) == [COMMIT_A]

    same = identical.plan([COMMIT_B], known, lambda c: {k: PRINT for k in KEYS}, lambda k: True)
    assert same.measure == [] and same.identical == {COMMIT_B: COMMIT_A}
    again = identical.plan([COMMIT_A], known, lambda c: {k: PRINT for k in KEYS}, lambda k: True)
    # measured before: said as such, not "identical to itself", and nothing copied (a run with nothing new writes
    # nothing)
    assert again.already == {COMMIT_A: COMMIT_A} and again.identical == {} and again.measure == []
    assert identical.describe(again) == [
        f"{COMMIT_A[:12]}: already measured on this machine: not measured again (--remeasure measures it again)"
    ]

    copied = copies.copy_results(results_dir, MACHINE, COMMIT_A, COMMIT_B, 1234, tracks.CPU_TIMINGS, "j2")
    assert copied.rows == 1 and copied.records == 2
    run = history_summary.collect_commit(results_dir, MACHINE, COMMIT_B, "j2", started_ms=10**15)
    assert run.status == history_summary.IDENTICAL and run.identical_to == COMMIT_A
    assert run.describe_status() == f"identical code to {COMMIT_A[:12]}: not re-measured"
    assert sorted(r["median_s"] for r in run.gemm.values()) == [0.01, 0.02] and not run.failures
    data = json.loads((results_dir / MACHINE / f"{COMMIT_B[:8]}-{ENV}.json").read_text())
    assert data["commit_hash"] == COMMIT_B and data["date"] == 1234
    notes = {r["note"] for r in records.load(results_dir / MACHINE / f"{COMMIT_B[:8]}-{ENV}{records.SUFFIX}").values()}
    assert notes == {f"identical code to {COMMIT_A[:12]}: not re-measured"}
    # The copy is itself a known commit whose original is A: a third identical commit names A.
    assert identical.match({k: PRINT for k in KEYS}, identical.recorded(results_dir, MACHINE)) == COMMIT_A


def test_remeasure_a_changed_kernel_or_an_unknown_fingerprint_is_measured(tmp_path):
    results_dir = tmp_path / "results"
    measured_commit(results_dir, COMMIT_A, [0.01, 0.02], job="j1")
    identical.stamp(results_dir, MACHINE, COMMIT_A, {k: PRINT for k in KEYS}, "j1")
    known = identical.recorded(results_dir, MACHINE)
    same = {k: PRINT for k in KEYS}

    forced = identical.plan([COMMIT_B], known, lambda c: same, lambda k: True, remeasure=[COMMIT_B])
    assert forced.measure == [COMMIT_B] and forced.reasons[COMMIT_B] == "--remeasure"
    changed = {KEYS[0]: {**PRINT, "launch path": "x" * 64}, KEYS[1]: PRINT}
    assert identical.plan([COMMIT_B], known, lambda c: changed, lambda k: True).measure == [COMMIT_B]
    unknown = {KEYS[0]: None, KEYS[1]: PRINT}
    plan = identical.plan([COMMIT_B], known, lambda c: unknown, lambda k: True)
    assert plan.measure == [COMMIT_B] and "unknown" in plan.reasons[COMMIT_B]
    # A measurement another job made and this one did not is never stamped with this job's fingerprint.
    assert identical.stamp(results_dir, MACHINE, COMMIT_A, same, "someone-else") == 0


def test_a_commit_measured_on_this_machine_is_not_fingerprinted_again_whatever_its_environments(tmp_path):
    """The main job with nothing new costs no compile: a known commit is not fingerprinted (unless --remeasure). Its
    fingerprints are those of all its results files: one per asv environment, merged (not the last one read)."""
    results_dir = tmp_path / "results"
    measured_commit(results_dir, COMMIT_A, [0.01, 0.02], job="j1")
    identical.stamp(results_dir, MACHINE, COMMIT_A, {k: PRINT for k in KEYS}, "j1")
    other_env = results_dir / MACHINE / f"{COMMIT_A[:8]}-zz-other-env{records.SUFFIX}"  # sorts after ENV's files
    gpu_key = "bench_gemm.GemmOnGpu.track_time('triton_dot_scaled:m128_n128_k128_w8_s3', 'square_m08192_n08192_k08192')"
    write_results(results_dir, COMMIT_A, [0.01, 0.02], env="zz-other-env")
    records.save(
        other_env, {gpu_key: {"status": "measured", "job": "j0", "median_s": 0.01, "tflops": 1.0, "fingerprint": PRINT}}
    )
    known = identical.recorded(results_dir, MACHINE)
    assert set(known[COMMIT_A].fingerprints) == {*KEYS, gpu_key}

    def never(commit):
        raise AssertionError(f"{commit[:8]} fingerprinted again")

    plan = identical.plan([COMMIT_A], known, never, lambda k: k in KEYS)
    assert plan.already == {COMMIT_A: COMMIT_A} and plan.measure == [] and plan.identical == {}
    forced = identical.plan(
        [COMMIT_A], known, lambda c: {k: PRINT for k in KEYS}, lambda k: k in KEYS, remeasure=[COMMIT_A]
    )
    assert forced.measure == [COMMIT_A]
    # Known only for benchmarks this run does not select (another track): fingerprinted and measured.
    other = identical.plan([COMMIT_A], known, lambda c: {"x": PRINT}, lambda k: k == "x")
    assert other.measure == [COMMIT_A]


def test_within_one_run_a_newer_identical_commit_equals_the_older_one_measured_in_it():
    commits = ["c" * 40, "b" * 40, "a" * 40]  # newest first, as asv takes them
    prints = {
        "a" * 40: {KEYS[0]: PRINT},
        "b" * 40: {KEYS[0]: PRINT},
        "c" * 40: {KEYS[0]: {**PRINT, "device code": "y"}},
    }
    plan = identical.plan(commits, {}, prints.__getitem__, lambda k: True)
    assert plan.measure == ["c" * 40, "a" * 40] and plan.identical == {"b" * 40: "a" * 40}


# ---------------------------------------------------------------------------
# end to end on the CPU: docs-only not measured, --remeasure measures, a changed kernel is measured
# ---------------------------------------------------------------------------


def _job(repo: Path, home: Path, *args: str) -> dict:
    report, done = history_job.run_job(repo, home, "--tracks=gpu", "--no-publish", *args)
    return {**report, "stdout": done.stdout}


@pytest.mark.slow
def test_identical_code_costs_no_gpu_time_end_to_end(tmp_path, measured_project):
    # The first run (--tracks gpu; it also published, which the later runs do not read) is the session's.
    measured = history_job.copy_project(measured_project, tmp_path)
    repo, home, first = measured.repo, measured.home, measured.report
    (base,) = first["commits"]
    assert first["status"][base] == "measured" and first["cost"]["gpu"]["benchmark_seconds"] > 0
    assert first["tracks"] == {"gpu": first["machine"]}  # --tracks gpu: no compile track ran

    docs = commit_change(repo, "README.md", "\nA docs-only change.\n", "docs")
    second = _job(repo, home)
    assert second["status"][docs] == "identical code" and second["identical_to"] == {docs: base}
    assert second["cost"]["gpu"]["benchmark_seconds"] == 0 and second["cost"]["gpu"]["asv_wall_seconds"] < 1
    assert second["cost"]["gpu"]["saved_seconds"] > 0
    assert f"identical code to {base[:12]}: not re-measured" in second["stdout"]
    assert second["measurements"][docs] and all(
        r["identical_to"] == base for r in second["measurements"][docs].values()
    )

    forced = _job(repo, home, "--remeasure")
    assert forced["status"][docs] == "measured" and forced["cost"]["gpu"]["benchmark_seconds"] > 0

    kernel = commit_change(repo, "kernels/torch_dequant.py", "\n_CHANGED = 1\n", "kernel")
    changed = _job(repo, home)
    assert changed["status"][kernel] == "measured" and not changed["identical_to"]
