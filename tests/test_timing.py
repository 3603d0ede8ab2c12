"""The one timing module (harness.timing): statistics, rotation, warm-up, input sizing, and that it
sees an injected slowdown. CPU tests use time.perf_counter; the device-event path is marked gpu."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from asv_bench.common import kernel_prepare  # what the asv suite and the speed gate hand to measure_gemm
from harness import operands, timing
from kernels import registry

FAST = timing.TimingBudget(warmup_ms=20, max_warmup_ms=400, rep_ms=150, min_reps=15, max_reps=200, chunk_ms=2)


def _timing(samples) -> timing.Timing:
    return timing.Timing(
        samples_s=tuple(samples),
        flops=2 * 10**12,
        device="cpu",
        clock="perf_counter",
        input_sets=2,
        inputs_cold=True,
        warmup_launches=0,
        warmup_s=0.0,
        steady=True,
    )


def test_statistics_match_numpy():
    samples = [3.0, 1.0, 4.0, 1.5, 5.0, 9.0, 2.5, 6.0]
    t = _timing(samples)
    assert t.median_s == pytest.approx(np.median(samples))
    assert t.q25_s == pytest.approx(np.quantile(samples, 0.25))
    assert t.q75_s == pytest.approx(np.quantile(samples, 0.75))
    assert t.mad_s == pytest.approx(np.median(np.abs(np.array(samples) - np.median(samples))))
    assert t.tflops == pytest.approx(2.0 / np.median(samples))  # 2e12 flop / median / 1e12
    assert t.asv_samples() == {"samples": samples, "number": 1}


def test_launches_rotate_through_the_input_sets_across_warm_up_and_timing():
    calls: list[int] = []
    launches = [lambda i=i: calls.append(i) for i in range(3)]
    t = timing.benchmark(launches, flops=1, device="cpu", budget=FAST)
    # Priming runs each set once; then one rotation continues through warm-up and timed launches.
    assert calls[:3] == [0, 1, 2]
    rotation = calls[3:]
    assert rotation == [i % 3 for i in range(len(rotation))]
    assert len(rotation) == t.warmup_launches + len(t.samples_s)


class _VirtualClock:
    """time.perf_counter for harness.timing's CPU path, advanced only by the launches it times.

    A launch's cost is its nominal time times a heavy-tailed draw (log-normal, and one launch in 20 stalled
    2-6x, as a shared CPU stalls), so the timing module's warm-up, sampling and medians are exercised on
    realistic samples while the result does not depend on the machine or its load.
    """

    def __init__(self, seed: int):
        self.now = 1000.0
        self._rng = np.random.default_rng(seed)

    def perf_counter(self) -> float:
        return self.now

    def launch(self, nominal_s: float):
        def run():
            stall = self._rng.uniform(2, 6) if self._rng.random() < 0.05 else 1.0
            self.now += nominal_s * float(self._rng.lognormal(0.0, 0.05)) * stall

        return run


@pytest.fixture
def virtual_clock(monkeypatch):
    clock = _VirtualClock(seed=20261205)
    fake_time = type("fake_time", (), {"perf_counter": staticmethod(clock.perf_counter)})
    monkeypatch.setattr(timing.clocks, "time", fake_time)
    monkeypatch.setattr(timing.sampling, "time", fake_time)
    return clock


def test_warm_up_waits_until_the_timings_are_steady(virtual_clock):
    # Clocks ramping up, caches filling: each call 25% faster than the last, then steady at 10 ms.
    ramp = [0.060, 0.045, 0.034, 0.026, 0.020, 0.015]
    calls = 0

    def launch():
        nonlocal calls
        calls += 1
        virtual_clock.now += ramp[calls - 1] if calls <= len(ramp) else 0.010

    budget = timing.TimingBudget(warmup_ms=20, max_warmup_ms=2000, steady_tolerance=0.05, rep_ms=150, min_reps=10)
    t = timing.benchmark([launch, launch], flops=1, device="cpu", budget=budget)
    assert t.steady
    assert t.warmup_launches >= len(ramp) - 2  # the two priming calls are not counted
    assert t.samples_s == pytest.approx((0.010,) * len(t.samples_s))  # no ramp call among the timed launches


def test_timings_that_never_settle_are_reported_as_not_steady(virtual_clock):
    durations = iter([0.001, 0.004] * 10_000)

    def launch():
        virtual_clock.now += next(durations)

    t = timing.benchmark(
        [launch],
        flops=1,
        device="cpu",
        budget=timing.TimingBudget(warmup_ms=10, max_warmup_ms=100, rep_ms=20, min_reps=5, chunk_ms=0.0),
    )
    assert not t.steady


def test_an_injected_slowdown_shows_in_the_medians_and_an_unchanged_callable_does_not(virtual_clock):
    work = virtual_clock.launch(0.7e-3)

    def twice():  # the injected slowdown: the same work done twice
        work()
        work()

    budget = timing.TimingBudget(warmup_ms=20, max_warmup_ms=400, rep_ms=300, min_reps=20, max_reps=300)
    baseline = timing.benchmark([work], flops=1, device="cpu", budget=budget)
    slowed = timing.benchmark([twice], flops=1, device="cpu", budget=budget)
    again = timing.benchmark([work], flops=1, device="cpu", budget=budget)
    assert baseline.steady and slowed.steady, (baseline.summary(), slowed.summary())
    assert 1.9 < slowed.median_s / baseline.median_s < 2.1, (baseline.summary(), slowed.summary())
    assert abs(again.median_s / baseline.median_s - 1) < 0.03, (baseline.summary(), again.summary())
    # rep_ms sizes step 5 from the warm-up's last per-launch time: 300 ms of 0.7 ms launches is capped at
    # max_reps, of 1.4 ms launches about 214.
    assert len(baseline.samples_s) == 300 and 150 < len(slowed.samples_s) < 300, (baseline, slowed)


def test_gemm_bytes_counts_packed_operands_scales_and_bf16_output():
    m, n, k = 8192, 8192, 8192
    assert timing.gemm_bytes(m, n, k) == 2 * (8192 * 4096 + 8192 * 256) + 8192 * 8192 * 2


@pytest.mark.parametrize(
    "shape, cache, expected_sets, cold",
    [
        ((8192, 8192, 8192), 60 * 10**6, 2, True),  # H200: one 196 MiB set already exceeds the 60 MB L2
        ((8192, 8192, 8192), 256 << 20, 4, True),  # MI355X: 256 MiB of Infinity Cache -> 4 sets
        ((16384, 16384, 16384), 256 << 20, 2, True),
        ((256, 256, 8192), 256 << 20, timing.MAX_INPUT_SETS, False),  # small: capped, may stay cached
    ],
)
def test_input_sets_are_sized_from_the_cache(shape, cache, expected_sets, cold):
    sets, is_cold = timing.input_set_count(timing.gemm_bytes(*shape), cache, free_bytes=100 << 30)
    assert (sets, is_cold) == (expected_sets, cold)


def test_input_sets_that_do_not_fit_are_refused_with_the_sizes():
    with pytest.raises(MemoryError, match="two GEMM input sets need"):
        timing.input_set_count(timing.gemm_bytes(16384, 16384, 16384), 60 * 10**6, free_bytes=1 << 30)


def test_measure_gemm_times_the_torch_reference_on_the_cpu():
    kernel = registry.get_kernel("torch_dequant")
    t = timing.measure_gemm(kernel_prepare(kernel), 128, 128, 1024, device="cpu", budget=FAST, label="torch 128^2x1024")
    assert t.flops == 2 * 128 * 128 * 1024
    assert t.clock == "perf_counter" and t.input_sets == timing.CPU_MAX_INPUT_SETS
    assert t.idle == {"status": "no gpu", "waited_s": 0.0, "problems": [], "state": None}
    assert len(t.samples_s) >= FAST.min_reps and all(s > 0 for s in t.samples_s)
    assert t.to_json()["tflops"] == pytest.approx(t.tflops)
    assert t.label == "torch 128^2x1024"


def test_measure_gemm_hands_each_input_set_its_own_seeded_operands():
    seen = []

    def prepare(a, b, out):
        seen.append((a, b, out))
        return lambda: None

    t = timing.measure_gemm(prepare, 64, 32, 256, device="cpu", budget=FAST, seed=7)
    assert len(seen) == t.input_sets == timing.CPU_MAX_INPUT_SETS
    for i, (a, b, out) in enumerate(seen):
        expected_a, expected_b = operands.gemm_operands(64, 32, 256, seed=7 + i, device="cpu")
        assert torch.equal(a.data, expected_a.data) and torch.equal(b.scales, expected_b.scales)
        assert a.data.shape == (64, 128) and b.data.shape == (32, 128) and out.shape == (64, 32)
    assert not torch.equal(seen[0][0].data, seen[1][0].data)  # consecutive launches never share inputs


def test_measure_gemm_rejects_an_empty_shape():
    with pytest.raises(ValueError, match="must be positive"):
        timing.measure_gemm(lambda a, b, out: lambda: None, 0, 64, 256, device="cpu", budget=FAST)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm GPU")
def test_device_events_time_a_known_gpu_sleep():
    # torch.cuda._sleep spins for a number of GPU cycles: events must see it, the host-side launch must not.
    cycles = int(torch.cuda.get_device_properties(0).clock_rate * 1e3 * 1e-3)  # ~1 ms at the base clock
    t = timing.benchmark([lambda: torch.cuda._sleep(cycles)] * 2, flops=1, device="cuda", budget=FAST)
    assert t.clock == "device events"
    assert 0.3e-3 < t.median_s < 3e-3, t.summary()


@pytest.mark.gpu
@pytest.mark.large
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm GPU")
def test_measure_gemm_on_the_gpu_records_gpu_state_and_a_sane_tflops():
    runnable = [k for k in registry.all_kernels() if k.backend == "triton" and not k.unavailable_reason("cuda")]
    if not runnable:
        pytest.skip("no Triton kernel runs on this GPU")
    t = timing.measure_gemm(kernel_prepare(runnable[0]), 8192, 8192, 8192, device="cuda")
    assert t.clock == "device events" and t.idle["status"] in ("idle", "overridden")
    assert t.gpu_before and t.gpu_after and t.gpu_before["sm_clock_mhz"] > 0
    assert 1 < t.tflops < 10_000, t.summary()
    assert t.inputs_cold, t.summary()


def _counted_launches():
    """``(calls, launch)``: ``launch(name)`` is a launch that counts its runs in ``calls[name]``."""
    calls = {"a": 0, "b": 0}

    def launch(name):
        def run():
            calls[name] += 1

        return run

    return calls, launch


def test_a_primed_timing_skips_priming_and_still_warms_up_until_steady():
    """A warm worker's repeat timing (``primed``): no priming launch, the warm-up and samples as before."""
    calls, launch = _counted_launches()
    budget = timing.TimingBudget(
        warmup_ms=0.0, chunk_ms=0.0, rep_ms=0.0, min_reps=6, max_reps=6, steady_tolerance=1000.0
    )
    first = timing.benchmark([launch("a"), launch("b")], flops=1, device="cpu", budget=budget)
    primed_from = dict(calls)
    again = timing.benchmark([launch("a"), launch("b")], flops=1, device="cpu", budget=budget, primed=True)
    launched_again = sum(calls.values()) - sum(primed_from.values())
    assert sum(primed_from.values()) == 2 + first.warmup_launches + 6  # priming: one launch per input set
    assert launched_again == again.warmup_launches + 6  # primed: warm-up and samples only
    assert again.warmup_launches >= 3 and len(again.samples_s) == 6  # three chunks make "steady"


def test_a_settled_timing_warms_up_with_one_launch_and_judges_steadiness_on_its_samples():
    """A warm worker's repeat timing on a GPU (``settled``): one warm-up launch, then the samples."""
    calls, launch = _counted_launches()
    budget = timing.TimingBudget(
        warmup_ms=10_000.0, chunk_ms=0.0, rep_ms=0.0, min_reps=6, max_reps=6, steady_tolerance=1000.0
    )
    settled = timing.benchmark(
        [launch("a"), launch("b")], flops=1, device="cpu", budget=budget, primed=True, settled=True
    )
    assert settled.warmup_launches == 1 and sum(calls.values()) == 1 + 6  # no priming, no 10 s warm-up
    assert settled.steady  # any spread is within a tolerance of 1000x
    with pytest.raises(ValueError, match="settled"):
        timing.benchmark([launch("a")], flops=1, device="cpu", budget=budget, settled=True)


@pytest.mark.parametrize(
    "samples, steady",
    [
        ([1.0] * 9, True),
        ([1.0, 1.02, 0.99] * 3, True),  # noise within 3%: the thirds' medians agree
        ([1.0] * 3 + [1.0] * 3 + [1.1] * 3, False),  # the last third 10% slower: a clock falling
        ([1.2] * 3 + [1.0] * 6, False),  # the first third slow: not settled when timing began
        ([5.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0], True),  # one slow launch moves no median
        ([1.0, 1.0], False),  # too few to judge
    ],
)
def test_samples_steady_compares_the_medians_of_the_thirds(samples, steady):
    from harness.timing.sampling import samples_steady

    assert samples_steady(samples, 0.03) is steady


class _ScriptedClock:
    """A clock whose launches take the scripted seconds, in order (then the last one again)."""

    name = "scripted"

    def __init__(self, seconds):
        self.seconds, self.used = list(seconds), 0
        self.timed_from: list[int] = []  # the input set each timing (time_each) started its rotation at

    def _next(self):
        value = self.seconds[min(self.used, len(self.seconds) - 1)]
        self.used += 1
        return value

    def time_chunk(self, launches, start, count):
        return sum(self._next() for _ in range(count))

    def time_each(self, launches, start, count):
        self.timed_from.append(start)
        return [self._next() for _ in range(count)]

    def sync(self):
        pass


@pytest.mark.parametrize("drifting", [False, True])
def test_a_settled_timing_that_was_not_steady_warms_up_fully_and_times_again(monkeypatch, drifting):
    """Settled samples that drift (a clock falling) are not kept: they become warm-up, then the
    warm-up is retried until steady and the benchmark is timed again. Steady ones are kept as they are."""
    from harness.timing import sampling

    first = [1.0] + ([1.0] * 2 + [1.0] * 2 + [1.2] * 2 if drifting else [1.0] * 6)  # one warm-up launch, six samples
    clock = _ScriptedClock(first + [0.9] * 100)  # then: settled at 0.9
    monkeypatch.setattr(sampling, "clock_for", lambda device: clock)
    budget = timing.TimingBudget(warmup_ms=0.0, chunk_ms=0.0, rep_ms=0.0, min_reps=6, max_reps=6, steady_tolerance=0.03)
    t = timing.benchmark([lambda: None], flops=1, device="cpu", budget=budget, primed=True, settled=True)
    assert t.steady and len(t.samples_s) == 6
    if drifting:
        assert t.samples_s == (0.9,) * 6 and t.warmup_launches == 1 + 6 + 3  # the discarded timing, three steady chunks
        assert clock.timed_from == [1, 3]  # each timing goes on from where its own warm-up left the rotation
    else:
        assert t.samples_s == (1.0,) * 6 and t.warmup_launches == 1 and clock.used == 7


def test_free_memory_counts_the_blocks_torchs_allocator_holds_unused(monkeypatch):
    """An H100 calibration worker (2026-12-07) saw 1.06 GiB free after the torch_dequant references' temporaries, which
    its caching allocator still held: two input sets of 0.7 GiB could not be made, though the allocator would have
    handed those blocks back. Free is the driver's free plus those blocks."""
    from harness.timing import inputs

    gib = 1 << 30
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (int(1.06 * gib), 80 * gib))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 9 * gib)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 2 * gib)
    free = inputs._free_memory_bytes(torch.device("cuda", 0))
    assert free == int(1.06 * gib) + 7 * gib
    sets, _ = inputs.input_set_count(int(0.71 * gib), 50 << 20, free)  # the benchmark the calibration lost
    assert sets >= 2
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 9 * gib)  # nothing cached: the driver's
    assert inputs._free_memory_bytes(torch.device("cuda", 0)) == int(1.06 * gib)
    assert inputs._free_memory_bytes(torch.device("cpu")) > 0  # the CPU path is untouched
