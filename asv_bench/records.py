"""Per-measurement records: what asv's results file cannot hold, beside it, one sidecar per results file.

Each GEMM measurement's conditions (idle check and override, clocks and throttling, warm-up, cache
residency, TFLOPS) go to ``<results_dir>/<machine>/<commit[:8]>-<env>.records`` (JSON, not ``.json``:
asv reads those), written atomically under a lock after every measurement, so a killed run keeps every
finished one and the main job resumes from them. Keys are asv's regex selection; ``status`` is
``measured``, ``n/a`` (with the reason) or ``failed`` (``harness``, ``wrong result`` or ``benchmark``).
Standard library and harness.report only: the suite, the main job and the publish plug-in all go
through here. docs/MEASURING.md, "Per-measurement records".
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness import fast_json
from harness.report import write_json_atomic

SUFFIX = ".records"
FORMAT_VERSION = 1
MACHINE_ENV = (
    "MXFP4_ASV_MACHINE"  # set by ci.history.main_job; asv tells a benchmark its commit and env, not its machine
)
RESULTS_DIR_ENV = "MXFP4_ASV_RESULTS_DIR"
JOB_ENV = "MXFP4_MAIN_JOB"  # "<checkout>::<job id>", inherited by every process of one main-job run
DEFAULT_RESULTS_DIR = ".asv/results"  # asv.conf.json "results_dir" (a test keeps the two equal)

# Quality flags: a measurement carrying one is marked in the summary and the HTML.
FLAG_IDLE_OVERRIDDEN = "idle check overridden"
FLAG_NOT_STEADY = "warm-up never steady"
FLAG_THROTTLED = "clocks throttled"
FLAG_INPUTS_WARM = "inputs may be cache resident"
# Slowdown reasons (harness.gpu_state.SLOWDOWN_REASONS), repeated so this module needs no torch.
_SLOWDOWNS = {
    "sw_power_cap",
    "hw_slowdown",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "throttled",
}


def results_file_stem(commit: str, env_name: str) -> str:
    """asv.results.get_filename's stem: ``<commit[:8]>-<env>``, the env hashed when 128 characters or longer."""
    if env_name and len(env_name) >= 128:
        env_name = "env-" + hashlib.md5(env_name.encode("utf-8")).hexdigest()
    return f"{commit[:8]}-{env_name}"


def sidecar_for_results_file(results_file: Path) -> Path:
    return results_file.with_suffix(SUFFIX)


def benchmark_key(benchmark: str, params: tuple[str, ...]) -> str:
    """The name asv's ``-b`` regex sees: ``module.Class.method('a', 'b')`` (asv writes params with repr)."""
    return f"{benchmark}({', '.join(repr(p) for p in params)})" if params else benchmark


# ---------------------------------------------------------------------------
# where the benchmark process writes
# ---------------------------------------------------------------------------


def machine_name(environ: dict[str, str] | None = None) -> str | None:
    """The asv machine of this run: ``$MXFP4_ASV_MACHINE``, else the only one in ``~/.asv-machine.json``."""
    environ = dict(os.environ if environ is None else environ)
    if environ.get(MACHINE_ENV):
        return environ[MACHINE_ENV]
    path = Path(environ.get("HOME", "~")).expanduser() / ".asv-machine.json"
    try:
        machines = [k for k in json.loads(path.read_text()) if k != "version"]
    except (OSError, ValueError):
        return None
    return machines[0] if len(machines) == 1 else None


def sidecar_in_this_run(environ: dict[str, str] | None = None) -> Path | None:
    """The sidecar of the commit and environment this asv benchmark process measures; None outside asv."""
    environ = dict(os.environ if environ is None else environ)
    conf_dir, commit, env_name = environ.get("ASV_CONF_DIR"), environ.get("ASV_COMMIT"), environ.get("ASV_ENV_NAME")
    machine = machine_name(environ)
    if not (conf_dir and commit and env_name and machine):
        return None
    results_dir = Path(environ.get(RESULTS_DIR_ENV) or Path(conf_dir) / DEFAULT_RESULTS_DIR)
    return results_dir / machine / (results_file_stem(commit, env_name) + SUFFIX)


# ---------------------------------------------------------------------------
# reading and writing a sidecar
# ---------------------------------------------------------------------------


@contextlib.contextmanager
def _locked(sidecar: Path) -> Iterator[None]:
    sidecar.parent.mkdir(parents=True, exist_ok=True)
    with open(sidecar.with_name(sidecar.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class CorruptSidecar(ValueError):
    """A sidecar that is not a records document; the message names it."""


def load(sidecar: Path) -> dict[str, dict[str, Any]]:
    """key -> record; {} when there is no sidecar. Raises CorruptSidecar for anything else."""
    try:
        text = sidecar.read_text()
    except FileNotFoundError:
        return {}
    try:
        data = fast_json.loads(text)  # a full history publish reads every sidecar: the faster decoder
    except ValueError as exc:
        raise CorruptSidecar(f"{sidecar}: not JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("records"), dict):
        raise CorruptSidecar(f"{sidecar}: no 'records' object")
    if not all(isinstance(r, dict) and isinstance(r.get("status"), str) for r in data["records"].values()):
        raise CorruptSidecar(f"{sidecar}: a record without a status")
    return data["records"]


def save(sidecar: Path, records: dict[str, dict[str, Any]]) -> None:
    write_json_atomic(sidecar, {"format": FORMAT_VERSION, "records": dict(sorted(records.items()))})


def update(sidecar: Path, changes: dict[str, dict[str, Any] | None]) -> dict[str, dict[str, Any]]:
    """Set (or, for None, remove) records under the lock; returns the sidecar's records after."""
    with _locked(sidecar):
        try:
            records = load(sidecar)
        except CorruptSidecar as exc:
            # ci.history.main_job quarantines these before a run; under a plain `asv run` keep it beside, never drop it.
            kept = sidecar.with_name(f"{sidecar.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}")
            os.replace(sidecar, kept)
            print(f"records: {exc}; kept as {kept}, starting a new one", file=sys.stderr, flush=True)
            records = {}
        for key, record in changes.items():
            if record is None:
                records.pop(key, None)
            else:
                records[key] = record
        save(sidecar, records)
        return records


# ---------------------------------------------------------------------------
# what a record says
# ---------------------------------------------------------------------------


def quality_flags(timing: dict[str, Any], device_is_cpu: bool) -> list[str]:
    """What makes a timing (harness.timing.Timing.to_json()) unfit to mix silently into the history."""
    flags = []
    idle = timing.get("idle") or {}
    if idle.get("status") == "overridden":
        flags.append(FLAG_IDLE_OVERRIDDEN)
    if not timing.get("steady", True):
        flags.append(FLAG_NOT_STEADY)
    reasons = {
        r
        for state in (timing.get("gpu_before"), timing.get("gpu_after"))
        if state
        for r in state.get("throttle_reasons", ())
    }
    if reasons & _SLOWDOWNS:
        flags.append(FLAG_THROTTLED)
    # On a CPU the inputs are always small enough to stay cached (harness.timing.CPU_MAX_INPUT_SETS): a
    # known property of every CPU timing, stated once in the HTML, not a flag on each.
    if not timing.get("inputs_cold", True) and not device_is_cpu:
        flags.append(FLAG_INPUTS_WARM)
    return flags


def measured_record(
    timing: dict[str, Any], *, device_is_cpu: bool, method_version: str, job: str | None, override_requested: bool
) -> dict[str, Any]:
    """A record of one finished timing: its numbers, its conditions, its flags."""
    idle = dict(timing.get("idle") or {})
    idle.pop("state", None)  # the full GPU state is already in gpu_before
    return {
        "status": "measured",
        "job": job,
        "method_version": method_version,
        "median_s": timing["median_s"],
        "tflops": timing["tflops"],
        "flops": timing["flops"],
        "n": len(timing["samples_s"]),
        "samples_s": list(timing["samples_s"]),  # dropped by ci.history.main_job once asv's results file holds them
        "relative_iqr": (timing["q75_s"] - timing["q25_s"]) / timing["median_s"],
        "flags": quality_flags(timing, device_is_cpu),
        "idle": idle,
        # MXFP4_ALLOW_BUSY_GPU was set for this measurement (on a CPU there is no idle check to override).
        "override_requested": override_requested,
        "steady": timing["steady"],
        "warmup_launches": timing["warmup_launches"],
        "inputs_cold": timing["inputs_cold"],
        "input_sets": timing["input_sets"],
        "clock": timing["clock"],
        "gpu_before": _gpu_summary(timing.get("gpu_before")),
        "gpu_after": _gpu_summary(timing.get("gpu_after")),
        "label": timing.get("label", ""),
    }


def _gpu_summary(state: dict[str, Any] | None) -> dict[str, Any] | None:
    if not state:
        return None
    keep = (
        "name",
        "sm_clock_mhz",
        "max_sm_clock_mhz",
        "memory_clock_mhz",
        "temperature_c",
        "power_w",
        "throttle_reasons",
    )
    return {k: state.get(k) for k in keep}


def is_harness_failure(exc: BaseException) -> bool:
    """The measuring code, not the kernel, could not measure (a busy or unwatchable GPU, no memory for inputs)."""
    return type(exc).__name__ in {"GpuBusyError", "MonitorUnavailable", "OutOfMemoryError"} or isinstance(
        exc, MemoryError
    )


def failure_kind(exc: BaseException) -> str:
    """A failed record's ``failure``: ``harness`` (could not measure), ``wrong result`` (the timed output was
    wrong at the timed shape: harness.output_check.WrongResult) or ``benchmark`` (the kernel failed otherwise)."""
    if is_harness_failure(exc):
        return "harness"
    return "wrong result" if type(exc).__name__ == "WrongResult" else "benchmark"


def describe(record: dict[str, Any]) -> str:
    """One short line for a summary cell or a tooltip."""
    if record["status"] == "n/a":
        return f"n/a: {record.get('reason', '')}"
    if record["status"] == "failed":
        return f"failed ({record.get('failure', 'benchmark')}): {record.get('reason', '')}"
    notes = list(record.get("flags") or [])
    if record.get("override_requested") and FLAG_IDLE_OVERRIDDEN not in notes:
        notes.append("idle override requested (no GPU idle check on this device)")
    return "; ".join(notes) or "clean"
