"""Every target the registry compiles without a GPU, and its resources: ``python -m ci.budget.resources``.

    python -m ci.budget.resources                        # table of every compile target
    python -m ci.budget.resources --kernel flydsl_gfx950_4wave --isa-dir out/   # also keep each ISA/PTX

A target is (kernel, arch, config); the kernel compiles itself and harness.resources reads the output. The table goes to
stdout, progress to stderr, ``--json`` (atomic, layout ``compiling.SCHEMA``, append-only: the budget gate reads it from
every commit). Details: docs/BUDGET_GATE.md.
"""

from __future__ import annotations

import argparse
import sys

from ci.budget.options import ResourcesOptions, from_args
from ci.common.command import Command
from ci.common.options import add_arch, add_json, add_selection


def _arguments(parser: argparse.ArgumentParser) -> None:
    add_selection(parser)
    add_arch(parser, None)
    add_json(parser, "the results")
    parser.add_argument("--isa-dir", metavar="DIR", help="also keep each target's assembly (ISA / PTX / SASS) here")
    parser.add_argument("--list", dest="list_only", action="store_true", help="list the compile targets, compile none")
    parser.add_argument(
        "--allow-empty",
        action="store_true",
        help="no target matching --kernel/--arch/--config is not an error "
        "(the budget gate measures old commits with it)",
    )


def _options(args: argparse.Namespace) -> ResourcesOptions:  # checked before minutes of compiling, not after
    return from_args(ResourcesOptions, args)


def _run(options: ResourcesOptions) -> int:
    from ci.budget.compiling import run

    return run(options)


COMMAND = Command(
    "python -m ci.budget.resources",
    __doc__ or "",
    _arguments,
    _options,
    _run,
    {0: "every target compiled", 1: "a target failed to compile (its error is in the table and JSON)"},
)


def main(argv: list[str] | None = None) -> int:
    return COMMAND.main(argv)


if __name__ == "__main__":
    sys.exit(main())
