"""The gates' JSON read as frozen records through ci.notify.untrusted: the one module that knows their field names (an
unknown schema is a Rejected naming it). When a gate's JSON changes, adapt this module and untrusted.KNOWN_SCHEMAS."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ci.notify.untrusted import SAFE_URL, Reader, check_schema

# The gate's verdicts of a whole run: "inconclusive" (a measurement failed, the remedy a re-run) is not green.
RUN_VERDICTS = {"pass", "fail", "inconclusive", "error"}


@dataclass(frozen=True)
class SpeedBenchmark:
    id: str
    status: str  # gated, wrong result, new, removed, n/a, unchanged (identical code); a later gate's word as it is
    # regression, improvement, no change, inconclusive (or a later gate's word, shown, not refused), when decided
    verdict: str | None
    ratio: float | None  # head/base TFLOPS (higher is better), the estimate
    low: float | None  # its interval, when bounded
    high: float | None
    threshold: float | None
    rounds_used: int | None
    reason: str  # the decision's reason, else the benchmark's note
    stopped_by: str | None
    base_tflops: float | None = None  # the median of the rounds the decision used, per side
    head_tflops: float | None = None


@dataclass(frozen=True)
class WrongResult:
    where: str  # kernel[config] at MxNxK: what the failed check at head was of
    message: str


@dataclass(frozen=True)
class SpeedRecord:
    verdict: str  # RUN_VERDICTS
    exit_code: int
    error: str | None
    head_sha: str | None
    benchmarks: tuple[SpeedBenchmark, ...]
    wrong_at_head: tuple[WrongResult, ...]
    gpu_seconds_spent: float | None
    gpu_seconds_saved: float | None
    skipped_identical: int
    # a --judge replay's ``judged`` block: the thresholds file's source and the noise model's, that the base's gate took
    judged_by: tuple[str, ...] = ()
    # a GPU no runner profile names (ci/speed_runners.json): its name, and whether a calibrated noise model decided
    unknown_runner: tuple[str, bool] | None = None


def speed_record(data: Any, file: str = "verdict.json") -> SpeedRecord:
    root = check_schema(data, "mxfp4-speed-gate", file)
    verdict = root.get("verdict").choice(RUN_VERDICTS)
    exit_code = root.get("exit_code").integer()
    if verdict == "error":
        return SpeedRecord(
            "error", exit_code, root.get("error").text(optional=True) or "(no message)", None, (), (), None, None, 0
        )
    benchmarks = tuple(_speed_benchmark(b) for b in root.get("benchmarks").items())
    wrong = []
    for check in root.get("correctness").items(optional=True):
        if check.get("side").text(optional=True) == "head" and check.get("status").text(optional=True) == "fail":
            where = (
                f"{check.get('kernel').text(optional=True) or '?'}[{check.get('config').text(optional=True) or '?'}]"
            )
            shape = check.get("shape").value
            if isinstance(shape, list) and len(shape) == 3 and all(isinstance(v, int) for v in shape):
                where += " at {}x{}x{}".format(*shape)
            wrong.append(WrongResult(where, check.get("message").text(optional=True) or ""))
    skipped = root.get("skipped_identical").items(optional=True)
    judged_by: tuple[str, ...] = ()
    if root.has("judged"):
        j = root.get("judged")
        judged_by = (j.get("thresholds").text(optional=True) or "?", j.get("noise_model").text(optional=True) or "")
    return SpeedRecord(
        verdict,
        exit_code,
        None,
        root.get("head").get("sha").text(optional=True) if root.has("head") else None,
        benchmarks,
        tuple(wrong),
        root.get("gpu_seconds_spent").number(optional=True),
        root.get("gpu_seconds_saved_estimated").number(optional=True),
        len(skipped),
        judged_by,
        _unknown_runner(root),
    )


def _unknown_runner(root: Reader) -> tuple[str, bool] | None:
    """(GPU name, decided with a noise model) for a runner the record says no profile names; None otherwise (a
    record before runner profiles included). A record without ``has_model`` tells it by its summary line."""
    if not root.has("runner_profile"):
        return None
    profile = root.get("runner_profile")
    if profile.get("known").boolean(optional=True) is not False:
        return None
    has_model = profile.get("has_model").boolean(optional=True)
    if has_model is None:
        has_model = "no noise model" not in (profile.get("first_line").text(optional=True) or "no noise model")
    return profile.get("gpu").text(optional=True) or "?", has_model


def _speed_benchmark(b: Reader) -> SpeedBenchmark:
    status = b.get("status").text()
    decision = b.get("decision")
    ratio = low = high = rounds = verdict = None
    reason = b.get("note").text(optional=True) or ""
    if decision.value is not None:
        estimate = decision.get("estimate")
        ratio = estimate.get("point").number(optional=True)
        low, high = estimate.get("low").number(optional=True), estimate.get("high").number(optional=True)
        rounds = decision.get("rounds_used").integer(optional=True)
        reason = decision.get("reason").text(optional=True) or reason
        verdict = decision.get("verdict").text(optional=True)
    return SpeedBenchmark(
        b.get("id").text(),
        status,
        verdict,
        ratio,
        low,
        high,
        b.get("threshold").number(optional=True),
        rounds,
        reason,
        b.get("stopped_by").text(optional=True),
        _positive(b.get("base_tflops")),
        _positive(b.get("head_tflops")),
    )


def _positive(r: Reader) -> float | None:
    value = r.number(optional=True)
    return value if value is not None and value > 0 else None


# The CPU job's decision (python -m ci.speed.changes --json; ci/speed/scope/summary.py)


@dataclass(frozen=True)
class DiffRow:
    name: str
    base: str
    head: str
    delta: str


@dataclass(frozen=True)
class CodeChange:
    target: str  # kernel/arch/config
    dialect: str
    instruction_mix: tuple[DiffRow, ...]
    resources: tuple[DiffRow, ...]


@dataclass(frozen=True)
class ChangesRecord:
    error: str | None  # the command stopped (exit 2): gpu_needed is true (false: nothing to compare) and no more known
    gpu_needed: bool
    unchanged: int
    removed: int
    saved_seconds: float
    saved_estimated: bool
    failures: tuple[str, ...]
    code_changes: tuple[CodeChange, ...]


def changes_record(data: Any, file: str = "changes.json") -> ChangesRecord:
    root = check_schema(data, "mxfp4-changes", file)
    if root.has("error"):  # gpu_needed false: the gate would stop the same way (ci.speed.changes' NothingToCompare)
        gpu_needed = root.get("gpu_needed").boolean(optional=True) is not False
        return ChangesRecord(root.get("error").text(), gpu_needed, 0, 0, 0.0, True, (), ())
    saved = root.get("saved")
    seconds = sum(v.number() for v in saved.get("gpu_seconds_by_arch").mapping().values())
    changes = tuple(
        CodeChange(
            c.get("target").text(),
            c.get("dialect").text(),
            _rows(c.get("instruction_mix"), "instructions"),
            _rows(c.get("resources"), "resource"),
        )
        for c in root.get("code_changes").items()
    )
    failures = tuple(f"{side}: {r.text()}" for side, r in root.get("failures").mapping(optional=True).items())
    return ChangesRecord(
        None,
        bool(root.get("gpu_needed").boolean()),
        len(root.get("unchanged").items()),
        len(root.get("removed").items(optional=True)),
        seconds,
        bool(saved.get("estimated").boolean()),
        failures,
        changes,
    )


def _rows(rows: Reader, name_key: str) -> tuple[DiffRow, ...]:
    return tuple(
        DiffRow(r.get(name_key).text(), _str(r.get("base")), _str(r.get("head")), _str(r.get("delta")))
        for r in rows.items()
    )


def _str(r: Reader) -> str:
    if isinstance(r.value, (int, float)) and not isinstance(r.value, bool):
        return str(r.value)
    return r.text(optional=True) or ""


# The register budget gate (python -m ci.budget --json; ci/budget/report.py)


@dataclass(frozen=True)
class BudgetTarget:
    target: str
    status: str
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class BudgetRecord:
    verdict: str  # "pass", "fail" or "error"
    error: str | None
    targets: int
    failed: tuple[BudgetTarget, ...]


def budget_record(data: Any, file: str = "budget.json") -> BudgetRecord:
    root = check_schema(data, "mxfp4-budget-gate", file)
    verdict = root.get("verdict").choice({"pass", "fail", "error"})
    if verdict == "error":
        return BudgetRecord("error", root.get("error").text(optional=True) or "(no message)", 0, ())
    targets = root.get("targets").items()
    failed = []
    for t in targets:
        status = t.get("status").text()
        if status == "fail":
            reasons = [r.text() for r in t.get("reasons").items(optional=True)]
            failed.append(BudgetTarget(t.get("target").text(), status, tuple(reasons)))
    return BudgetRecord(verdict, None, len(targets), tuple(failed))


# The PR's changed files (python -m ci.notify pr-files: GitHub's list, written by the trusted render job)


@dataclass(frozen=True)
class PrFiles:
    pull_requests: tuple[int, ...]
    files_listed: int
    gate_files: tuple[tuple[str, str, str], ...]  # (path, what it is to the gate, GitHub's status)
    truncated: bool
    error: str | None


def pr_files_record(data: Any, file: str = "pr-files.json") -> PrFiles:
    root = check_schema(data, "mxfp4-pr-files", file)
    gate = tuple(
        (g.get("path").text(), g.get("what").text(), g.get("status").text(optional=True) or "?")
        for g in root.get("gate_files").items()
    )
    return PrFiles(
        tuple(n.integer() for n in root.get("pull_requests").items()),
        root.get("files_listed").integer(),
        gate,
        bool(root.get("truncated").boolean(optional=True)),
        root.get("error").text(optional=True),
    )


# The run's jobs (GitHub: GET /repos/{repo}/actions/runs/{id}/attempts/{n}/jobs)

CONCLUSIONS = {"success", "failure", "cancelled", "skipped", "timed_out", "action_required", "neutral", "stale"}


@dataclass(frozen=True)
class Job:
    name: str
    conclusion: str | None  # None while it runs (never, once the run completed)
    url: str | None
    steps: Mapping[str, str | None]  # step name -> conclusion


@dataclass(frozen=True)
class Jobs:
    by_name: Mapping[str, Job]

    def conclusion(self, job: str) -> str | None:
        found = self.by_name.get(job)
        return found.conclusion if found else None

    def step(self, job: str, step: str) -> str | None:
        found = self.by_name.get(job)
        return found.steps.get(step) if found else None


def jobs_record(data: Any, file: str = "jobs.json") -> Jobs:
    root = Reader(data, file)
    jobs = {}
    for j in root.get("jobs").items():
        steps = {
            s.get("name").text(): s.get("conclusion").choice(CONCLUSIONS, optional=True)
            for s in j.get("steps").items(optional=True)
        }
        url = j.get("html_url").text(optional=True)
        jobs[j.get("name").text()] = Job(
            j.get("name").text(),
            j.get("conclusion").choice(CONCLUSIONS, optional=True),
            url if url and SAFE_URL.match(url) else None,
            steps,
        )
    return Jobs(jobs)
