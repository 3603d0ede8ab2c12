"""ci.bisect on a temporary repository with a simulated measurer: culprits, fingerprint skips, inconclusive steps."""

from __future__ import annotations

import json
import math
import re
import subprocess
from pathlib import Path

import pytest

from ci.bisect import engine, measurer
from ci.bisect import options as bisect_options

THRESHOLD = 0.01  # the simulated gate's band
HALF_WIDTH = 0.004  # and its interval's half width: steps near the threshold are inconclusive


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def make_repo(
    tmp_path: Path, steps: list[tuple[str, float]], side_branch_at: int | None = None
) -> tuple[Path, list[str]]:
    """One commit per (code, tflops): code.txt stands for the speed fingerprint, speed.txt for the true speed."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@t")
    git(repo, "config", "user.name", "t")
    shas = []
    for i, (code, tflops) in enumerate(steps):
        if side_branch_at == i:
            git(repo, "checkout", "-q", "-b", "side")
            (repo / "side.txt").write_text("side")
            git(repo, "add", "-A")
            git(repo, "commit", "-q", "-m", "side work")
            git(repo, "checkout", "-q", "main")
        (repo / "code.txt").write_text(code)
        (repo / "speed.txt").write_text(str(tflops))
        (repo / "n.txt").write_text(str(i))
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"commit {i}")
        if side_branch_at == i:
            git(repo, "merge", "-q", "--no-ff", "-m", "merge side", "side")
        shas.append(git(repo, "rev-parse", "HEAD"))
    return repo, shas


class SimulatedGate:
    """The speed gate's verdict from the true speeds in the tree: ratio head/base +- HALF_WIDTH against the band."""

    def __init__(self, repo: Path):
        self.repo = repo
        self.calls: list[tuple[str, str]] = []

    def speed(self, sha: str) -> float:
        return float(git(self.repo, "show", f"{sha}:speed.txt"))

    def __call__(self, base: str, head: str) -> engine.Measurement:
        self.calls.append((base, head))
        ratio = self.speed(head) / self.speed(base)
        low, high = ratio - HALF_WIDTH, ratio + HALF_WIDTH
        if high < 1 - THRESHOLD:
            verdict = engine.REGRESSION
        elif low > 1 + THRESHOLD:
            verdict = engine.IMPROVEMENT
        elif low > 1 - THRESHOLD and high < 1 + THRESHOLD:
            verdict = engine.NO_CHANGE
        else:
            verdict = engine.INCONCLUSIVE
        return engine.Measurement(base, head, verdict, ratio, low, high, THRESHOLD)


def code_key(repo: Path):
    return lambda sha: git(repo, "show", f"{sha}:code.txt")


def run_bisect(repo: Path, good: str, bad: str):
    gate = SimulatedGate(repo)
    commits = bisect_options.first_parent_range(repo, good, bad)
    return engine.bisect(good, commits, code_key(repo), gate), gate


@pytest.mark.parametrize("culprit", range(1, 10))
def test_the_culprit_is_named_within_the_bound_wherever_it_is(tmp_path, culprit):
    steps = [(f"v{i}", 100.0 if i < culprit else 95.0) for i in range(10)]
    repo, shas = make_repo(tmp_path, steps)
    result, gate = run_bisect(repo, shas[0], shas[-1])
    assert result.outcome is engine.Outcome.CULPRIT and result.culprit == shas[culprit]
    assert len(gate.calls) <= 1 + math.ceil(math.log2(9)) == result.comparison_bound
    assert all(base == shas[0] for base, _ in gate.calls)  # always against the known-good end


def test_identical_code_commits_are_skipped_and_never_measured(tmp_path):
    # Commits 2, 3, 6, 7 keep their parent's code: the slowdown at 5 must still be found, and 6, 7 are not candidates.
    codes = ["a", "b", "c", "c", "c", "d", "d", "d", "e"]
    steps = [(code, 100.0 if i < 5 else 96.0) for i, code in enumerate(codes)]
    repo, shas = make_repo(tmp_path, steps)
    result, gate = run_bisect(repo, shas[0], shas[-1])
    assert set(result.skipped) == {shas[3], shas[4], shas[6], shas[7]}
    assert result.candidates == [shas[1], shas[2], shas[5], shas[8]]
    assert not {head for _, head in gate.calls} & set(result.skipped)
    assert result.culprit == shas[5] and len(gate.calls) <= 1 + math.ceil(math.log2(4))


def test_a_step_below_the_gates_resolution_is_inconclusive_with_its_interval(tmp_path):
    steps = [(f"v{i}", 100.0 if i < 4 else 99.0) for i in range(8)]  # 1%: the interval straddles the band edge
    repo, shas = make_repo(tmp_path, steps)
    result, gate = run_bisect(repo, shas[0], shas[-1])
    assert result.outcome is engine.Outcome.INCONCLUSIVE and result.culprit is None
    assert result.interval == (shas[0], shas[-1]) and result.remaining() == shas[1:]
    text = engine.markdown(result, "k[c]/s")
    assert "Inconclusive" in text and "0.9900" in text and "[0.9860, 0.9940]" in text


@pytest.mark.parametrize(
    ("speeds", "code", "outcome"),
    [
        ([100.0, 100.0, 94.0, 94.0], 0, "culprit"),
        (
            [100.0, 100.0, 99.0, 99.0],
            3,
            "inconclusive",
        ),  # 1%: as the speed gate's own "inconclusive", never 1 ("failed")
        ([100.0, 100.0, 100.0, 100.0], 1, "no regression"),
    ],
)
def test_the_exit_code_says_the_outcome(tmp_path, monkeypatch, speeds, code, outcome):
    repo, shas = make_repo(tmp_path, [(f"v{i}", s) for i, s in enumerate(speeds)])
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    out = tmp_path / "bisect.json"
    opts = bisect_options.COMMAND.checked(
        ["--good", shas[0], "--bad", shas[-1], "--benchmark", "k[c]/s", "--repo", str(repo), "--json", str(out)]
    )
    assert bisect_options.run(opts, SimulatedGate(repo), code_key(repo), log=lambda line: None) == code
    assert json.loads(out.read_text())["outcome"] == outcome
    exits = bisect_options.COMMAND.parser().format_help().split("exit codes:")[1]
    assert f"  {code} " in exits and ("  3    inconclusive" in exits) and "  1    inconclusive" not in exits


def test_an_inconclusive_midpoint_stops_with_the_narrowed_interval(tmp_path):
    # A 1% step at 5, then 4% at 7: the bad end is a clear regression; the first midpoint (4) is clean,
    # the second (6) sits 1% down, inside the gate's blind zone: the interval stops at (4, 8].
    speeds = [100, 100, 100, 100, 100, 99, 99, 95, 95]
    repo, shas = make_repo(tmp_path, [(f"v{i}", float(s)) for i, s in enumerate(speeds)])
    result, gate = run_bisect(repo, shas[0], shas[-1])
    assert [head for _, head in gate.calls] == [shas[8], shas[4], shas[6]]
    assert result.outcome is engine.Outcome.INCONCLUSIVE
    assert result.interval == (shas[4], shas[8]) and result.remaining() == shas[5:9]


def test_no_code_change_and_no_regression(tmp_path):
    repo, shas = make_repo(tmp_path, [("same", 100.0 if i < 3 else 90.0) for i in range(5)])
    result, gate = run_bisect(repo, shas[0], shas[-1])
    assert result.outcome is engine.Outcome.NO_CODE_CHANGE and not gate.calls
    assert "No code change" in engine.markdown(result, "k[c]/s")
    (tmp_path / "two").mkdir()
    repo2, shas2 = make_repo(tmp_path / "two", [(f"v{i}", 100.0) for i in range(5)])
    result2, gate2 = run_bisect(repo2, shas2[0], shas2[-1])
    assert result2.outcome is engine.Outcome.NO_REGRESSION and len(gate2.calls) == 1


def test_only_first_parent_commits_are_bisected(tmp_path):
    repo, shas = make_repo(tmp_path, [(f"v{i}", 100.0 if i < 5 else 95.0) for i in range(8)], side_branch_at=3)
    commits = bisect_options.first_parent_range(repo, shas[0], shas[-1])
    side = git(repo, "rev-parse", "side")
    assert side not in commits and commits[-1] == shas[-1]
    result, _ = run_bisect(repo, shas[0], shas[-1])
    assert result.culprit == shas[5]


def test_the_front_checks_options_and_writes_the_record(tmp_path, monkeypatch, capsys):
    repo, shas = make_repo(tmp_path, [(f"v{i}", 100.0 if i < 2 else 94.0) for i in range(5)])
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    assert (
        bisect_options.main(["--good", shas[0], "--bad", shas[-1], "--benchmark", "no-brackets", "--repo", str(repo)])
        == 2
    )
    assert (
        bisect_options.main(["--good", shas[-1], "--bad", shas[0], "--benchmark", "k[c]/s", "--repo", str(repo)]) == 2
    )
    out = tmp_path / "bisect.json"
    opts = bisect_options.COMMAND.checked(
        [
            "--good",
            shas[0],
            "--bad",
            shas[-1],
            "--benchmark",
            "k[c]/s",
            "--repo",
            str(repo),
            "--json",
            str(out),
            "--",
            "--device",
            "cuda",
        ]
    )
    assert (opts.kernel, opts.config, opts.shape) == ("k", "c", "s")
    assert opts.gate_args == ("--device", "cuda")  # passed through to every python -m ci.speed
    assert bisect_options.run(opts, SimulatedGate(repo), code_key(repo), log=lambda line: None) == 0
    record = json.loads(out.read_text())
    assert record["outcome"] == "culprit" and record["culprit"] == shas[2]
    assert record["comparisons"] <= record["comparison_bound"]
    assert "Culprit" in capsys.readouterr().out


def test_the_gates_record_is_read_for_verdict_ratio_and_interval():
    record = {
        "verdict": "fail",
        "benchmarks": [
            {
                "verdict": "regression",
                "threshold": 0.01,
                "status": "gated",
                "decision": {"estimate": {"point": 0.97, "low": 0.96, "high": 0.98}},
            }
        ],
    }
    m = measurer.measurement_from_record(record, "a", "b")
    assert (m.verdict, m.ratio, m.low, m.high) == ("regression", 0.97, 0.96, 0.98)
    with pytest.raises(measurer.MeasureError):
        measurer.measurement_from_record({"benchmarks": []}, "a", "b")
    with pytest.raises(measurer.MeasureError):
        measurer.measurement_from_record({"benchmarks": [{"verdict": None, "status": "skipped"}]}, "a", "b")


def test_the_real_measurer_runs_the_speed_gate_with_the_benchmark_and_reads_its_record(tmp_path, monkeypatch):
    seen = {}

    def fake_run(command, cwd, env, stdout):
        seen["command"] = command
        out = Path(command[command.index("--json") + 1])
        out.write_text(
            json.dumps(
                {
                    "benchmarks": [
                        {
                            "verdict": "no change",
                            "decision": {"estimate": {"point": 1.001, "low": 0.995, "high": 1.006}},
                        }
                    ]
                }
            )
        )
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(measurer.subprocess, "run", fake_run)
    gate = measurer.SpeedGateMeasurer("k", "c", "s", tmp_path, ("--device", "cuda"))
    m = gate("a" * 40, "b" * 40)
    assert m.verdict == "no change" and m.ratio == 1.001
    command = seen["command"]
    assert command[1:3] == ["-m", "ci.speed"] and command[command.index("--base") + 1] == "a" * 40
    assert (
        command[command.index("--shape") + 1] == "s"
        and "--measure-identical" in command
        and command[-2:] == ["--device", "cuda"]
    )

    def failing_run(command, cwd, env, stdout):
        return subprocess.CompletedProcess(command, 2)

    monkeypatch.setattr(measurer.subprocess, "run", failing_run)
    with pytest.raises(measurer.MeasureError):
        gate("a" * 40, "b" * 40)


# ---------------------------------------------------------------------------
# --from-change-point: good, bad and the benchmark from the main job's JSON
# ---------------------------------------------------------------------------

GPU_KEY = "bench_gemm.GemmOnGpu.track_time('triton_dot_scaled:m128_n128_k128_w8_s3', 'square_m08192_n08192_k08192')"
OTHER_KEY = "bench_gemm.GemmOnGpu.track_time('torch_dequant:bf16', 'square_m08192_n08192_k08192')"


def change(benchmark: str, last_before: str, first_after: str, direction: str = "regression") -> dict:
    """One entry of the main job's history.change_points, as ci.history.trends.regressions.CommitChange.to_json writes
    it.
    """
    return {
        "machine": "h200",
        "benchmark": benchmark,
        "last_before": last_before,
        "first_after": first_after,
        "change": {"index": 3, "direction": direction, "relative_change": -0.01 if direction == "regression" else 0.02},
    }


def main_job_report(tmp_path: Path, changes: list[dict] | None, **history) -> Path:
    path = tmp_path / f"main_job_{len(list(tmp_path.glob('main_job_*.json')))}.json"
    report = {"machine": "h200", "commits": []}
    if changes is not None:
        report["history"] = {"machine": "h200", "not_checked": None, "change_points": changes, **history}
    path.write_text(json.dumps(report))
    return path


def test_from_change_point_takes_good_bad_and_the_gate_id_from_the_report_and_finds_the_culprit(tmp_path, monkeypatch):
    steps = [("v0", 100.0), ("v1", 100.0), ("v1", 100.0), ("v3", 95.0), ("v4", 95.0), ("v5", 90.0), ("v6", 90.0)]
    repo, shas = make_repo(tmp_path, steps)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    report = main_job_report(
        tmp_path,
        [
            change(GPU_KEY, shas[1], shas[3]),
            change(OTHER_KEY, shas[0], shas[6], "improvement"),
            change(GPU_KEY, shas[4], shas[5]),
        ],
    )
    out = tmp_path / "bisect.json"
    opts = bisect_options.COMMAND.checked(
        [
            "--from-change-point",
            str(report),
            "--index",
            "2",
            "--repo",
            str(repo),
            "--json",
            str(out),
            "--",
            "--max-minutes",
            "2",
        ]
    )
    assert (opts.good, opts.bad) == (shas[4], shas[5])  # the second regression: the improvement is never picked
    assert (opts.benchmark, opts.kernel, opts.config, opts.shape) == (
        "triton_dot_scaled[m128_n128_k128_w8_s3]/square_m08192_n08192_k08192",
        "triton_dot_scaled",
        "m128_n128_k128_w8_s3",
        "square_m08192_n08192_k08192",
    )
    assert opts.gate_args == ("--max-minutes", "2")
    first = bisect_options.COMMAND.checked(
        [
            "--from-change-point",
            str(report),
            "--index",
            "1",
            "--repo",
            str(repo),
            "--benchmark",
            "triton_dot_scaled[m128_n128_k128_w8_s3]/square_m08192_n08192_k08192",
        ]
    )
    assert (first.good, first.bad) == (shas[1], shas[3])
    assert bisect_options.run(first, SimulatedGate(repo), code_key(repo), log=lambda line: None) == 0
    assert bisect_options.run(opts, SimulatedGate(repo), code_key(repo), log=lambda line: None) == 0
    assert json.loads(out.read_text())["culprit"] == shas[5]
    single = main_job_report(tmp_path, [change(GPU_KEY, shas[1], shas[3])])  # one regression: no --index needed
    assert bisect_options.COMMAND.checked(["--from-change-point", str(single), "--repo", str(repo)]).bad == shas[3]


@pytest.mark.parametrize(
    "case, expected",
    [
        ("no history", "no 'history' section"),
        ("not checked", "was not checked"),
        ("no change points", "no change point"),
        ("only improvements", "only a slowdown is bisected"),
        ("ambiguous", "pick one with --index"),
        ("index out of range", "--index 3"),
        ("other benchmark", "no regression change point of that benchmark"),
        ("not json", "not valid JSON"),
        ("with --good", "leave out --good and --bad"),
        ("index alone", "it needs --from-change-point"),
        ("nothing", "--good, --bad, --benchmark: required"),
    ],
)
def test_from_change_point_refuses_a_report_or_a_choice_it_cannot_use(tmp_path, monkeypatch, capsys, case, expected):
    repo, shas = make_repo(tmp_path, [(f"v{i}", 100.0 if i < 2 else 94.0) for i in range(4)])
    two = [change(GPU_KEY, shas[0], shas[1]), change(GPU_KEY, shas[1], shas[2])]
    reports = {
        "no history": lambda: main_job_report(tmp_path, None),
        "not checked": lambda: main_job_report(tmp_path, [], not_checked="CPU timings are not checked"),
        "no change points": lambda: main_job_report(tmp_path, []),
        "only improvements": lambda: main_job_report(tmp_path, [change(GPU_KEY, shas[0], shas[2], "improvement")]),
        "ambiguous": lambda: main_job_report(tmp_path, two),
        "index out of range": lambda: main_job_report(tmp_path, two),
        "other benchmark": lambda: main_job_report(tmp_path, two),
        "not json": lambda: (tmp_path / "broken.json").write_text("{not json") and tmp_path / "broken.json",
    }
    extra = {
        "index out of range": ["--index", "3"],
        "other benchmark": ["--benchmark", "k[c]/s"],
        "with --good": ["--good", shas[0]],
    }
    if case in ("index alone", "nothing"):
        argv = (
            ["--index", "1", "--good", shas[0], "--bad", shas[-1], "--benchmark", "k[c]/s"]
            if case == "index alone"
            else []
        )
    else:
        report = reports[case]() if case in reports else main_job_report(tmp_path, two)
        argv = ["--from-change-point", str(report), *extra.get(case, [])]
    with pytest.raises(bisect_options.OptionsError, match=re.escape(expected)):
        bisect_options.COMMAND.checked([*argv, "--repo", str(repo)])
    assert bisect_options.main([*argv, "--repo", str(repo)]) == 2
    assert expected in capsys.readouterr().err
