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

Exit: 0 every target compiled; 1 a target failed to compile (its error is in the
table and the JSON); 2 harness error (unknown kernel/arch, registry import error,
compiler output the parser cannot read, unwritable output).
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
