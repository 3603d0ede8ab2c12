"""The idle check and GPU state snapshots (harness.gpu_state), driven by fake NVML / amdsmi libraries.

The backends take the library module as an argument, so these tests run the real
backend code against fakes with the libraries' function names and units. The
amdsmi backend is exercised here only: it is NOT YET RUN ON AN MI355X.
"""

from __future__ import annotations

import os

import pytest
import torch

from harness import gpu_state
from harness.timing import gemm as timing_gemm  # measure_gemm's idle step


class FakeNvml:
    """The slice of pynvml that NvmlMonitor uses, with settable readings."""

    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_TEMPERATURE_GPU = 0

    class NVMLError(Exception):
        pass

    def __init__(self, *, processes=(), utilization=0, reasons=0x1, temperature=35, power_mw=90_000, has_temp_v=True):
        self.processes = list(processes)
        self.utilization = utilization
        self.reasons = reasons
        self.temperature = temperature
        self.power_mw = power_mw
        self.has_temp_v = has_temp_v
        self.inits = 0
        self.shutdowns = 0
        self.opened = None

    def nvmlInit(self):
        self.inits += 1

    def nvmlShutdown(self):
        self.shutdowns += 1

    def nvmlDeviceGetHandleByIndex(self, index):
        self.opened = ("index", index)
        return f"handle{index}"

    def nvmlDeviceGetHandleByUUID(self, uuid):
        self.opened = ("uuid", uuid)
        return "handle-uuid"

    def nvmlDeviceGetIndex(self, handle):
        return 3

    def nvmlDeviceGetName(self, handle):
        return b"NVIDIA H200"

    def nvmlDeviceGetPowerUsage(self, handle):
        return self.power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return 700_000

    def nvmlDeviceGetUtilizationRates(self, handle):
        return type("Utilization", (), {"gpu": self.utilization, "memory": 0})()

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [type("Process", (), {"pid": pid, "usedGpuMemory": 1 << 30})() for pid in self.processes]

    def nvmlDeviceGetClockInfo(self, handle, kind):
        return {1: 1980, 2: 3201}[kind]

    def nvmlDeviceGetMaxClockInfo(self, handle, kind):
        return {1: 1980, 2: 3201}[kind]

    def nvmlDeviceGetTemperatureV(self, handle, sensor):
        if not self.has_temp_v:  # an older driver: the new entry point is missing
            raise self.NVMLError("Function Not Found")
        return self.temperature

    def nvmlDeviceGetTemperature(self, handle, sensor):
        return self.temperature

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return self.reasons

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):
        return self.reasons


class FakeClock:
    def __init__(self):
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_nvml_snapshot_reads_every_counter_in_its_unit():
    state = gpu_state.NvmlMonitor(FakeNvml(reasons=0x1 | 0x4, processes=[11, 7]), index=0).snapshot()
    assert state.name == "NVIDIA H200"
    assert (state.sm_clock_mhz, state.memory_clock_mhz, state.max_sm_clock_mhz) == (1980, 3201, 1980)
    assert state.power_w == 90.0 and state.power_limit_w == 700.0  # NVML reports milliwatts
    assert state.temperature_c == 35.0
    assert state.throttle_reasons == ("gpu_idle", "sw_power_cap")
    assert state.process_ids == (7, 11)
    assert state.to_json()["throttle_reasons"] == ["gpu_idle", "sw_power_cap"]


def test_nvml_falls_back_to_the_old_temperature_call_on_old_drivers():
    state = gpu_state.NvmlMonitor(FakeNvml(has_temp_v=False, temperature=51), index=0).snapshot()
    assert state.temperature_c == 51.0


def test_nvml_monitor_opens_by_uuid_and_shuts_down():
    nvml = FakeNvml()
    monitor = gpu_state.NvmlMonitor(nvml, uuid="GPU-1234")
    assert nvml.opened == ("uuid", "GPU-1234") and monitor.index == 3
    monitor.close()
    assert nvml.inits == nvml.shutdowns == 1


@pytest.mark.parametrize(
    "visible, index, expected",
    [(None, 1, (1, None)), ("2,5", 1, (5, None)), ("GPU-abc,GPU-def", 0, (None, "GPU-abc"))],
)
def test_cuda_device_maps_to_the_nvml_device(monkeypatch, visible, index, expected):
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert gpu_state._nvml_target(index) == expected


def test_cuda_device_outside_cuda_visible_devices_is_an_error(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with pytest.raises(gpu_state.MonitorUnavailable, match="not among CUDA_VISIBLE_DEVICES"):
        gpu_state._nvml_target(1)


def _problems(nvml: FakeNvml, own_context: bool = False) -> list[str]:
    state = gpu_state.NvmlMonitor(nvml, index=0).snapshot()
    return gpu_state.idle_problems(
        state, gpu_state.IdlePolicy(), own_pids=frozenset({os.getpid()}), own_context=own_context
    )


def test_an_idle_gpu_has_no_problems_and_our_own_process_does_not_count():
    assert _problems(FakeNvml(processes=[os.getpid()], utilization=0, reasons=0x1)) == []


@pytest.mark.parametrize(
    "nvml, expected",
    [
        (FakeNvml(processes=[4242]), "other compute processes on GPU 0: PIDs [4242]"),
        (FakeNvml(utilization=37), "utilization 37% > 5%"),
        (FakeNvml(reasons=0x40), "clocks throttled (hw_thermal_slowdown)"),
        (FakeNvml(reasons=0x20 | 0x80), "clocks throttled (sw_thermal_slowdown, hw_power_brake_slowdown)"),
    ],
)
def test_each_kind_of_busy_is_named(nvml, expected):
    assert _problems(nvml) == [expected]


def test_in_a_container_one_unlisted_process_is_taken_for_our_own_context():
    # NVML lists host PIDs: with a context of our own and our PID not listed, one stranger is us.
    assert _problems(FakeNvml(processes=[90001]), own_context=True) == []
    assert _problems(FakeNvml(processes=[90001, 90002]), own_context=True) == [
        "other compute processes on GPU 0: PIDs [90002]"
    ]
    assert _problems(FakeNvml(processes=[90001]), own_context=False) != []


def test_wait_until_idle_waits_for_a_busy_gpu_to_become_idle():
    nvml = FakeNvml(processes=[4242])
    clock = FakeClock()

    def sleep(seconds):
        clock.sleep(seconds)
        if clock.now >= 3.0:  # the other job finishes after 3 s
            nvml.processes = []

    report = gpu_state.wait_until_idle(
        gpu_state.NvmlMonitor(nvml, index=0),
        gpu_state.IdlePolicy(wait_s=60, poll_s=1),
        environ={},
        clock=clock,
        sleep=sleep,
    )
    assert report.status == "idle" and report.problems == ()
    assert report.waited_s == pytest.approx(3.0)
    assert report.state.process_ids == ()


def test_wait_until_idle_refuses_after_the_bound_with_a_clear_message():
    clock = FakeClock()
    monitor = gpu_state.NvmlMonitor(FakeNvml(processes=[4242], utilization=80), index=0)
    with pytest.raises(gpu_state.GpuBusyError) as caught:
        gpu_state.wait_until_idle(
            monitor, gpu_state.IdlePolicy(wait_s=10, poll_s=2), environ={}, clock=clock, sleep=clock.sleep
        )
    message = str(caught.value)
    assert "PIDs [4242]" in message and "utilization 80%" in message and gpu_state.ALLOW_BUSY_ENV in message
    assert clock.now == pytest.approx(10.0)  # it waited the whole bound, polling
    assert len(clock.sleeps) == 5


def test_the_override_records_what_it_waved_through():
    clock = FakeClock()
    report = gpu_state.wait_until_idle(
        gpu_state.NvmlMonitor(FakeNvml(processes=[4242]), index=0),
        environ={gpu_state.ALLOW_BUSY_ENV: "1"},
        clock=clock,
        sleep=clock.sleep,
    )
    assert report.status == "overridden"
    assert report.problems == ("other compute processes on GPU 0: PIDs [4242]",)
    assert report.to_json()["state"]["process_ids"] == [4242]
    assert clock.sleeps == []  # an override does not wait


def test_no_monitor_means_a_cpu_run():
    assert gpu_state.open_monitor("cpu") is None
    assert gpu_state.wait_until_idle(None).status == "no gpu"


def test_the_timing_harness_refuses_a_busy_gpu(monkeypatch):
    """measure_gemm's idle step: a busy GPU raises instead of being timed."""
    # Two foreign processes: on a real GPU this pytest process may already hold a context, and
    # then one unknown PID is taken to be its own (containers list host PIDs); one must remain.
    monitor = gpu_state.NvmlMonitor(FakeNvml(processes=[4242, 4343]), 0)
    monkeypatch.setattr(gpu_state, "open_monitor", lambda device: monitor)
    monkeypatch.delenv(gpu_state.ALLOW_BUSY_ENV, raising=False)
    with pytest.raises(gpu_state.GpuBusyError, match="other compute processes on GPU 0: PIDs \\[(4242, )?4343\\]"):
        timing_gemm._open_and_wait_idle(torch.device("cuda", 0), gpu_state.IdlePolicy(wait_s=0.0), log=None)


def test_the_timing_harness_refuses_an_unmonitored_gpu_unless_overridden(monkeypatch):
    def unavailable(device):
        raise gpu_state.MonitorUnavailable("the idle check on NVIDIA GPUs needs nvidia-ml-py")

    monkeypatch.setattr(gpu_state, "open_monitor", unavailable)
    monkeypatch.delenv(gpu_state.ALLOW_BUSY_ENV, raising=False)
    with pytest.raises(gpu_state.MonitorUnavailable, match="not timing"):
        timing_gemm._open_and_wait_idle(torch.device("cuda", 0), gpu_state.IdlePolicy(), log=None)
    monkeypatch.setenv(gpu_state.ALLOW_BUSY_ENV, "1")
    monitor, report = timing_gemm._open_and_wait_idle(torch.device("cuda", 0), gpu_state.IdlePolicy(), log=None)
    assert monitor is None and report.status == "overridden" and "nvidia-ml-py" in report.problems[0]


# -- amdsmi (written against the documented API; not yet run on an MI355X) ---------------------------


class FakeAmdSmi:
    class AmdSmiException(Exception):
        pass

    class AmdSmiClkType:
        GFX = "gfx"
        MEM = "mem"

    class AmdSmiTemperatureType:
        HOTSPOT = "hotspot"

    class AmdSmiTemperatureMetric:
        CURRENT = "current"

    def __init__(self, processes=(), throttle=0):
        self.processes = processes
        self.throttle = throttle

    def amdsmi_init(self):
        pass

    def amdsmi_shut_down(self):
        pass

    def amdsmi_get_processor_handles(self):
        return ["h0", "h1"]

    def amdsmi_get_gpu_asic_info(self, h):
        return {"market_name": "AMD Instinct MI355X"}

    def amdsmi_get_clock_info(self, h, kind):
        return {"gfx": {"clk": 2400, "min_clk": 500, "max_clk": 2400}, "mem": {"clk": 1900, "max_clk": 1900}}[kind]

    def amdsmi_get_power_info(self, h):
        return {"current_socket_power": "N/A", "average_socket_power": 1100, "power_limit": 1400}

    def amdsmi_get_gpu_activity(self, h):
        return {"gfx_activity": 0, "umc_activity": 0, "mm_activity": "N/A"}

    def amdsmi_get_gpu_metrics_info(self, h):
        return {"throttle_status": self.throttle}

    def amdsmi_get_temp_metric(self, h, sensor, metric):
        return 61000  # millidegrees

    def amdsmi_get_gpu_process_list(self, h):
        return [{"pid": pid, "name": "N/A"} for pid in self.processes]


def test_amdsmi_snapshot_maps_the_documented_fields():
    state = gpu_state.AmdSmiMonitor(FakeAmdSmi(processes=[77], throttle=1), index=1).snapshot()
    assert state.name == "AMD Instinct MI355X"
    assert (state.sm_clock_mhz, state.max_sm_clock_mhz, state.memory_clock_mhz) == (2400, 2400, 1900)
    assert state.temperature_c == 61.0 and state.power_w == 1100 and state.power_limit_w == 1400
    assert state.utilization_pct == 0 and state.process_ids == (77,) and state.throttle_reasons == ("throttled",)
    problems = gpu_state.idle_problems(state, gpu_state.IdlePolicy(), own_pids=frozenset(), own_context=False)
    assert problems == ["other compute processes on GPU 1: PIDs [77]", "clocks throttled (throttled)"]


def test_the_wait_bound_can_be_shortened_from_the_environment():
    assert gpu_state.IdlePolicy.from_environment({}).wait_s == 120.0
    assert gpu_state.IdlePolicy.from_environment({gpu_state.WAIT_ENV: "10"}).wait_s == 10.0
    with pytest.raises(ValueError, match="MXFP4_IDLE_WAIT_S"):
        gpu_state.IdlePolicy.from_environment({gpu_state.WAIT_ENV: "soon"})
