"""Whether a device can hold what its workers will hold, checked before any benchmark is prepared (issue 46).

Each side's worker prepares every benchmark of its device at once and keeps them for its generation
(ci.speed.engine.worker): their input sets (harness.timing.inputs) stay allocated, and the largest launch's own
temporaries (a dequantized operand, the output check's float64 reference chunks) stay in torch's caching allocator
after the first launch. Two workers (base and head) do so side by side. On an 80 GB card the default selection's
input sets alone are ~38 GB a side, and torch_dequant[fp32] at 8192x57344x8192 needs ~6 GB more of temporaries: the
pair does not fit. :func:`memory_skips` names the benchmarks to leave out, largest first, each with the bytes needed
against the bytes free, before any of them is prepared. The figures are estimates, kept on the high side: a benchmark
left out is a line in the report, one that runs out of memory mid-run costs its whole device.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ci.speed.engine.devices import assign_devices, estimated_seconds

GIB = 1 << 30
SIDES = 2  # base and head, each its own worker on the device
# The input sets (harness.timing.inputs: MAX_INPUT_SETS, the eviction rule); the LLC when the survey could not say
# (the MI355X's 256 MiB Infinity Cache: the largest of the runners, the most sets).
MAX_INPUT_SETS = 64
DEFAULT_LLC_BYTES = 256 << 20
# Temporaries go through torch's caching allocator: blocks rounded up, fragments not returned; this much on top.
TEMPORARY_SLACK = 1.25
# The output check at the timed shape (harness.output_check): float64 reference K-chunks of at most 1 GiB for the
# operands and their absolute values, the sampled rows' and columns' references.
OUTPUT_CHECK_BYTES = 3 * GIB
# Per device, what no worker's operands may take: the next generation's contexts while the old one exits, cuBLAS
# and hipBLASLt workspaces.
DEVICE_HEADROOM_BYTES = 2 * GIB
# harness.timing.inputs makes a benchmark's input sets only while they fit in this share of the free memory (its
# _INPUT_MEMORY_SHARE; tests/test_speed_calibration_skips.py holds the two equal): the last benchmark a worker prepares
# needs its sets' bytes over this share free, not only its sets' bytes (an H100's calibration lost two benchmarks so).
PREPARE_SHARE = 0.5
# torch_dequant's dequantized element size by config (the registry's configs: kernels/torch_dequant.py).
DEQUANT_ITEMSIZE = {"bf16": 2, "fp32": 4}


def gemm_bytes(m: int, n: int, k: int) -> int:
    """One input set: packed A and B, their e8m0 scales, the bf16 C (harness.timing.inputs.gemm_bytes, which imports
    torch: the parent never does; tests/test_speed_memory.py holds the two equal)."""
    return (m + n) * (k // 2 + k // 32) + m * n * 2


def input_sets(set_bytes: int, llc_bytes: int) -> int:
    """How many input sets a worker makes (harness.timing.inputs.input_set_count without its free-memory cap)."""
    return min(MAX_INPUT_SETS, max(2, math.ceil(2 * llc_bytes / set_bytes) + 1))


@dataclass(frozen=True)
class Footprint:
    """One benchmark in one worker: bytes it holds for the generation, and its largest transient need on top."""

    held: int
    transient: int

    @property
    def total(self) -> int:
        return self.held + self.transient


def footprint(bench: Any, llc_bytes: int = DEFAULT_LLC_BYTES) -> Footprint:
    """What ``bench`` (kernel, config, m, n, k) needs in one worker. By kernel: torch_dequant dequantizes both operands
    to bf16 or fp32 each launch (index tensors of int64 on the way) and multiplies into a temporary C; the FlyDSL
    kernel keeps a preshuffled copy of B and the scales per input set; the Triton kernels read the inputs as they are.
    An unknown kernel is costed as torch_dequant[fp32] (the most of any known one)."""
    m, n, k = bench.m, bench.n, bench.k
    set_bytes = gemm_bytes(m, n, k)
    sets = input_sets(set_bytes, llc_bytes)
    per_set = set_bytes
    transient = 0
    if bench.kernel.startswith("flydsl"):
        per_set += n * k // 2 + (m + n) * (k // 32)
    elif not bench.kernel.startswith("triton"):
        s = DEQUANT_ITEMSIZE.get(bench.config, 4)
        # Dequantizing a [rows, K] operand: low and high nibbles' int64 indices (8 B a packed byte), their values,
        # the stacked values and their scaled product: (2 s + 4) bytes an element at its peak. A first (kept), then B,
        # then the matmul's C in s bytes an element beside both.
        transient = max((2 * s + 4) * m * k, s * m * k + (2 * s + 4) * n * k, s * (m * k + n * k + m * n))
    transient = max(transient, OUTPUT_CHECK_BYTES)
    return Footprint(sets * per_set, math.ceil(transient * TEMPORARY_SLACK))


def device_need(benches: Sequence[Any], llc_bytes: int = DEFAULT_LLC_BYTES) -> int:
    """Bytes a device needs for ``benches`` in both sides' workers: every benchmark held, the largest transient once
    per worker, the free margin the last prepared one needs (:data:`PREPARE_SHARE`, at most the largest's), and the
    headroom."""
    prints = [footprint(b, llc_bytes) for b in benches]
    if not prints:
        return 0
    per_worker = sum(p.held for p in prints) + max(p.transient for p in prints)
    margin = math.ceil(max(p.held for p in prints) * (1.0 / PREPARE_SHARE - 1.0))
    return SIDES * per_worker + margin + DEVICE_HEADROOM_BYTES


@dataclass(frozen=True)
class DeviceMemory:
    """What a survey saw of its device's memory (ci.speed.engine.survey: torch.cuda.mem_get_info, CUDA or ROCm)."""

    free_bytes: int
    total_bytes: int
    llc_bytes: int = DEFAULT_LLC_BYTES

    @classmethod
    def of_surveys(cls, surveys: Sequence[Mapping[str, Any] | None]) -> DeviceMemory | None:
        """The least free memory any side's survey saw (each counted the other's context when it looked); None when
        none reported any (a CPU run, or a survey from before issue 46)."""
        seen = [s["memory"] for s in surveys if s is not None and isinstance(s.get("memory"), Mapping)]
        if not seen:
            return None
        return cls(
            min(int(m["free_bytes"]) for m in seen),
            min(int(m["total_bytes"]) for m in seen),
            min(int(m.get("llc_bytes") or DEFAULT_LLC_BYTES) for m in seen),
        )


def _gib(n: int) -> str:
    return f"{n / GIB:.1f} GiB"


def memory_skips(
    benches: Sequence[Any],
    memory: DeviceMemory,
    devices: Sequence[int] = (0,),
    cost: Callable[[Any], float] = estimated_seconds,
) -> dict[str, str]:
    """Benchmark id -> why it is left out: while a device's need is above its free memory, the benchmark there with
    the largest footprint goes (the fewest benchmarks lost for the bytes), spread over ``devices`` as the warm engine
    spreads them (ci.speed.engine.devices.assign_devices). Each reason names bytes needed against bytes free."""
    kept = list(benches)
    skipped: dict[str, str] = {}
    while kept:
        plan = assign_devices(kept, list(devices), cost)
        over = [(d, device_need(bs, memory.llc_bytes)) for d, bs in plan.items() if bs]
        over = [(d, need) for d, need in over if need > memory.free_bytes]
        if not over:
            break
        device, need = max(over, key=lambda x: x[1])
        largest = max(plan[device], key=lambda b: footprint(b, memory.llc_bytes).total)
        mine = footprint(largest, memory.llc_bytes)
        skipped[largest.id] = (
            f"not enough GPU memory: it needs {_gib(mine.held)} held and {_gib(mine.transient)} of "
            f"temporaries in each of the {SIDES} workers (base and head); with the device's other benchmarks "
            f"{_gib(need)} against {_gib(memory.free_bytes)} free of {_gib(memory.total_bytes)} "
            "(ci.speed.engine.memory)"
        )
        kept.remove(largest)
    return skipped
