"""Every target the registry compiles without a GPU, and its resources: ``python -m ci.budget.resources``.

    python -m ci.budget.resources                        # table of every compile target
    python -m ci.budget.resources --kernel flydsl_gfx950_4wave --isa-dir out/   # also keep each ISA/PTX

A target is (kernel, arch, config); the kernel compiles itself and harness.resources reads the output.
The table goes to stdout, progress to stderr, ``--json`` (atomic, layout ``compiling.SCHEMA``,
append-only: the budget gate reads it from every commit). Exit: 0 all compiled, 1 a target failed to
compile, 2 harness error. Details: docs/BUDGET_GATE.md.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable

from ci.budget.compiling import run
from ci.budget.options import ResourcesOptions
from ci.common.options import OptionsError, add_arch, add_json, add_selection


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ci.budget.resources",
        description=(
            "Compile every (kernel, arch, config) the kernel registry can build without a GPU "
            "(Triton for sm_90/gfx950, FlyDSL for gfx950) and report registers, spills/scratch, "
            "shared memory/LDS, occupancy and MFMA count."
        ),
        epilog="Exit codes: 0 all compiled, 1 some target failed to compile, 2 harness error.",
    )
    add_selection(parser)
    add_arch(parser, None)
    add_json(parser, "the results")
    parser.add_argument("--isa-dir", metavar="DIR", help="also keep each target's assembly (ISA / PTX / SASS) here")
    parser.add_argument("--list", action="store_true", help="list the compile targets and exit without compiling")
    parser.add_argument(
        "--allow-empty",
        action="store_true",
        help="no target matching --kernel/--arch/--config is not an error "
        "(the budget gate measures old commits with it)",
    )
    return parser


def main(argv: Iterable[str] | None = None) -> int:
    args = _parser().parse_args(None if argv is None else list(argv))
    try:
        options = ResourcesOptions.checked(kernel=args.kernel, arch=args.arch, config=args.config, json=args.json,
                                           isa_dir=args.isa_dir, list_only=args.list, allow_empty=args.allow_empty)
    except OptionsError as exc:  # before minutes of compiling, not after
        print(f"ci.budget.resources: error: {exc}", file=sys.stderr)
        return 2
    return run(options)


if __name__ == "__main__":
    sys.exit(main())
