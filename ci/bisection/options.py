"""The front of ``python -m ci.bisection``: argparse -> one frozen :class:`BisectOptions`, checked whole, then the run.

    python -m ci.bisection --good A --bad B --bench 'kernel[config]/shape' [--json out.json] [-- <speed gate args>]

Arguments after ``--`` go to every ``python -m ci.speed`` comparison (``--device``, ``--thresholds``,
``--max-rounds``, ...). Exit 0: a culprit is named; 1: inconclusive, no regression, or no code change
(the step summary says which); 2: a harness error (a bad option, a commit that does not resolve, a
comparison the gate could not make).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from ci.common import gitutil
from ci.common.code_fingerprint import DEFAULT_ARCHS
from ci.common.options import OptionsError, add_json, output_value


@dataclass(frozen=True)
class BisectOptions:
    good: str  # full sha, resolved
    bad: str  # full sha, a first-parent descendant of good
    bench: str  # kernel[config]/shape
    kernel: str
    config: str
    shape: str
    archs: tuple[str, ...] = DEFAULT_ARCHS  # the fingerprint's archs: a commit is skipped only when all are identical
    json: Path | None = None
    repo: Path = Path(".")
    gate_args: tuple[str, ...] = ()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ci.bisection",
                                     description="Find the commit that made a benchmark slower: bisection with the speed gate.")
    parser.add_argument("--good", required=True, help="a commit measured at the old speed")
    parser.add_argument("--bad", required=True, help="a later first-parent commit measured slower")
    parser.add_argument("--bench", required=True, metavar="ID", help="the speed gate's benchmark id, kernel[config]/shape")
    parser.add_argument("--arch", default=",".join(DEFAULT_ARCHS), help="fingerprint archs, comma-separated (default %(default)s)")
    parser.add_argument("--repo", default=".", help="the repository (default: the current directory)")
    add_json(parser, "the bisection (schema mxfp4-bisect/1)")
    parser.add_argument("gate_args", nargs="*", help="after --: arguments for every python -m ci.speed comparison")
    return parser


def options_from(argv: Sequence[str] | None) -> BisectOptions:
    from ci.bisection.measurer import parse_bench

    args = build_parser().parse_args(argv)
    try:
        kernel, config, shape = parse_bench(args.bench)
    except ValueError as exc:
        raise OptionsError(f"--bench {exc}") from None
    archs = tuple(a for a in args.arch.split(",") if a)
    if not archs:
        raise OptionsError("--arch: name at least one arch")
    try:
        repo = gitutil.open_repo(args.repo)
        good, bad = gitutil.resolve_commit(repo, args.good), gitutil.resolve_commit(repo, args.bad)
    except Exception as exc:  # GitError and git's own errors: both mean the commit cannot be used
        raise OptionsError(f"--good/--bad: {exc}") from None
    if good == bad or not repo.is_ancestor(good, bad):
        raise OptionsError(f"--good {args.good} must be an ancestor of --bad {args.bad}")
    return BisectOptions(good, bad, args.bench, kernel, config, shape, archs, output_value(args.json, "--json"),
                         Path(args.repo), tuple(args.gate_args))


def first_parent_range(repo_path: Path, good: str, bad: str) -> list[str]:
    """Commits on bad's first-parent line after good, oldest first."""
    repo = gitutil.open_repo(repo_path)
    return repo.git.rev_list("--first-parent", "--reverse", f"{good}..{bad}", "--").split()


def run(options: BisectOptions, measure=None, key=None, log: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> int:
    """Bisect with ``measure`` and ``key`` (default: the speed gate and the code fingerprint); write the outputs."""
    from ci.bisection import engine, measurer, report
    from harness.report import append_step_summary_or_fallback, write_json_atomic

    measure = measure or measurer.SpeedGateMeasurer(options.kernel, options.config, options.shape, options.repo,
                                                    options.gate_args, log)
    key = key or measurer.FingerprintKey(options.repo, options.kernel, options.config, options.archs, log)
    commits = first_parent_range(options.repo, options.good, options.bad)
    if commits[-1:] != [options.bad]:
        log(f"ci.bisection: {options.good[:12]} is not on {options.bad[:12]}'s first-parent line")
        return 2
    try:
        result = engine.bisect(options.good, commits, key, measure, log)
    except measurer.MeasureError as exc:
        log(f"ci.bisection: {exc}")
        return 2
    text = report.markdown(result, options.bench)
    print(text)
    append_step_summary_or_fallback(text, log)
    if options.json is not None:
        write_json_atomic(options.json, {**result.to_json(), "bench": options.bench})
    return 0 if result.outcome is engine.Outcome.CULPRIT else 1


def main(argv: Sequence[str] | None = None) -> int:
    try:
        options = options_from(argv)
    except OptionsError as exc:
        print(f"ci.bisection: {exc}", file=sys.stderr)
        return 2
    return run(options)
