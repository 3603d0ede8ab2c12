"""The published history (python -m ci.history.publish) on synthetic histories: what a new commit costs, and that
building incrementally gives the answers of building from nothing (issue 27).

A clone of this repository gets a few hundred synthetic commits and their results (tests/synthetic_history.py: 30 GEMM
lines with known steps and regressions fixed a few commits later, and compile-only's counts). The site is built,
commits arrive, it is built again with everything the first build kept; a second clone builds the same final
history from nothing. Their change points and drift verdicts must be the same, the second build of the first clone
must read only the new commits' files, and the pages must stay within their size limits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import synthetic_history as synthetic

from ci.history.asv_results.ledger import Ledger
from ci.history.branch import results_branch
from ci.history.branch.results_branch import ResultsBranch

REPO = Path(__file__).resolve().parents[1]
SPEC = synthetic.Spec(commits=240, seed=4, bumps_per_line=1, bump_length=(5, 10), drift_sd=0.0, commit_noise=0.002)


def _clone(where: Path) -> Path:
    subprocess.run(["git", "clone", "--quiet", "--no-local", "--branch", "main", str(REPO), str(where)], check=True)
    subprocess.run(["git", "-C", str(where), "remote", "remove", "origin"], check=True)
    # The checkout's working tree (what is being tested, committed or not) over the clone's files.
    for relative in subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "ci", "harness", "asv_bench", "kernels", "docs/data"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split():
        source = REPO / relative
        if source.is_file():
            target = where / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    return where


def _publish(clone: Path, report: Path) -> dict:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ci.history.publish",
            "--local-branch",
            "--out",
            str(clone / "site"),
            "--page-window",
            "100",
            "--asv-window",
            "150",
            "--json",
            str(report),
        ],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONPATH": str(clone)},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(report.read_text())


def _answers(report: dict) -> tuple[list, list]:
    changes = sorted(
        (c["machine"], c["benchmark"], c["first_after"], round(c["change"]["relative_change"], 9))
        for m in report["machines"]
        for c in m["change_points"]
    )
    drifts = sorted(
        (d["machine"], d["benchmark"], d["newest"], d["failed"]) for m in report["machines"] for d in m["drift"]
    )
    return changes, drifts


@pytest.mark.slow
def test_a_new_commit_costs_its_own_files_and_the_answers_equal_a_build_from_nothing(tmp_path):
    grown = _clone(tmp_path / "grown")
    truth, held = synthetic.make_history(grown, SPEC, hold_back=3)
    first = _publish(grown, tmp_path / "first.json")
    assert first["files"]["read"] == 2 * (SPEC.commits - 3) and first["commits"] == SPEC.commits - 3
    for _ in held:  # three merges, each publishing
        again = _publish(grown, tmp_path / "again.json")
    assert again["files"] == {"read": 2, "reused": 2 * (SPEC.commits - 1)}, again[
        "files"
    ]  # the newest commit's two files
    assert again["commits"] == SPEC.commits

    fresh = _clone(tmp_path / "fresh")
    subprocess.run(
        [
            "git",
            "-C",
            str(fresh),
            "fetch",
            "--quiet",
            "--update-head-ok",
            str(grown),
            "main:main",
            f"{synthetic.BRANCH}:{synthetic.BRANCH}",
        ],
        check=True,
    )
    scratch = _publish(fresh, tmp_path / "scratch.json")
    assert scratch["files"]["reused"] == 0
    assert _answers(again) == _answers(scratch)

    # What was put in is found: every bump's two edges on most lines (a few land near another step).
    found = {(c["benchmark"], c["first_after"]) for m in again["machines"] for c in m["change_points"]}
    position = {sha: i for i, sha in enumerate(truth.commits)}
    hits = total = 0
    for key, line in truth.lines.items():
        edges = [e for start, end, _ in line.bumps for e in (start, end)]
        total += len(edges)
        hits += sum(any(b == key and abs(position[c] - e) <= 2 for b, c in found) for e in edges)
    assert hits >= 0.9 * total, f"{hits} of {total} bump edges found"

    site = grown / "site"
    assert json.loads((site / "site.json").read_text())["results_commit"] == truth.results_tip
    sizes = {p.relative_to(site).as_posix(): p.stat().st_size for p in site.rglob("*") if p.is_file()}
    assert max(sizes.values()) < 5e6, max(sizes.items(), key=lambda item: item[1])
    assert "kernels/triton_dot_scaled-all.html" in sizes and "kernels/triton_dot_scaled.html" in sizes
    page = (site / "kernels" / "triton_dot_scaled.html").read_text()
    assert truth.results_tip[:12] in page and "The newest 100 of 240 commits" in page
    index = (site / "index.html").read_text()
    assert "mxfp4-site-stamp" in index and truth.results_tip[:12] in index


def test_the_branch_import_reads_only_what_changed(tmp_path):
    clone = _clone(tmp_path / "clone")
    synthetic.make_history(clone, synthetic.Spec(commits=12, seed=1))
    branch = ResultsBranch(clone, None)
    results = tmp_path / "results"
    reads = []
    original = branch.blob
    branch.blob = lambda sha: reads.append(sha) or original(sha)
    tip = branch.local_tip()
    assert results_branch.import_from_branch(branch, tip, results, (), Ledger(results)) == 12 * 3 + 3
    first = len(reads)
    assert results_branch.import_from_branch(branch, tip, results, (), Ledger(results)) == 0
    assert len(reads) == first, "an unchanged branch read again"
    # The commit step offers only what differs from the branch (nothing here; one file after a local change).
    on_branch = branch.tree(tip, "results/")
    assert results_branch.machine_files(results, SPEC.gpu_machine, (), Ledger(results), on_branch) == {}
    changed = sorted((results / SPEC.gpu_machine).glob("*.records"))[0]
    changed.write_text(changed.read_text().replace('"job":"synthetic"', '"job":"later"', 1))
    offered = results_branch.machine_files(results, SPEC.gpu_machine, (), Ledger(results), on_branch)
    assert list(offered) == [f"results/{SPEC.gpu_machine}/{changed.name}"]


def test_the_main_jobs_results_and_the_sites_mirror_keep_their_summaries_apart(tmp_path):
    from ci.history.asv_results import store

    asv = tmp_path / ".asv"
    assert store.default_path(asv / "results") != store.default_path(asv / "site-results")
    assert store.default_path(asv / "results").parent == asv  # beside the folder, never inside (asv reads *.json there)


def test_asvs_pages_show_a_bounded_window_whatever_the_history(tmp_path):
    """asv writes each graph with every commit it shows (~0.7 KB a commit in the GPU timings' file): the window is
    bounded so that no file of the site passes 5 MB at any history length (issue 39); the kernel pages hold the rest."""
    from ci.common.options import OptionsError
    from ci.history import publish
    from ci.history.messages import HarnessError
    from ci.history.site import asv_window

    for bad in ("0", str(asv_window.MAX_WINDOW + 1)):
        with pytest.raises(OptionsError, match=f"expected 1 to {asv_window.MAX_WINDOW}"):
            publish.COMMAND.checked(["--local", "--asv-window", bad])
    assert (
        publish.COMMAND.checked(["--local", "--asv-window", str(asv_window.MAX_WINDOW)]).asv_window
        == asv_window.MAX_WINDOW
    )
    too_many = [f"{i:040x}" for i in range(asv_window.MAX_WINDOW + 1)]
    with pytest.raises(HarnessError, match=f"at most {asv_window.MAX_WINDOW}"):
        asv_window.publish(tmp_path / "results", tmp_path / "view", tmp_path / "html", too_many, REPO, "stamp")
    assert not (tmp_path / "view").exists()  # refused before any work
