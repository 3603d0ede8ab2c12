"""Register budget gate: a change must not grow any resource it has not budgeted on purpose.

    python -m ci.budget                      # HEAD vs merge-base with origin/main (or main)
    python -m ci.budget --base main --kernel flydsl_gfx950_4wave
    python -m ci.budget --working-tree       # your uncommitted edits vs the base
    python -m ci.budget --update-budget      # also write the tightened entries (ratchet)
    python -m ci.budget --json gate.json     # machine-readable verdict

How it works: HEAD (or ``--head``) and the merge-base of HEAD with ``--base`` are
each checked out in a temporary ``git worktree``, and this checkout's ``python -m
ci.budget.resources --json`` runs on each one's kernels (ci.common.commit_tree), so every commit
compiles *its own* kernels (without a GPU: Triton for sm_90/gfx950, FlyDSL for
gfx950) and one parser reads both. Then, per compile target
(kernel/arch/config), the head is compared with the base and with the committed
budget ``ci/register_budget.json`` (read from the head).

Compared, each with the base AND with the budget entry (``max_<field>``, or
``min_occupancy``): registers (total VGPRs per lane on gfx950, of 512; registers
per thread on sm_90, of 255), arch_vgpr, agpr, sgpr, shared_bytes (LDS / shared
memory per workgroup), occupancy (waves/SIMD or warps/SM: lower is worse),
accvgpr_copies and accvgpr_copies_in_loop (v_accvgpr_read/write/mov on gfx950;
n/a on sm_90); and with the base only: the spill and scratch counters.

A target FAILS when
  * it spills or uses scratch (AMD VGPR/SGPR spills, private segment, dynamic
    stack; NVIDIA spill stores/loads, stack frame, local memory) -- never budgetable;
  * its LDS / shared memory exceeds the hardware limit (gfx950: 160 KiB; sm_90:
    227 KiB per block) or it cannot launch (occupancy 0);
  * a field is worse than its budget entry by more than the field's tolerance;
  * a field is worse than at the base by more than its tolerance plus what this
    change's budget edit loosened for that field. Each field of the head's entry
    is compared with the base's entry: a loosened limit (``max_sgpr`` 68 -> 70)
    raises that field's allowance vs the base by exactly the loosening (2);
    tightened and unchanged fields exempt nothing, so tightening one field never
    excuses another. Where the base had the target but no entry for it, the
    base's measured numbers stand in for one; a new entry is accepted as a whole
    only for a target the base did not have;
  * a tolerance would cover a growth that lowers the occupancy the resource
    alone allows (e.g. SGPRs 99 -> 101 on gfx950: 8 -> 7 waves/SIMD) -- only a
    budget edit accepts a lost occupancy step;
  * it is in the base or the budget but no longer compiles / is gone at head
    (deleting its budget entry in the same change marks a removal as intended);
  * it has no budget entry (the gate prints the entry to add).
Every use of a tolerance or of a budget edit is printed as a note: nothing grows silently.

Tolerances (``default_tolerances`` in the budget file, each with its reason there;
a target may override one: ``"tolerance": {"sgpr": 4}``), in the field's unit:
  registers: 0 -- gfx950 allocates the 512-VGPR file in granules of 8 with
    occupancy steps at 64/72/80/96/128/168/256 total VGPRs; the FlyDSL kernel
    holds 408-418 (1 wave/SIMD) and its headroom is what the next optimization
    spends; growth inside a granule is free today but PRs add up to a granule.
    sm_90 allocates per warp in units of 256 (8 per thread) up to 255; the Triton
    configs sit at 194-250, 5 registers from where ptxas spills.
  arch_vgpr: 0 -- 256 addressable arch VGPRs; a value kept live across the K
    loop (+4) or accumulators leaving the AGPRs shows here first.
  agpr: 0 -- 256 AGPRs, part of the 512 total; new AGPR use outside the pinned
    accumulators is LLVM parking arch VGPRs there.
  sgpr: 2 -- on gfx950 SGPRs cost occupancy only above 100 (GFX9 rule: <=80 -> 10,
    <=88 -> 9, <=100 -> 8, else 7 waves, and gfx950 runs at most 8 waves/SIMD);
    the allocator trades VGPRs for an SGPR pair when it reschedules (4 fewer
    VGPRs for 1 more SGPR). 2 is one 64-bit scalar: it passes with a note; 3 or
    more fails (68 -> 71), and so does any growth crossing the step at 100.
  shared_bytes: 0 -- set by the code (tile x stages), so it never jitters.
    gfx950: 160 KiB per CU (the FlyDSL kernel's 128 KiB fits 1 workgroup per CU,
    2 need <= 80 KiB); sm_90: 227 KiB per block, 228 KiB per SM.
  occupancy: 0 -- already counted in whole steps; a lost wave/warp is never noise.
  accvgpr_copies: 0 -- deterministic for a source and compiler; the FlyDSL default
    config's 512 are its accumulators' zero-fill and read-out outside the loop.
  accvgpr_copies_in_loop: 0 -- run every K step: spill-like traffic (default
    config 0, intrinsic_acc 132 with its arch VGPRs full).
  vgpr_spills, sgpr_spills, spill_store_bytes, spill_load_bytes, scratch_bytes,
    dynamic_stack: 0, fixed -- must be 0 anyway.

Ratchet: when a passing target measures below its entry (after any reduction),
the gate prints the tightened entry to paste, and ``--update-budget`` writes it
into the budget file (atomically) -- it only ever lowers a max / raises
``min_occupancy``, and only for targets that passed.

Base: an explicit ``--base`` that does not resolve, or has no common ancestor
with the head, is an error (exit 2; in a shallow clone the message says how to
deepen it: ``git fetch --unshallow`` or ``git fetch --deepen=N origin <branch>:refs/remotes/origin/<branch>``). With no ``--base``, a missing origin/main and main is an error under
CI (``CI=true`` or ``GITHUB_ACTIONS=true``); elsewhere the head is checked
against the budget only, and the report says "no base: ... checked against
budget only" -- as it does on main itself (the merge-base is HEAD). Without
``--working-tree`` the gate checks a commit, and names every uncommitted file it
leaves out in a WARNING line. Selectors (``--kernel``/``--arch``/``--config``)
that match no target are an error.

Raising a budget is an explicit, reviewed edit of ci/register_budget.json; when the
gate fails it prints the entries that would accept the measured numbers.

Output: a head-vs-base table on stdout, progress on stderr, Markdown in
$GITHUB_STEP_SUMMARY when set, ``--json PATH`` (written atomically; after a harness
error it holds ``{"verdict": "error", "exit_code": 2, "error": ...}`` when it can be
written, so the PR comment can say why the gate stopped). A base that cannot be
measured at all (its kernels do not import) leaves every target new: checked against
the budget only.
"""

from __future__ import annotations

import argparse

from ci.budget.budget_file import BUDGET_PATH
from ci.budget.options import GateOptions
from ci.budget.report import GATE_SCHEMA
from ci.common.command import Command
from ci.common.options import add_arch, add_commits, add_json, add_selection, step_summary_value


def _arguments(parser: argparse.ArgumentParser) -> None:
    add_commits(parser)
    parser.add_argument("--budget", metavar="PATH", help=f"budget file to use (default: {BUDGET_PATH} of the head)")
    parser.add_argument("--update-budget", action="store_true",
                        help=f"write the tightened entries of passing targets into --budget or the working tree's {BUDGET_PATH} (only ever tightens)")
    add_selection(parser)
    add_arch(parser, None)
    add_json(parser)


def _options(args: argparse.Namespace) -> GateOptions:
    options = GateOptions.checked(
        head=args.head or "HEAD", base=args.base, working_tree=args.working_tree, budget=args.budget,
        update_budget=args.update_budget, kernel=args.kernel, arch=args.arch, config=args.config,
        repo=args.repo, json=args.json,
    )
    step_summary_value()
    return options


def _run(options: GateOptions) -> int:
    from ci.budget.run import run  # after the options: --help and a bad option need no compiler stack

    return run(options)


COMMAND = Command("python -m ci.budget", __doc__ or "", _arguments, _options, _run,
                  {0: "pass", 1: "the gate failed (a target over its budget or its base, a spill, a target gone)"},
                  error_fields={"schema": GATE_SCHEMA})


def main(argv: list[str] | None = None) -> int:
    return COMMAND.main(argv)
