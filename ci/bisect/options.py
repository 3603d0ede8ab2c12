"""Find the commit that made a benchmark slower: bisection with the speed gate (the front of ``python -m ci.bisect``).

    python -m ci.bisect --good A --bad B --benchmark 'kernel[config]/shape' [--json out.json] [-- <speed gate args>]
    python -m ci.bisect --from-change-point REPORT.json [--benchmark ID] [--index N] [--json out.json] \
        [-- <speed gate args>]

``--from-change-point`` takes good, bad and the benchmark from a regression change point of the main job's JSON
report (ci.bisect.change_point); it excludes --good/--bad. Arguments after ``--`` go to every ``python -m ci.speed``
comparison (``--device``, ``--thresholds``, ``--plan max_rounds=30``, ...).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ci.common import gitutil
from ci.common.code_fingerprint import DEFAULT_ARCHS
from ci.common.command import Command
from ci.common.errors import InputError
from ci.common.options import OptionsError, add_arch, add_json, add_repo, arch_value, output_value


@dataclass(frozen=True)
class BisectOptions:
    good: str  # full sha, resolved
    bad: str  # full sha, a first-parent descendant of good
    benchmark: str  # kernel[config]/shape
    kernel: str
    config: str
    shape: str
    archs: tuple[str, ...] = DEFAULT_ARCHS  # the fingerprint's archs: a commit is skipped only when all are identical
    json: Path | None = None
    repo: Path = Path(".")
    gate_args: tuple[str, ...] = ()


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--good", help="a commit measured at the old speed")
    parser.add_argument("--bad", help="a later first-parent commit measured slower")
    parser.add_argument(
        "--from-change-point",
        metavar="REPORT",
        type=Path,
        help="instead of --good/--bad/--benchmark: a regression change point of this main-job JSON "
        "(python -m ci.history --json): good = the last commit before its suspected range, bad = its end",
    )
    parser.add_argument(
        "--index",
        type=int,
        metavar="N",
        help="with --from-change-point: the N-th regression change point (from 1, after --benchmark narrowed them)",
    )
    parser.add_argument(
        "--benchmark",
        metavar="ID",
        help="a benchmark id, not a pattern: the speed gate's kernel[config]/shape (with --from-change-point: "
        "which benchmark's change points; its asv key works too)",
    )
    add_arch(parser, ",".join(DEFAULT_ARCHS))  # a commit is skipped unmeasured only when its code is identical on all
    add_repo(parser)
    add_json(parser, "the bisection (schema mxfp4-bisect/1)")
    parser.add_argument("gate_args", nargs="*", help="after --: arguments for every python -m ci.speed comparison")


def options_from(args: argparse.Namespace) -> BisectOptions:
    from ci.bisect import change_point
    from ci.bisect.measurer import parse_bench

    if args.from_change_point is not None:
        if args.good is not None or args.bad is not None:
            raise OptionsError("--from-change-point takes good and bad from the report: leave out --good and --bad")
        args.good, args.bad, args.benchmark = change_point.choose(args.from_change_point, args.benchmark, args.index)
    else:
        missing = [name for name in ("good", "bad", "benchmark") if getattr(args, name) is None]
        if missing:
            raise OptionsError(f"--{', --'.join(missing)}: required (or --from-change-point REPORT)")
        if args.index is not None:
            raise OptionsError("--index picks a change point: it needs --from-change-point")
    try:
        kernel, config, shape = parse_bench(args.benchmark)
    except ValueError as exc:
        raise OptionsError(f"--benchmark {exc}") from None
    archs = arch_value(args.arch)
    try:
        repo = gitutil.open_repo(args.repo)
        good, bad = gitutil.resolve_commit(repo, args.good, "--good"), gitutil.resolve_commit(repo, args.bad, "--bad")
    except Exception as exc:  # GitError (it names the option) and git's own errors: the commit cannot be used
        raise OptionsError(str(exc) if isinstance(exc, gitutil.GitError) else f"--good/--bad: {exc}") from None
    if good == bad or not repo.is_ancestor(repo.commit(good), repo.commit(bad)):
        raise OptionsError(f"--good {args.good} must be an ancestor of --bad {args.bad}")
    return BisectOptions(
        good,
        bad,
        args.benchmark,
        kernel,
        config,
        shape,
        archs,
        output_value(args.json, "--json"),
        Path(args.repo),
        tuple(args.gate_args),
    )


def first_parent_range(repo_path: Path, good: str, bad: str) -> list[str]:
    """Commits on bad's first-parent line after good, oldest first."""
    repo = gitutil.open_repo(repo_path)
    return repo.git.rev_list("--first-parent", "--reverse", f"{good}..{bad}", "--").split()


def run(
    options: BisectOptions,
    measure=None,
    key=None,
    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
) -> int:
    """Bisect with ``measure`` and ``key`` (default: the speed gate and the code fingerprint); write the outputs."""
    from ci.bisect import engine, measurer
    from ci.common.files import write_json_atomic
    from harness.report import append_step_summary_or_fallback

    measure = measure or measurer.SpeedGateMeasurer(
        options.kernel, options.config, options.shape, options.repo, options.gate_args, log
    )
    key = key or measurer.FingerprintKey(options.repo, options.kernel, options.config, options.archs, log)
    commits = first_parent_range(options.repo, options.good, options.bad)
    if commits[-1:] != [options.bad]:
        raise InputError(f"{options.good[:12]} is not on {options.bad[:12]}'s first-parent line")
    result = engine.bisect(options.good, commits, key, measure, log)
    text = engine.markdown(result, options.benchmark)
    print(text)
    append_step_summary_or_fallback(text, log)
    if options.json is not None:
        write_json_atomic(options.json, {**result.to_json(), "bench": options.benchmark})
    return {engine.Outcome.CULPRIT: 0, engine.Outcome.INCONCLUSIVE: 3}.get(result.outcome, 1)


COMMAND = Command(
    "python -m ci.bisect",
    __doc__ or "",
    _arguments,
    options_from,
    run,
    {0: "a culprit is named", 1: "no regression, or no code change (the step summary says which)", 3: "inconclusive"},
)


def main(argv: Sequence[str] | None = None) -> int:
    return COMMAND.main(argv)
