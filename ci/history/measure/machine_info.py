"""This machine and its stack, and the asv suite's benchmark names -- read in a child process.

Why: docs/HISTORY.md, "measure/machine_info.py".
"""

from __future__ import annotations

import json
import os
import platform
import re
import socket
import subprocess
from pathlib import Path
from typing import Any

from ci.common.errors import HarnessError

REPO_ROOT = Path(__file__).resolve().parents[3]


class FingerprintError(HarnessError, RuntimeError):
    """The child process could not fingerprint this machine; the message has its stderr."""


def suite_benchmarks() -> list[str]:
    """Every name asv's ``-b`` regex is matched against: ``name`` or ``name(param, ...)`` per parameter set."""
    import itertools

    from asv_runner.discovery import disc_benchmarks

    names = []
    for benchmark in disc_benchmarks(str(REPO_ROOT / "asv_bench")):
        if benchmark.params:
            names += [f"{benchmark.name}({', '.join(c)})" for c in itertools.product(*benchmark.params)]
        else:
            names.append(benchmark.name)
    return sorted(names)


def fingerprint() -> dict[str, Any]:
    """This machine and its software stack. Touches the GPU; call it in a child process."""
    import torch

    info: dict[str, Any] = {
        "host": socket.gethostname(),
        "os": f"{platform.system()} {platform.release()}",
        "arch": platform.machine(),
        "cpu": _cpu_model(),
        "num_cpu": os.cpu_count() or 0,
        "ram": _ram(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": _version_of("triton"),
        "flydsl": _version_of("flydsl"),
        "gpu": "none",
        "gpu_arch": "cpu",
        "gpu_driver": "none",
        "gpu_runtime": "none",
    }
    device = "cpu"
    if torch.cuda.is_available():
        from kernels import devices

        device = "cuda"
        info["gpu"] = f"{torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}"
        info["gpu_arch"] = devices.device_arch(device)
        hip = getattr(torch.version, "hip", None)
        info["gpu_runtime"] = f"ROCm {hip}" if hip else f"CUDA {torch.version.cuda}"
        info["gpu_driver"] = _gpu_driver(bool(hip))
    info["kernels"] = _kernel_availability(device)
    info["benchmarks"] = suite_benchmarks()
    return info


def _version_of(module: str) -> str:
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:
        return "none"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _ram() -> str:
    try:
        with open("/proc/meminfo") as f:
            kib = int(f.readline().split()[1])
        return f"{round(kib / 2**20)} GiB"
    except (OSError, ValueError, IndexError):
        return "unknown"


def _gpu_driver(rocm: bool) -> str:
    try:
        if rocm:
            import amdsmi  # written against amdsmi's documented API; NOT YET RUN ON AN MI355X

            amdsmi.amdsmi_init()
            try:
                return str(
                    amdsmi.amdsmi_get_gpu_driver_info(amdsmi.amdsmi_get_processor_handles()[0])["driver_version"]
                )
            finally:
                amdsmi.amdsmi_shut_down()
        import pynvml

        pynvml.nvmlInit()
        try:
            driver = pynvml.nvmlSystemGetDriverVersion()
            return driver.decode() if isinstance(driver, bytes) else str(driver)
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:  # the fingerprint says what it could not read rather than failing the job
        return f"unknown ({type(exc).__name__})"


def _kernel_availability(device: str) -> dict[str, str]:
    """Kernel name -> "runs" or why not, on this machine (the working tree's registry)."""
    try:
        from kernels import registry

        return {k.name: k.unavailable_reason(device) or "runs" for k in registry.all_kernels()}
    except Exception as exc:
        return {"(registry)": f"could not load: {type(exc).__name__}: {exc}"}


def fingerprint_in_child(python: str, env: dict[str, str]) -> dict[str, Any]:
    code = "import json, ci.history.measure.machine_info as m; print(json.dumps(m.fingerprint()))"
    proc = subprocess.run([python, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise FingerprintError(f"fingerprinting this machine failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def machine_name(info: dict[str, Any]) -> str:
    gpu = info["gpu"].split(" x")[0] if info["gpu"] != "none" else "cpu"
    return re.sub(r"[^a-z0-9]+", "-", f"{info['host']}-{gpu}".lower()).strip("-")


ASV_FIELDS = ("os", "arch", "cpu", "num_cpu", "ram")  # ``asv machine``'s own
MACHINE_FIELDS = (*ASV_FIELDS, "gpu", "gpu_driver", "gpu_runtime", "torch", "triton", "flydsl")


def machine_fields(info: dict[str, Any]) -> dict[str, str]:
    """asv's machine fields plus the GPU and the stack: they label every result of the machine (nothing that varies
    per measurement: the idle check's status travels with each measurement's record, asv_bench.records)."""
    return {name: str(info[name]) for name in MACHINE_FIELDS}


def record_machine(name: str, fields: dict[str, str], asv: list[str], env: dict[str, str]) -> None:
    """``asv machine --yes`` with the standard fields, then the GPU/stack fields into the same entry."""
    standard = [f"--{k}={fields[k]}" for k in ASV_FIELDS]
    cmd = [*asv, "machine", "--yes", f"--machine={name}", *standard]
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise FingerprintError(
            f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
        )
    from asv.machine import MachineCollection

    entry = MachineCollection.load(name)
    entry.update(fields)
    entry.pop("idle_check", None)  # a machine-wide label of earlier versions; it relabelled whole commits
    MachineCollection.save(name, entry)
