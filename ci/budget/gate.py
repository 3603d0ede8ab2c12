"""Register budget gate, ``python -m ci.budget``: a change must not grow any resource it has not budgeted on purpose.

    python -m ci.budget                      # HEAD vs merge-base with origin/main (or main)
    python -m ci.budget --working-tree       # your uncommitted edits vs the base
    python -m ci.budget --update-budget      # also write the tightened entries (ratchet)
    python -m ci.budget --json gate.json     # machine-readable verdict

Each side compiles its own kernels in a temporary worktree (no GPU); per target the head is compared
with the base and with ``ci/register_budget.json``. What fails, the tolerances, the ratchet and the
base rules: docs/BUDGET_GATE.md. Table on stdout, progress on stderr, Markdown in the step summary,
``--json`` written atomically (also after an error).
"""

from __future__ import annotations

import argparse

from ci.budget.budget_file import BUDGET_PATH
from ci.budget.options import GateOptions, from_args
from ci.budget.report import GATE_SCHEMA
from ci.common.command import Command
from ci.common.options import add_arch, add_commits, add_json, add_selection, step_summary_value


def _arguments(parser: argparse.ArgumentParser) -> None:
    add_commits(parser)
    parser.add_argument("--budget", metavar="PATH", help=f"budget file to use (default: {BUDGET_PATH} of the head)")
    parser.add_argument(
        "--update-budget",
        action="store_true",
        help="write the tightened entries of passing targets into --budget or the working tree's "
        f"{BUDGET_PATH} (only ever tightens)",
    )
    add_selection(parser)
    add_arch(parser, None)
    add_json(parser)


def _options(args: argparse.Namespace) -> GateOptions:
    options = from_args(GateOptions, args)
    step_summary_value()
    return options


def _run(options: GateOptions) -> int:
    from ci.budget.run import run  # after the options: --help and a bad option need no compiler stack

    return run(options)


COMMAND = Command(
    "python -m ci.budget",
    __doc__ or "",
    _arguments,
    _options,
    _run,
    {0: "pass", 1: "the gate failed (a target over its budget or its base, a spill, a target gone)"},
    error_fields={"schema": GATE_SCHEMA},
)


def main(argv: list[str] | None = None) -> int:
    return COMMAND.main(argv)
