"""Record rounds of N commits side by side on one GPU, for the speed gate's error rates.

    python -m ci.speed.experiment --side base=main --side base-again=main \\
        --side slow-0.5=exp/slow-0p5 --side slow-1.0=exp/slow-1p0 \\
        --kernel triton_dot_scaled --config m128_n128_k128_w8_s3 --shape square_m08192_n08192_k08192 \\
        --seconds 480 --timing rep_ms=200 --json rounds.json

Each round runs one fresh process per side (ci.speed.rounds.measure_round, the
gate's own child protocol and measuring code), the sides' order rotating from
round to round. Every side is checked for correctness first (ci.speed.child
survey). The record is rewritten atomically after every round, so a run cut
short by a time limit keeps every finished round; it is the speed gate's
``--replay`` format (ci.speed.outputs.experiment_record):

    python -m ci.speed --replay rounds.json --sides base,slow-0.5 --decisions 10 --disjoint

This is how the gate's false-alarm and detection rates were measured on a GPU
(docs/SPEED_GATE.md): a GPU's time is scarce, so decisions are replayed through
the gate's own statistics from disjoint sets of recorded rounds.
"""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import ExitStack
from typing import NoReturn, Sequence

from ci.common import gitutil
from ci.common.options import OptionsError, add_json, add_timing
from ci.speed.options import ExperimentOptions, experiment_options
from ci.speed.outputs import experiment_record
from ci.speed.reasons import Check
from ci.speed.rounds import Benchmark, Side, measure_round, rotating_order, survey_request, survey_side
from harness.report import write_json_atomic


def log(message: str) -> None:
    print(f"speed_experiment: {message}", file=sys.stderr, flush=True)


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        log(f"error: {message} (python -m ci.speed.experiment --help)")
        sys.exit(2)


def _parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(prog="python -m ci.speed.experiment", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--side", action="append", required=True, metavar="NAME=REF", help="a side (repeatable, >= 2)")
    parser.add_argument("--repo", default=".", help="the git repository holding the refs")
    parser.add_argument("--kernel", action="append", default=[], required=True)
    parser.add_argument("--config", action="append", default=[])
    parser.add_argument("--shape", action="append", default=[], required=True)
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="cuda")
    parser.add_argument("--rounds", type=int, default=10_000, help="at most this many rounds")
    parser.add_argument("--seconds", type=float, required=True, help="start no round after this many seconds")
    add_timing(parser)
    add_json(parser, "the record (required; rewritten after every round)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    given = vars(_parser().parse_args(None if argv is None else list(argv)))
    try:
        options = experiment_options(given)
    except OptionsError as exc:  # before any worktree or measurement
        log(f"error: {exc}")
        return 2
    return record_experiment(options)


def record_experiment(options: ExperimentOptions) -> int:
    """Survey every side, then rounds until the time or round limit; 0 with a record, 1 a wrong result, 2 no record."""
    started = time.monotonic()
    overrides = options.timing_overrides
    repo = gitutil.open_repo(options.repo)
    with ExitStack() as stack:
        # One worktree per side, also for two sides of one commit: an A/A pair is two checkouts.
        sides = [Side(name, stack.enter_context(gitutil.checkout(repo, gitutil.resolve_commit(repo, ref))))
                 for name, ref in options.sides]
        benchmarks: list[Benchmark] = []
        for side in sides:
            request = survey_request(device=options.device, kernels=options.kernels, configs=options.configs,
                                     shapes=options.shapes)
            survey = survey_side(side, request, log=log)
            bad = [c for c in survey.get("correctness", []) if Check.of(c) not in (Check.PASS, Check.NOT_APPLICABLE)]
            if bad:
                log(f"{side.name}: correctness problems, not timing: {bad}")
                return 1
            found = [Benchmark.from_json(b) for b in survey["benchmarks"] if b["available"]]
            benchmarks = benchmarks or found
            if {b.id for b in found} != {b.id for b in benchmarks}:
                log(f"{side.name} has benchmarks {sorted(b.id for b in found)}, others {sorted(b.id for b in benchmarks)}")
                return 2
        if not benchmarks:
            log("no benchmark selected")
            return 2
        log(f"sides {[s.name for s in sides]}; benchmarks {[b.id for b in benchmarks]}; {time.monotonic() - started:.0f} s")
        rounds = []
        for index in range(options.rounds):
            if time.monotonic() - started > options.seconds:
                break
            order = rotating_order([s.name for s in sides], index)
            record = measure_round(sides, order, benchmarks, device=options.device, round_index=index, budget=overrides)
            rounds.append(record.to_json())
            walls = ", ".join(f"{p.side} {p.wall_s:.1f} s" for p in record.processes)
            log(f"round {index + 1}: {walls}; {time.monotonic() - started:.0f} s")
            write_json_atomic(options.json, experiment_record(
                rounds, benchmarks, device=options.device,
                note=f"sides {dict(options.sides)}; timing overrides {overrides}",
            ))
    log(f"{len(rounds)} rounds in {time.monotonic() - started:.0f} s -> {options.json}")
    return 0 if rounds else 2


if __name__ == "__main__":
    sys.exit(main())
