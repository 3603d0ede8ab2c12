"""A pull request that slows a benchmark and edits the thresholds file to hide it, from real H200 rounds (issue 37).

The rounds are the speed gate's own, recorded on an H200 (an A/A run of the default selection, 20
benchmarks, the committed noise model: docs/data/h200_noise_model_v5b/committed/committed_aa_1.json).
The PR is made from them as its GPU job would have measured it:

- its head is 2% slower on the tracked config (:data:`BENCH`: every head TFLOPS of it, and its
  times, scaled; the base's untouched), a real kernel step's size, against its threshold of at most
  1% (0.14% in version 5b's file, 0.5% in version 6's: :func:`base_threshold`);
- its ``ci/speed_thresholds_h200.json`` adds a first override, 5% for that benchmark ("noisy on this
  runner"): the PR's own gate then says "no change" at the first look, so its job stops after two
  rounds (:data:`ROUNDS`: the record keeps only those) and reports PASS;
- the PR's own record is that decision, made by the gate's code with the PR's thresholds file
  (``python -m ci.speed --replay SHIFTED --thresholds PR_FILE --json verdict.json``: the recorded
  plan and noise model, as the PR's job decided them).

Laid out as a pr-checks run's artifacts (``speed-gate-attempt1/verdict.json``), with the run's
job and artifact lists as GitHub's API gives them, and the PR's changed files.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parents[1]
SOURCE = PROJECT / "docs" / "data" / "h200_noise_model_v5b" / "committed" / "committed_aa_1.json"
BENCH = "triton_dot_scaled[m128_n128_k128_w8_s3]/square_m08192_n08192_k08192"
SHIFT = -0.02  # head TFLOPS 2% lower
ROUNDS = 2  # what the PR's own plan measured before its 5% threshold said "no change"
# The record's rounds stop at 2, one worker generation: under version 7 this benchmark (between-worker SD 0.19%, the
# model's generation-mean variance worth ~7 df) needs a second generation at its 1%, so the PR's record leaves it out
# rather than have it "inconclusive: the record ran out" under every judge.
NEEDS_TWO_GENERATIONS = "triton_dot_scaled[m128_n256_k64_w8_s3]/square_m08192_n08192_k08192"
PR_THRESHOLD = 0.05
RUN_ID, ATTEMPT = 77, 1
RUN_URL = f"https://github.com/OWNER/REPO/actions/runs/{RUN_ID}"
FORK, BRANCH, SHA = "mallory/mxfp4-fork", "tune/faster-tile", "d" * 40
PR_NUMBER = 7
# The PR's files as GitHub lists them: a kernel change and the thresholds edit that hides its cost.
PR_FILES = [
    {"filename": "kernels/triton_mxfp4.py", "status": "modified"},
    {"filename": "ci/speed_thresholds_h200.json", "status": "modified"},
    {"filename": "docs/PERF_NOTES.md", "status": "modified"},
]


@dataclass(frozen=True)
class Scenario:
    artifacts: Path  # the pr-checks run's artifacts, one folder each
    record: Path  # the PR's own speed-gate record (in artifacts)
    pr_thresholds: Path  # the PR's edited thresholds file
    shifted: Path  # the raw rounds with the head slowed (before the PR's decision)


def slowed(record: dict[str, Any], bench: str = BENCH, shift: float = SHIFT, rounds: int = ROUNDS) -> dict[str, Any]:
    """``record`` cut to its first ``rounds`` rounds (without :data:`NEEDS_TWO_GENERATIONS`), ``bench``'s head
    measurements scaled by ``1 + shift``."""
    out = dict(record, rounds=json.loads(json.dumps(record["rounds"][:rounds])))
    out["benchmarks"] = [b for b in record["benchmarks"] if b["id"] != NEEDS_TWO_GENERATIONS]
    for rnd in out["rounds"]:
        if isinstance(rnd.get("sequence"), list):
            rnd["sequence"] = [b for b in rnd["sequence"] if b != NEEDS_TWO_GENERATIONS]
        for process in rnd["processes"]:
            process["records"].pop(NEEDS_TWO_GENERATIONS, None)
            timing = process["records"].get(bench) if process["side"] == "head" else None
            if not timing or "tflops" not in timing:
                continue
            timing["tflops"] *= 1 + shift
            timing["samples_s"] = [t / (1 + shift) for t in timing["samples_s"]]
            for key in ("median_s", "q25_s", "q75_s", "mad_s"):
                if timing.get(key) is not None:
                    timing[key] /= 1 + shift
    return out


def pr_thresholds() -> dict[str, Any]:
    """The base's H200 thresholds with the PR's edit on top: the slowed benchmark at 5%."""
    data = json.loads((PROJECT / "ci" / "speed_thresholds_h200.json").read_text())
    data["overrides"].insert(0, {"match": BENCH, "threshold": PR_THRESHOLD, "why": "noisy on this runner"})
    return data


def speed(*args: str, cwd: Path = PROJECT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ci.speed", *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


def base_threshold(bench: str = BENCH) -> float:
    """The threshold this checkout's H200 thresholds file gives ``bench`` (what the judge must decide with)."""
    from ci.speed.decide.thresholds import load_thresholds

    return load_thresholds(PROJECT / "ci" / "speed_thresholds_h200.json").lookup(bench)[0]


def make(folder: Path, rounds: int = ROUNDS, shift: float = SHIFT) -> Scenario:
    folder.mkdir(parents=True, exist_ok=True)
    shifted, thresholds = folder / "shifted.json", folder / "pr_speed_thresholds_h200.json"
    shifted.write_text(json.dumps(slowed(json.loads(SOURCE.read_text()), rounds=rounds, shift=shift)))
    thresholds.write_text(json.dumps(pr_thresholds(), indent=1))
    artifacts = folder / "pr-artifacts"
    record = artifacts / f"speed-gate-attempt{ATTEMPT}" / "verdict.json"
    record.parent.mkdir(parents=True)
    done = speed("--replay", str(shifted), "--thresholds", str(thresholds), "--json", str(record))
    if done.returncode not in (0, 1, 3) or not record.is_file():  # 3: inconclusive is a record too
        raise RuntimeError(f"the PR's own decision failed (exit {done.returncode}): {done.stderr[-2000:]}")
    return Scenario(artifacts, record, thresholds, shifted)


def jobs(speed_step: str = "success") -> list[dict[str, Any]]:
    """pr-checks' jobs as GitHub lists them for this run: everything green in the PR's own run."""
    from ci.notify.comment import (
        JOB_CHANGES,
        JOB_CPU,
        JOB_GPU,
        STEP_BUDGET,
        STEP_CHANGES,
        STEP_GPU_TESTS,
        STEP_SPEED,
        STEP_TESTS,
    )

    def job(i, name, steps):
        return {
            "id": i,
            "name": name,
            "conclusion": "success",
            "html_url": f"{RUN_URL}/job/{i}",
            "steps": [{"name": s, "conclusion": c} for s, c in steps],
        }

    return [
        job(1, JOB_CPU, [(STEP_TESTS, "success"), (STEP_BUDGET, "success")]),
        job(2, JOB_CHANGES, [(STEP_CHANGES, "success")]),
        job(3, JOB_GPU, [(STEP_GPU_TESTS, "success"), (STEP_SPEED, speed_step)]),
    ]


def artifact_list() -> list[dict[str, Any]]:
    return [{"id": 4242, "name": f"speed-gate-attempt{ATTEMPT}", "expired": False}]
