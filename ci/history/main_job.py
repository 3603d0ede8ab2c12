"""The main job: benchmark the recent history of main with asv, keep it on the results branch, publish the HTML.

    python -m ci.history                                  # last 3 commits of main, publish
    python -m ci.history --commits 1 --push-results       # the history workflow (.github/workflows/history.yml)
    python -m ci.history --commits 1 --tracks gpu --push-results --remeasure   # the scheduled run (drift)

This module is the front (options checked whole); the work is ci.history.run. The steps, the output and
the reasons: docs/HISTORY.md, "The main job".
Exit: 0 recorded (or nothing new); 1 the newest commit failed to build or a benchmark of it failed;
2 the harness failed; 130/143 interrupted.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path

from ci.common import options as common_options
from ci.common.command import Command
from ci.common.errors import WriteError
from ci.common.options import OptionsError
from ci.history import run
from ci.history.branch.results_branch import BRANCH
from ci.history.options import DEFAULT_RESULTS_REMOTE, LAUNCH_METHODS, TRACKS, HistoryOptions

_DEFAULTS = {f.name: f.default for f in fields(HistoryOptions)}


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--commits",
        type=int,
        default=_DEFAULTS["commits"],
        metavar="N",
        help=f"how many recent first-parent commits of the branch (default {_DEFAULTS['commits']})",
    )
    parser.add_argument(
        "--branch",
        default=_DEFAULTS["branch"],
        help=f"branch whose history is benchmarked (default {_DEFAULTS['branch']})",
    )
    parser.add_argument(
        "--bench",
        action="append",
        default=[],
        metavar="REGEX",
        help="asv -b regex (repeatable); each must select a benchmark",
    )
    parser.add_argument(
        "--repeat-head", type=int, default=0, metavar="N", help="run the newest commit N more times: spread"
    )
    common_options.add_machine(parser)
    parser.add_argument(
        "--launch-method",
        choices=LAUNCH_METHODS,
        default=_DEFAULTS["launch_method"],
        help="asv's benchmark processes: spawn (a fresh interpreter each) or forkserver (fork from one that has "
        "imported the suite; each makes its own device context). auto: forkserver (saves ~5-10 s of start-up per "
        "benchmark; measured on an H200: the full GPU suite of one commit in 99 s)",
    )
    parser.add_argument(
        "--wheelhouse", type=Path, metavar="DIR", help="directory of wheels for asv's environments (offline machines)"
    )
    parser.add_argument("--show-stderr", action="store_true", help="print every benchmark's output (timing summaries)")
    parser.add_argument(
        "--push-results", action="store_true", help=f"push the {BRANCH} branch to --results-remote (retrying on a race)"
    )
    parser.add_argument(
        "--results-remote",
        metavar="REMOTE",
        help=f"git remote --push-results pushes the {BRANCH} branch to (default {DEFAULT_RESULTS_REMOTE}; "
        "only with --push-results: without it the branch is read from "
        f"{DEFAULT_RESULTS_REMOTE} when that exists)",
    )
    parser.add_argument("--no-publish", action="store_true", help="skip asv publish")
    parser.add_argument(
        "--tracks",
        choices=TRACKS,
        default=_DEFAULTS["tracks"],
        help="gpu: the GEMM timings of this machine (GemmOnGpu; GemmOnCpu without a GPU); cpu: the "
        "compile-only resource counts, recorded under the asv machine 'compile-only'; all: both "
        f"(default {_DEFAULTS['tracks']}; the GPU runner's workflow runs gpu, its CPU job cpu)",
    )
    parser.add_argument(
        "--remeasure",
        action="store_true",
        help="measure the newest commit even when its code is identical to a measured commit's "
        "(the scheduled run: drift of the driver, firmware or machine still shows)",
    )
    parser.add_argument(
        "--drop",
        action="append",
        default=[],
        metavar="PATTERN",
        help=f"let the recorded points this regex finds in '<machine>/<commit8>-<env>/<benchmark>(<params>)' "
        f"leave {BRANCH} (repeatable); without it, a commit that would lose a recorded point exits 2",
    )
    common_options.add_json(parser, "the report")


def options_from(args: argparse.Namespace) -> HistoryOptions:
    """The parsed arguments as one checked value; an :class:`OptionsError` names the first bad option."""
    if args.results_remote is not None and not args.push_results:
        raise OptionsError(
            f"--results-remote {args.results_remote!r} is only used with --push-results (without it "
            f"the results branch is read from {DEFAULT_RESULTS_REMOTE}); add --push-results or drop it"
        )
    if args.results_remote == "":
        raise OptionsError("--results-remote must name a git remote (got an empty name)")
    if args.repeat_head < 0:
        raise OptionsError(f"--repeat-head must be >= 0 (got {args.repeat_head})")
    common_options.step_summary_value()
    _check_results_folder()
    if args.wheelhouse is not None and not args.wheelhouse.is_dir():
        raise OptionsError(f"--wheelhouse {args.wheelhouse}: not a directory")
    return HistoryOptions(
        commits=common_options.positive_int_value(args.commits, "--commits"),
        branch=_branch_value(args.branch, args.results_remote or DEFAULT_RESULTS_REMOTE),
        bench=tuple(_regex_value(pattern, "--bench") for pattern in args.bench),
        repeat_head=args.repeat_head,
        machine=common_options.machine_value(args.machine),
        launch_method=args.launch_method,
        wheelhouse=args.wheelhouse.resolve() if args.wheelhouse is not None else None,
        show_stderr=args.show_stderr,
        push_results=args.push_results,
        results_remote=args.results_remote or DEFAULT_RESULTS_REMOTE,
        publish=not args.no_publish,
        json=common_options.output_value(args.json, "--json"),
        tracks=args.tracks,
        remeasure=args.remeasure,
        drop=tuple(_regex_value(pattern, "--drop") for pattern in args.drop),
    )


def _branch_value(branch: str, remote: str) -> str:
    """--branch: names a commit here, or a branch ``remote`` has (the job creates the local branch); checked before
    any step, not found two steps in as git's own text."""
    from ci.common import gitutil

    repo = gitutil.open_repo(run.REPO_ROOT)
    if not (gitutil.resolves(repo, branch) or gitutil.resolves(repo, f"refs/remotes/{remote}/{branch}")):
        raise OptionsError(
            f"--branch {branch!r}: no such branch in {gitutil.work_tree(repo)}, nor {remote}/{branch} "
            f"(git fetch {remote} {branch}, or name a branch this clone has)"
        )
    return branch


def _regex_value(pattern: str, option: str) -> str:
    """--bench, --drop: a regular expression; --drop's not empty (it would let every point go)."""
    if option == "--drop" and not pattern.strip():
        raise OptionsError(
            "--drop must name the points to remove (got an empty pattern, which would match every point)"
        )
    try:
        re.compile(pattern)
    except re.error as exc:
        raise OptionsError(f"{option} {pattern!r} is not a regular expression: {exc}") from None
    return pattern


def _check_results_folder() -> None:
    """The job writes its lock, asv's results and the records under .asv before anything else: a folder it
    cannot write is one line naming it (exit 2), not a traceback minutes later."""
    from harness.report import check_writable

    try:
        check_writable(run.REPO_ROOT / ".asv" / "main_job.json", "the results folder (.asv):", create=True)
    except OSError as exc:
        raise WriteError(str(exc)) from None


def _run(options: HistoryOptions) -> int:
    try:
        return run.run(options)
    except OSError as exc:
        where = f" {exc.filename}" if getattr(exc, "filename", None) else ""
        raise WriteError(f"cannot write{where}: {exc.strerror or exc}") from exc


COMMAND = Command(
    "python -m ci.history",
    __doc__ or "",
    _arguments,
    options_from,
    _run,
    {
        0: "recorded (or nothing new: every commit already measured)",
        1: "the newest commit failed to build or a benchmark of it failed (older commits' failures are "
        "listed: they are history)",
    },
    # Not "no result": the measurements asv finished stay in .asv/results (the main job's own line says what else).
    stopped="asv and the job's processes stopped, temporary files removed; finished measurements kept in .asv/results",
)


def main(argv: Sequence[str] | None = None) -> int:
    return COMMAND.main(argv)
