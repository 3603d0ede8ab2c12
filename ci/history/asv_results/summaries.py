"""A results file and its records as a summary (what the history store keeps of it), and summaries as one History.

The numbers and their reasons: docs/HISTORY.md, "asv_results/store.py".
"""

from __future__ import annotations

import ast
import functools
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asv_bench import records
from ci.history.asv_results import folder as history_results
from ci.history.asv_results import result_points

GEMM_PREFIX = "bench_gemm.GemmOn"
RESOURCES_PREFIX = "bench_resources.CompiledResources.track_"
GEMM_KEY = re.compile(r"^bench_gemm\.(\w+)\.track_time\('([^']*)', '([^']*)'\)$")
COMPILE_MACHINE = "compile-only"  # ci.history.measure.tracks.COMPILE_MACHINE (not imported: that pulls in asv driving)
_SE_OF_MEDIAN = 1.2533


@dataclass(frozen=True, slots=True)
class Point:
    """One measured GEMM: (machine, kernel config, shape) at one commit."""

    machine: str
    kernel_config: str
    shape: str
    benchmark: str  # asv's key: bench_gemm.GemmOnGpu.track_time('<config>', '<shape>')
    commit: str
    order: int
    tflops: float  # the record's: 2*M*N*K / median time
    median_s: float
    level: float  # log of the median TFLOPS over every sample (change points work on it)
    error: float  # that median's standard error, log units (0 with one sample)
    relative_iqr: float
    device: str  # the GPU's name as it reports it, or "cpu"
    flags: tuple[str, ...]
    clocks: str
    copied_from: str | None  # identical code: this is another commit's measurement, copied (ci.history.measure.copies)

    @property
    def is_cpu(self) -> bool:
        return self.device == "cpu"


@dataclass(frozen=True, slots=True)
class Missing:
    """A (machine, kernel config, shape) with a record but no number at a commit: n/a or failed, and why."""

    machine: str
    kernel_config: str
    shape: str
    commit: str
    order: int
    why: str


@dataclass
class History:
    points: list[Point] = field(default_factory=list)
    missing: list[Missing] = field(default_factory=list)
    # (kernel, arch, metric) -> [(order, commit, value)]
    resources: dict[tuple[str, str, str], list[tuple[int, str, float]]] = field(default_factory=dict)
    commits: dict[str, int] = field(default_factory=dict)  # every commit with results -> its order

    def machines(self) -> list[str]:
        return sorted({p.machine for p in self.points} | {m.machine for m in self.missing})

    def kernels(self) -> list[str]:
        names = {p.kernel_config.partition(":")[0] for p in self.points}
        names |= {m.kernel_config.partition(":")[0] for m in self.missing}
        return sorted(names | {kernel for kernel, _, _ in self.resources})

    def commit_axis(self) -> list[str]:
        return [c for c, _ in sorted(self.commits.items(), key=lambda item: (item[1], item[0]))]


def lines(points: Iterable[Point]) -> dict[tuple[str, str, str], list[Point]]:
    """(machine, kernel config, shape) -> its points in commit order: one line each, machines never mixed."""
    grouped: dict[tuple[str, str, str], list[Point]] = {}
    for point in sorted(points, key=lambda p: (p.order, p.commit)):
        grouped.setdefault((point.machine, point.kernel_config, point.shape), []).append(point)
    return grouped


def read_commit(
    results_dir: Path, machine: str, commit: str
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]], dict | None]:
    """(asv values by key, records by key, the results document or None) of one commit on ``machine``."""
    values: dict[str, dict[str, Any]] = {}
    recs: dict[str, dict[str, Any]] = {}
    document = None
    for _, document in history_results.commit_documents(results_dir, machine, commit):
        values.update(history_results.values_by_key(document))
    for _, entries in history_results.sidecars(results_dir, machine, commit[:8]):
        recs.update(entries)
    return values, recs, document


def _tflops_samples(asv_samples: Any, record: dict[str, Any]) -> list[float] | None:
    flops = record.get("flops")
    raw = asv_samples or record.get("samples_s")
    if isinstance(flops, (int, float)) and raw:
        tflops = [flops / t / 1e12 for t in raw if isinstance(t, (int, float)) and t > 0]
        if tflops:
            return tflops
    single = record.get("tflops")
    if isinstance(single, (int, float)) and math.isfinite(single) and single > 0:
        return [float(single)]
    return None


def _median(ordered: list[float]) -> float:
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _level(samples: Sequence[float]) -> tuple[float, float]:
    """The log of the samples' median TFLOPS, and that median's standard error (1.2533 x the MAD's SD over sqrt n).
    Plain Python: numpy's per-call overhead was a third of summarizing a file (30 lines of ~10 samples)."""
    logs = sorted(map(math.log, samples))  # map, not a generator: the same numbers, a third of the time
    centre = _median(logs)
    if len(logs) < 2:
        return centre, 0.0
    spread = _median(sorted(map(abs, map(centre.__rsub__, logs))))  # |x - centre| for each x
    return centre, _SE_OF_MEDIAN * 1.4826 * spread / math.sqrt(len(logs))


def summarize(document: dict[str, Any], recs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One commit's results document and records as a plain summary (what the database keeps)."""
    values = result_points.results_and_samples(document)  # key -> (asv's result, its samples)
    gemm, missing = {}, {}
    for key, record in recs.items():
        if not key.startswith(GEMM_PREFIX):
            continue
        if record.get("status") != "measured" or not record.get("tflops"):
            missing[key] = records.describe(record)
            continue
        samples = _tflops_samples(values.get(key, (None, None))[1], record)
        if samples is None:
            continue
        level, error = _level(samples)
        before = record.get("gpu_before") or {}
        device = "cpu" if ".GemmOnCpu." in key else (before.get("name") or "GPU")
        gemm[key] = [
            float(record["tflops"]),
            float(record["median_s"]),
            level,
            error,
            float(record.get("relative_iqr") or 0.0),
            device,
            list(record.get("flags") or ()),
            _clocks(record),
            record.get("identical_to"),
        ]
    stamped = {
        k: r for k, r in recs.items() if r.get("status") == "measured" and isinstance(r.get("fingerprint"), dict)
    }
    fingerprints = {
        "of": {k: r["fingerprint"] for k, r in stamped.items()},
        "originals": sorted({r.get("identical_to") or document["commit_hash"] for r in stamped.values()}),
        "at": max((float(r.get("fingerprint_at") or 0.0) for r in stamped.values()), default=0.0),
    }
    resources = {
        key: float(value)
        for key, (value, _) in values.items()
        if key.startswith(RESOURCES_PREFIX) and isinstance(value, (int, float)) and math.isfinite(value)
    }
    return {
        "commit": document["commit_hash"],
        "date": document.get("date"),
        "gemm": gemm,
        "missing": missing,
        "resources": resources,
        "fingerprints": fingerprints,
    }


def _clocks(record: dict[str, Any]) -> str:
    before = record.get("gpu_before") or {}
    if before.get("sm_clock_mhz"):
        after = record.get("gpu_after") or {}
        after_mhz, max_mhz = after.get("sm_clock_mhz", "?"), before.get("max_sm_clock_mhz", "?")
        return f"SM {before['sm_clock_mhz']} MHz before, {after_mhz} after, max {max_mhz}"
    return str(record.get("clock") or "")


def _summarize_file(path: Path, machine: str) -> dict[str, Any] | None:
    try:
        document = history_results.check_results_file(path, machine)
    except history_results.InvalidFile:
        return None  # ci.history.asv_results.folder.validate_tree quarantines it, saying why
    return summarize(document, history_results.read_records(records.sidecar_for_results_file(path)))


def history(summaries: dict[str, list[dict[str, Any]]], order: dict[str, int] | None = None) -> History:
    """Every summary as one History; ``order`` (commit -> position, asv's revisions) limits and orders the commits,
    else each results file's date does."""
    out = History()
    for machine, files in sorted(summaries.items()):
        for summary in files:
            commit = summary["commit"]
            if order is None:
                position = int(summary.get("date") or 0)
            elif commit in order:
                position = order[commit]
            else:
                continue
            out.commits[commit] = position
            _add(out, machine, commit, position, summary)
    return out


@functools.lru_cache(maxsize=4096)  # a few hundred distinct keys, repeated at every commit
def split_key(key: str) -> tuple[str, str] | None:
    _, _, params = key.partition("(")
    try:
        first, second = ast.literal_eval("(" + params)
    except (ValueError, SyntaxError, TypeError):
        return None
    return str(first), str(second)


def _add(out: History, machine: str, commit: str, order: int, summary: dict[str, Any]) -> None:
    for key, row in summary["gemm"].items():
        split = split_key(key)
        if split is not None:
            tflops, median_s, level, error, iqr, device, flags, clocks, copied = row
            numbers = (tflops, median_s, level, error, iqr, device)
            out.points.append(Point(machine, *split, key, commit, order, *numbers, tuple(flags), clocks, copied))
    for key, why in summary["missing"].items():
        split = split_key(key)
        if split is not None:
            out.missing.append(Missing(machine, split[0], split[1], commit, order, why))
    for key, value in summary["resources"].items():
        split = split_key(key)
        if split is not None:
            metric = key[len(RESOURCES_PREFIX) :].partition("(")[0]
            out.resources.setdefault((split[0], split[1], metric), []).append((order, commit, value))
