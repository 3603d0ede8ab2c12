"""Compile every kernel the registry can build without a GPU and report its resources.

    python -m ci.budget.resources                        # table of every compile target
    python -m ci.budget.resources --kernel triton_dot_scaled --arch sm_90
    python -m ci.budget.resources --json results/resources.json
    python -m ci.budget.resources --kernel flydsl_gfx950_4wave --isa-dir out/   # also keep each ISA/PTX

A compile target is (kernel, arch, config): every config of every registered
kernel, for each arch its ``compile_archs`` lists. The kernel compiles itself
(``Kernel.compile_only``: the code under test); harness.resources reads the
compiler's output (the one parser and resource model, also used by the asv
resource history and the budget gate).
For each: registers (total VGPRs on gfx950, registers per thread on sm_90), arch
VGPRs / AGPRs / SGPRs, spills and scratch, shared memory / LDS, occupancy, MFMA
count. Progress goes to stderr, the table to stdout, JSON (written atomically) to
``--json``. The budget gate (ci.budget.gate) runs this command inside a checkout
of each commit it compares, so the JSON layout (ci.budget.compiling's ``SCHEMA``) is
append-only.
"""

from __future__ import annotations

import argparse
import sys

from ci.budget.options import ResourcesOptions
from ci.common.command import Command
from ci.common.options import add_arch, add_json, add_selection


def _arguments(parser: argparse.ArgumentParser) -> None:
    add_selection(parser)
    add_arch(parser, None)
    add_json(parser, "the results")
    parser.add_argument("--isa-dir", metavar="DIR", help="also keep each target's assembly (ISA / PTX / SASS) here")
    parser.add_argument("--list", action="store_true", help="list the compile targets and exit without compiling")
    parser.add_argument(
        "--allow-empty",
        action="store_true",
        help="no target matching --kernel/--arch/--config is not an error (the budget gate measures old commits "
        "with it)",
    )


def _options(args: argparse.Namespace) -> ResourcesOptions:  # checked before minutes of compiling, not after
    return ResourcesOptions.checked(kernel=args.kernel, arch=args.arch, config=args.config, json=args.json,
                                    isa_dir=args.isa_dir, list_only=args.list, allow_empty=args.allow_empty)


def _run(options: ResourcesOptions) -> int:
    from ci.budget.compiling import run

    return run(options)


COMMAND = Command("python -m ci.budget.resources", __doc__ or "", _arguments, _options, _run,
                  {0: "every target compiled", 1: "a target failed to compile (its error is in the table and JSON)"})


def main(argv: list[str] | None = None) -> int:
    return COMMAND.main(argv)


if __name__ == "__main__":
    sys.exit(main())
