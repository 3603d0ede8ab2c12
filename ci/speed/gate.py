"""PR speed gate: is the head slower than its base, per (kernel, config, shape), with confidence?

    python -m ci.speed --base origin/main                      # HEAD vs its merge-base with origin/main
    python -m ci.speed --base main --kernel triton_dot_scaled --shape square_m08192_n08192_k08192
    python -m ci.speed --base main --working-tree              # your uncommitted edits vs the base
    python -m ci.speed --calibrate --json cal.json             # A/A rounds: noise, thresholds to paste
    python -m ci.speed --replay verdict.json --decisions 10    # disjoint decisions from recorded rounds

How: the head and the merge-base of head and --base are checked out as git
worktrees. Each side's kernels run under THIS checkout's harness in child
processes (ci.common.commit_tree, ci.speed.child), so both are measured one way.
0. Before any GPU time, each side's speed fingerprints for the runner's arch
   (ci.speed.fingerprints, or the CPU job's --changes file): a (kernel, config)
   whose code is identical at base and head is "unchanged (identical code)",
   a pass, not surveyed or measured (--measure-identical measures it anyway).
   When nothing selected differs, no child touches the GPU: exit 0 at once.
1. Correctness first: per side, each selected (kernel, config) is run once at a
   small shape and judged by ci.common.correctness.check_kernel (the survey, asked
   of the side's warm worker, ci.speed.worker). A wrong result at head fails the
   gate and that kernel gets no speed number; a kernel that raises at head is a
   harness error; a wrong or raising base is reported only (its benchmarks "new").
2. Rounds, the sides' order rotating (A B, B A, ...): one warm worker per side
   and GPU (ci.speed.warm; replaced every --restart-every rounds) times every
   benchmark still undecided, the sides of one benchmark back to back, with
   harness.timing, checking the timed output at the benchmark's shape; every
   sample is kept. --engine fresh: a fresh process per side and round instead.
3. A round is excluded when either side was throttled (a slowdown reason), ran
   below the clock floor, never became steady, or found the GPU busy.
4. Per benchmark, harness.paired decides on the head/base TFLOPS ratios of the
   usable rounds (warm engine: mean log ratio, Student-t intervals, looks at 5, 7,
   10, 14, 20 rounds; fresh: Hodges-Lehmann, exact signed-rank interval):
   regression / improvement / no change / inconclusive against the band
   [1 - t, 1 + t], t from ci/speed_thresholds.json (default 1%). Higher is better.
   An unchanged head fails anywhere in the PR with probability <= --pr-alpha; a
   benchmark slower by t or more is called "no change" with probability <= --miss-alpha.
   Measuring stops when every benchmark is decided, stopped at the threshold's
   edge, or the round budget or --max-minutes is spent -- or, unless
   --all-verdicts, once the PR has failed (a regression decided or a wrong result
   at head): the status is known, the undecided benchmarks say so.

Defaults: on a GPU every registered kernel that runs there, every config, the
five harness.shapes.BENCHMARK_SHAPES; on a CPU the asv suite's CPU shapes
(Triton/FlyDSL are not timed on a CPU: asv_bench.common.CPU_EXCLUDED_BACKENDS).

Exit: 0 pass (no regression, no wrong result; inconclusive benchmarks are listed
with a warning and do not fail unless --fail-on-inconclusive), 1 a regression or
a wrong result at head, 2 harness error (bad ref, selector matching nothing,
malformed thresholds, a kernel raising at head, a child process dying); 130/143
after SIGINT/SIGTERM (children stopped, worktrees and temporary folders removed).
Output: Markdown on stdout and in $GITHUB_STEP_SUMMARY, progress on stderr,
--json (every raw measurement; replayable), --plot (PNG). docs/SPEED_GATE.md.
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable, NoReturn, Sequence

from ci.common.options import OptionsError, add_json, add_max_minutes, add_timing, step_summary_value
from ci.speed.arch import ARCH_CHOICES
from ci.speed.exclusion import DEFAULT_CLOCK_FLOOR_FRACTION
from ci.speed.options import DEFAULT_MAX_MINUTES, Mode, SpeedOptions, speed_options
from ci.speed.thresholds import THRESHOLDS_PATH
from ci.speed.verdict import CALIBRATION_PATH
from harness.gpu_state import SLOWDOWN_REASONS
from harness.paired.sequential import DEFAULT_PLAN, WARM_PLAN


class _OneLineParser(argparse.ArgumentParser):
    """A bad option is one line on stderr, as every other harness error of the gate (exit 2)."""

    def error(self, message: str) -> NoReturn:
        print(f"speed_gate: error: {message} (python -m ci.speed --help)", file=sys.stderr)
        sys.exit(2)


def _parser() -> argparse.ArgumentParser:
    doc = __doc__ or ""
    p = _OneLineParser(prog="python -m ci.speed", description=doc.split("\n\n", 1)[0],
                       epilog=doc.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_argument_group("what to compare")
    g.add_argument("--base", metavar="REF", help="compare with the merge-base of the head and REF (default: origin/main, else main)")
    g.add_argument("--head", metavar="REF", help="the commit to gate (default: HEAD)")
    g.add_argument("--working-tree", action="store_true", help="gate the current files, uncommitted edits included, as the head")
    g.add_argument("--repo", metavar="DIR", default=".", help="the git repository (default: the current directory)")
    g.add_argument("--kernel", action="append", default=[], metavar="NAME", help="only this kernel (repeatable; * and ? match)")
    g.add_argument("--config", action="append", default=[], metavar="NAME", help="only this config of the kernels (repeatable; * and ? match)")
    g.add_argument("--shape", action="append", default=[], metavar="NAME|MxNxK", help="only this shape: a harness.shapes name or MxNxK (repeatable)")
    g.add_argument("--device", choices=("auto", "cpu", "cuda"), help="where to run (default auto: the GPU if torch sees one)")
    g = p.add_argument_group("what to skip: identical code (ci.speed.unchanged)")
    g.add_argument("--arch", choices=ARCH_CHOICES, help="the arch whose code is fingerprinted (default auto: cpu on a CPU run, "
                                                        "else the GPU's, read through amdsmi/NVML without torch)")
    g.add_argument("--changes", metavar="PATH", help="decide from this python -m ci.speed.changes --json file (of the same "
                                                     "base and head) instead of fingerprinting here")
    g.add_argument("--measure-identical", action="store_true", help="measure benchmarks whose code is identical at base and head too")
    g = p.add_argument_group("statistics and thresholds")
    g.add_argument("--thresholds", metavar="PATH", help=f"thresholds file (default: the head's {THRESHOLDS_PATH})")
    g.add_argument("--calibration", metavar="PATH", help=f"a --calibrate JSON for the resolvable effects (default: the head's {CALIBRATION_PATH} if present)")
    g.add_argument("--min-rounds", type=int, metavar="N", help=f"usable rounds at the first look (default {WARM_PLAN.min_rounds}; fresh engine {DEFAULT_PLAN.min_rounds})")
    g.add_argument("--max-rounds", type=int, metavar="N", help=f"usable rounds at the last look (default {WARM_PLAN.max_rounds}; fresh engine {DEFAULT_PLAN.max_rounds})")
    g.add_argument("--looks", type=int, metavar="K", help=f"number of looks from min to max rounds (default {WARM_PLAN.look_points}; fresh engine {DEFAULT_PLAN.looks})")
    g.add_argument("--alpha", type=float, metavar="A", help="per-benchmark family-wise error over the looks (default: --pr-alpha shared by the gated benchmarks; fresh engine 0.01 each)")
    g.add_argument("--pr-alpha", type=float, metavar="A",
                   help="chance that an unchanged head fails anywhere in the PR, shared by the gated benchmarks "
                        "(Bonferroni; default 0.01; the warm engine's t plan; --alpha sets a per-benchmark alpha instead)")
    g.add_argument("--miss-alpha", type=float, metavar="A",
                   help="chance that a benchmark slower by its threshold or more is called 'no change', per benchmark "
                        f"(the warm engine's t plan; default {WARM_PLAN.miss_alpha}, raised to the plan's alpha if below it)")
    g.add_argument("--round-budget", type=int, metavar="N", help="most rounds attempted, excluded ones included (default: 1.5 x max rounds)")
    add_max_minutes(g, DEFAULT_MAX_MINUTES, "start no round after M minutes; undecided benchmarks are then inconclusive "
                                            "(under the GPU job's 120-minute limit)")
    g.add_argument("--rounds", type=int, metavar="N", help="measure exactly N rounds of every benchmark, no early stop (a record to replay; --calibrate: default 16)")
    g.add_argument("--fail-on-inconclusive", action="store_true", help="exit 1 when a benchmark is inconclusive (default: exit 0 with a warning)")
    g.add_argument("--all-verdicts", action="store_true",
                   help="measure on after the PR has failed (a regression decided, a wrong result at head) until every "
                        "benchmark has its verdict (default: no round starts once the PR's status is known)")
    g = p.add_argument_group("measurement")
    add_timing(g)
    g.add_argument("--engine", choices=("warm", "fresh"),
                   help="warm (default): one long-lived worker per side and GPU, timed on request, replaced every "
                        "--restart-every rounds; fresh: a fresh process per side and round (the engine before issue 21)")
    g.add_argument("--restart-every", type=int, metavar="N", help="with the warm engine: new worker processes every N rounds (default 4)")
    g.add_argument("--gpus", metavar="all|N|LIST", help="GPUs to spread the benchmarks over, base and head of one "
                   "benchmark always on one GPU (default all visible; N: the first N; LIST: 0,2)")
    g.add_argument("--clock-floor-mhz", type=float, metavar="MHZ",
                   help=f"exclude rounds with an SM clock below this (default {DEFAULT_CLOCK_FLOOR_FRACTION * 100:.0f}%% of the card's max SM clock; 0: no floor)")
    g.add_argument("--allow-throttle", action="append", default=[], metavar="REASON",
                   help=f"do not exclude rounds for this throttle reason (repeatable; one of {', '.join(sorted(SLOWDOWN_REASONS))})")
    g = p.add_argument_group("modes and output")
    g.add_argument("--calibrate", action="store_true", help="A/A: rounds of the head against itself; prints noise, suggested thresholds, resolvable effects")
    g.add_argument("--replay", metavar="JSON", help="re-decide from a recorded --json file (no GPU), with its plan/thresholds or the ones given")
    g.add_argument("--sides", metavar="BASE,HEAD", help="with --replay: the two recorded sides to pair (default base,head)")
    g.add_argument("--decisions", type=int, metavar="N", help="with --replay: take N decisions from the record and print verdict rates")
    how = g.add_mutually_exclusive_group()
    how.add_argument("--disjoint", dest="resampled", action="store_false", default=None,
                     help="with --decisions: consume rounds in time order, no round in two decisions (default)")
    how.add_argument("--resampled", dest="resampled", action="store_true", default=None,
                     help="with --decisions: every decision reshuffles the whole record (overlapping)")
    g.add_argument("--seed", type=int, help="with --resampled: the shuffle seed (default 0)")
    add_json(g, "the verdict and every raw measurement")
    g.add_argument("--plot", metavar="PATH", help="write a PNG of the per-round ratios, intervals and bands")
    g.add_argument("--traceback", action="store_true", help="show the Python traceback of a harness error")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    given = vars(_parser().parse_args(None if argv is None else list(argv)))
    try:
        options = speed_options(given, command=sys.argv[1:] if argv is None else argv)
        step_summary_value()
    except OptionsError as exc:  # before any worktree, survey or round
        return _harness_error(f"error: {exc}", given["json"])
    from ci.common import interrupts

    interrupts.install()
    try:
        return run(options)
    except interrupts.Interrupted as exc:  # the worktrees and temporary folders are gone by now (their `with`s)
        message = interrupts.interrupted_line("speed_gate", exc)
        _harness_error(message.split(": ", 1)[1], options.json)
        return interrupts.exit_code(exc)


def run(options: SpeedOptions) -> int:
    """Run the mode asked for; a harness error is one line on stderr (and the --json record) and exit 2."""
    from ci.speed import modes

    runner: Callable[[SpeedOptions], int] = {Mode.GATE: modes.run_gate, Mode.CALIBRATE: modes.run_calibrate,
                                             Mode.REPLAY: modes.run_replay}[options.mode]
    from ci.common.interrupts import Interrupted

    try:
        return runner(options)
    except (KeyboardInterrupt, Interrupted):
        raise
    except Exception as exc:
        if options.traceback:
            raise
        from ci.common.commit_tree import NotAKernelsTree
        from ci.common.gitutil import GitError
        from ci.speed.rounds import ChildFailed
        from ci.speed.run import GateError
        from ci.speed.selection import SelectionError
        from ci.speed.thresholds import ThresholdsError
        from ci.speed.unchanged import ChangesFileError
        from ci.speed.verdict import RecordError

        known = (GateError, GitError, ChildFailed, SelectionError, ThresholdsError, RecordError, NotAKernelsTree, ChangesFileError)
        kind = "error" if isinstance(exc, known) else f"internal error ({type(exc).__name__})"
        return _harness_error(f"{kind}: {exc}", options.json)


def _harness_error(message: str, json_path: object) -> int:
    from ci.speed.outputs import write_error_json

    print(f"speed_gate: {message}", file=sys.stderr)
    write_error_json(json_path, message)  # type: ignore[arg-type]
    return 2


if __name__ == "__main__":
    sys.exit(main())
