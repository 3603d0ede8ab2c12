"""Issue 38's "Done when": a history grown one commit per main-job run, its regression issues filed after each run.

    PYTHONPATH=. .venv/bin/python docs/data/regression_issues_growth.py --seeds 10 --json docs/data/regression_issues_growth.json

Per seed: tests/issue_growth.py's scenario (24 benchmarks, 0.3% t5 commit noise with exact
repeats; regressions of -5% at commit 30 fixed at 40, -4% at 45, -6% at 56; -2% in 20
benchmarks at 66; one benchmark named with a forged marker), 20 commits, then 60 runs of one
commit each. Each run computes what the site build publishes (ci.history.regressions over the
history store's points, memos kept) and runs ``python -m ci.notify regression-issues``'s front
in this process against tests/fake_github.py (real HTTPS through ``gh``). Before run 35 every
issue's label is removed and the first issue is retitled by a person. Then it counts, per true
regression, the issues that name its benchmarks: exactly one each is the goal.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))  # the scenario and the GitHub stand-in live with the tests

from fake_github import FakeGitHub, State  # noqa: E402
from issue_growth import Scenario, benchmark_key, fixing_commit, grow, notify_in_process  # noqa: E402

from ci.notify.issue_state import parse  # noqa: E402
from harness.report import write_json_atomic  # noqa: E402


def truths(scenario: Scenario) -> dict[str, set[str]]:
    """Each true regression -> the benchmark keys it is in."""
    out = {f"benchmark {b} at {at}" + (f", fixed at {at + fixed}" if fixed else ""): {benchmark_key(scenario, b)}
           for b, at, _, fixed in scenario.regressions}
    first, count, at, size = scenario.shared
    out[f"{count} benchmarks at {at}"] = {benchmark_key(scenario, b) for b in range(first, first + count)}
    return out


def one_seed(seed: int, runs: int) -> dict:
    scenario = Scenario(seed=seed, runs=runs)
    with tempfile.TemporaryDirectory() as tmp, FakeGitHub(Path(tmp), State()) as server:
        log: list[str] = []

        def triage(number: int) -> None:
            if number == 35:
                for issue in server.state.issues:
                    issue["labels"] = []
                if server.state.issues:
                    server.state.issues[0]["title"] = "perf: looking into it (retitled by a person)"

        started = time.monotonic()
        grow(scenario, Path(tmp), notify_in_process(server.env(dict(os.environ)), log), triage)
        seconds = time.monotonic() - started
        state = server.state
    issues = []
    for issue in state.issues:
        parsed = parse(issue["body"])
        names = {m.benchmark for m in parsed.members} | {d.benchmark for d in parsed.drifts} if parsed else set()
        issues.append((issue, names))
    per_truth = {name: [i["number"] for i, names in issues if names & keys] for name, keys in truths(scenario).items()}
    claimed = {n for numbers in per_truth.values() for n in numbers}
    fixed_name = next(iter(per_truth))
    fixed = [i for i, _ in issues if i["number"] in per_truth[fixed_name]]
    fix_sha = fixing_commit(scenario)
    comments = state.comments
    return {
        "seed": seed, "runs": runs, "seconds": round(seconds, 1), "issues": len(state.issues),
        "issues_per_regression": {k: len(v) for k, v in per_truth.items()},
        "duplicates": sum(max(0, len(v) - 1) for v in per_truth.values()),
        "unexplained_issues": len([i for i, _ in issues if i["number"] not in claimed]),
        "fixed_closed_naming_fix": bool(fixed) and all(
            i["state"] == "closed" and fix_sha[:12] in i["body"]
            and any(fix_sha[:12] in c["body"] for c in comments.get(i["number"], [])) for i in fixed),
        "group_issue_members": [len(names) for i, names in issues if i["number"] in per_truth[list(per_truth)[-1]]],
        "closed": sum(i["state"] == "closed" for i in state.issues),
        "status_comments": sum(len(c) for c in comments.values()),
        "writes": len(state.writes()),
        "requests": len(state.requests),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first", type=int, default=0, help="the first seed (default 0)")
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    results = []
    for seed in range(args.first, args.first + args.seeds):
        result = one_seed(seed, args.runs)
        print(result, flush=True)
        results.append(result)
    summary = {"seeds": [r["seed"] for r in results], "runs": args.runs,
               "issues": [r["issues"] for r in results],
               "duplicates": sum(r["duplicates"] for r in results),
               "unexplained_issues": sum(r["unexplained_issues"] for r in results),
               "fixed_closed_naming_fix": sum(r["fixed_closed_naming_fix"] for r in results),
               "group_as_one_issue": sum(r["group_issue_members"] == [20] for r in results),
               "per_seed": results}
    print({k: v for k, v in summary.items() if k != "per_seed"})
    if args.json:
        write_json_atomic(args.json, summary)
    return 0 if summary["duplicates"] == 0 and all(r["issues"] == 4 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
