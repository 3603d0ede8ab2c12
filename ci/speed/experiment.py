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
``--replay`` format (ci.speed.modes.experiment_record):

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
from pathlib import Path
from typing import Sequence

from ci.common import gitutil
from ci.speed.modes import experiment_record
from ci.speed.rounds import Benchmark, Side, measure_round, rotating_order, survey_side
from harness.report import check_writable, write_json_atomic


def log(message: str) -> None:
    print(f"speed_experiment: {message}", file=sys.stderr, flush=True)


def _parse_sides(texts: Sequence[str]) -> list[tuple[str, str]]:
    sides = []
    for text in texts:
        name, sep, ref = text.partition("=")
        if not sep or not name or not ref:
            raise SystemExit(f"speed_experiment: --side {text!r}: expected NAME=REF")
        sides.append((name, ref))
    names = [n for n, _ in sides]
    if len(sides) < 2 or len(set(names)) != len(names):
        raise SystemExit(f"speed_experiment: need at least two --side with distinct names, got {names}")
    return sides


def _budget(texts: Sequence[str]) -> dict[str, float]:
    overrides = {}
    for text in texts:
        field, sep, value = text.partition("=")
        if not sep:
            raise SystemExit(f"speed_experiment: --timing {text!r}: expected FIELD=VALUE")
        overrides[field] = float(value)
    return overrides


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ci.speed.experiment", description=__doc__.split("\n\n")[0])
    parser.add_argument("--side", action="append", required=True, metavar="NAME=REF", help="a side (repeatable, >= 2)")
    parser.add_argument("--repo", default=".", help="the git repository holding the refs")
    parser.add_argument("--kernel", action="append", default=[], required=True)
    parser.add_argument("--config", action="append", default=[])
    parser.add_argument("--shape", action="append", default=[], required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--rounds", type=int, default=10_000, help="at most this many rounds")
    parser.add_argument("--seconds", type=float, required=True, help="start no round after this many seconds")
    parser.add_argument("--timing", action="append", default=[], metavar="FIELD=VALUE", help="TimingBudget override")
    parser.add_argument("--json", required=True, help="the record (rewritten after every round)")
    args = parser.parse_args(argv)
    sides_refs = _parse_sides(args.side)
    overrides = _budget(args.timing)
    check_writable(args.json, "--json")
    started = time.monotonic()

    repo = gitutil.open_repo(args.repo)
    with ExitStack() as stack:
        # One worktree per side, also for two sides of one commit: an A/A pair is two checkouts.
        sides = [Side(name, stack.enter_context(gitutil.checkout(repo, gitutil.resolve_commit(repo, ref))))
                 for name, ref in sides_refs]
        benchmarks: list[Benchmark] = []
        for side in sides:
            survey = survey_side(side, device=args.device, kernels=args.kernel, configs=args.config,
                                 shapes=args.shape, log=log)
            bad = [c for c in survey.get("correctness", []) if c.get("status") not in ("pass", "n/a")]
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
        for index in range(args.rounds):
            if time.monotonic() - started > args.seconds:
                break
            order = rotating_order([s.name for s in sides], index)
            record = measure_round(sides, order, benchmarks, device=args.device, round_index=index, budget=overrides)
            rounds.append(record.to_json())
            walls = ", ".join(f"{p.side} {p.wall_s:.1f} s" for p in record.processes)
            log(f"round {index + 1}: {walls}; {time.monotonic() - started:.0f} s")
            write_json_atomic(args.json, experiment_record(
                rounds, benchmarks, device=args.device,
                note=f"sides {dict(sides_refs)}; timing overrides {overrides}",
            ))
    log(f"{len(rounds)} rounds in {time.monotonic() - started:.0f} s -> {Path(args.json)}")
    return 0 if rounds else 2


if __name__ == "__main__":
    sys.exit(main())
