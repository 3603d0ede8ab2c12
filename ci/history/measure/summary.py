"""What one main-job run measured, read back from asv's results and the records, as tables and Markdown.

Only this run's measurements are reported (a GEMM record with this job's id, a resource count started after
the job); each commit ends in one status: measured, failed, build failed, not measured, identical code or
already measured (docs/HISTORY.md, "measure/summary.py", says what each means).
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from asv_bench import records
from ci.history.asv_results import store
from ci.history.asv_results.result_points import is_number
from harness.report import markdown_table

RESOURCE_KEY = re.compile(r"^bench_resources\.CompiledResources\.track_(\w+)\('([^']*)', '([^']*)'\)$")

MEASURED, FAILED, BUILD_FAILED = "measured", "failed", "build failed"
NOT_MEASURED, IDENTICAL = "not measured", "identical code"
ALREADY = "already measured"


@dataclass
class CommitRun:
    commit: str
    status: str = NOT_MEASURED
    gemm: dict[str, dict[str, Any]] = field(default_factory=dict)  # row -> record (+ "saved": asv has the value)
    resources: dict[str, float | None] = field(default_factory=dict)  # row -> value (None: failed)
    failures: list[str] = field(default_factory=list)  # "benchmark: why"
    harness_failures: list[str] = field(default_factory=list)
    not_available: Counter = field(default_factory=Counter)  # reason -> how many parameter sets
    identical_to: str | None = None  # IDENTICAL: the measured commit whose results were copied

    def describe_status(self) -> str:
        if self.status == ALREADY:
            holds = f" (the results of {self.identical_to[:12]}, identical code)" if self.identical_to else ""
            return f"already measured{holds}: nothing new"
        if self.status == IDENTICAL and self.identical_to:
            return f"identical code to {self.identical_to[:12]}: not re-measured"
        return self.status


def gemm_row(key: str) -> str | None:
    match = store.GEMM_KEY.match(key)
    return f"{match.group(1)} {match.group(2)} {match.group(3)}" if match else None


def collect_commit(
    results_dir: Path,
    machine: str,
    commit: str,
    job: str,
    started_ms: float,
    selection: Sequence[str] = (),
    already: str | None = None,
) -> CommitRun:
    """This run's measurements of ``commit``; ``selection`` (the --bench regexes) leaves out the parameter
    sets asv carried over from earlier runs within a benchmark it ran now. ``already``: the track's asv -b
    regex when the run left ``commit`` out as already measured (ci.history.measure.track_steps): nothing of it is this
    run's, whatever its dates, and it is ``already measured`` when it holds a value of the track."""
    values, recs, _ = store.read_commit(results_dir, machine, commit)
    run = CommitRun(commit)
    selected = [k for k in values if not selection or any(re.search(p, k) for p in selection)]
    if already is not None:
        held = [k for k in selected if re.search(already, k) and is_number(values[k].get("value"))]
        if not held:
            run.harness_failures.append(
                f"left out as already measured, but it holds no result of these benchmarks ({already}) on this machine"
            )
            return run
        sources = {recs.get(k, {}).get("identical_to") for k in held} - {None, commit}
        run.status, run.identical_to = ALREADY, sources.pop() if len(sources) == 1 else None
        return run
    this_run = {
        k: values[k]
        for k in selected
        if isinstance(values[k].get("started_at"), (int, float)) and values[k]["started_at"] >= started_ms
    }
    mine = {k: r for k, r in recs.items() if job in (r.get("job"), r.get("resumed_by"), r.get("copied_by"))}
    recorded_failures = set()  # asv's None for these is already explained by the record
    for key, record in mine.items():
        row = gemm_row(key) or key
        if record["status"] == "measured":
            saved = values.get(key, {}).get("value")
            run.gemm[row] = {**record, "saved": is_number(saved)}
            if not is_number(saved):
                recorded_failures.add(key)
                run.harness_failures.append(f"{key}: measured, but asv did not save the value")
        elif record["status"] == "failed":
            recorded_failures.add(key)
            target = run.harness_failures if record.get("failure") == "harness" else run.failures
            target.append(f"{key}: {record.get('reason', '')}")
        else:
            run.not_available[record.get("reason", "")] += 1
    for key, entry in sorted(this_run.items()):
        match = RESOURCE_KEY.match(key)
        if match and (is_number(entry["value"]) or entry["value"] is None):
            run.resources[f"{match.group(1)}({match.group(2)}, {match.group(3)})"] = entry["value"]
        if entry["value"] is None and key not in recorded_failures:
            run.failures.append(f"{key}: failed (asv recorded no value; --show-stderr prints why)")
    if this_run or mine:
        all_failed = this_run and all(e["value"] is None for e in this_run.values())
        if not all_failed or any(r["status"] == "measured" for r in mine.values()):
            run.status = MEASURED
        else:  # nothing measured: the benchmarks' own records say why, or the commit never built
            run.status = FAILED if any(r["status"] == "failed" for r in mine.values()) else BUILD_FAILED
    copied = {r.get("identical_to") for r in mine.values() if r.get("copied_by") == job}
    # Copied by this run (its values carry the source's started_at, this run's when the source was measured in it).
    if copied and all(r.get("copied_by") == job for r in mine.values()) and not set(this_run) - set(mine):
        run.status, run.identical_to = IDENTICAL, sorted(c for c in copied if c)[0]
    if run.status == BUILD_FAILED:
        run.failures = [f"{commit[:8]}: the build or install of this commit failed (asv's output above says why)"]
    return run


def _time_cell(record: dict[str, Any] | None) -> str:
    if record is None:
        return ""
    text = f"{record['median_s'] * 1e3:.4g} ms, {record['tflops']:.4g} TFLOPS"
    if record.get("flags"):
        text += " ⚑"
    if record.get("resumed_by"):
        text += " (resumed)"
    if record.get("identical_to"):
        text += f" (= {record['identical_to'][:8]}, identical code)"
    return text


def gemm_rows(runs: Sequence[CommitRun]) -> list[dict[str, str]]:
    names = sorted({row for run in runs for row in run.gemm})
    return [{"benchmark": name, **{run.commit[:8]: _time_cell(run.gemm.get(name)) for run in runs}} for name in names]


def _count_cell(value: float | None) -> str:
    if value is None:
        return "failed"
    return str(int(value)) if float(value).is_integer() else f"{value:.4g}"


def resource_rows(runs: Sequence[CommitRun]) -> list[dict[str, str]]:
    names = sorted({row for run in runs for row in run.resources if is_number(run.resources[row])})
    return [
        {
            "benchmark": name,
            **{run.commit[:8]: _count_cell(run.resources[name]) if name in run.resources else "" for run in runs},
        }
        for name in names
    ]


def flagged(runs: Sequence[CommitRun]) -> list[str]:
    lines = []
    for run in runs:
        for row, record in sorted(run.gemm.items()):
            if record.get("flags") or record.get("override_requested"):
                detail = records.describe(record)
                problems = (record.get("idle") or {}).get("problems") or []
                if problems:
                    detail += f" ({'; '.join(problems)})"
                lines.append(f"{run.commit[:8]} {row}: {detail}")
    return lines


def spread_rows(head_runs: Sequence[dict[str, float]]) -> list[dict[str, str]]:
    """The newest commit measured ``len(head_runs)`` times: each median and (max - min) / median."""
    rows = []
    for name in sorted({n for run in head_runs for n in run}):
        values = [run.get(name) for run in head_runs]
        numbers = sorted(v for v in values if v is not None)
        if len(numbers) < 2:
            continue
        middle = statistics.median(numbers)
        row = {
            "benchmark": name,
            **{f"run {i + 1}": "" if v is None else f"{v * 1e3:.4g} ms" for i, v in enumerate(values)},
        }
        row["spread"] = f"{(numbers[-1] - numbers[0]) / middle * 100:.1f}%"
        rows.append(row)
    return rows


SHORT_TABLE_ROWS = 6  # the screen's tables; the log file and $GITHUB_STEP_SUMMARY get every row


def _table(rows: list[dict[str, str]], empty: str, short: str | None) -> str:
    if short is None or len(rows) <= SHORT_TABLE_ROWS:
        return markdown_table(rows, empty=empty)
    shown = markdown_table(rows[:SHORT_TABLE_ROWS], empty=empty)
    return f"{shown}\n\n_... {len(rows) - SHORT_TABLE_ROWS} more rows: the full table is in `{short}`_"


@dataclass
class Report:
    """One main-job run as JSON (``--json``; the Markdown summary is drawn from it): every harness problem included.
    :meth:`to_json` leaves out ``history`` and ``machine_spread`` where they were not computed (no publish)."""

    machine: str
    fingerprint: dict[str, Any]
    job: str
    commits: list[str]
    status: dict[str, str]
    track_status: dict[str, dict[str, str]]
    nothing_new: bool  # every commit already measured on every track: nothing measured or copied
    identical_to: dict[str, str]
    results_branch: str
    html: str
    quarantined: list[dict[str, str]]
    harness_problems: list[str]
    failures: list[str]
    measurements: dict[str, Any]
    resources: dict[str, Any]
    seconds: float
    step_seconds: dict[str, float]  # where a run's time goes (docs/PERF_NOTES.md, the history at scale)
    tracks: dict[str, str]
    cost: dict[str, dict[str, Any]]
    # point -> [samples before this run, samples now]: a re-run adds to the first run's samples, never replaces them
    samples: dict[str, dict[str, dict[str, tuple[int, int]]]]
    history: dict[str, Any] | None = None  # change points and the drift guard of this machine (with a publish)
    machine_spread: list[dict[str, Any]] | None = None  # two runners of one GPU model (with a publish)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None or k not in ("history", "machine_spread")}


def harness_problems(per_track: Mapping[str, Sequence[CommitRun]], problems: list[str], log_file: Path) -> list[str]:
    """The run's harness problems with each commit's: not measured, or a failure that is the harness's."""
    problems = list(problems)
    for kind, track_runs in per_track.items():
        for run in track_runs:
            if run.status == NOT_MEASURED:
                problems.append(
                    f"{run.commit[:8]}: not measured ({kind} tracks; asv stopped before it; its output "
                    f"in {log_file} says why)"
                )
            problems += [f"{run.commit[:8]} {item}" for item in run.harness_failures]
    return problems


def _section(title: str, items: Sequence[str]) -> list[str]:
    return [f"### {title}", "", *[f"- {item}" for item in items], ""] if items else []


def summary_markdown(
    report: Report,
    runs: Sequence[CommitRun],
    spread: list[dict[str, str]] | None,
    short: str | None = None,
) -> str:
    """The run in Markdown; ``short`` (the log file's path): the screen's form, each table cut to a few rows."""
    fp = report.fingerprint
    parts = [
        f"## asv main job: {report.machine}",
        "",
        f"GPU: {fp['gpu']} ({fp['gpu_arch']}), driver {fp['gpu_driver']}, {fp['gpu_runtime']}; "
        f"torch {fp['torch']}, triton {fp['triton']}, flydsl {fp['flydsl']}; {fp['cpu']} x{fp['num_cpu']}.",
        "",
        "Kernels here: " + "; ".join(f"`{k}`: {v}" for k, v in fp["kernels"].items()),
        "",
        f"Commits (oldest first): {', '.join(f'{r.commit[:8]} ({r.describe_status()})' for r in runs)}. "
        f"Results branch: {report.results_branch}. HTML: `{report.html}`",
        "",
        *(
            [
                f"**Nothing new**: every commit already measured on every track of this run "
                f"({', '.join(report.track_status)}); nothing was measured or copied.",
                "",
            ]
            if report.nothing_new
            else []
        ),
        "### GEMM time per commit, this run (median; TFLOPS from the same samples; ⚑ flagged, see below)",
        "",
        _table(gemm_rows(runs), "_(no GEMM measured in this run)_", short),
        "",
        "### Compiled resources per commit, this run",
        "",
        _table(resource_rows(runs), "_(no resources measured in this run)_", short),
        "",
    ]
    parts += _section("What this run cost", cost_lines(report.cost))
    if spread:
        parts += ["### Same commit, repeated: spread = (max - min) / median", "", _table(spread, "", short), ""]
    notes = flagged(runs)
    if short is not None and len(notes) > SHORT_TABLE_ROWS:
        notes = notes[:SHORT_TABLE_ROWS] + [f"... {len(notes) - SHORT_TABLE_ROWS} more in `{short}`"]
    parts += _section("Flagged measurements (recorded, marked, not clean)", notes)
    not_available: Counter[str] = sum((run.not_available for run in runs), Counter())
    parts += _section(
        "Not measured on this machine (n/a)",
        [f"{why} ({count} parameter sets over {len(runs)} commits)" for why, count in not_available.most_common()],
    )
    parts += _section("Harness problems (not the commits' fault)", report.harness_problems)
    parts += _section("Failed benchmarks", report.failures)
    parts += _section(
        "Results files moved aside (unreadable)",
        [f"`{q['path']}`: {q['reason']} (now `{q['moved_to']}`)" for q in report.quarantined],
    )
    return "\n".join(parts)


def merge_tracks(per_track: Mapping[str, Sequence[CommitRun]]) -> list[CommitRun]:
    """One CommitRun per commit from each track's (timings from "gpu", resource counts from "cpu")."""
    merged = []
    for parts in zip(*per_track.values()):
        by_kind = dict(zip(per_track, parts))
        run = CommitRun(parts[0].commit)
        for part in parts:
            run.gemm.update(part.gemm)
            run.resources.update(part.resources)
            run.failures += [f for f in part.failures if f not in run.failures]
            run.harness_failures += part.harness_failures
            run.not_available.update(part.not_available)
        statuses = {part.status for part in parts}
        timing = by_kind.get("gpu")
        if BUILD_FAILED in statuses:
            run.status = BUILD_FAILED
        elif FAILED in statuses and MEASURED not in statuses:
            run.status = FAILED
        elif statuses == {NOT_MEASURED}:
            run.status = NOT_MEASURED
        elif timing is not None and timing.status == IDENTICAL:
            run.status, run.identical_to = IDENTICAL, timing.identical_to
        elif statuses == {ALREADY}:  # nothing new on any track
            run.status, run.identical_to = ALREADY, timing.identical_to if timing is not None else None
        else:
            run.status = NOT_MEASURED if NOT_MEASURED in statuses else MEASURED
        merged.append(run)
    return merged


def cost_lines(cost: dict[str, dict[str, Any]]) -> list[str]:
    """The report's ``cost`` in words: GPU seconds spent and saved, and where the CPU tracks ran."""
    lines = []
    for kind, data in cost.items():
        if kind == "gpu":
            lines.append(
                f"timing tracks ({data['machine']}): {data['benchmark_seconds']:.0f} s of benchmarks measured "
                f"({data['measured_commits']} commits; asv's wall time {data['asv_wall_seconds']:.0f} s with builds), "
                f"{data['saved_seconds']:.0f} s saved by identical-code skips ({len(data['identical'])} commits); "
                f"fingerprints {data['fingerprint_seconds']:.0f} s on the CPU; each benchmark measured once per commit"
            )
        else:
            lines.append(
                f"compile-only tracks ({data['machine']}): asv's wall time {data['asv_wall_seconds']:.0f} s, no GPU"
            )
    return lines
