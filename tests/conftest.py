"""pytest set-up: the interpreter switch, the run's header, shared fixtures."""

from __future__ import annotations

import os

import torch

# Triton reads TRITON_INTERPRET when @triton.jit runs, i.e. when a kernel module
# is imported: set it before anything imports kernels.triton_mxfp4. On a machine
# without a GPU this is the only way Triton code executes at all.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from kernels import devices  # noqa: E402
from operands import DEVICE, SEED  # noqa: E402



def pytest_report_header(config):
    arch = devices.device_arch(DEVICE)
    return [f"mxfp4: device={DEVICE} ({devices.gpu_name(DEVICE)}, {arch}) seed={SEED} (MXFP4_TEST_SEED to replay)"]


@pytest.fixture
def device() -> torch.device:
    return DEVICE


@pytest.fixture(scope="session")
def gate_log(request):
    """(kernel, config, data kind, AccuracyReport) of every gate run; summarized at the end.

    With MXFP4_GATE_REPORT=path the summary is also written there as JSON.
    """
    reports: list = []
    yield reports
    if reports:
        from gate_summary import summarize

        summarize(reports, request.config, os.environ.get("MXFP4_GATE_REPORT"))
