"""Register budget gate, ``python -m ci.budget``: a change must not grow any resource it has not budgeted on purpose.

    python -m ci.budget                      # HEAD vs merge-base with origin/main (or main)
    python -m ci.budget --working-tree       # your uncommitted edits vs the base
    python -m ci.budget --update-budget      # also write the tightened entries (ratchet)
    python -m ci.budget --json gate.json     # machine-readable verdict

Each side compiles its own kernels in a temporary worktree (no GPU); per target the head is compared
with the base and with ``ci/register_budget.json``. What fails, the tolerances, the ratchet and the
base rules: docs/BUDGET_GATE.md. Table on stdout, progress on stderr, Markdown in the step summary,
``--json`` written atomically (also after an error). Exit: 0 pass, 1 gate failed, 2 harness error,
130/143 after SIGINT/SIGTERM (children stopped, worktrees removed).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable

from ci.budget.budget_file import BUDGET_PATH
from ci.budget.errors import HarnessError
from ci.budget.options import GateOptions
from ci.budget.report import write_error_json
from ci.common.errors import WriteError
from ci.common.gitutil import GitError
from ci.common.options import (
    OptionsError,
    add_arch,
    add_commits,
    add_json,
    add_selection,
    add_traceback,
    step_summary_value,
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ci.budget",
        description=__doc__.split("\n\n", 1)[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_commits(parser)
    parser.add_argument("--budget", metavar="PATH", help=f"budget file to use (default: {BUDGET_PATH} of the head)")
    parser.add_argument("--update-budget", action="store_true",
                        help="write the tightened entries of passing targets into --budget or the working tree's "
                        f"{BUDGET_PATH} (only ever tightens)")
    add_selection(parser)
    add_arch(parser, None)
    add_json(parser)
    add_traceback(parser)
    return parser


def main(argv: Iterable[str] | None = None) -> int:
    args = _parser().parse_args(None if argv is None else list(argv))
    try:
        options = GateOptions.checked(
            head=args.head or "HEAD", base=args.base, working_tree=args.working_tree, budget=args.budget,
            update_budget=args.update_budget, kernel=args.kernel, arch=args.arch, config=args.config,
            repo=args.repo, json=args.json, traceback=args.traceback,
        )
        step_summary_value()
    except OptionsError as exc:
        print(f"budget_gate: error: {exc}", file=sys.stderr)
        write_error_json(args.json, f"error: {exc}")
        return 2
    from ci.budget.run import run  # after the options: --help and a bad option need no compiler stack
    from ci.common import interrupts

    interrupts.install()
    try:
        return run(options)
    except interrupts.Interrupted as exc:  # the worktrees and temporary folders are gone by now (their `with`s)
        print(interrupts.interrupted_line("budget_gate", exc), file=sys.stderr)
        return interrupts.exit_code(exc)
    except Exception as exc:
        if options.traceback:
            raise
        known = isinstance(exc, (HarnessError, WriteError, GitError))
        kind = "error" if known else f"internal error ({type(exc).__name__})"
        print(f"budget_gate: {kind}: {exc}", file=sys.stderr)
        if not isinstance(exc, WriteError):  # what was written (or its fallback) is not replaced by an error record
            write_error_json(options.json, f"{kind}: {exc}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
