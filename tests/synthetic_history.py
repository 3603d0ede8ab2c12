"""Synthetic histories at scale: N commits x machines x benchmarks, with steps, short regressions and noise of known
size.

Made in a clone of this repository (``git fast-import``): ``main`` gets N commits, ``asv-results`` one commit per
main commit with a GPU machine (the real H200 results, redrawn), ``compile-only`` counts and optionally a CPU
machine. A line's TFLOPS is ``base x step x bump x drift x (1 + noise)``; :class:`Truth` keeps it all. Dates are
in the past, gaps heavy-tailed (docs/HISTORY.md, "tests/synthetic_history.py").
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import subprocess
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import synthetic_cpu

from asv_bench import records

REPO_ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = REPO_ROOT / "docs/data/h200_history_cost/asv/results/vm-nvidia-h200"
TEMPLATE_STEM = "7d25df89-virtualenv-py3.12-VIRTUALENV_SYSTEM_SITE_PACKAGEStrue"
BENCHMARKS_JSON = REPO_ROOT / "docs/data/h200_history_cost/asv/results/benchmarks.json"
GEMM_BENCHMARK = "bench_gemm.GemmOnGpu.track_time"
RESOURCES_PREFIX = "bench_resources.CompiledResources.track_"
COMPILE_MACHINE = "compile-only"
HISTORY_FILE = "docs/synthetic-history.txt"
BRANCH = "asv-results"
GAP_MEDIAN_S = 2700  # between two commits of main: median 45 min ...
GAP_SIGMA = 1.2  # ... lognormal: 1 gap in 100 is over ~14 h, the mean ~1.5 h (10,000 commits: ~21 months)
NEWEST_AGE_S = 3600  # the newest commit landed an hour before ``end``, its results ~2-30 min after it
MEASURED_AFTER_S = (120, 1800)  # a commit's results start this long after the commit (a runner picks it up)


@dataclass(frozen=True)
class Spec:
    """What to generate; every size is relative (0.01 = 1%)."""

    commits: int
    seed: int = 0
    gpu_machine: str = "synthetic-h200"
    compile_only: bool = True
    steps_per_line: int = 3
    step_range: tuple[float, float] = (0.01, 0.03)
    bumps_per_line: int = 0
    bump_size: float = 0.03
    bump_length: tuple[int, int] = (5, 20)
    commit_noise: float = 0.001
    drift_sd: float = 0.0025  # stationary SD of the machine's AR(1) wander
    drift_phi: float = 0.97
    sample_noise: float = 0.002
    flagged_share: float = 0.005  # measurements flagged (clocks throttled)
    resource_changes: int = 4  # commits where compile-only counts move
    # A second machine, without a GPU, timing bench_gemm.GemmOnCpu (the main job's timing track there): torch_dequant's
    # configs at the CPU shapes, every other kernel n/a; None: the GPU machine and compile-only only.
    cpu_machine: str | None = None
    cpu_sample_noise: float = 0.015  # a shared CPU: ~10x the GPU's spread, ...
    cpu_slow_share: float = 0.05  # ... and a few samples slowed by a neighbour (1 + exponential(0.15))
    end: float | None = None  # epoch seconds nothing is dated after (None: now, when the history is made)
    gap_median_s: float = 0.0  # between two commits (0: GAP_MEDIAN_S); longer spreads few commits over weeks


@dataclass
class LineTruth:
    steps: list[tuple[int, float]] = field(default_factory=list)  # (first commit index at the new level, relative size)
    bumps: list[tuple[int, int, float]] = field(default_factory=list)  # [start, end) at relative size, then back


@dataclass
class Truth:
    spec: Spec
    commits: list[str]  # the new main commits, oldest first
    lines: dict[str, LineTruth]  # asv key -> what was put in
    results_tip: str

    def to_json(self) -> dict[str, Any]:
        return {
            "spec": asdict(self.spec),
            "commits": self.commits,
            "results_tip": self.results_tip,
            "lines": {k: asdict(v) for k, v in self.lines.items()},
        }


# ---------------------------------------------------------------------------
# the levels
# ---------------------------------------------------------------------------


def _line_truth(rng: np.random.Generator, spec: Spec) -> LineTruth:
    n, truth = spec.commits, LineTruth()
    if n >= 8:
        for at in sorted(rng.choice(np.arange(4, n - 3), size=min(spec.steps_per_line, n - 8), replace=False)):
            truth.steps.append((int(at), float(rng.uniform(*spec.step_range) * rng.choice((-1, 1)))))
    for _ in range(spec.bumps_per_line):
        length = int(rng.integers(spec.bump_length[0], spec.bump_length[1] + 1))
        if n - length - 8 > 4:
            start = int(rng.integers(4, n - length - 4))
            truth.bumps.append((start, start + length, -spec.bump_size))
    return truth


def line_levels(truth: LineTruth, n: int) -> np.ndarray:
    """The true multiplier of a line's base TFLOPS at each commit (steps and bumps; no noise)."""
    level = np.ones(n)
    for at, size in truth.steps:
        level[at:] *= 1 + size
    for start, end, size in truth.bumps:
        level[start:end] *= 1 + size
    return level


def _drift(rng: np.random.Generator, spec: Spec) -> np.ndarray:
    innovation = spec.drift_sd * math.sqrt(1 - spec.drift_phi**2)
    out = np.empty(spec.commits)
    value = rng.normal(0, spec.drift_sd)
    for i in range(spec.commits):
        value = spec.drift_phi * value + rng.normal(0, innovation)
        out[i] = value
    return out


# ---------------------------------------------------------------------------
# the files of one commit
# ---------------------------------------------------------------------------


def _template() -> tuple[dict[str, Any], dict[str, Any]]:
    results = json.loads((TEMPLATE / f"{TEMPLATE_STEM}.json").read_text())
    sidecar = json.loads((TEMPLATE / f"{TEMPLATE_STEM}{records.SUFFIX}").read_text())
    return results, sidecar


class _GpuFiles:
    """The GPU machine's results and records of one commit, from the H200 template with new levels."""

    def __init__(self, spec: Spec, rng: np.random.Generator):
        self.spec, self.rng = spec, rng
        self.results, self.sidecar = _template()
        for record in self.sidecar["records"].values():  # the template is itself a copy of an identical commit's
            for key in ("identical_to", "copied_by", "note"):
                record.pop(key, None)
        self.results["params"] = {**self.results["params"], "machine": spec.gpu_machine}
        self.columns = self.results["result_columns"]
        row = dict(zip(self.columns, self.results["results"][GEMM_BENCHMARK]))
        self.row = row
        combos = [(a, b) for a in row["params"][0] for b in row["params"][1]]
        self.keys = [f"{GEMM_BENCHMARK}({a}, {b})" for a, b in combos]
        self.measured = [i for i, v in enumerate(row["result"]) if isinstance(v, (int, float)) and not math.isnan(v)]
        self.base_s = {i: float(row["result"][i]) for i in self.measured}
        self.repeats = {i: len(row["samples"][i]) for i in self.measured}

    def machine_json(self) -> bytes:
        info = json.loads((TEMPLATE / "machine.json").read_text())
        return _dumps({**info, "machine": self.spec.gpu_machine})

    def files(
        self, commit: str, date_ms: int, measured_ms: int, factors: dict[int, float], flagged: set[int]
    ) -> dict[str, bytes]:
        """``factors``: measured index -> this commit's TFLOPS multiplier (time is base / factor); ``measured_ms``:
        when asv started measuring it."""
        row = dict(self.row)
        result, samples = list(row["result"]), list(row["samples"])
        q25, q75 = list(row["stats_q_25"]), list(row["stats_q_75"])
        lo, hi = list(row["stats_ci_99_a"]), list(row["stats_ci_99_b"])
        recs = json.loads(json.dumps(self.sidecar["records"]))
        for i in self.measured:
            median = self.base_s[i] / factors[i]
            drawn = median * (1 + self.rng.normal(0, self.spec.sample_noise, self.repeats[i]))
            samples[i] = [float(f"{s:.6g}") for s in drawn]
            result[i] = float(np.median(drawn))
            q25[i], q75[i] = (float(f"{v:.5g}") for v in np.quantile(drawn, (0.25, 0.75)))
            lo[i], hi[i] = q25[i], q75[i]
            record = recs[self.keys[i]]
            record.update(
                median_s=result[i],
                tflops=record["flops"] / result[i] / 1e12,
                n=len(drawn),
                samples_s=None,
                relative_iqr=(q75[i] - q25[i]) / result[i],
                job="synthetic",
                resume=False,
                flags=[records.FLAG_THROTTLED] if i in flagged else [],
                fingerprint={"launch path": commit, "device code": commit, "environment": "synthetic"},
            )
        row.update(
            result=result,
            samples=samples,
            stats_q_25=q25,
            stats_q_75=q75,
            stats_ci_99_a=lo,
            stats_ci_99_b=hi,
            started_at=measured_ms,
        )
        document = {
            **self.results,
            "commit_hash": commit,
            "date": date_ms,
            "results": {GEMM_BENCHMARK: [row.get(c) for c in self.columns]},
        }
        stem = records.results_file_stem(commit, document["env_name"])
        folder = f"results/{self.spec.gpu_machine}"
        return {
            f"{folder}/{stem}.json": _dumps(document),
            f"{folder}/{stem}{records.SUFFIX}": _dumps({"format": self.sidecar["format"], "records": recs}),
        }


class _CompileFiles:
    """compile-only's resource counts of one commit (bench_resources): integers that move at a few commits."""

    def __init__(self, spec: Spec, rng: np.random.Generator, benchmarks: dict[str, Any], gpu_results: dict[str, Any]):
        self.spec = spec
        self.names = sorted(k for k in benchmarks if k.startswith(RESOURCES_PREFIX))
        self.params = benchmarks[self.names[0]]["params"]
        self.versions = {name: benchmarks[name]["version"] for name in self.names}  # asv drops other versions' results
        size = len(self.params[0]) * len(self.params[1])
        self.base = {name: rng.integers(16, 256, size).astype(float) for name in self.names}
        n = spec.commits
        self.changes = sorted(
            rng.choice(np.arange(1, n), size=min(spec.resource_changes, max(n - 1, 0)), replace=False)
        )
        self.deltas = {at: {name: rng.integers(-8, 9, size) for name in self.names} for at in self.changes}
        self.template = gpu_results

    def step(self, index: int) -> None:
        """The counts at commit ``index`` (called in commit order)."""
        for name, delta in self.deltas.get(index, {}).items():
            self.base[name] = np.maximum(self.base[name] + delta, 0)

    def machine_json(self) -> bytes:
        return _dumps(
            {
                "machine": COMPILE_MACHINE,
                "arch": "x86_64",
                "cpu": "synthetic",
                "gpu": "none (compile-only)",
                "gpu_driver": "none",
                "gpu_runtime": "none",
                "num_cpu": "2",
                "os": "Linux",
                "ram": "24 GiB",
                "version": 1,
            }
        )

    def files(self, index: int, commit: str, date_ms: int, measured_ms: int) -> dict[str, bytes]:
        self.step(index)
        columns = ["result", "params", "version", "started_at", "duration"]
        results = {
            name: [[float(v) for v in self.base[name]], self.params, self.versions[name], measured_ms, 1.0]
            for name in self.names
        }
        document = {
            **self.template,
            "commit_hash": commit,
            "date": date_ms,
            "result_columns": columns,
            "results": results,
            "durations": {},
            "params": {**self.template["params"], "machine": COMPILE_MACHINE, "gpu": "none (compile-only)"},
        }
        stem = records.results_file_stem(commit, document["env_name"])
        return {f"results/{COMPILE_MACHINE}/{stem}.json": _dumps(document)}


def _dumps(data: Any) -> bytes:
    return json.dumps(data, separators=(",", ":"), allow_nan=True).encode()


# ---------------------------------------------------------------------------
# git
# ---------------------------------------------------------------------------


def _git(repo: Path, *args: str, stdin: bytes | None = None) -> str:
    return (
        subprocess.run(["git", "-C", str(repo), *args], input=stdin, check=True, capture_output=True)
        .stdout.decode()
        .strip()
    )


def _fast_import(repo: Path, stream: Iterator[bytes]) -> dict[int, str]:
    """Feed ``stream`` to git fast-import; returns mark -> commit sha."""
    marks = repo / ".git" / "synthetic-marks"
    proc = subprocess.Popen(
        ["git", "-C", str(repo), "fast-import", "--quiet", f"--export-marks={marks}"], stdin=subprocess.PIPE
    )
    assert proc.stdin is not None
    for chunk in stream:
        proc.stdin.write(chunk)
    proc.stdin.close()
    if proc.wait() != 0:
        raise RuntimeError(f"git fast-import failed in {repo}")
    out = {}
    for line in marks.read_text().splitlines():
        mark, sha = line.split()
        out[int(mark[1:])] = sha
    marks.unlink()
    return out


def _data(payload: bytes) -> bytes:
    return b"data %d\n" % len(payload) + payload + b"\n"


def _main_commits(parent: str, first: int, dates: np.ndarray) -> Iterator[bytes]:
    for i, date in enumerate(dates):
        number = first + i
        yield b"commit refs/heads/main\nmark :%d\n" % (i + 1)
        yield b"author Synthetic <synthetic@localhost> %d +0000\n" % date  # asv's date of a commit
        yield b"committer Synthetic <synthetic@localhost> %d +0000\n" % date
        yield _data(f"synthetic commit {number}".encode())
        if i == 0:
            yield f"from {parent}\n".encode()
        yield f"M 100644 inline {HISTORY_FILE}\n".encode() + _data(f"synthetic commit {number}\n".encode())


def _results_commits(parent: str | None, per_commit: Iterator[tuple[str, int, dict[str, bytes]]]) -> Iterator[bytes]:
    for i, (message, when, files) in enumerate(per_commit):
        yield b"commit refs/heads/%s\nmark :%d\n" % (BRANCH.encode(), i + 1)
        yield b"committer Synthetic <synthetic@localhost> %d +0000\n" % when  # pushed once measured
        yield _data(message.encode())
        if i == 0 and parent:
            yield f"from {parent}\n".encode()
        for path, payload in sorted(files.items()):
            yield f"M 100644 inline {path}\n".encode() + _data(payload)


# ---------------------------------------------------------------------------
# the history
# ---------------------------------------------------------------------------


def _draw(spec: Spec) -> tuple[np.random.Generator, _GpuFiles, _CompileFiles | None, dict, dict, np.ndarray, dict]:
    """A seed's draws, in one order for both makers: the files, each line's truth and levels, the drift, the noise."""
    rng = np.random.default_rng(spec.seed)
    gpu = _GpuFiles(spec, rng)
    benchmarks = json.loads(BENCHMARKS_JSON.read_text())
    compile_files = _CompileFiles(spec, rng, benchmarks, gpu.results) if spec.compile_only else None
    lines = {gpu.keys[i]: _line_truth(rng, spec) for i in gpu.measured}
    levels = {i: line_levels(lines[gpu.keys[i]], spec.commits) for i in gpu.measured}
    noise_drift = _drift(rng, spec)
    return (
        rng,
        gpu,
        compile_files,
        lines,
        levels,
        noise_drift,
        {i: rng.normal(0, spec.commit_noise, spec.commits) for i in gpu.measured},
    )


def make_history(repo: Path, spec: Spec, hold_back: int = 0) -> tuple[Truth, Iterator[None]]:
    """``spec.commits`` new commits on ``repo``'s main and the results of all but the newest ``hold_back`` on
    asv-results (created or extended). The second value adds the held-back commits' results one per ``next()``:
    a new commit's results arriving, as the main job pushes them."""
    rng, gpu, compile_files, lines, levels, drift, noise = _draw(spec)
    cpu_files = (
        synthetic_cpu.CpuFiles(spec, json.loads(BENCHMARKS_JSON.read_text()), gpu.results, gpu.columns, _drift)
        if spec.cpu_machine
        else None
    )
    tip = _git(repo, "rev-parse", "refs/heads/main")
    already = _count_synthetic(repo)
    after = int(_git(repo, "log", "-1", "--format=%at", tip)) if already else None  # extending: after the last one
    dates, measured = commit_dates(spec, after)
    marks = _fast_import(repo, _main_commits(tip, already, dates))
    commits = [marks[i + 1] for i in range(spec.commits)]

    def files_of(index: int) -> tuple[str, int, dict[str, bytes]]:
        commit = commits[index]
        date_ms, measured_ms = int(dates[index]) * 1000, int(measured[index]) * 1000
        factors = {i: levels[i][index] * (1 + drift[index]) * (1 + noise[i][index]) for i in gpu.measured}
        flagged = {i for i in gpu.measured if rng.random() < spec.flagged_share}
        files = gpu.files(commit, date_ms, measured_ms, factors, flagged)
        if compile_files is not None:
            files |= compile_files.files(index, commit, date_ms, measured_ms)
        if cpu_files is not None:
            files |= cpu_files.files(index, commit, date_ms, measured_ms + 300_000)
        if index == 0 and already == 0:
            files[f"results/{spec.gpu_machine}/machine.json"] = gpu.machine_json()
            files["results/benchmarks.json"] = BENCHMARKS_JSON.read_bytes()
            if compile_files is not None:
                files[f"results/{COMPILE_MACHINE}/machine.json"] = compile_files.machine_json()
            if cpu_files is not None:
                files[f"results/{spec.cpu_machine}/machine.json"] = cpu_files.machine_json()
        return f"{spec.gpu_machine}: 1 commits ({commit[:8]}), synthetic", int(measured[index]) + 60, files

    def write(indices: range) -> str:
        written = _fast_import(repo, _results_commits(_branch_tip(repo, BRANCH), map(files_of, indices)))
        return written[len(written)]

    first = spec.commits - hold_back
    truth = Truth(spec, commits, lines, write(range(first)) if first > 0 else (_branch_tip(repo, BRANCH) or ""))

    def held_back() -> Iterator[None]:
        for index in range(first, spec.commits):
            truth.results_tip = write(range(index, index + 1))
            yield None

    return truth, held_back()


def commit_dates(spec: Spec, after: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Epoch seconds of each new commit (oldest first) and of the start of its measurement, all before ``spec.end``
    (see the module doc); ``after``: the newest existing synthetic commit's date, which every new one follows
    (its gaps shrunk to fit when the realistic ones would not)."""
    rng = np.random.default_rng([spec.seed, 1])  # its own stream: a seed's levels do not depend on the dates
    end = time.time() if spec.end is None else spec.end
    newest = end - NEWEST_AGE_S
    gaps = (spec.gap_median_s or GAP_MEDIAN_S) * np.exp(rng.normal(0, GAP_SIGMA, spec.commits))
    gaps[-1] = 0.0  # the newest commit is at ``newest``; gaps[i] lies between commit i and i + 1
    dates = newest - np.cumsum(gaps[::-1])[::-1]
    if after is not None and spec.commits and dates[0] <= after:
        room = newest - after
        if room < spec.commits:
            raise ValueError(
                f"cannot date {spec.commits} new commits between the newest synthetic commit "
                f"({after}) and the end ({end:.0f}): less than a second each"
            )
        dates = after + (dates - dates[0] + 1) * (room / (newest - dates[0] + 1))
    measured = dates + rng.uniform(*MEASURED_AFTER_S, spec.commits)
    return np.floor(dates).astype(np.int64), np.floor(measured).astype(np.int64)


def _branch_tip(repo: Path, branch: str) -> str | None:
    try:
        return _git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}")
    except subprocess.CalledProcessError:
        return None


def _count_synthetic(repo: Path) -> int:
    """How many synthetic commits main already has: HISTORY_FILE holds the newest one's number."""
    try:
        text = _git(repo, "show", f"refs/heads/main:{HISTORY_FILE}")
    except subprocess.CalledProcessError:
        return 0
    return int(text.split()[-1]) + 1


# ---------------------------------------------------------------------------
# a results folder without git (the history store's measurements and tests)
# ---------------------------------------------------------------------------


def results_folder_commits(
    spec: Spec, gpu_machines: int = 3, repeat_share: float = 0.05
) -> Iterator[tuple[str, dict[str, bytes]]]:
    """Each commit (a made-up hash, oldest first) of ``spec``'s history with its results files as asv's results folder
    holds them (paths relative to it): ``gpu_machines`` GPU-like machines (``<spec.gpu_machine>-<n>``, one seed each,
    on the first one's commit dates: in the past, heavy-tailed gaps) and compile-only. An exact repeat (a share
    ``repeat_share`` of commits after the first, drawn per GPU machine): the previous commit's measurement copied,
    every number the same and each record ``identical_to`` the commit measured, as ci.history.measure.copies writes
    it. No git: the commits are not a repository's (docs/data/history_store.py)."""
    dates, measured = commit_dates(spec)
    makers = []
    for number in range(gpu_machines):
        one = dataclasses.replace(spec, seed=spec.seed + number, gpu_machine=f"{spec.gpu_machine}-{number}")
        rng, gpu, compile_files, _, levels, drift, noise = _draw(one)
        makers.append((one, rng, gpu, compile_files if number == 0 else None, levels, drift, noise))
    repeats = np.random.default_rng([spec.seed, 2])
    previous: dict[str, tuple[str, dict[str, bytes]]] = {}
    for index in range(spec.commits):
        commit = hashlib.sha1(f"synthetic {spec.seed} {index}".encode()).hexdigest()  # asv names files by its first 8
        date_ms, measured_ms = int(dates[index]) * 1000, int(measured[index]) * 1000
        files: dict[str, bytes] = {}
        for one, rng, gpu, compile_files, levels, drift, noise in makers:
            if index == 0:
                files[f"results/{one.gpu_machine}/machine.json"] = gpu.machine_json()
            factors = {i: levels[i][index] * (1 + drift[index]) * (1 + noise[i][index]) for i in gpu.measured}
            flagged = {i for i in gpu.measured if rng.random() < one.flagged_share}
            mine = gpu.files(commit, date_ms, measured_ms, factors, flagged)
            if index and repeats.random() < repeat_share:
                mine = _repeated(previous[one.gpu_machine], commit, date_ms)
            else:
                previous[one.gpu_machine] = (commit, mine)
            files |= mine
            if compile_files is not None:
                files |= compile_files.files(index, commit, date_ms, measured_ms)
                if index == 0:
                    files[f"results/{COMPILE_MACHINE}/machine.json"] = compile_files.machine_json()
        if index == 0:
            files["results/benchmarks.json"] = BENCHMARKS_JSON.read_bytes()
        yield commit, {path.removeprefix("results/"): data for path, data in files.items()}


def _repeated(source: tuple[str, dict[str, bytes]], commit: str, date_ms: int) -> dict[str, bytes]:
    """``source``'s (commit, files) copied to ``commit``: the same numbers, the records ``identical_to`` it."""
    original, files = source
    out = {}
    for path, data in files.items():
        document = json.loads(data)
        name = path.rsplit("/", 1)[1].replace(original[:8], commit[:8], 1)
        if path.endswith(records.SUFFIX):
            for record in document["records"].values():
                if record.get("status") == "measured":
                    record.update(identical_to=original, copied_by="synthetic", note=f"identical to {original[:12]}")
        else:
            document.update(commit_hash=commit, date=date_ms)
        out[f"{path.rsplit('/', 1)[0]}/{name}"] = _dumps(document)
    return out


def write_results_folder(folder: Path, commits: Iterator[tuple[str, dict[str, bytes]]], count: int) -> list[str]:
    """The next ``count`` commits of ``commits`` (:func:`results_folder_commits`) written into ``folder``; their
    hashes."""
    written = []
    for commit, files in itertools.islice(commits, count):
        for relative, data in files.items():
            path = folder / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        written.append(commit)
    return written
