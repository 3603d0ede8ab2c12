"""Clocks: device events on GPUs (``torch.cuda.Event`` works on CUDA and ROCm), ``time.perf_counter`` on the CPU.

Each times launches in rotation over the input sets: a chunk under one pair (warm-up) or one pair per launch (samples).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import torch


class _EventClock:
    name = "device events"

    def __init__(self, device: torch.device):
        self.device = device

    def time_chunk(self, launches: Sequence[Callable[[], None]], start: int, count: int) -> float:
        """Seconds for ``count`` launches, rotating from ``start``; one event pair around all of them."""
        with torch.cuda.device(self.device):
            begin = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            begin.record()
            for i in range(start, start + count):
                launches[i % len(launches)]()
            end.record()
            end.synchronize()
            return begin.elapsed_time(end) * 1e-3

    def time_each(self, launches: Sequence[Callable[[], None]], start: int, count: int) -> list[float]:
        """Seconds of each of ``count`` launches: one event pair per launch, one sync at the end."""
        with torch.cuda.device(self.device):
            begins = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
            for j in range(count):
                begins[j].record()
                launches[(start + j) % len(launches)]()
                ends[j].record()
            torch.cuda.synchronize(self.device)
            return [b.elapsed_time(e) * 1e-3 for b, e in zip(begins, ends)]

    def sync(self) -> None:
        torch.cuda.synchronize(self.device)


class _HostClock:
    name = "perf_counter"

    def time_chunk(self, launches: Sequence[Callable[[], None]], start: int, count: int) -> float:
        begin = time.perf_counter()
        for i in range(start, start + count):
            launches[i % len(launches)]()
        return time.perf_counter() - begin

    def time_each(self, launches: Sequence[Callable[[], None]], start: int, count: int) -> list[float]:
        samples = []
        for j in range(count):
            launch = launches[(start + j) % len(launches)]
            begin = time.perf_counter()
            launch()
            samples.append(time.perf_counter() - begin)
        return samples

    def sync(self) -> None:
        pass


def clock_for(device: torch.device) -> _EventClock | _HostClock:
    if device.type == "cuda":
        return _EventClock(device)
    if device.type == "cpu":
        return _HostClock()
    raise ValueError(f"device: cannot time on {device} (expected cpu or cuda/rocm)")


Clock = _EventClock | _HostClock
