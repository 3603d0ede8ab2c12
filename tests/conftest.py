"""pytest set-up: the interpreter switch, the run's header, shared fixtures."""

from __future__ import annotations

import atexit
import base64
import os
import pickle
import shutil
import subprocess
import tempfile

import torch

# Triton reads TRITON_INTERPRET when @triton.jit runs, i.e. when a kernel module
# is imported: set it before anything imports kernels.triton_mxfp4. On a machine
# without a GPU this is the only way Triton code executes at all.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# The main job's machine lock is host-wide on purpose (one job per machine name on a runner:
# ci.common.job_process). This session's jobs lock in a folder of their own, so they never meet
# another session's jobs on the same host (two checkouts' suites at once), module fixtures included.
os.environ["MXFP4_MAIN_JOB_LOCKS"] = tempfile.mkdtemp(prefix="mxfp4-test-locks-")
atexit.register(shutil.rmtree, os.environ["MXFP4_MAIN_JOB_LOCKS"], True)

import pytest  # noqa: E402
from known_deviations import describe_machine  # noqa: E402
from operands import DEVICE, SEED  # noqa: E402

from kernels import devices  # noqa: E402

# pytest-xdist's workers start from this process's environment: one seed for the whole run, the one the header names.
os.environ["MXFP4_TEST_SEED"] = str(SEED)


def pytest_report_header(config):
    arch = devices.device_arch(DEVICE)
    return [
        f"mxfp4: device={DEVICE} ({devices.gpu_name(DEVICE)}, {arch}) seed={SEED} (MXFP4_TEST_SEED to replay)",
        # Which CPU kind CI got decides which known deviations are expected (tests/known_deviations.py).
        f"mxfp4: {describe_machine()}",
    ]


@pytest.fixture
def device() -> torch.device:
    return DEVICE


GATE_RUNS = pytest.StashKey[list]()


@pytest.fixture(scope="session")
def gate_log(request):
    """A gate_summary.GateRun for every gate run (K sweep, large shapes, edge cases); summarized at the end.

    With MXFP4_GATE_REPORT=path the summary is also written there as JSON.
    """
    return request.config.stash.setdefault(GATE_RUNS, [])


def pytest_sessionfinish(session):
    # Under pytest-xdist each worker logs its own gate runs: they travel to the controller, which summarizes them all.
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["gate_runs"] = base64.b64encode(pickle.dumps(session.config.stash.get(GATE_RUNS, []))).decode()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    shipped = getattr(node, "workeroutput", {}).get("gate_runs")
    if shipped:
        node.config.stash.setdefault(GATE_RUNS, []).extend(pickle.loads(base64.b64decode(shipped)))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    # Here, not in gate_log's teardown: output written there is captured with the last test's and
    # never shown when that test passes.
    runs = config.stash.get(GATE_RUNS, [])
    if runs:
        from gate_summary import summarize

        summarize(runs, config, os.environ.get("MXFP4_GATE_REPORT"))


@pytest.fixture(scope="session")
def asv_env_template(tmp_path_factory):
    """asv's environments as ``asv setup`` creates them in a copy of this working tree, once per session: the tests
    that run asv in a project of their own start from a copy (test_asv_suite.make_project's ``asv_env_from``)
    instead of each creating a virtualenv. Project-specific parts (asv's clone of the project, its built wheels)
    are not in it; asv makes them per project and commit."""
    from test_asv_suite import asv, asv_env, make_project

    where = tmp_path_factory.mktemp("asv-env-template")
    repo = make_project(where)
    done = asv(repo, asv_env(where / "home"), "setup")
    # asv setup exits with the list of environments it set up (its run() returns it): 1 is its success.
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stdout[-3000:] + done.stderr[-3000:]
    env_dir = repo / ".asv" / "env"
    envs = [p for p in env_dir.iterdir() if p.is_dir()] if env_dir.is_dir() else []
    assert envs, f"asv setup created no environment in {env_dir}: {done.stdout[-3000:]}{done.stderr[-3000:]}"
    for env in envs:
        assert (env / "asv-env-info.json").is_file(), f"{env}: not a complete asv environment"
        ran = subprocess.run([str(env / "bin" / "python"), "-m", "pip", "--version"], capture_output=True, text=True)
        assert ran.returncode == 0, f"{env}: its python cannot run pip: {ran.stderr[-2000:]}"
        for project_specific in ("project", "asv-build-cache"):
            assert not (env / project_specific).exists(), f"asv setup left {env / project_specific}: not a template"
    return env_dir


@pytest.fixture(scope="session")
def measured_project(tmp_path_factory, asv_env_template):
    """A fresh project after the main job's first run (tests/history_job.py), run once per session; a test takes
    its own copy (``history_job.copy_project``) and never changes this one."""
    from history_job import measure_new_project

    return measure_new_project(tmp_path_factory.mktemp("measured-project"), asv_env_template)
