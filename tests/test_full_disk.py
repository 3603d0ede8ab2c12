"""A full disk in each write path of the main job, the gates and publish: one line, exit 2, nothing lost.

Each test runs the real command in a subprocess with the folder of the path under test on a tmpfs filled to its
last page (a real ENOSPC from the kernel: nothing is mocked) and everything else on the ordinary disk, so the
steps before succeed and that write fails. It asserts exit 2, no traceback, the error as the last line of stderr
naming the file and what was kept, every earlier file byte-identical and no temporary file left. Mounting needs
root (CI runs as root); elsewhere these tests skip, saying so.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import history_job
import pytest
import test_budget_gate
from test_asv_suite import asv_env, commit_change, git

gate_env, probe_repo = test_budget_gate.gate_env, test_budget_gate.probe_repo  # the budget gate's fixtures

FILLER = "filler.bin"
EARLIER = "earlier\n" * 512  # a whole page: appending to it needs a page more
NO_SUMMARY = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}


@contextlib.contextmanager
def full(folder: Path, size: str = "2m") -> Iterator[Path]:
    """``folder``, its files as they were, on a tmpfs with no page left: every new byte there fails with ENOSPC."""
    saved = folder.with_name(folder.name + ".before-tmpfs")
    if folder.exists():
        folder.rename(saved)
    folder.mkdir(parents=True)
    mounted = (
        os.geteuid() == 0
        and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True
        ).returncode
        == 0
    )
    if not mounted:
        pytest.skip("a full disk needs a tmpfs, which needs root (CI runs as root)")
    try:
        if saved.exists():
            shutil.copytree(saved, folder, dirs_exist_ok=True)  # copy2: the times the ledger knows files by
            shutil.rmtree(saved)
        with open(folder / FILLER, "wb", buffering=0) as f:
            try:
                while True:
                    f.write(b"\0" * 4096)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != FILLER
    }


def assert_one_clean_line(done: subprocess.CompletedProcess, prefix: str, path: Path) -> str:
    """Exit 2, no traceback, and the last line of stderr the error: naming ``path``, the disk and what was kept."""
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-4000:]
    assert "Traceback" not in done.stderr, done.stderr[-4000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(prefix) and f"cannot write {path}" in last, last
    assert "No space left on device" in last and "kept: " in last, last
    return last


def no_temporary_files(folder: Path) -> None:
    left = [p.name for p in folder.rglob("*") if p.name.endswith((".tmp", ".partial"))]
    assert not left, left


# ---------------------------------------------------------------------------
# the main job (python -m ci.history)
# ---------------------------------------------------------------------------


def _main_job(repo: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "ci.history",
            "--commits=1",
            f"--bench={history_job.TWO_CPU_TIMINGS}",
            "--tracks=gpu",
            "--no-publish",
            *args,
        ],
        cwd=repo,
        env=asv_env(home),
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.mark.slow
def test_the_copy_of_identical_code_on_a_full_disk(tmp_path, measured_project):
    """The case found at 99191cf: a two-part traceback where one line was promised."""
    measured = history_job.copy_project(measured_project, tmp_path)
    docs = commit_change(measured.repo, "README.md", "\nA docs-only change.\n", "docs")
    results = measured.repo / ".asv" / "results"
    before = files(results)
    with full(results / measured.report["machine"]) as machine_dir:
        done = _main_job(measured.repo, measured.home)
        assert_one_clean_line(done, "python -m ci.history: error: ", machine_dir / f"{docs[:8]}-")
        assert files(results) == before
        no_temporary_files(results)


@pytest.mark.slow
def test_the_main_jobs_json_report_on_a_full_disk(tmp_path, measured_project):
    measured = history_job.copy_project(measured_project, tmp_path)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "report.json").write_text('{"an": "earlier report"}\n')
    results = measured.repo / ".asv" / "results"
    before = files(results)
    with full(tmp_path / "out") as out:
        done = _main_job(measured.repo, measured.home, f"--json={out / 'report.json'}")
        last = assert_one_clean_line(done, "python -m ci.history: error: ", out / "report.json")
        assert "this run's results in" in last
        assert (out / "report.json").read_text() == '{"an": "earlier report"}\n'
        no_temporary_files(out)
    assert files(results) == before


# ---------------------------------------------------------------------------
# publish (python -m ci.history.publish): the site's folder
# ---------------------------------------------------------------------------


@pytest.mark.slow
def test_publishing_into_a_full_site_folder(tmp_path):
    import synthetic_history as synthetic
    from test_published_history import _clone, _publish

    clone = _clone(tmp_path / "clone")
    _, held = synthetic.make_history(clone, synthetic.Spec(commits=30, seed=2), hold_back=1)
    _publish(clone, tmp_path / "first.json")
    next(iter(held))  # one merge more: every page changes
    scratch = clone / ".site.building"
    with full(clone / "site", size="64m") as site:
        before = files(site)
        done = subprocess.run(
            [sys.executable, "-m", "ci.history.publish", "--local-branch", "--out", str(site)],
            cwd=clone,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(clone)},
        )
        assert_one_clean_line(done, "python -m ci.history.publish: error: ", site)
        new = files(scratch)
        assert all(data in (before.get(name), new.get(name)) for name, data in files(site).items())  # each file whole
        assert any(files(site)[name] == data for name, data in before.items() if new.get(name) != data)  # old ones kept
        no_temporary_files(site)


# ---------------------------------------------------------------------------
# the gates' records: python -m ci.notify
# ---------------------------------------------------------------------------


def test_the_pr_comment_into_a_full_folder(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "comment.md").write_text("an earlier comment\n")
    with full(tmp_path / "out", size="64k") as out:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "ci.notify",
                "comment",
                "--artifacts",
                str(tmp_path),
                "--run-url",
                "https://github.com/a/b/actions/runs/1",
                "--out",
                str(out / "comment.md"),
            ],
            capture_output=True,
            text=True,
            env=NO_SUMMARY,
        )
        assert_one_clean_line(done, "python -m ci.notify: error: ", out / "comment.md")
        assert files(out) == {"comment.md": b"an earlier comment\n"}


def test_the_bisection_record_into_a_full_folder(tmp_path):
    from test_asv_suite import make_project

    repo = make_project(tmp_path)
    commit_change(repo, "README.md", "\nA docs-only change.\n", "docs")  # no code change: nothing to measure
    with full(tmp_path / "out", size="64k") as out:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "ci.bisect",
                "--good",
                "HEAD~1",
                "--bad",
                "HEAD",
                "--benchmark",
                "torch_dequant[bf16]/s",
                "--repo",
                str(repo),
                "--json",
                str(out / "bisect.json"),
            ],
            capture_output=True,
            text=True,
            env=NO_SUMMARY,
        )
        assert "No code change" in done.stdout
        assert_one_clean_line(done, "python -m ci.bisect: error: ", out / "bisect.json")
        assert files(out) == {}


# ---------------------------------------------------------------------------
# the speed gate (python -m ci.speed): its record, Markdown and plot, from a recorded run replayed
# ---------------------------------------------------------------------------

RECORDED = Path(__file__).resolve().parents[1] / "docs/data/h200_noise_model/after/after_one_pass.json"
OUTPUTS = {"--json": "gate.json", "--plot": "gate.png", "$GITHUB_STEP_SUMMARY": "summary.md"}


@pytest.mark.parametrize("refused", list(OUTPUTS))
def test_one_output_of_the_speed_gate_on_a_full_disk(tmp_path, refused):
    (tmp_path / "roomy").mkdir()
    (tmp_path / "full").mkdir()
    where = {option: tmp_path / ("full" if option == refused else "roomy") / name for option, name in OUTPUTS.items()}
    where[refused].write_text(EARLIER)
    with full(tmp_path / "full") as cramped:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "ci.speed",
                "--replay",
                str(RECORDED),
                "--json",
                str(where["--json"]),
                "--plot",
                str(where["--plot"]),
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "GITHUB_STEP_SUMMARY": str(where["$GITHUB_STEP_SUMMARY"])},
        )
        if refused == "--plot":
            assert_one_clean_line(done, "python -m ci.speed: error: ", where[refused])
        else:  # the data went to a named fallback file, and the line says where
            assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
            last = done.stderr.strip().splitlines()[-1]
            assert last.startswith(
                f"python -m ci.speed: error: {refused} {where[refused]}: cannot write there (No space"
            ), last
            spare = Path(last.split("kept: the ")[1].split(" in ", 1)[1])
            assert spare.stat().st_size > 1000
            spare.unlink()
        assert files(cramped) == {OUTPUTS[refused]: EARLIER.encode()}
    assert all(path.stat().st_size > 1000 for option, path in where.items() if option != refused)  # the others written
    if refused != "--json":
        assert json.loads(where["--json"].read_text())["verdict"] != "error"  # the record, not an error record


# ---------------------------------------------------------------------------
# the budget gate (python -m ci.budget): its record, Markdown and --update-budget
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("refused", ["--json", "$GITHUB_STEP_SUMMARY", "--update-budget"])
def test_one_output_of_the_budget_gate_on_a_full_disk(probe_repo, tmp_path, refused):
    import git
    from test_budget_gate import CANNED, run_gate

    root, _ = probe_repo
    work = tmp_path / "work"
    git.Repo.clone_from(f"file://{root}", work).git.checkout("origin/trade", b="trade", quiet=True)  # a tightening
    names = {"--json": "gate.json", "$GITHUB_STEP_SUMMARY": "summary.md", "--update-budget": "budget.json"}
    (tmp_path / "roomy").mkdir()
    (tmp_path / "full").mkdir()
    where = {option: tmp_path / ("full" if option == refused else "roomy") / name for option, name in names.items()}
    shutil.copy(work / "ci/register_budget.json", where["--update-budget"])
    where["$GITHUB_STEP_SUMMARY"].write_text(EARLIER)
    before = {option: path.read_bytes() for option, path in where.items() if path.exists()}
    with full(tmp_path / "full", size="64k") as cramped:
        done = run_gate(
            work,
            "--base",
            "origin/main",
            "--kernel",
            CANNED,
            "--json",
            str(where["--json"]),
            "--update-budget",
            "--budget",
            str(where["--update-budget"]),
            env_extra={"GITHUB_STEP_SUMMARY": str(where["$GITHUB_STEP_SUMMARY"])},
        )
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stdout[-2000:] + done.stderr[-3000:]
        last = done.stderr.strip().splitlines()[-1]
        assert (
            last.startswith("python -m ci.budget: error: ") and str(where[refused]) in last and "cannot write" in last
        ), last
        assert "No space left on device" in last and "kept: " in last, last
        if refused != "--update-budget":  # the data went to a named fallback file, and the line says where
            spare = Path(last.split("kept: the ")[1].split(" in ", 1)[1])
            assert spare.stat().st_size > 100
            spare.unlink()
        assert files(cramped) == ({names[refused]: before[refused]} if refused in before else {})
    if refused != "--json":
        assert json.loads(where["--json"].read_text())["verdict"] == "pass"  # the record, not an error record


@pytest.mark.slow
def test_the_main_jobs_log_on_a_full_disk(tmp_path, measured_project):
    """The log is not a result: it stops with one line saying so, and the job goes on to record its results."""
    measured = history_job.copy_project(measured_project, tmp_path)
    docs = commit_change(measured.repo, "README.md", "\nA docs-only change.\n", "docs")
    (tmp_path / "logs").mkdir()
    log = measured.repo / ".asv" / "main_job.log"
    log.unlink()
    log.symlink_to(tmp_path / "logs" / "main_job.log")  # opened through the link: its writes land on the full disk
    with full(tmp_path / "logs", size="64k"):
        done = _main_job(measured.repo, measured.home, f"--json={tmp_path / 'report.json'}")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-4000:]
    refused = [line for line in done.stderr.splitlines() if "main_job.log (No space left on device)" in line]
    assert refused == [
        f"main_job: cannot write {log} (No space left on device); kept: the log up to here, the rest on "
        "this screen only"
    ], refused
    assert json.loads((tmp_path / "report.json").read_text())["status"][docs] == "identical code"


@pytest.mark.slow
def test_asvs_own_results_on_a_full_disk(tmp_path, measured_project):
    """asv writes its files in place, in a child process: the job finds the disk full after asv ran and says so."""
    measured = history_job.copy_project(measured_project, tmp_path)
    commit_change(measured.repo, "kernels/torch_dequant.py", "\n_CHANGED = 1\n", "a kernel change: asv measures it")
    results = measured.repo / ".asv" / "results"
    before, tip = files(results), git(measured.repo, "rev-parse", "asv-results")
    with full(results):
        done = _main_job(measured.repo, measured.home)
        after = files(results)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-4000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("main_job: harness problems (exit 2): ") and "asv run (gpu tracks) exited 1" in last, last
    assert f"{results} cannot be written (No space left on device) after asv ran" in last, last
    assert "Kept: every point recorded before stays on asv-results" in last, last
    assert {name: after.get(name) for name in before} == before  # asv's half-written file quarantined, no other touched
    assert all(name.endswith(".lock") for name in set(after) - set(before)), set(after) - set(before)
    assert git(measured.repo, "rev-parse", "asv-results") == tip


# ---------------------------------------------------------------------------
# the compile-only resources (python -m ci.budget.resources): the kept assembly and its record (issue 49, item 4)
# ---------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]
ONE_TARGET = ["--kernel", "triton_dot_scaled", "--arch", "sm_90", "--config", "m128_n128_k128_w8_s3"]


def _resources(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ci.budget.resources", *ONE_TARGET, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=NO_SUMMARY,
        timeout=600,
    )


def assert_not_a_compile_failure(done: subprocess.CompletedProcess) -> None:
    """A full disk is the runner's problem, never the kernel's: no "FAILED", no "failed to compile", no exit 1."""
    assert "FAILED" not in done.stderr and "failed to compile" not in done.stderr, done.stderr[-4000:]


def test_the_kept_assembly_on_a_full_disk_is_exit_2_not_a_compile_failure(tmp_path):
    """Found in issue 49: every target "FAILED: OSError [Errno 28]", "failed to compile", exit 1 (a failed gate)."""
    (tmp_path / "isa").mkdir()
    (tmp_path / "isa" / "earlier.s").write_text(EARLIER)
    (tmp_path / "out").mkdir()
    with full(tmp_path / "isa", size="64k") as isa:
        done = _resources(f"--isa-dir={isa}", f"--json={tmp_path / 'out' / 'resources.json'}")
        name = "triton_dot_scaled.sm_90.m128_n128_k128_w8_s3.ptx"
        last = assert_one_clean_line(done, "python -m ci.budget.resources: error: ", isa / name)
        assert "not a compile failure" in last
        assert_not_a_compile_failure(done)
        assert "regs" not in done.stdout, done.stdout  # no table of a run that stopped
        assert files(isa) == {"earlier.s": EARLIER.encode()}
        no_temporary_files(isa)
    assert not (tmp_path / "out" / "resources.json").exists()  # no record that could read as "0 targets failed"


def test_the_resources_record_on_a_full_disk_is_exit_2(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "resources.json").write_text('{"an": "earlier record"}\n')
    with full(tmp_path / "out", size="64k") as out:
        done = _resources(f"--json={out / 'resources.json'}")
        last = assert_one_clean_line(done, "python -m ci.budget.resources: error: ", out / "resources.json")
        assert "the table is on stdout" in last
        assert_not_a_compile_failure(done)
        assert files(out) == {"resources.json": b'{"an": "earlier record"}\n'}
        no_temporary_files(out)


# ---------------------------------------------------------------------------
# the calibration's noise model (python -m ci.speed.calibrate --write, issue 49, item 2)
# ---------------------------------------------------------------------------
# In process, with test_speed_calibration_skips' engine of simulated A/A rounds (no GPU here); the model's folder is a
# real full tmpfs, so the model's write meets the kernel's own ENOSPC.


@pytest.mark.parametrize("json_given", [True, False], ids=["--json", "no --json"])
def test_the_calibrations_model_on_a_full_disk_keeps_the_rounds(tmp_path, monkeypatch, json_given):
    """A calibration's rounds (~8 minutes of a GPU runner) outlive a model that cannot be written: they go to --json,
    or to a named file in the temp dir; the earlier model is left whole; the one line names the model and the refit."""
    import tempfile

    # Imported here: the other tests of this file also run on code from before the calibration's engine hook.
    import test_speed_calibration_skips as calibration_skips

    from ci.common.errors import WriteError
    from ci.speed.engine.rounds import Benchmark
    from ci.speed.modes.calibration import run_calibrate

    FakeEngine, _options = calibration_skips.FakeEngine, calibration_skips._options
    one_commit_repo = calibration_skips.make_one_commit_repo(tmp_path)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    spare = tmp_path / "temp"  # where a fallback file goes: tempfile.gettempdir()
    spare.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spare))
    benches = [Benchmark("triton_upcast", "m128_n128_k64_w8_s3", f"s{i}", 256, 256, 256) for i in range(2)]
    models = tmp_path / "models"
    models.mkdir()
    model = models / "model.json"
    first = _options(tmp_path, one_commit_repo, noise=model, json=None)  # this runner's earlier model
    assert run_calibrate(first, open_engine=lambda *a: FakeEngine(benches, seed=1)) == 0
    assert not list(spare.iterdir())
    before = files(models)
    record = tmp_path / "cal.json" if json_given else None
    with full(models):
        again = _options(tmp_path, one_commit_repo, noise=model, json=record)
        with pytest.raises(WriteError) as refused:
            run_calibrate(again, open_engine=lambda *a: FakeEngine(benches, seed=2))
        assert files(models) == before
        no_temporary_files(models)
    line = str(refused.value)
    assert f"cannot write {model}" in line and "No space left on device" in line and "kept: " in line, line
    fallbacks = list(spare.iterdir())
    assert len(fallbacks) == (0 if record is not None else 1), (fallbacks, line)  # no --json: one named file
    kept = record if record is not None else fallbacks[0]
    assert f"the rounds are kept in {kept}: `python -m ci.speed.calibrate --refit --aa-records {kept}" in line, line
    assert len(json.loads(kept.read_text())["rounds"]) == 8
