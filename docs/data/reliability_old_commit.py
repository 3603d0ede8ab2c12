"""Do issue 49's tests fail on the code before it? Each listed test run against e8ba7df: a check, not a test.

    PYTHONPATH=. nice -n 10 python docs/data/reliability_old_commit.py --before-change --head   # the record's run

Issue 49's "Done when" asks for a test per item that fails on e8ba7df and passes after. A test can only guard its
item if it fails without the item's code, so this script puts today's tests beside the old code and runs them there:
a worktree of OLD (removed at the end), this checkout's test files and test helpers copied over it (every ``tests/``
file and ``tests/data``: test support, never the code under test), then pytest on just the test functions of
``CASES`` with a JUnit report, one pytest per test file. Each test id's outcome:

- ``fails on an assertion``: the old code ran and gave the wrong answer (an assert, ``pytest.fail``, "DID NOT
  RAISE"), the guard we want;
- ``cannot import``: a module or a name the test uses did not exist at OLD (the item's code is new, but the test
  never saw the old behaviour);
- ``fails with an error``: the old code raised something else (a signature the test calls that changed, ...);
- ``passes``: the test does not guard its item against OLD;
- ``skipped``: with pytest's reason; never counted as either.

``--before-change`` also runs each case that names its item's own change on that change's parent: a test that drives
the code through a hook OLD lacks (the calibration's simulated engine) cannot import there, but can fail there.
``--head`` runs the same ids on this checkout (each must pass). Outcomes, by side, to
docs/data/reliability_old_commit.json (2026-12-07, on the shared 2-core machine; the tests as committed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "docs" / "data" / "reliability_old_commit.json"


# One row of docs/RELIABILITY.md's issue 49 cases: the item, a test function (every parameter it has) or a whole file,
# and, where the test drives the code through a hook that OLD lacks, the commit that made the item's change: the test
# also runs on that commit's parent, where the hook exists (--before-change).
@dataclass(frozen=True)
class Case:
    item: str
    test: str
    change: str | None = None


CALIBRATION = "tests/test_speed_calibration_skips.py::"
CASES = [
    Case(
        "1", CALIBRATION + "test_another_runners_model_file_is_refused_before_any_round_and_left_untouched", "b299269"
    ),
    Case("2", CALIBRATION + "test_an_interrupted_calibration_keeps_its_rounds_and_they_refit", "d67584b"),
    Case("2", CALIBRATION + "test_a_model_that_cannot_be_written_keeps_the_rounds_and_says_how_to_refit", "d67584b"),
    Case("2", "tests/test_full_disk.py::test_the_calibrations_model_on_a_full_disk_keeps_the_rounds", "d67584b"),
    Case("3", "tests/test_gate_faults.py::test_an_interrupted_gate_records_its_complete_rounds_and_replays_them"),
    Case("3", "tests/test_command_shape.py::test_an_interrupt_keeps_an_earlier_runs_record"),
    Case("4", "tests/test_full_disk.py::test_the_kept_assembly_on_a_full_disk_is_exit_2_not_a_compile_failure"),
    Case("4", "tests/test_full_disk.py::test_the_resources_record_on_a_full_disk_is_exit_2"),
    Case("5", "tests/test_fronts_agree.py"),
    Case(
        "5",
        "tests/test_notify_comment.py::test_a_changes_record_that_found_nothing_to_compare_says_the_gate_did_not_run",
    ),
    Case("6", "tests/test_bad_input.py::test_a_base_beyond_a_shallow_clone_is_one_line_saying_how_to_deepen"),
    Case("6", "tests/test_bad_input.py::test_a_ref_that_names_nothing_says_which_argument_it_was"),
    Case("6", "tests/test_bad_input.py::test_a_json_file_nested_too_deeply_is_one_line_naming_the_option"),
    Case("6", "tests/test_bad_input.py::test_a_json_file_over_the_cap_is_not_read"),
    Case("6", "tests/test_bad_input.py::test_a_malformed_noise_model_is_refused_before_any_work"),
    Case("6", "tests/test_bad_input.py::test_an_output_into_a_missing_folder_is_refused_not_created"),
    Case("6", "tests/test_bad_input.py::test_another_tools_file_is_one_line_naming_the_option"),
    Case("6", "tests/test_command_shape.py::test_an_error_a_user_causes_below_ci_is_one_line"),
    Case("7", "tests/test_help_text.py::test_the_plan_defaults_in_the_help_are_the_plans"),
    Case("7", "tests/test_help_text.py::test_the_spending_example_is_one_the_gate_takes"),
    Case("7", "tests/test_help_text.py::test_the_docs_plan_table_lists_the_codes_defaults"),
    Case("7", "tests/test_help_text.py::test_every_option_a_help_names_exists"),
    Case("7", "tests/test_help_text.py::test_every_example_line_of_a_help_parses_and_its_plan_is_taken"),
    Case("7", "tests/test_help_text.py::test_what_an_inconclusive_benchmark_does_is_what_the_gate_says"),
    Case("7", "tests/test_help_text.py::test_a_replayed_record_that_passes_does_not_say_the_pr_had_failed"),
    Case("7", "tests/test_help_text.py::test_the_issue_note_names_the_command_that_takes_issues"),
    Case("7", "tests/test_help_text.py::test_publish_speaks_as_publish_not_as_the_main_job"),
    Case("7", "tests/test_help_text.py::test_an_interrupted_main_job_says_one_consistent_thing"),
    Case("7", "tests/test_help_text.py::test_a_branch_that_names_nothing_is_refused_before_any_step"),
    Case("8", "tests/test_speed_worker.py::test_three_devices_keep_pairs_together_and_report_a_failing_device"),
]

IMPORT_ERRORS = ("ImportError", "ModuleNotFoundError", "cannot import name", "has no attribute")


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--old", default="e8ba7df", help="the commit before issue 49's changes (default e8ba7df)")
    ap.add_argument("--head", action="store_true", help="run the same tests on this checkout as well")
    ap.add_argument("--before-change", action="store_true", help="and on the parent of each case's own change")
    ap.add_argument("--only", default="", help="only the cases whose test id contains this; no record written")
    args = ap.parse_args()
    cases = [c for c in CASES if args.only in c.test]
    # Each side: a name, the tree the tests run in (None: a worktree of the commit, made below) and its cases.
    sides: list[tuple[str, str | None, list[Case]]] = [(args.old, args.old, cases)]
    if args.before_change:
        for change in sorted({c.change for c in cases if c.change}):
            sides.append((f"{change}^", f"{change}^", [c for c in cases if c.change == change]))
    if args.head:
        sides.append(("head", None, cases))
    results: dict[str, dict[str, dict]] = {}
    with tempfile.TemporaryDirectory(prefix="reliability-old-") as scratch:
        for name, commit, side_cases in sides:
            junit = Path(scratch) / f"junit-{len(results)}"
            if commit is None:
                results[name] = run_cases(ROOT, side_cases, junit)
                continue
            tree = Path(scratch) / f"tree-{len(results)}"
            git("worktree", "add", "--detach", "--quiet", str(tree), commit)
            try:
                copy_tests(tree)
                results[name] = run_cases(tree, side_cases, junit)
            finally:
                git("worktree", "remove", "--force", str(tree))
    rows = table(cases, results)
    counts = {side: dict(Counter(r[side]["outcome"] for r in rows if side in r)) for side in results}
    print(json.dumps(counts, indent=1))
    if not args.only:
        record = {"old": args.old, "tests_from": git("rev-parse", "--short", "HEAD"), "counts": counts, "tests": rows}
        RECORD.write_text(json.dumps(record, indent=1) + "\n")
    return 0


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout.strip()


def copy_tests(tree: Path) -> None:
    """Today's tests and their helpers over TREE's: only tests/, never the code they test."""
    shutil.rmtree(tree / "tests")
    shutil.copytree(ROOT / "tests", tree / "tests", ignore=shutil.ignore_patterns("__pycache__"))


def run_cases(tree: Path, cases: list[Case], junit_dir: Path) -> dict[str, dict]:
    """Every case's test ids on TREE -> {"outcome", "detail"}; one pytest per test file (an import error stays there)."""
    junit_dir.mkdir(parents=True)
    by_file: dict[str, list[str]] = {}
    for case in cases:
        by_file.setdefault(case.test.split("::")[0], []).append(case.test)
    outcomes: dict[str, dict] = {}
    for n, (path, ids) in enumerate(by_file.items()):
        junit = junit_dir / f"{n}.xml"
        # PYTHONPATH first: the virtualenv's .pth names another checkout, which must not be what runs.
        env = {**os.environ, "PYTHONPATH": str(tree)}
        command = ["nice", "-n", "10", sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        print(f"{tree}: {path} ({len(ids)} test functions)", flush=True)
        done = subprocess.run([*command, f"--junitxml={junit}", *ids], cwd=tree, env=env, stdout=subprocess.DEVNULL)
        found = read_junit(junit, path)
        if done.returncode == INTERRUPTED and "passes" in {o["outcome"] for o in found.values()}:
            # A KeyboardInterrupt (the gates' Interrupted) escaped a test: the report of that test, and of the file's
            # tests after it, is no verdict. Each function again on its own, so the one that escapes is known.
            for one in ids:
                alone = junit.with_suffix(f".{ids.index(one)}.xml")
                done = subprocess.run(
                    [*command, f"--junitxml={alone}", one], cwd=tree, env=env, stdout=subprocess.DEVNULL
                )
                found.update(read_junit(alone, path, escaped=done.returncode == INTERRUPTED))
        outcomes.update(found)
    return outcomes


INTERRUPTED = 2  # pytest's exit code when the session was stopped (also a collection error: nothing passes then)


def read_junit(junit: Path, path: str, escaped: bool = False) -> dict[str, dict]:
    """``escaped``: the session was interrupted from inside the test, whose report then reads as passed."""
    outcomes = {}
    for case in ET.parse(junit).iter("testcase"):
        node = f"{path}::{case.get('name')}"
        if not case.get("classname"):  # a collection error: the whole file could not be imported
            node = path
        outcomes[node] = outcome(case)
        if escaped and outcomes[node]["outcome"] == "passes":
            outcomes[node] = {"outcome": "fails with an error", "detail": "a KeyboardInterrupt escaped the code"}
    return outcomes


def outcome(case: ET.Element) -> dict:
    for tag in ("failure", "error"):
        found = case.find(tag)
        if found is not None:
            text = found.text or ""
            message = found.get("message") or (text.strip().splitlines() or [""])[-1]
            text += message
            if "AssertionError" in message or message.startswith("assert") or "Failed: " in message:
                kind = "fails on an assertion"
            elif any(e in text for e in IMPORT_ERRORS):
                kind = "cannot import"
            else:
                kind = "fails with an error"
            return {"outcome": kind, "detail": message[:300]}
    skipped = case.find("skipped")
    if skipped is not None:
        return {"outcome": "skipped", "detail": (skipped.get("message") or "")[:300]}
    return {"outcome": "passes", "detail": ""}


def table(cases: list[Case], results: dict[str, dict[str, dict]]) -> list[dict]:
    """One row per test id (a parameter each), in CASES' order; a side that did not run a case has no key."""
    rows = []
    for case in cases:
        path = case.test.split("::")[0]
        found = {node for side in results.values() for node in side if node == path or node.startswith(case.test)}
        # A file that did not import on one side is one node there (its path): its row is each test the others ran.
        for node in sorted(found - {path}) or sorted(found) or [case.test]:
            row: dict = {"item": case.item, "test": node}
            for side, outcomes in results.items():
                ran = side == "head" or not side.endswith("^") or side == f"{case.change}^"
                if ran:
                    row[side] = outcomes.get(node) or outcomes.get(path) or {"outcome": "not run", "detail": ""}
            rows.append(row)
    return rows


if __name__ == "__main__":
    sys.exit(main())
