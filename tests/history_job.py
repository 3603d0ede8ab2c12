"""The history main job on a temporary project, for the end-to-end tests: a run, a first run shared, its copies.

Several slow tests start the same way: a fresh project (tests/test_asv_suite.make_project) whose one commit the
main job measures on the CPU (one CPU timing, ``--tracks gpu``). That first run costs ~20 s on 2 cores, so the
session runs it once (tests/conftest.py's ``measured_project``) and each test continues on a copy of its own
(:func:`copy_project`): the tests stay independent of each other and of their order.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from test_asv_suite import asv_env, make_project

TWO_CPU_TIMINGS = r"GemmOnCpu\.track_time\('torch_dequant:bf16'"


@dataclass(frozen=True)
class MeasuredProject:
    """A project after the main job's first run: the repository, asv's home, that run's report and output."""

    repo: Path
    home: Path
    report: dict
    run: subprocess.CompletedProcess


def run_job(repo: Path, home: Path, *args: str) -> tuple[dict, subprocess.CompletedProcess]:
    """``python -m ci.history`` on the newest commit of ``repo``, the one CPU timing: its --json report and run."""
    report = repo / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "ci.history", "--commits=1", f"--bench={TWO_CPU_TIMINGS}", f"--json={report}", *args],
        cwd=repo,
        env=asv_env(home),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    return json.loads(report.read_text()), done


def measure_new_project(where: Path, asv_env_template: Path) -> MeasuredProject:
    """A fresh project under ``where`` and the main job's first run on it (``--tracks gpu``, publishing)."""
    repo = make_project(where, asv_env_from=asv_env_template)
    home = where / "home"
    report, done = run_job(repo, home, "--tracks=gpu")
    return MeasuredProject(repo, home, report, done)


def _asv_clones(folder: str, names: list[str]) -> set[str]:
    # asv's checkout of the project in each environment is a ``git clone --shared`` of the repository: its
    # objects are the original repository's, by absolute path. A copy leaves it out; asv clones the copy's
    # repository again when it next builds a commit (what it does in a new environment).
    return {"project"} if Path(folder).parent.name == "env" and "asv-env-info.json" in names else set()


def copy_project(measured: MeasuredProject, where: Path) -> MeasuredProject:
    """``measured`` copied under ``where``: the repository (results, ledger, stores, asv's environments with the
    project installed) and asv's home, modification times kept (the ledger and stores know files by them)."""
    repo = shutil.copytree(measured.repo, where / measured.repo.name, symlinks=True, ignore=_asv_clones)
    home = shutil.copytree(measured.home, where / measured.home.name, symlinks=True)
    return MeasuredProject(Path(repo), Path(home), measured.report, measured.run)
