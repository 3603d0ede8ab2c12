"""pytest set-up: the interpreter switch, the run's header, shared fixtures."""

from __future__ import annotations

import atexit
import os
import shutil
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

from kernels import devices  # noqa: E402
from known_deviations import describe_machine  # noqa: E402
from operands import DEVICE, SEED  # noqa: E402



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


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    # Here, not in gate_log's teardown: output written there is captured with the last test's and
    # never shown when that test passes.
    runs = config.stash.get(GATE_RUNS, [])
    if runs:
        from gate_summary import summarize

        summarize(runs, config, os.environ.get("MXFP4_GATE_REPORT"))

