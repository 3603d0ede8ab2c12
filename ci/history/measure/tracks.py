"""Which asv benchmarks a main-job run measures, and under which asv machine: ``--tracks gpu|cpu|all``.

``gpu``: the GEMM timings of this machine's device (``GemmOnGpu``, or ``GemmOnCpu`` without a GPU), under this
machine. ``cpu``: the compile-only resource counts, the same on every machine, under :data:`COMPILE_MACHINE`.
``all`` (the default) is both, one asv run each; ``--bench`` regexes narrow each track, and a track they select
nothing of is not run (docs/HISTORY.md, "measure/tracks.py").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

COMPILE_MACHINE = "compile-only"
GPU_TIMINGS = r"^bench_gemm\.GemmOnGpu\."
CPU_TIMINGS = r"^bench_gemm\.GemmOnCpu\."  # the stand-in of GPU_TIMINGS on a machine without a GPU
COMPILE_TRACKS = r"^bench_resources\.CompiledResources\."


@dataclass(frozen=True)
class TrackRun:
    """One ``asv run`` of the job: which kind, under which asv machine, with which ``-b`` regex."""

    kind: str  # "gpu" (timings of this machine's device) or "cpu" (compile-only counts)
    machine: str
    bench: str  # one asv -b regex: the track, narrowed by the --bench regexes

    @property
    def timings(self) -> bool:
        return self.kind == "gpu"


def timing_track(has_gpu: bool) -> str:
    return GPU_TIMINGS if has_gpu else CPU_TIMINGS


def narrowed(track: str, patterns: Sequence[str]) -> str:
    """``track`` AND any of ``patterns`` as one regex for asv's re.search (a lookahead over the whole name)."""
    if not patterns:
        return track
    return f"^(?=.*(?:{'|'.join(patterns)})){track.removeprefix('^')}"


def plan(tracks: str, has_gpu: bool, machine: str, patterns: Sequence[str], names: Sequence[str]) -> list[TrackRun]:
    """The asv runs for ``--tracks`` (see the module doc); tracks the patterns select nothing of are left out."""
    wanted = {"all": ("gpu", "cpu"), "gpu": ("gpu",), "cpu": ("cpu",)}[tracks]
    runs = []
    for kind in wanted:
        regex = narrowed(timing_track(has_gpu) if kind == "gpu" else COMPILE_TRACKS, patterns)
        if any(re.search(regex, name) for name in names):
            runs.append(TrackRun(kind, machine if kind == "gpu" else COMPILE_MACHINE, regex))
    return runs
