"""The main job's options: one frozen value, built and checked whole by its front (ci.history.main_job).

Everything below the front (ci.history.run and what it calls) takes this object;
none of it parses ``argv`` or re-checks an option.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

LAUNCH_METHODS = ("auto", "spawn", "forkserver")
TRACKS = ("all", "gpu", "cpu")  # ci.history.measure.tracks says what each selects
DEFAULT_RESULTS_REMOTE = "origin"


@dataclass(frozen=True)
class HistoryOptions:
    commits: int = 3  # the last N first-parent commits of ``branch``, >= 1
    branch: str = "main"
    # asv -b regexes, each compiled; whether each selects a benchmark is checked after the fingerprint
    bench: tuple[str, ...] = ()
    repeat_head: int = 0  # runs of the newest commit beyond the first, >= 0 (its spread)
    machine: str | None = None  # None: <host>-<gpu model>, from the fingerprint
    launch_method: str = "auto"  # one of LAUNCH_METHODS
    wheelhouse: Path | None = None  # an existing directory, absolute
    show_stderr: bool = False
    push_results: bool = False
    results_remote: str = DEFAULT_RESULTS_REMOTE  # set by hand only together with push_results
    publish: bool = True
    json: Path | None = None  # checked writable
    tracks: str = "all"  # one of TRACKS: the GPU runner runs "gpu", a CPU job "cpu", a developer "all"
    remeasure: bool = False  # measure even a commit whose code is identical to a measured one's (the schedule)
    # --drop: regexes of point ids ('<machine>/<commit8>-<env>/<benchmark>(<params>)') that may leave the
    # results branch; every other recorded point must stay (ci.history.asv_results.result_points). Each compiled.
    drop: tuple[str, ...] = ()


@dataclass(frozen=True)
class SiteOptions:
    """``python -m ci.history.publish``: the published history, built from the results (ci.history.site.site_build)."""

    out: Path  # the site's folder (created); every file of it is the build's
    results_dir: Path  # where the results are (brought from the branch into it with from_branch)
    from_branch: bool = True  # bring every machine's results from the results branch first (the Pages job)
    results_remote: str | None = DEFAULT_RESULTS_REMOTE  # None: the local branch
    # newest commits on asv's own pages, 1 to asv_window.MAX_WINDOW (the site's files stay bounded)
    asv_window: int = 1000
    page_window: int = 200  # newest commits on a kernel page (the whole history: <kernel>-all.html)
    site_url: str | None = None  # where the site is served (links in the JSON)
    json: Path | None = None  # the history checks and the cost, for machines (schema mxfp4-history-changes/1)
    issues: Path | None = None  # the issue filer's record (mxfp4-regression-issues/2): each change point's issue shown
