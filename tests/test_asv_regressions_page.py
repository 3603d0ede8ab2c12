"""asv's own regressions page, with this project's asv.conf.json thresholds, from synthetic GPU results.

A 12-commit git history and asv results for it (asv's own Results.save), published by plain
``asv publish`` with the project's ``regressions_thresholds`` and ``regressions_first_commits``:
the Triton GEMM's TFLOPS rise 7% at commit 4 (a time drop) and fall 3% at commit 8 (a +3.1% time
rise). asv's regressions.json must list the fall, at its commit, and nothing at the gain. The same
results under a single 5% threshold list nothing: the per-benchmark threshold is what lists it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from asv.util import load_json
from test_asv_suite import REPO_ROOT, asv_env, git

MACHINE = "h200-test"
KEY = "bench_gemm.GemmOnGpu.track_time"
TRITON = ("'triton_dot_scaled:m128_n128_k128_w8_s3'", "'square_m08192_n08192_k08192'")
TORCH = ("'torch_dequant:bf16'", "'square_m08192_n08192_k08192'")
GAIN_AT, DROP_AT = 4, 8
BASE_S = 9.85e-3


def seconds(commit: int, rng: np.random.Generator) -> float:
    """The Triton GEMM's median time: TFLOPS x 1.07 from GAIN_AT, then x 0.97 from DROP_AT, 0.1% noise."""
    tflops = (1.07 if commit >= GAIN_AT else 1.0) * (0.97 if commit >= DROP_AT else 1.0)
    return BASE_S / tflops * (1 + rng.normal(0, 0.001))


def make_published(tmp_path: Path, thresholds: dict[str, float] | None = None) -> tuple[dict, list[str]]:
    """asv publish over synthetic results; (regressions.json, commits oldest first)."""
    from asv.results import Results
    from asv.runner import BenchmarkResult

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    shas = []
    for i in range(12):
        (repo / "n.txt").write_text(f"{i}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"commit {i}", f"--date=2026-01-{i + 1:02d}T00:00:00")
        shas.append(git(repo, "rev-parse", "HEAD"))
    project = load_json(str(REPO_ROOT / "asv.conf.json"), js_comments=True)
    conf = {
        "version": 1,
        "project": "p",
        "project_url": "#",
        "repo": ".",
        "dvcs": "git",
        "branches": ["main"],
        "environment_type": "virtualenv",
        "results_dir": "results",
        "html_dir": "html",
        "regressions_first_commits": project["regressions_first_commits"],
        "regressions_thresholds": thresholds if thresholds is not None else project["regressions_thresholds"],
    }
    (repo / "asv.conf.json").write_text(json.dumps(conf))
    results = repo / "results"
    (results / MACHINE).mkdir(parents=True)
    (results / MACHINE / "machine.json").write_text(
        json.dumps(
            {"machine": MACHINE, "os": "Linux", "arch": "x86_64", "cpu": "c", "num_cpu": "16", "ram": "1", "version": 1}
        )
    )
    params = [[TRITON[0], TORCH[0]], [TRITON[1]]]
    benchmark = {
        "name": KEY,
        "params": params,
        "param_names": ["kernel_config", "shape"],
        "version": "1",
        "type": "track",
        "unit": "seconds",
        "code": "",
        "timeout": 60,
    }
    (results / "benchmarks.json").write_text(json.dumps({KEY: benchmark, "version": 2}))
    rng = np.random.default_rng(0)
    for i, sha in enumerate(shas):
        run = Results({"machine": MACHINE}, {}, sha, 1767225600000 + i * 86_400_000, "3.11", "env", {})
        # torch_dequant steps by the same 3%: under its 12% threshold (it moved 10.1% between processes).
        values = [seconds(i, rng), seconds(i, rng) * 0.4]
        samples = [list(v * (1 + rng.normal(0, 0.0005, 10))) for v in values]
        result = BenchmarkResult(result=values, samples=samples, number=[1, 1], errcode=0, stderr="", profile=None)
        run.add_result(benchmark, result, record_samples=True)
        run.save(str(results))
    done = subprocess.run(
        [sys.executable, "-m", "asv", "publish"],
        cwd=repo,
        env=asv_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    index = json.loads((repo / "html" / "index.json").read_text())
    regressions = json.loads((repo / "html" / "regressions.json").read_text())
    return {"regressions": regressions["regressions"], "hash": index["revision_to_hash"]}, shas


def test_a_three_percent_tflops_drop_is_on_asvs_regressions_page_and_the_seven_percent_gain_is_not(tmp_path):
    published, shas = make_published(tmp_path)
    listed = {entry[0]: entry for entry in published["regressions"]}
    triton = f"{KEY}({', '.join(TRITON)})"
    assert set(listed) == {triton}, list(listed)  # torch_dequant's 3% is under its threshold
    jumps = listed[triton][6]
    assert len(jumps) == 1, jumps  # the fall only: the gain (a time drop) is never a regression
    before, after, value_before, value_after = jumps[0]
    assert before is None and published["hash"][str(after)] == shas[DROP_AT]  # None: asv's "exactly this commit"
    assert value_after / value_before - 1 == pytest.approx(1 / 0.97 - 1, abs=0.004)  # +3.1% in time
    assert shas[GAIN_AT] not in {published["hash"][str(r)] for jump in jumps for r in jump[:2] if r is not None}


def test_under_a_single_five_percent_threshold_asv_would_not_list_it(tmp_path):
    published, _ = make_published(tmp_path, {".*": 0.05})
    assert published["regressions"] == []
