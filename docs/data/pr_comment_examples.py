"""Make the PR comment's example inputs by running the real gates on this CPU (issue 30).

    PYTHONPATH=.:tests .venv/bin/python docs/data/pr_comment_examples.py tests/data/pr_comment

A temporary copy of this checkout (tests/test_asv_suite.make_project) gets one branch per outcome
off its first commit, and for each the three PR gates run as pr-checks.yml runs them (CPU-sized:
torch_dequant at 256x256x1024, a two-round plan, FlyDSL compiled for gfx950 on the CPU):

- ``identical``: a README edit. ``ci.speed.changes`` finds every benchmark's code identical, so the
  GPU job would not start: there is no speed-gate record, as on GitHub.
- ``regression``: torch_dequant does its work three times, and FlyDSL's ``default`` config leaves its
  accumulators to LLVM (an ISA and register diff): a regression with a code diff.
- ``wrong``: torch_dequant's output is 5% too large: "wrong result" at head.
- ``inconclusive``: a docs edit measured anyway (``--measure-identical``) at a 1% threshold, which the
  shared CPU's noise cannot resolve in two rounds.
- ``error``: torch_dequant raises at head: the speed gate stops with exit 2.

Each outcome's folder is laid out as ``actions/download-artifact`` lays out the artifacts of one run
(``<artifact name>/<file>``), plus ``jobs.json``: what GitHub's "list jobs for a workflow run attempt"
endpoint returns for that run. GitHub cannot be reached from here, so ``jobs.json`` is written by this
script from the gates' exit codes (the GPU job's pytest step is assumed to fail exactly when the head's
result is wrong). The speed gate's raw rounds are dropped from the copies (the comment never reads them:
``rounds`` becomes ``[]``), so the fixtures stay small.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from test_asv_suite import SLOWDOWN, git, make_project
from test_speed_gate import RAISES, SMALL, WRONG

FLYDSL_CONFIG = (
    '"default": {"lds_stages": 2, "agpr_accumulators": True}',
    '"default": {"lds_stages": 2, "agpr_accumulators": False}',
)
KERNELS = ["--kernel", "torch_dequant", "--kernel", "flydsl_gfx950_4wave"]
ATTEMPT = 1


def _env(repo: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GITHUB_STEP_SUMMARY", "TRITON_INTERPRET")}
    env["PYTHONPATH"] = str(repo)
    return env


def _run(repo: Path, *args: str) -> int:
    done = subprocess.run([sys.executable, "-m", *args], cwd=repo, env=_env(repo), capture_output=True, text=True)
    print(f"  python -m {' '.join(args[:1])} ... -> exit {done.returncode}", file=sys.stderr)
    if done.returncode not in (0, 1, 2):
        raise SystemExit(done.stdout[-3000:] + done.stderr[-3000:])
    return done.returncode


def _branch(repo: Path, c0: str, name: str, edits: list[tuple[str, str | tuple[str, str]]]) -> None:
    git(repo, "checkout", "-q", "-b", name, c0)
    for path, edit in edits:
        target = repo / path
        if isinstance(edit, tuple):
            old, new = edit
            assert old in target.read_text(), (path, old)
            target.write_text(target.read_text().replace(old, new))
        else:
            target.write_text(target.read_text() + edit)
    git(repo, "commit", "-q", "-am", name)
    git(repo, "checkout", "-q", "main")


def _slim(verdict: Path) -> None:
    record = json.loads(verdict.read_text())
    record["rounds"] = []
    for bench in record.get("benchmarks", []):
        bench["rounds"] = []
    verdict.write_text(json.dumps(record, indent=1) + "\n")


def _conclusion(code: int | None) -> str:
    return "skipped" if code is None else "success" if code == 0 else "failure"


def _jobs(changes: int, budget: int, speed: int | None, gpu_tests: int | None) -> dict:
    def step(number: int, name: str, code: int | None) -> dict:
        return {"number": number, "name": name, "status": "completed", "conclusion": _conclusion(code)}

    def job(job_id: int, name: str, steps: list[dict]) -> dict:
        conclusions = {s["conclusion"] for s in steps}
        conclusion = "skipped" if conclusions == {"skipped"} else "failure" if "failure" in conclusions else "success"
        return {
            "id": job_id,
            "name": name,
            "status": "completed",
            "conclusion": conclusion,
            "html_url": f"https://github.com/OWNER/REPO/actions/runs/1000/job/{job_id}",
            "steps": steps,
        }

    jobs = [
        job(
            1, "CPU gates and register budget", [step(1, "tests", 0), step(2, "register budget vs the PR base", budget)]
        ),
        job(
            2,
            "which benchmarks the PR changes (gfx950 code, on a CPU)",
            [step(1, "fingerprint base and head", changes)],
        ),
        job(
            3,
            "GPU correctness and speed gate (MI355X)",
            [step(1, "correctness gates on the GPU", gpu_tests), step(2, "speed gate vs the PR base", speed)],
        ),
    ]
    return {"total_count": len(jobs), "jobs": jobs}


def outcome(repo: Path, c0: str, head: str, out: Path, *, speed_args: list[str] | None, gpu_tests_fail: bool) -> None:
    print(f"{head}:", file=sys.stderr)
    changes_dir, gate_dir, budget_dir = (
        out / f"{name}-attempt{ATTEMPT}" for name in ("speed-changes", "speed-gate", "budget-gate")
    )
    for d in (changes_dir, budget_dir):
        d.mkdir(parents=True, exist_ok=True)
    changes = _run(
        repo,
        "ci.speed.changes",
        "--repo",
        str(repo),
        "--base",
        c0,
        "--head",
        head,
        "--arch",
        "gfx950",
        *KERNELS,
        "--json",
        str(changes_dir / "changes.json"),
    )
    budget = _run(
        repo,
        "ci.budget",
        "--repo",
        str(repo),
        "--base",
        c0,
        "--head",
        head,
        "--kernel",
        "flydsl_gfx950_4wave",
        "--json",
        str(budget_dir / "budget.json"),
    )
    speed = gpu_tests = None
    if speed_args is not None:  # the GPU job runs only when some benchmark's code differs
        gate_dir.mkdir(parents=True, exist_ok=True)
        speed = _run(
            repo,
            "ci.speed.gate",
            "--repo",
            str(repo),
            "--base",
            c0,
            "--head",
            head,
            *SMALL,
            *speed_args,
            "--json",
            str(gate_dir / "verdict.json"),
        )
        _slim(gate_dir / "verdict.json")
        gpu_tests = 1 if gpu_tests_fail else 0
    (out / "jobs.json").write_text(json.dumps(_jobs(changes, budget, speed, gpu_tests), indent=1) + "\n")


def main(argv: list[str]) -> int:
    target = (Path(argv[0]) if argv else Path("tests/data/pr_comment")).resolve()  # the gates run in the copy
    with tempfile.TemporaryDirectory(prefix="pr-comment-examples-") as tmp:
        repo = make_project(Path(tmp))
        c0 = git(repo, "rev-parse", "HEAD")
        flydsl = "kernels/flydsl_gfx950/__init__.py"
        _branch(repo, c0, "identical", [("README.md", "\ndocs only\n")])
        _branch(repo, c0, "regression", [("kernels/torch_dequant.py", SLOWDOWN), (flydsl, FLYDSL_CONFIG)])
        _branch(repo, c0, "wrong", [("kernels/torch_dequant.py", WRONG)])
        _branch(repo, c0, "inconclusive", [("README.md", "\nmeasured anyway\n")])
        _branch(repo, c0, "error", [("kernels/torch_dequant.py", RAISES)])
        outcome(repo, c0, "identical", target / "identical", speed_args=None, gpu_tests_fail=False)
        outcome(repo, c0, "regression", target / "regression", speed_args=[], gpu_tests_fail=False)
        outcome(repo, c0, "wrong", target / "wrong", speed_args=[], gpu_tests_fail=True)
        outcome(
            repo, c0, "inconclusive", target / "inconclusive", speed_args=["--measure-identical"], gpu_tests_fail=False
        )
        outcome(repo, c0, "error", target / "error", speed_args=[], gpu_tests_fail=False)
    # The temporary repository's paths are in the records; name them the same every time.
    for path in target.rglob("*.json"):
        path.write_text(re.sub(r"/tmp/pr-comment-examples-[^/\"]+", "/tmp/example", path.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
