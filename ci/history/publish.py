"""The published history: build the site from the results branch, off the GPU runner.

    python -m ci.history.publish --out site --json changes.json      # the Pages workflow (every machine's results)
    python -m ci.history.publish --local --out .asv/html             # this checkout's .asv/results, as it is

The steps (each costs what changed since the last build, not the history): docs/HISTORY.md, "site/site_build.py".

Change points and drift are reported, never a failure here: the issue filer and the kernel pages say them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ci.common import options as common_options
from ci.common.command import Command
from ci.common.options import OptionsError
from ci.history.options import DEFAULT_RESULTS_REMOTE, SiteOptions
from ci.history.site import asv_window

REPO_ROOT = Path(__file__).resolve().parents[2]


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", type=Path, default=REPO_ROOT / ".asv" / "html", help="the site's folder (default .asv/html)"
    )
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=None,
        help="results folder (default .asv/results, or .asv/site-results when reading the branch)",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--results-remote",
        default=DEFAULT_RESULTS_REMOTE,
        metavar="REMOTE",
        help=f"git remote whose asv-results branch is read (default {DEFAULT_RESULTS_REMOTE}; "
        "falls back to the local branch)",
    )
    where.add_argument("--local-branch", action="store_true", help="read the local asv-results branch, fetch nothing")
    where.add_argument("--local", action="store_true", help="publish the results folder as it is (no branch)")
    parser.add_argument(
        "--asv-window",
        type=int,
        default=1000,
        metavar="N",
        help=f"newest commits on asv's own pages (default 1000, at most {asv_window.MAX_WINDOW}: asv's "
        "graph data grows with it, the kernel pages hold the whole history)",
    )
    parser.add_argument(
        "--page-window",
        type=int,
        default=200,
        metavar="N",
        help="newest commits shown in detail on a kernel page (default 200)",
    )
    parser.add_argument("--site-url", metavar="URL", help="where the site is served (for the links in --json)")
    parser.add_argument(
        "--issues",
        type=Path,
        metavar="FILE",
        help="the regression-issues workflow's record (schema mxfp4-regression-issues/2): each change point's "
        "issue and its state on the pages; missing or unreadable, the pages say so and the site still builds",
    )
    common_options.add_json(parser, "the change points, drift guard and build cost")


def options_from(args: argparse.Namespace) -> SiteOptions:
    if not 1 <= args.asv_window <= asv_window.MAX_WINDOW or args.page_window < 1:
        raise OptionsError(
            f"--asv-window {args.asv_window} / --page-window {args.page_window}: expected 1 to "
            f"{asv_window.MAX_WINDOW} (asv's graph data grows with every commit it shows: a bounded window "
            "keeps each file of the site under 5 MB; the kernel pages hold the whole history) / >= 1"
        )
    results_dir = args.results_dir or REPO_ROOT / ".asv" / ("results" if args.local else "site-results")
    out = args.out.resolve()
    if out == REPO_ROOT or REPO_ROOT.is_relative_to(out):
        raise OptionsError(f"--out {args.out}: the site's folder is emptied and rewritten; it cannot hold the checkout")
    json_path = common_options.output_value(args.json, "--json")
    return SiteOptions(
        out=out,
        results_dir=results_dir.resolve(),
        from_branch=not args.local,
        results_remote=None if args.local_branch or args.local else args.results_remote,
        asv_window=args.asv_window,
        page_window=args.page_window,
        site_url=args.site_url,
        json=json_path,
        issues=args.issues.resolve() if args.issues else None,
    )


def _run(options: SiteOptions) -> int:
    from ci.history import messages
    from ci.history.site import site_build

    messages.speak_as("publish")  # its lines are publish's, not the main job's (which calls site_build too)
    return site_build.run(options)


COMMAND = Command("python -m ci.history.publish", __doc__ or "", _arguments, options_from, _run, {0: "built"})


def main(argv: Sequence[str] | None = None) -> int:
    return COMMAND.main(argv)


if __name__ == "__main__":
    sys.exit(main())
