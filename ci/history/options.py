"""The main job's options: one frozen value, built and checked whole by its front (ci.history.main_job).

Everything below the front (ci.history.run and what it calls) takes this object;
none of it parses ``argv`` or re-checks an option.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

LAUNCH_METHODS = ("auto", "spawn", "forkserver")
TRACKS = ("all", "gpu", "cpu")  # ci.history.tracks says what each selects
DEFAULT_RESULTS_REMOTE = "origin"


@dataclass(frozen=True)
class HistoryOptions:
    commits: int = 3  # the last N first-parent commits of ``branch``, >= 1
    branch: str = "main"
    bench: tuple[str, ...] = ()  # asv -b regexes, each compiled; whether each selects a benchmark is checked after the fingerprint
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
    # results branch; every other recorded point must stay (ci.history.result_points). Each compiled.
    drop: tuple[str, ...] = ()
