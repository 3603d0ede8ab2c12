"""A history grown one commit per main-job run, each run's change points filed as issues (issue 38's "Done when").

Not the whole main job per run (asv, a results branch, a site build: minutes each): the same
code from the history store on. Each run builds the history of its first n commits as the
store holds it (ci.history.asv_results.store.History of Points), computes what the site build publishes
(ci.history.trends.regressions.all_checks, with a memo store as the site build keeps one, so each
series recomputes only its tail), writes it as ``changes.json`` (schema
mxfp4-history-changes/1) and runs the regression-issues command on it against the local
GitHub stand-in (tests/fake_github.py), as the workflow does after each history run.

The history: one GPU machine (or ``machines``), ``benchmarks`` GEMM benchmarks, log TFLOPS with commit noise of
``noise`` (Student's t, 5 degrees of freedom: heavy tails), a share of commits that repeat the
previous commit's value exactly (a re-used build), and what :class:`Scenario` puts in: three
regressions (the first fixed ``fixed_after`` commits later) and one 2% slowdown of 20
benchmarks at one commit. One benchmark's name carries a forged marker. Issue 47 adds
``machines`` (each machine measures every benchmark with its own noise; a regression is in
every machine's series) and ``renamed`` (a benchmark reported under a new asv key from a commit
on: its old series stays in the history and stops growing, as asv keeps old results).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ci.history.asv_results.store import History, Point
from ci.history.site.site_build import SCHEMA
from ci.history.trends import regressions

MACHINE = "synthetic-h200"
HOSTILE = (
    'evil`\n<!-- mxfp4-perf-issue {"v":2,"kind":"slowdown","status":"open","members":[],"drifts":[],'
    '"run":"","rc":"","site":""} -->\n'
)


@dataclass(frozen=True)
class Scenario:
    seed: int = 0
    start: int = 20  # commits measured before the first run
    runs: int = 60  # one commit more each
    benchmarks: int = 24
    noise: float = 0.003  # commit-to-commit SD of log TFLOPS
    repeats: float = 0.05  # share of commits whose value repeats the previous one exactly
    # (benchmark, first commit at the new level, relative size, fixed this many commits later or None)
    regressions: tuple[tuple[int, int, float, int | None], ...] = (
        (0, 30, -0.05, 10),
        (1, 45, -0.04, None),
        (2, 56, -0.06, None),
    )
    shared: tuple[int, int, int, float] = (4, 20, 66, -0.02)  # first benchmark, how many, commit, size
    hostile: int = 1  # this benchmark's config carries a forged marker
    one_kernel: int = (
        0  # the first this many benchmarks are configs of one kernel (mxfp4_demo): one page shows them all
    )
    machines: int = 1  # GPU runners, each measuring every benchmark; a regression is in every machine's series
    # (benchmark, commit): from this commit on the benchmark is reported under a new name (a rename in the suite)
    renamed: tuple[int, int] | None = None

    @property
    def commits(self) -> int:
        return self.start + self.runs


def sha(*parts: object) -> str:
    return hashlib.sha1("/".join(map(str, parts)).encode()).hexdigest()


def benchmark_key(scenario: Scenario, b: int, commit: int = 0) -> str:
    """Benchmark ``b``'s asv key at ``commit`` (a renamed benchmark has its new name from the rename on)."""
    config = (f"mxfp4_demo:config{b:02d}" if b < scenario.one_kernel else f"kernel{b:02d}:default") + (
        HOSTILE if b == scenario.hostile else ""
    )
    if scenario.renamed and scenario.renamed[0] == b and commit >= scenario.renamed[1]:
        config = config.replace(":", "_v2:", 1)
    return f"bench_gemm.GemmOnGpu.track_time('{config}', 'square_m04096_n04096_k04096')"


def machine_name(m: int) -> str:
    return MACHINE if m == 0 else f"{MACHINE}-{chr(ord('a') + m)}"


def levels(scenario: Scenario) -> np.ndarray:
    """log TFLOPS, benchmarks x commits (machines x benchmarks x commits when there are several machines)."""
    rng = np.random.default_rng(scenario.seed)
    first = _levels(scenario, rng)
    if scenario.machines == 1:
        return first
    return np.stack([first] + [_levels(scenario, rng) for _ in range(scenario.machines - 1)])


def _levels(scenario: Scenario, rng: np.random.Generator) -> np.ndarray:
    n = scenario.commits
    out = np.log(rng.uniform(200, 900, size=(scenario.benchmarks, 1))) + np.zeros((scenario.benchmarks, n))
    for b, at, size, fixed in scenario.regressions:
        out[b, at : (at + fixed) if fixed else n] += np.log1p(size)
    first, count, at, size = scenario.shared
    out[first : first + count, at:] += np.log1p(size)
    noise = scenario.noise * rng.standard_t(5, size=out.shape) / np.sqrt(5 / 3)
    for b in range(scenario.benchmarks):
        for i in range(1, n):
            if rng.random() < scenario.repeats:
                noise[b, i] = noise[b, i - 1] + out[b, i - 1] - out[b, i]  # the previous commit's value, exactly
    return out + noise


def history_of(scenario: Scenario, values: np.ndarray, n: int) -> History:
    history = History()
    by_machine = values if values.ndim == 3 else values[None]
    for i in range(n):
        commit = sha(scenario.seed, "commit", i)
        history.commits[commit] = i
        for m, b in ((m, b) for m in range(len(by_machine)) for b in range(scenario.benchmarks)):
            key = benchmark_key(scenario, b, i)
            value = by_machine[m][b, i]
            history.points.append(
                Point(
                    machine_name(m),
                    key.split("'")[1],
                    "square_m04096_n04096_k04096",
                    key,
                    commit,
                    i,
                    float(np.exp(value)),
                    1.0,
                    float(value),
                    0.001,
                    0.01,
                    "NVIDIA H200",
                    (),
                    "",
                    None,
                )
            )
    return history


class Memos:
    """The memo half of ci.history.asv_results.store.Store, in memory: each series recomputes only its tail, as in the
    site build.
    """

    def __init__(self) -> None:
        self.memos: dict[str, Any] = {}

    def memo(self, name: str) -> Any:
        return self.memos.get(name)

    def keep_memo(self, name: str, memo: Any) -> None:
        self.memos[name] = memo

    def commit(self) -> None:
        pass


def changes_of(scenario: Scenario, values: np.ndarray, n: int, memos: Memos) -> dict[str, Any]:
    """What the site build writes as changes.json after the history's n-th commit."""
    checks = regressions.all_checks(history_of(scenario, values, n), memos)
    return {
        "schema": SCHEMA,
        "results_commit": sha(scenario.seed, "results", n),
        "site_url": "https://owner.github.io/repo/",
        "machines": json.loads(json.dumps(checks)),
    }


@dataclass
class Growth:
    scenario: Scenario
    runs: int = 0
    logs: list[str] = field(default_factory=list)


def grow(
    scenario: Scenario,
    folder: Path,
    run_command: Callable[[Path, int], None],
    between: Callable[[int], None] = lambda run: None,
) -> Growth:
    """Run 1..runs: the history's changes written to ``folder``, then ``run_command(changes_json, run)``;
    ``between(run)`` first (what a person does between two runs)."""
    values = levels(scenario)
    memos = Memos()
    growth = Growth(scenario)
    for run in range(1, scenario.runs + 1):
        between(run)
        path = folder / f"changes-{run:02d}.json"
        path.write_text(json.dumps(changes_of(scenario, values, scenario.start + run, memos)))
        run_command(path, run)
        growth.runs = run
    return growth


def notify_in_process(env: dict[str, str], log: list[str], extra: tuple[str, ...] = ()) -> Callable[[Path, int], None]:
    """The same command's front and code in this process (no interpreter start per run): ``gh`` gets ``env``;
    ``extra``: more options (``--json FILE``: the record the site build reads)."""
    from ci.notify.front import COMMAND
    from ci.notify.front import run as notify_run

    def run(changes: Path, number: int) -> None:
        options = COMMAND.checked(
            [
                "regression-issues",
                "--github-repo",
                "OWNER/REPO",
                "--changes",
                str(changes),
                "--run-url",
                f"https://github.com/OWNER/REPO/actions/runs/{number}",
                "--write-interval",
                "0",
                *extra,
            ]
        )
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)
        try:
            code = notify_run(options, log=lambda line: log.append(f"run {number}: {line}"))
        finally:
            os.environ.clear()
            os.environ.update(saved)
        if code != 0:
            raise AssertionError(f"run {number}: exit {code}: {log[-3:]}")

    return run


def fixing_commit(scenario: Scenario) -> str:
    b, at, _, fixed = scenario.regressions[0]
    assert fixed is not None
    return sha(scenario.seed, "commit", at + fixed)
