"""PR speed gate: is the head slower than its base, per (kernel, config, shape), with confidence?

    python -m ci.speed --base origin/main                      # HEAD vs its merge-base with origin/main
    python -m ci.speed --base main --kernel triton_dot_scaled --shape square_m08192_n08192_k08192
    python -m ci.speed --base main --working-tree              # your uncommitted edits vs the base
    python -m ci.speed --replay verdict.json --judge --json judged.json   # a PR's rounds decided by this checkout

--plan KEY=VALUE (repeatable) sets the statistics and the rounds:
{plan_keys}

Exit: the table below. An inconclusive benchmark is exit 3 under the zone rule (the default), passes with a
warning under --plan rule=band, and is exit 1 under either with --fail-on-inconclusive. Markdown on stdout and in
$GITHUB_STEP_SUMMARY, progress on stderr, --json (every raw measurement; replayable), --plot (PNG).
How it measures and decides: docs/SPEED_GATE.md, "The command".
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from functools import partial

from ci.common.command import Command
from ci.common.options import (
    add_arch,
    add_commits,
    add_json,
    add_max_minutes,
    add_repo,
    add_selection,
    add_timing,
    step_summary_value,
)
from ci.speed.decide.verdict import CALIBRATION_PATH, GATE_SCHEMA
from ci.speed.options import CALIBRATION_MAX_MINUTES, DEFAULT_MAX_MINUTES, PLAN_KEYS, Mode, SpeedOptions, speed_options
from ci.speed.profiles import RUNNERS_PATH

CALIBRATE_DOC = """A/A rounds of the head against itself: the runner's noise model; the rounds each benchmark needs.

    python -m ci.speed.calibrate --write                       # this runner's model (ci/speed_runners.json)
    python -m ci.speed.calibrate --noise ci/speed_noise_h200.json --thresholds ci/speed_thresholds_h200.json --write
    python -m ci.speed.calibrate --refit --aa-records aa.json --noise ci/speed_noise_h200.json --write   # no GPU

The gate's warm workers measure rounds of two worktrees of one commit (a restart every 2
rounds, at most 16, none that would end after --max-minutes); the model is fitted from
them and the runs already in the model file. The thresholds file is policy and is only
read: per benchmark the report gives the rounds and GPU seconds by which the gate decides
any effect at its threshold, restarting workers every 1, 2 or 4 rounds, and names those
that cannot be decided by the last look (docs/SPEED_GATE.md, "Calibrating a new runner").
Without --write the model is printed, not written.

--plan KEY=VALUE (repeatable; rounds, restart_every are the calibration's own):
{plan_keys}
"""


def _doc(doc: str) -> str:
    return doc.replace("{plan_keys}", "\n".join(f"  {k}: {v.means}" for k, v in PLAN_KEYS.items()))


def _add_device(g: argparse._ArgumentGroup) -> None:
    g.add_argument(
        "--device",
        metavar="auto|cpu|cuda[:LIST]",
        help="where to run (default auto: the GPU if torch sees one); cuda:0,2: spread the benchmarks over "
        "these GPUs (default every visible one), base and head of a benchmark always on one",
    )


def _add_plan(g: argparse._ArgumentGroup) -> None:
    g.add_argument(
        "--plan",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a knob of the statistics or the rounds (repeatable; the keys are listed below)",
    )


def _gate_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("what to compare")
    add_commits(g, head="the commit to gate")
    add_selection(g, shape=True)
    _add_device(g)
    g = p.add_argument_group("what to skip: identical code (ci.speed.scope.unchanged)")
    add_arch(
        g,
        None,
        "auto: cpu on a CPU run, else the runner's GPU, read through amdsmi/NVML; one arch here, or "
        "cpu: launch paths only",
    )
    g.add_argument(
        "--changes",
        metavar="PATH",
        help="decide from this python -m ci.speed.changes --json file (of the "
        "same base and head) instead of fingerprinting here",
    )
    g.add_argument(
        "--measure-identical",
        action="store_true",
        help="measure benchmarks whose code is identical at base and head too",
    )
    g = p.add_argument_group("how it decides")
    g.add_argument(
        "--thresholds",
        metavar="PATH",
        help=f"thresholds file (default: the head's file of the runner's profile, {RUNNERS_PATH})",
    )
    g.add_argument(
        "--calibration",
        metavar="PATH",
        help=f"a calibration JSON for the t plan's resolvable effects "
        f"(default: the head's {CALIBRATION_PATH} if present)",
    )
    g.add_argument(
        "--noise",
        metavar="PATH",
        help=f"the runner's noise model (default: the head's file of the runner's profile, {RUNNERS_PATH}, if present; "
        "--plan noise=off ignores it)",
    )
    _add_plan(g)
    add_max_minutes(
        g,
        DEFAULT_MAX_MINUTES,
        "start no round after M minutes; undecided benchmarks are then inconclusive "
        "(under the GPU job's 120-minute limit)",
    )
    g.add_argument(
        "--fail-on-inconclusive",
        action="store_true",
        help="exit 1 when a benchmark is inconclusive (default: exit 3 under the zone rule; a warning, exit 0, "
        "under --plan rule=band)",
    )
    g.add_argument(
        "--all-verdicts",
        action="store_true",
        help="measure on after the PR has failed (a regression decided, a wrong result at head) until "
        "every benchmark has its verdict (default: no round starts once the PR's status is known)",
    )
    add_timing(g)
    g = p.add_argument_group("modes and output")
    g.add_argument(
        "--replay",
        metavar="JSON",
        help="decide again from a recorded --json file (no GPU), with its plan "
        "and thresholds or the ones given; a record of a retired plan is refused",
    )
    g.add_argument(
        "--decisions",
        type=int,
        metavar="N",
        help="with --replay: take N disjoint decisions from the "
        "record's rounds, in time order, and print verdict rates",
    )
    g.add_argument(
        "--judge",
        action="store_true",
        help="with --replay: decide the record's raw rounds with THIS checkout's plan, exclusion rule, "
        "thresholds and noise model (those of the record's runner, by its profile in ci/speed_runners.json), "
        "never the record's; nothing it decided is kept, and a benchmark undecided at the end of the "
        "record is inconclusive and fails (the PR comment's judge: docs/SPEED_GATE.md)",
    )
    add_json(g, "the verdict and every raw measurement")
    g.add_argument("--plot", metavar="PATH", help="write a PNG of the per-round ratios, intervals and bands")


def _calibrate_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("what to measure")
    g.add_argument("--head", metavar="REF", help="the commit measured against itself (default: HEAD)")
    g.add_argument("--working-tree", action="store_true", help="the current files, uncommitted edits included, twice")
    add_repo(g)
    add_selection(g, shape=True)
    _add_device(g)
    g = p.add_argument_group("how it decides")
    g.add_argument(
        "--thresholds",
        metavar="PATH",
        help=f"thresholds file, only read (default: the head's file of the runner's profile, {RUNNERS_PATH})",
    )
    g.add_argument(
        "--noise",
        metavar="PATH",
        help=f"the runner's noise model, refreshed (default: its profile's, {RUNNERS_PATH})",
    )
    _add_plan(g)
    add_max_minutes(g, CALIBRATION_MAX_MINUTES, "start no round after M minutes, and none that would end after them")
    add_timing(g)
    g = p.add_argument_group("calibration and output")
    g.add_argument(
        "--write",
        action="store_true",
        help="write the fitted noise model (--noise, default the runner's profile's path)",
    )
    g.add_argument(
        "--refit",
        action="store_true",
        help="measure nothing; refit the model from the runs already in it and --aa-records",
    )
    g.add_argument(
        "--aa-records",
        nargs="+",
        metavar="JSON",
        help="gate or calibration records whose rounds are A/A (identical code, --measure-identical) to fit from too",
    )
    g.add_argument(
        "--assume-aa",
        metavar="WHY",
        help="count --aa-records whose code differed as A/A, for this reason (kept in the model)",
    )
    add_json(g, "the calibration record (every round)")


def _options(args: argparse.Namespace, calibrate: bool) -> SpeedOptions:
    """The parsed values as one options object; the calibration's completed with the defaults of the gate's parser."""
    given = vars(args)
    if calibrate:
        defaults = argparse.ArgumentParser()
        _gate_arguments(defaults)
        given = {**vars(defaults.parse_args([])), **given}
    options = speed_options({**given, "calibrate": calibrate}, command=args.command_line)
    step_summary_value()  # before any worktree, survey or round
    return options


def run(options: SpeedOptions) -> int:
    """Run the mode asked for."""
    from ci.speed import modes

    runners = {Mode.GATE: modes.run_gate, Mode.CALIBRATE: modes.run_calibrate, Mode.REPLAY: modes.run_replay}
    return runners[options.mode](options)


GATE = Command(
    "python -m ci.speed",
    _doc(__doc__ or ""),
    _gate_arguments,
    partial(_options, calibrate=False),
    run,
    {
        0: "pass: no regression, no wrong result (an inconclusive benchmark under --plan rule=band is a warning)",
        1: "a regression or a wrong result at head (or, with --fail-on-inconclusive, an inconclusive benchmark)",
        3: "inconclusive under the zone rule: a benchmark left undecided (a failed measurement, or --max-minutes "
        "or the round budget ran out first: the report says which); re-run",
    },
    error_fields={"schema": GATE_SCHEMA, "mode": "error"},
    stopped="child processes stopped, temporary files removed; the complete rounds, if any had ended, decided and "
    "recorded in --json (marked interrupted)",
)
CALIBRATE = Command(
    "python -m ci.speed.calibrate",
    _doc(CALIBRATE_DOC),
    _calibrate_arguments,
    partial(_options, calibrate=True),
    run,
    {0: "done", 1: "a wrong result at head"},
    error_fields={"schema": GATE_SCHEMA, "mode": "error"},
)


def main(argv: Sequence[str] | None = None, calibrate: bool = False) -> int:
    """``python -m ci.speed`` (the gate, a replay) or, with ``calibrate``, ``python -m ci.speed.calibrate``."""
    return (CALIBRATE if calibrate else GATE).main(argv)
