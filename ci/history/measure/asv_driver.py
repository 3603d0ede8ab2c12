"""Driving asv for the main job: its environment, ``asv run`` over the commits, live output, a clean stop.

Why: docs/HISTORY.md, "measure/asv_driver.py".
"""

from __future__ import annotations

import filecmp
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from asv_bench import records
from ci.common import job_process
from ci.common.errors import WriteError
from ci.history.asv_results import store
from ci.history.measure import summary as history_summary
from ci.history.measure.progress import AsvProgress
from ci.history.measure.tracks import TrackRun
from ci.history.messages import log, log_detail

REPO_ROOT = Path(__file__).resolve().parents[3]
ASV = [sys.executable, "-m", "asv"]


def run_streaming(
    cmd: list[str], env: dict[str, str], label: str = "asv", echo: bool = False, quiet: bool = False
) -> int:
    """Run ``cmd``, its output to the log file and its progress to the screen (``quiet``: none, for short work);
    on an interrupt, stop it first."""
    log_detail(f"main_job: {label}: $ " + " ".join(cmd))
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    progress = AsvProgress(label, echo=echo, quiet=quiet)
    try:
        for line in proc.stdout:
            progress.feed(line)
        return proc.wait()
    except BaseException:
        _stop(proc)
        raise
    finally:
        progress.close()


def sync_tree(source: Path, target: Path) -> None:
    """Make ``target`` hold exactly ``source``'s files; ``target`` and its folders stay (a server's cwd survives)."""
    target.mkdir(parents=True, exist_ok=True)
    wanted = set()
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        wanted.add(relative)
        destination = target / relative
        if path.is_dir():
            destination.mkdir(exist_ok=True)
        elif not destination.is_file() or not filecmp.cmp(path, destination, shallow=False):
            partial = destination.with_name(destination.name + ".partial")
            try:
                shutil.copyfile(path, partial)
                os.replace(partial, destination)
            except OSError as exc:
                partial.unlink(missing_ok=True)
                raise WriteError(
                    f"cannot write {destination} ({exc.strerror or exc}); kept: {target}'s other files, each whole "
                    f"(those before it in name order are the new ones, the new set in {source})"
                ) from None
    for path in sorted(target.rglob("*"), reverse=True):  # deepest first: a folder is empty when its turn comes
        if path.relative_to(target) not in wanted:
            path.rmdir() if path.is_dir() and not path.is_symlink() else path.unlink()


def _stop(proc: subprocess.Popen) -> None:
    """asv cleans up its benchmark processes on SIGINT; give it a few seconds, then kill it."""
    for sig, wait_s in ((signal.SIGINT, 10.0), (signal.SIGKILL, 5.0)):
        if proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            continue


def asv_environment(job: job_process.Job, wheelhouse: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    # asv_bench/link_stack.py links this interpreter's site-packages into asv's environments.
    env["MXFP4_STACK_PYTHON"] = sys.executable
    # asv's forkserver imports the suite once and forks each benchmark from it: a CUDA driver initialized
    # there would be unusable in the children. torch's availability check through NVML leaves it untouched.
    env.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    # Triton's CPU interpreter would turn GPU benchmarks into hour-long CPU runs.
    env.pop("TRITON_INTERPRET", None)
    # Every process asv starts inherits the tag (ci.common.job_process reaps them after a kill) and writes its
    # temporary files (forkserver socket, result files) where the next job can remove them.
    env[records.JOB_ENV] = job.tag
    env["TMPDIR"] = str(job.tmp_dir)
    if wheelhouse is not None:
        # Offline machines: asv's environment gets its few requirements (asv_runner, build, ...) from here.
        env["PIP_FIND_LINKS"] = str(wheelhouse)
        env["PIP_NO_INDEX"] = "1"
    return env


def asv_config() -> dict[str, Any]:
    import asv.util

    return asv.util.load_json(str(REPO_ROOT / "asv.conf.json"), js_comments=True)


class AsvCodes(list):
    """asv's exit codes, and the newest commit's GEMM medians after each of its runs (for the spread)."""

    head_medians: list[dict[str, float]]
    seconds: float  # wall time of the asv runs (environment builds included)


def asv_run_args(track: TrackRun, launch: str, show_stderr: bool = False) -> list[str]:
    """What every ``asv run`` of one track gets: its machine, launch method and the track's one ``-b`` regex."""
    # --record-samples: keep every timing sample, so `asv compare` can apply its Mann-Whitney test.
    # --append-samples: a second run of a commit adds its samples to the first's instead of replacing them.
    args = [
        f"--machine={track.machine}",
        f"--launch-method={launch}",
        "--record-samples",
        "--append-samples",
        f"--bench={track.bench}",
    ]
    if show_stderr:
        args.append("--show-stderr")
    return args


def run_asv(
    env: dict[str, str],
    commits: Sequence[str],
    track: TrackRun,
    job: job_process.Job,
    launch: str,
    show_stderr: bool = False,
    repeat_head: int = 0,
) -> AsvCodes:
    """``asv run`` of one track over ``commits`` (newest first), then the newest again ``repeat_head`` times."""
    env = {**env, records.MACHINE_ENV: track.machine}
    # auto is forkserver, with or without a GPU (why: docs/HISTORY.md, "measure/asv_driver.py")
    common = asv_run_args(track, "forkserver" if launch == "auto" else launch, show_stderr)
    started = time.monotonic()
    codes = AsvCodes()
    codes.head_medians = []
    if commits:
        hashfile = job.tmp_dir / f"commits-{track.kind}.txt"
        hashfile.write_text("\n".join(commits) + "\n")
        codes.append(
            run_streaming([*ASV, "run", f"HASHFILE:{hashfile}", *common], env, f"asv run {track.kind}", show_stderr)
        )
        results_dir = Path(env[records.RESULTS_DIR_ENV])
        codes.head_medians.append(_head_medians(results_dir, track.machine, commits[0]))
        for i in range(repeat_head):
            log(f"repeat {i + 1}/{repeat_head} of {commits[0][:8]} (same commit, for the spread)")
            codes.append(run_streaming([*ASV, "run", f"{commits[0]}^!", *common], env, f"repeat {i + 1}", show_stderr))
            codes.head_medians.append(_head_medians(results_dir, track.machine, commits[0]))
    codes.seconds = time.monotonic() - started
    return codes


def _head_medians(results_dir: Path, machine: str, commit: str) -> dict[str, float]:
    _, recs, _ = store.read_commit(results_dir, machine, commit)
    return {history_summary.gemm_row(k) or k: r["median_s"] for k, r in recs.items() if r["status"] == "measured"}
