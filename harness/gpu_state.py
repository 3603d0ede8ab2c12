"""What the GPU is doing (clocks, temperature, power, utilization, throttling, other processes), and the idle check.

Backends NVML and amdsmi (not yet run on an MI355X), each given its library module so tests drive it with a fake.
docs/MEASURING.md, "The GPU's state and the idle check".
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from harness.errors import MeasurementError

ALLOW_BUSY_ENV = "MXFP4_ALLOW_BUSY_GPU"

# NVML clock event ("throttle") reasons, nvml.h. Those in _NVML_SLOWDOWN_BITS lower the clocks below what the
# workload asks for; the rest are informational (the GPU is idle, clocks pinned by the admin, sync boost).
_NVML_REASONS = {
    0x001: "gpu_idle",
    0x002: "applications_clocks_setting",
    0x004: "sw_power_cap",
    0x008: "hw_slowdown",
    0x010: "sync_boost",
    0x020: "sw_thermal_slowdown",
    0x040: "hw_thermal_slowdown",
    0x080: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
_NVML_SLOWDOWN_BITS = 0x004 | 0x008 | 0x020 | 0x040 | 0x080
# "throttled": amdsmi's one throttle flag.
SLOWDOWN_REASONS = frozenset({name for bit, name in _NVML_REASONS.items() if bit & _NVML_SLOWDOWN_BITS} | {"throttled"})


class GpuBusyError(MeasurementError, RuntimeError):
    """The GPU did not become idle within the wait bound; the message says why."""


class MonitorUnavailable(MeasurementError, RuntimeError):
    """No management library can watch this GPU; the message names what is missing."""


@dataclass(frozen=True)
class GpuState:
    backend: str  # "nvml" | "amdsmi"
    index: int  # index in the management library's numbering
    name: str
    sm_clock_mhz: float | None
    max_sm_clock_mhz: float | None
    memory_clock_mhz: float | None
    temperature_c: float | None
    power_w: float | None
    power_limit_w: float | None
    utilization_pct: float | None
    throttle_reasons: tuple[str, ...]  # active clock event reasons, by name
    process_ids: tuple[int, ...]  # PIDs with a compute context on the device
    timestamp: float = field(default_factory=time.time)

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"throttle_reasons": list(self.throttle_reasons), "process_ids": list(self.process_ids)}


class GpuMonitor(Protocol):
    backend: str

    def snapshot(self) -> GpuState: ...

    def close(self) -> None: ...


def _counter(read: Callable[[], Any], unsupported: type[Exception]) -> Any:
    """A counter this GPU or driver does not support (``unsupported`` raised, or amdsmi's "N/A") reads as None."""
    try:
        value = read()
    except unsupported:
        return None
    return None if isinstance(value, str) and value == "N/A" else value


class NvmlMonitor:
    """One NVIDIA GPU through NVML. ``nvml`` is the ``pynvml`` module (or a fake with its names)."""

    backend = "nvml"

    def __init__(self, nvml: Any, index: int | None = None, uuid: str | None = None):
        self._nvml = nvml
        nvml.nvmlInit()
        try:
            if uuid is not None:
                self._handle = nvml.nvmlDeviceGetHandleByUUID(uuid)
                self.index = int(nvml.nvmlDeviceGetIndex(self._handle))
            else:
                self.index = 0 if index is None else index
                self._handle = nvml.nvmlDeviceGetHandleByIndex(self.index)
            name = nvml.nvmlDeviceGetName(self._handle)
            self.name = name.decode() if isinstance(name, bytes) else str(name)
        except Exception:
            nvml.nvmlShutdown()
            raise

    def _try(self, fn: Callable[[], Any]) -> Any:
        return _counter(fn, self._nvml.NVMLError)

    def _throttle_reasons(self) -> tuple[str, ...]:
        h, nvml = self._handle, self._nvml
        # nvmlDeviceGetCurrentClocksEventReasons is the new name (driver >= 535); older drivers have the old one.
        mask = self._try(lambda: nvml.nvmlDeviceGetCurrentClocksEventReasons(h))
        if mask is None:
            mask = self._try(lambda: nvml.nvmlDeviceGetCurrentClocksThrottleReasons(h))
        if mask is None:
            return ()
        return tuple(name for bit, name in _NVML_REASONS.items() if mask & bit)

    def _temperature(self) -> float | None:
        h, nvml = self._handle, self._nvml
        # nvmlDeviceGetTemperatureV replaces nvmlDeviceGetTemperature (deprecated); older drivers lack it.
        if hasattr(nvml, "nvmlDeviceGetTemperatureV"):
            value = self._try(lambda: nvml.nvmlDeviceGetTemperatureV(h, nvml.NVML_TEMPERATURE_GPU))
            if value is not None:
                return float(value)
        value = self._try(lambda: nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU))
        return None if value is None else float(value)

    def snapshot(self) -> GpuState:
        h, nvml = self._handle, self._nvml
        power_mw = self._try(lambda: nvml.nvmlDeviceGetPowerUsage(h))
        limit_mw = self._try(lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(h))
        utilization = self._try(lambda: nvml.nvmlDeviceGetUtilizationRates(h))
        processes = self._try(lambda: nvml.nvmlDeviceGetComputeRunningProcesses(h)) or []
        return GpuState(
            backend=self.backend,
            index=self.index,
            name=self.name,
            sm_clock_mhz=self._try(lambda: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM)),
            max_sm_clock_mhz=self._try(lambda: nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_SM)),
            memory_clock_mhz=self._try(lambda: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_MEM)),
            temperature_c=self._temperature(),
            power_w=None if power_mw is None else power_mw / 1000.0,
            power_limit_w=None if limit_mw is None else limit_mw / 1000.0,
            utilization_pct=None if utilization is None else float(utilization.gpu),
            throttle_reasons=self._throttle_reasons(),
            process_ids=tuple(sorted(int(p.pid) for p in processes)),
        )

    def close(self) -> None:
        self._try(self._nvml.nvmlShutdown)


def _nvml_target(device_index: int) -> tuple[int | None, str | None]:
    """NVML index or UUID of CUDA device ``device_index``, without initialising CUDA (CUDA numbers the devices
    CUDA_VISIBLE_DEVICES leaves visible, by index or UUID; NVML all of them, in PCI order: docs/MEASURING.md)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None or not visible.strip():
        return device_index, None
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    if device_index >= len(entries):
        raise MonitorUnavailable(
            f"device cuda:{device_index} is not among CUDA_VISIBLE_DEVICES={visible!r} ({len(entries)} visible)"
        )
    entry = entries[device_index]
    return (int(entry), None) if entry.isdigit() else (None, entry)


class AmdSmiMonitor:
    """One AMD GPU through amdsmi (or a fake with its names): written against its documented API, NOT YET RUN ON AN
    MI355X."""

    backend = "amdsmi"

    def __init__(self, amdsmi: Any, index: int = 0, bdf: str | None = None):
        self._amdsmi = amdsmi
        amdsmi.amdsmi_init()
        try:
            if bdf is not None:
                self._handle = amdsmi.amdsmi_get_processor_handle_from_bdf(bdf)
            else:
                handles = amdsmi.amdsmi_get_processor_handles()
                if index >= len(handles):
                    raise MonitorUnavailable(f"amdsmi sees {len(handles)} GPUs; there is no GPU {index}")
                self._handle = handles[index]
            self.index = index
            self.name = str(
                self._try(lambda: amdsmi.amdsmi_get_gpu_asic_info(self._handle)["market_name"]) or "AMD GPU"
            )
        except Exception:
            amdsmi.amdsmi_shut_down()
            raise

    def _try(self, fn: Callable[[], Any]) -> Any:
        return _counter(fn, self._amdsmi.AmdSmiException)

    def snapshot(self) -> GpuState:
        a, h = self._amdsmi, self._handle
        gfx_clock = self._try(lambda: a.amdsmi_get_clock_info(h, a.AmdSmiClkType.GFX)) or {}
        mem_clock = self._try(lambda: a.amdsmi_get_clock_info(h, a.AmdSmiClkType.MEM)) or {}
        power = self._try(lambda: a.amdsmi_get_power_info(h)) or {}
        activity = self._try(lambda: a.amdsmi_get_gpu_activity(h)) or {}
        metrics = self._try(lambda: a.amdsmi_get_gpu_metrics_info(h)) or {}
        # Hotspot (junction) is the sensor the firmware throttles on; millidegrees.
        temp_milli = self._try(
            lambda: a.amdsmi_get_temp_metric(h, a.AmdSmiTemperatureType.HOTSPOT, a.AmdSmiTemperatureMetric.CURRENT)
        )
        processes = self._try(lambda: a.amdsmi_get_gpu_process_list(h)) or []
        throttled = metrics.get("throttle_status")
        socket_power = _number(power.get("current_socket_power"))
        return GpuState(
            backend=self.backend,
            index=self.index,
            name=self.name,
            sm_clock_mhz=_number(gfx_clock.get("clk")),
            max_sm_clock_mhz=_number(gfx_clock.get("max_clk")),
            memory_clock_mhz=_number(mem_clock.get("clk")),
            temperature_c=None if temp_milli is None else temp_milli / 1000.0,
            power_w=_number(power.get("average_socket_power")) if socket_power is None else socket_power,
            power_limit_w=_number(power.get("power_limit")),
            utilization_pct=_number(activity.get("gfx_activity")),
            throttle_reasons=("throttled",) if throttled not in (None, "N/A", 0, False) else (),
            process_ids=tuple(sorted(int(p["pid"]) for p in processes if isinstance(p, dict) and "pid" in p)),
        )

    def close(self) -> None:
        self._try(self._amdsmi.amdsmi_shut_down)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def open_monitor(device: Any) -> GpuMonitor | None:
    """A monitor for ``device`` (a torch device or string); None for the CPU; :class:`MonitorUnavailable` for a GPU no
    library can watch."""
    import torch

    device = torch.device(device)
    if device.type == "cpu":
        return None
    index = device.index if device.index is not None else 0
    if getattr(torch.version, "hip", None):
        try:
            import amdsmi
        except ImportError as exc:
            raise MonitorUnavailable(f"the idle check on AMD GPUs needs amdsmi (pip install amdsmi): {exc}") from None
        return AmdSmiMonitor(amdsmi, index=index, bdf=_rocm_bdf(index))
    try:
        import pynvml
    except ImportError as exc:
        raise MonitorUnavailable(f"the idle check on NVIDIA GPUs needs nvidia-ml-py (import pynvml): {exc}") from None
    nvml_index, uuid = _nvml_target(index)
    try:
        return NvmlMonitor(pynvml, index=nvml_index, uuid=uuid)
    except pynvml.NVMLError as exc:
        raise MonitorUnavailable(f"NVML could not open GPU {index}: {exc}") from None


def _rocm_bdf(index: int) -> str | None:
    """PCI address of ROCm device ``index`` when torch already knows it (no HIP init otherwise)."""
    import torch

    if not torch.cuda.is_initialized():
        return None
    props = torch.cuda.get_device_properties(index)
    if not hasattr(props, "pci_bus_id"):
        return None
    # torch's stub for the properties lacks the PCI domain and device ids that the runtime object has
    return f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"  # type: ignore[attr-defined]


WAIT_ENV = "MXFP4_IDLE_WAIT_S"


@dataclass(frozen=True)
class IdlePolicy:
    max_utilization_pct: float = 5.0
    wait_s: float = 120.0  # how long to wait for the GPU to become idle before refusing
    poll_s: float = 0.5

    @classmethod
    def from_environment(cls, environ: dict[str, str] | None = None) -> IdlePolicy:
        """The default policy, with the wait bound from ``MXFP4_IDLE_WAIT_S`` when set (a quick smoke run)."""
        value = (os.environ if environ is None else environ).get(WAIT_ENV)
        if value is None:
            return cls()
        try:
            wait = float(value)
        except ValueError:
            raise ValueError(f"{WAIT_ENV}={value!r}: expected seconds, e.g. 10") from None
        if wait < 0:
            raise ValueError(f"{WAIT_ENV}={value!r}: must be >= 0")
        return cls(wait_s=wait)


@dataclass(frozen=True)
class IdleReport:
    """How the idle check went; travels with every timing."""

    status: str  # "idle" | "overridden" | "no gpu"
    waited_s: float
    problems: tuple[str, ...]  # what was wrong at the last look (non-empty only when overridden)
    state: GpuState | None

    def to_json(self) -> dict[str, Any]:
        state = None if self.state is None else self.state.to_json()
        return asdict(self) | {"waited_s": round(self.waited_s, 3), "problems": list(self.problems), "state": state}


def idle_problems(state: GpuState, policy: IdlePolicy, *, own_pids: frozenset[int], own_context: bool) -> list[str]:
    """Everything that makes ``state`` unfit for recording a benchmark; empty when idle."""
    problems = []
    others = [pid for pid in state.process_ids if pid not in own_pids]
    # In a container NVML may list this process under its host PID: holding a context and not listed by its own
    # PID, this process is taken to be one of the unknown ones.
    if own_context and not own_pids & set(state.process_ids) and others:
        others = others[1:]
    if others:
        problems.append(f"other compute processes on GPU {state.index}: PIDs {others}")
    if state.utilization_pct is not None and state.utilization_pct > policy.max_utilization_pct:
        problems.append(f"utilization {state.utilization_pct:.0f}% > {policy.max_utilization_pct:.0f}%")
    slowing = [r for r in state.throttle_reasons if r in SLOWDOWN_REASONS]
    if slowing:
        problems.append(f"clocks throttled ({', '.join(slowing)})")
    return problems


def override_requested(environ: dict[str, str] | None = None) -> bool:
    value = (os.environ if environ is None else environ).get(ALLOW_BUSY_ENV, "")
    return value.strip().lower() in ("1", "true", "yes")


def wait_until_idle(
    monitor: GpuMonitor | None,
    policy: IdlePolicy = IdlePolicy(),
    *,
    own_context: bool = False,
    environ: dict[str, str] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    log: Callable[[str], None] | None = None,
) -> IdleReport:
    """Poll ``monitor`` (None: a CPU run) until the GPU is idle; raise :class:`GpuBusyError` after ``policy.wait_s``,
    unless ``MXFP4_ALLOW_BUSY_GPU=1`` (then status "overridden", with its problems)."""
    if monitor is None:
        return IdleReport("no gpu", 0.0, (), None)
    own_pids = frozenset({os.getpid()})
    start = clock()
    announced = False
    while True:
        state = monitor.snapshot()
        problems = idle_problems(state, policy, own_pids=own_pids, own_context=own_context)
        waited = clock() - start
        if not problems:
            return IdleReport("idle", waited, (), state)
        if override_requested(environ):
            return IdleReport("overridden", waited, tuple(problems), state)
        if waited >= policy.wait_s:
            raise GpuBusyError(
                f"GPU {state.index} ({state.name}) is not idle after waiting {waited:.0f} s: {'; '.join(problems)}. "
                f"Not recording a benchmark on a busy GPU. Stop the other work, or set {ALLOW_BUSY_ENV}=1 "
                f"for a local experiment (the override is recorded with the timing)."
            )
        if log is not None and not announced:
            log(f"waiting up to {policy.wait_s:.0f} s for GPU {state.index} to become idle: {'; '.join(problems)}")
            announced = True
        sleep(min(policy.poll_s, max(policy.wait_s - waited, 0.0)))
