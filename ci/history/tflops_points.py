"""The kernel pages' data, read from a results folder: TFLOPS per measurement, resources per commit, steps.

No new measurement: every TFLOPS point is a record that the GEMM benchmark wrote beside asv's
results file (asv_bench.records) from the samples asv keeps as seconds -- 2*M*N*K over their
median. The compile-only resource counts are asv's own results of the machine ``compile-only``
(bench_resources.CompiledResources). A line is one (machine, kernel config, shape): machines are
never mixed, because a TFLOPS figure is a property of the device it ran on.

A step between two consecutive points of a line is a ``gain`` (TFLOPS up) or a ``regression``
(TFLOPS down) when it is larger than the line's noise: the two measurements' relative IQRs added,
and never under MIN_STEP. On a CPU the floor is CPU_MIN_STEP: one commit's CPU timing moved 19-45%
between runs on the shared runner (README, "The main job"), so smaller CPU steps are noise.

Imports only the standard library and asv_bench.records.
"""

from __future__ import annotations

import ast
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asv_bench import records

GEMM_PREFIX = "bench_gemm.GemmOn"
RESOURCES_PREFIX = "bench_resources.CompiledResources.track_"
COMPILE_MACHINE = "compile-only"  # ci.history.tracks.COMPILE_MACHINE (not imported: that pulls in asv driving)
MIN_STEP = 0.02
CPU_MIN_STEP = 0.45


@dataclass(frozen=True)
class Point:
    machine: str
    kernel_config: str
    shape: str
    commit: str
    order: int
    tflops: float
    median_s: float
    relative_iqr: float
    device: str  # the GPU's name as it reports it, or "cpu"
    flags: tuple[str, ...]
    clocks: str

    @property
    def is_cpu(self) -> bool:
        return self.device == "cpu"


@dataclass(frozen=True)
class Missing:
    """A (machine, kernel config, shape) with a record but no number at a commit: n/a or failed, and why."""

    machine: str
    kernel_config: str
    shape: str
    commit: str
    order: int
    why: str


@dataclass(frozen=True)
class Step:
    before: Point
    after: Point
    change: float  # after.tflops / before.tflops - 1
    noise: float

    @property
    def kind(self) -> str:
        if self.change > self.noise:
            return "gain"
        if self.change < -self.noise:
            return "regression"
        return "none"


@dataclass
class History:
    points: list[Point] = field(default_factory=list)
    missing: list[Missing] = field(default_factory=list)
    # (kernel, arch, metric) -> [(order, commit, value)]
    resources: dict[tuple[str, str, str], list[tuple[int, str, float]]] = field(default_factory=dict)
    commits: dict[str, int] = field(default_factory=dict)  # every commit seen -> its order

    def machines(self) -> list[str]:
        return sorted({p.machine for p in self.points} | {m.machine for m in self.missing})

    def kernels(self) -> list[str]:
        names = {p.kernel_config.partition(":")[0] for p in self.points}
        names |= {m.kernel_config.partition(":")[0] for m in self.missing}
        return sorted(names | {kernel for kernel, _, _ in self.resources})


def read_history(results_dir: Path, revisions: dict[str, int] | None = None) -> History:
    """Every record and compile-only count under ``results_dir``; ``revisions`` (commit -> order, asv's) limits and orders them."""
    history = History()
    if not results_dir.is_dir():
        return history
    for machine_dir in sorted(p for p in results_dir.iterdir() if p.is_dir()):
        commits = _commits_of(machine_dir, revisions)
        for stem, (commit, order) in sorted(commits.items()):
            history.commits[commit] = order
            if machine_dir.name == COMPILE_MACHINE:
                _read_resources(history, machine_dir / f"{stem}.json", commit, order)
            sidecar = machine_dir / f"{stem}{records.SUFFIX}"
            try:
                entries = records.load(sidecar)
            except records.CorruptSidecar:
                continue  # ci.history.main_job quarantines these
            for key, record in entries.items():
                _add_record(history, machine_dir.name, commit, order, key, record)
    return history


def _commits_of(machine_dir: Path, revisions: dict[str, int] | None) -> dict[str, tuple[str, int]]:
    """results-file stem -> (commit, order): asv's revisions when given, else the results file's commit date."""
    found = {}
    for path in machine_dir.glob("*.json"):
        if path.name == "machine.json":
            continue
        try:
            data = json.loads(path.read_text())
            commit = data["commit_hash"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if revisions is None:
            found[path.stem] = (commit, int(data.get("date") or 0))
        elif commit in revisions:
            found[path.stem] = (commit, revisions[commit])
    return found


def _add_record(history: History, machine: str, commit: str, order: int, key: str, record: dict[str, Any]) -> None:
    if not key.startswith(GEMM_PREFIX):
        return
    benchmark, _, params = key.partition("(")
    try:
        kernel_config, shape = ast.literal_eval("(" + params)
    except (ValueError, SyntaxError):
        return
    if record["status"] != "measured" or not record.get("tflops"):
        history.missing.append(Missing(machine, kernel_config, shape, commit, order, records.describe(record)))
        return
    before = record.get("gpu_before") or {}
    device = "cpu" if benchmark.endswith("GemmOnCpu.track_time") else (before.get("name") or "GPU")
    clocks = ""
    if before.get("sm_clock_mhz"):
        after = record.get("gpu_after") or {}
        clocks = f"SM {before['sm_clock_mhz']} MHz before, {after.get('sm_clock_mhz', '?')} after (max {before.get('max_sm_clock_mhz', '?')})"
    elif record.get("clock"):
        clocks = str(record["clock"])
    history.points.append(
        Point(
            machine=machine,
            kernel_config=kernel_config,
            shape=shape,
            commit=commit,
            order=order,
            tflops=float(record["tflops"]),
            median_s=float(record["median_s"]),
            relative_iqr=float(record.get("relative_iqr") or 0.0),
            device=device,
            flags=tuple(record.get("flags") or ()),
            clocks=clocks,
        )
    )


def _read_resources(history: History, results_file: Path, commit: str, order: int) -> None:
    try:
        data = json.loads(results_file.read_text())
    except (OSError, ValueError):
        return
    columns = data.get("result_columns") or []
    for name, row in (data.get("results") or {}).items():
        if not name.startswith(RESOURCES_PREFIX):
            continue
        entry = dict(zip(columns, row))
        values, params = entry.get("result") or [], entry.get("params") or []
        for combo, value in zip(itertools.product(*params), values):
            if len(combo) != 2 or not isinstance(value, (int, float)) or value != value:
                continue
            kernel, arch = (ast.literal_eval(p) if p[:1] in "'\"" else p for p in combo)
            metric = name[len(RESOURCES_PREFIX) :]
            history.resources.setdefault((kernel, arch, metric), []).append((order, commit, float(value)))


def lines(points: list[Point]) -> dict[tuple[str, str, str], list[Point]]:
    """(machine, kernel config, shape) -> its points in commit order: one line each, machines never mixed."""
    grouped: dict[tuple[str, str, str], list[Point]] = {}
    for point in sorted(points, key=lambda p: (p.order, p.commit)):
        grouped.setdefault((point.machine, point.kernel_config, point.shape), []).append(point)
    return grouped


def steps(line: list[Point]) -> list[Step]:
    """Each consecutive pair of a line's points, with its change and the noise it is judged against."""
    found = []
    for before, after in zip(line, line[1:]):
        floor = CPU_MIN_STEP if after.is_cpu else MIN_STEP
        found.append(Step(before, after, after.tflops / before.tflops - 1, max(floor, before.relative_iqr + after.relative_iqr)))
    return found
