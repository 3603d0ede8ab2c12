"""The published history, from checked options to a site folder (``python -m ci.history.publish``; the main job's
publish).

Steps: results from the branch (through the ledger), summaries (the store), checks (change points and drift),
asv's pages over the newest commits, the kernel pages over the whole history, the stamp (``site.json``). Each
costs what changed since the last build. The site is written into a scratch folder and copied over ``out``
file by file; what the checks found goes to ``--json`` (``mxfp4-history-changes/1``) and the step summary
(docs/HISTORY.md, "site/site_build.py").
"""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
import time
import traceback
from pathlib import Path
from typing import Any

from ci.common.files import append_step_summary_or_fallback, write_json_atomic
from ci.history.asv_results import folder, store
from ci.history.asv_results.ledger import Ledger
from ci.history.branch.results_branch import BRANCH, BranchError, ResultsBranch, import_from_branch
from ci.history.measure import asv_driver
from ci.history.messages import HarnessError, log, log_detail, log_to
from ci.history.options import SiteOptions
from ci.history.site import asv_window, commit_info, issue_links, kernel_page, page_changes
from ci.history.trends import machine_spread, regressions

REPO_ROOT = Path(__file__).resolve().parents[3]
SCHEMA = "mxfp4-history-changes/1"


LOG_FILE = REPO_ROOT / ".asv" / "site.log"  # asv's output, in full


def run(options: SiteOptions) -> int:
    """Build the site; 0 built; a failed build raises (its front: exit 2, one line)."""
    LOG_FILE.parent.mkdir(parents=True, exist_ok=True)
    log_to(LOG_FILE)
    try:
        report = build(options)
    except Exception:
        log_detail(traceback.format_exc())  # the front says it in one line; the log file keeps the whole
        raise
    finally:
        log_to(None)
    markdown = "\n".join(summary_markdown(report))
    print(markdown)
    append_step_summary_or_fallback(markdown, log)
    if options.json is not None:
        write_json_atomic(options.json, report)
        log(f"change points and drift written to {options.json}")
    return 0


def commit_order(repo_root: Path) -> dict[str, int]:
    """asv's revision numbers (asv.plugins.git.get_revisions): every commit by date, oldest first."""
    listing = subprocess.run(
        ["git", "-C", str(repo_root), "rev-list", "--all", "--date-order", "--reverse"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return {commit: i for i, commit in enumerate(listing)}


def _bring_results(options: SiteOptions) -> str | None:
    """The branch's files into the mirror; returns the branch tip they came from."""
    try:
        branch = ResultsBranch(REPO_ROOT, options.results_remote)
        tip = branch.fetch() if options.results_remote else branch.local_tip()
    except BranchError as exc:
        if options.results_remote is None:
            raise
        # No fetch (a private repository after actions/checkout took its token back, an offline machine): what the
        # checkout already has, the local branch or the remote's tracking ref.
        branch = ResultsBranch(REPO_ROOT, None)
        tip = branch.local_tip() or branch.tracking_tip(options.results_remote)
        log(f"warning: {exc}; reading what this checkout has of {BRANCH} ({tip[:12] if tip else 'nothing'})")
    if tip is None:
        raise HarnessError(
            f"no {BRANCH} branch to publish (git fetch {options.results_remote or 'origin'} {BRANCH}, or --local)"
        )
    options.results_dir.mkdir(parents=True, exist_ok=True)
    ledger = Ledger(options.results_dir)
    on_branch = {path.removeprefix("results/") for path in branch.tree(tip, "results/")}
    imported = import_from_branch(branch, tip, options.results_dir, (), ledger)
    gone = [name for name in folder.files(options.results_dir) if name not in on_branch]
    for name in gone:  # the mirror holds what the branch holds: a point dropped there (--drop) leaves here too
        (options.results_dir / name).unlink()
    ledger.forget(gone)
    ledger.save()
    log(f"{BRANCH} at {tip[:12]}: {imported} files brought in or updated, {len(gone)} gone from the branch removed")
    return tip


def build(options: SiteOptions) -> dict[str, Any]:
    started, seconds = time.monotonic(), {}

    def step(name: str, since: float) -> float:
        now = time.monotonic()
        seconds[name] = round(now - since, 2)
        return now

    tip = _bring_results(options) if options.from_branch else None
    mark = step("results", started)
    kept = store.Store(store.default_path(options.results_dir), log, workers=os.cpu_count() or 1)
    try:
        kept.update(options.results_dir)
        commits = kept.commits(commit_order(REPO_ROOT))
        # dates and subjects for the kernel pages' date axis and hover
        info = commit_info.with_git(REPO_ROOT, commit_info.from_dates(kept.dates()))
        mark = step("summaries", mark)
        checks = regressions.store_checks(kept, commits)
        newest = kept.history(commits, only=set(kernel_page.commit_axis(commits)[-regressions.HISTORY_COMMITS :]))
        spread = machine_spread.spread(options.results_dir, newest)
        mark = step("checks", mark)
        when = commit_info.axis_seconds(kernel_page.commit_axis(commits), info)
        pages_data = kernel_page.page_data_from_store(
            kept, commits, page_changes.from_checks(checks), options.page_window, when
        )
        mark = step("kernel pages' data", mark)
    finally:
        parsed, reused = kept.parsed, kept.reused
        kept.close()
    if not commits:
        raise HarnessError(f"no results of a commit of this clone in {options.results_dir}: nothing to publish")
    built_at = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    source = f"asv-results {tip[:12]}" if tip else f"the local results in {options.results_dir}"
    machines = [d.name for d in folder.machine_dirs(options.results_dir) if (d / "machine.json").is_file()]
    stamp = f"Built {built_at} from {source}: {len(commits)} commits, {len(machines)} machines"
    axis = kernel_page.commit_axis(commits)
    window = axis[-options.asv_window :] if options.asv_window else axis
    scratch = options.out.with_name(f".{options.out.name}.building")
    view = options.results_dir.with_name(options.results_dir.name + "-asv-view")
    if asv_window.publish(options.results_dir, view, scratch, window, REPO_ROOT, stamp) != 0:
        raise HarnessError(f"asv publish failed over the newest {len(window)} commits (its output: {LOG_FILE})")
    mark = step("asv pages", mark)
    issues = issue_links.for_site(options.issues, checks)
    log(issues.note if issues.known or options.issues is None else f"warning: {issues.note}")  # none given: a note
    pages = kernel_page.publish_pages(scratch, pages_data, checks, stamp, info, issues)
    mark = step("kernel pages", mark)
    site = {
        "results_commit": tip,
        "built_at": built_at,
        "stamp": stamp,
        "commits": len(commits),
        "machine_names": machines,
        "asv_window": len(window),
        "page_window": options.page_window,
    }
    write_json_atomic(scratch / "site.json", site)
    asv_driver.sync_tree(scratch, options.out)
    shutil.rmtree(scratch, ignore_errors=True)
    step("copy", mark)
    seconds["total"] = round(time.monotonic() - started, 2)
    return {
        "schema": SCHEMA,
        **site,
        "site_url": options.site_url,
        "site": str(options.out),
        "machines": checks,
        "issues": {"known": issues.known, "note": issues.note, "linked": len(issues.links)},
        "machine_spread": spread,
        "kernel_pages": len(pages),
        "files": {"read": parsed, "reused": reused},
        "seconds": seconds,
    }


def summary_markdown(report: dict[str, Any]) -> list[str]:
    lines = [
        f"## The published history: {report['stamp']}",
        "",
        f"- site: {report.get('site_url') or report['site']} (asv's pages: the newest {report['asv_window']} "
        f"commits; kernel pages: the newest {report['page_window']} in detail, the whole history thinned)",
        f"- results files read {report['files']['read']}, reused {report['files']['reused']}; seconds: "
        + ", ".join(f"{k} {v:g}" for k, v in report["seconds"].items()),
        f"- regression issues: {report['issues']['linked']} change points linked; {report['issues']['note']}",
    ]
    for checks in report["machines"]:
        lines += ["", *regressions.history_markdown(checks)]
    return lines + machine_spread.spread_markdown(report["machine_spread"])
