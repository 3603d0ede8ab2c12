"""Which benchmarks a PR can change, decided on a CPU before any GPU time.

    python -m ci.speed.changes --base origin/main                 # head = HEAD
    python -m ci.speed.changes --base HEAD~1 --arch sm_90 --json changes.json

Prints Markdown (also to $GITHUB_STEP_SUMMARY): per benchmark "unchanged (identical code)", "changed: what"
or "measure: reason", each changed compiled code's diff, the GPU seconds the skips save. ``--json`` has
``to_measure``, ``unchanged`` and ``gpu_needed`` (the workflow's switch; ``--github-output`` also appends it
to $GITHUB_OUTPUT). What is compared and why: docs/SPEED_GATE.md, "Identical code is not measured".

Exit: 0 decided (whatever the decision); 2 harness error (bad option, git,
neither side's kernels readable) -- then ``gpu_needed`` is true in the JSON -- or nothing to compare the head
with (no base, or the base is the head), as ``python -m ci.speed`` says on the same input: ``gpu_needed`` false.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ci.common import gitutil
from ci.common.code_fingerprint import DEFAULT_ARCHS
from ci.common.command import Command
from ci.common.errors import HarnessError
from ci.common.files import append_step_summary_or_fallback, write_json_atomic
from ci.common.options import (
    OptionsError,
    add_arch,
    add_commits,
    add_json,
    add_selection,
    arch_value,
    names_value,
    output_value,
)
from ci.speed.scope import summary as changes_report
from ci.speed.scope.dependencies import dependency_changes
from ci.speed.scope.fingerprints import decide, fingerprint_sides


@dataclass(frozen=True)
class Options:
    base: str | None
    head: str
    repo: Path
    archs: tuple[str, ...]
    json: Path | None
    costs: dict[str, float] | None
    kernels: tuple[str, ...] = ()  # only kernels whose names match these patterns (empty: all)
    github_output: Path | None = None  # append gpu_needed=true|false here ($GITHUB_OUTPUT)


def _arguments(parser: argparse.ArgumentParser) -> None:
    add_commits(parser, working_tree=False)
    add_arch(parser, ",".join(DEFAULT_ARCHS))
    add_selection(parser, config=False)
    parser.add_argument(
        "--costs", metavar="PATH", type=Path, help="GPU seconds per benchmark id from a previous gate run (JSON)"
    )
    parser.add_argument(
        "--github-output",
        action="store_true",
        help="append gpu_needed=true|false to the file named by $GITHUB_OUTPUT (a workflow step's outputs)",
    )
    add_json(parser, "the decision")


def options_from_args(args: argparse.Namespace) -> Options:
    costs = None
    if args.costs is not None:
        try:
            costs = changes_report.load_costs(args.costs)
        except (OSError, ValueError) as exc:
            raise OptionsError(f"--costs: {exc}") from None
    github_output = None
    if args.github_output:
        if not os.environ.get("GITHUB_OUTPUT"):
            raise OptionsError("--github-output: $GITHUB_OUTPUT is not set (it is, in a GitHub Actions step)")
        github_output = Path(os.environ["GITHUB_OUTPUT"])
    return Options(
        args.base,
        args.head or "HEAD",
        Path(args.repo),
        arch_value(args.arch),
        output_value(args.json, "--json"),
        costs,
        names_value(args.kernel, "--kernel"),
        github_output,
    )


class NothingToCompare(HarnessError):
    """No base, or the base is the head: the speed gate stops on this input too, so the GPU job is not needed."""

    record_fields = {"gpu_needed": False}  # in the error JSON and $GITHUB_OUTPUT (ci.common.command)


def run(options: Options, log=lambda line: print(line, file=sys.stderr, flush=True)) -> tuple[dict, str]:
    """(JSON data, Markdown) for the options; gitutil.GitError when the commits cannot be read, NothingToCompare
    where ``python -m ci.speed`` stops for the same reason (its ci/speed/modes/measure.py, ``resolve_commits``)."""
    repo = gitutil.open_repo(options.repo)
    head_sha = gitutil.resolve_commit(repo, options.head, "--head")
    base = gitutil.resolve_base(repo, head_sha, options.base)  # as the gate's: a base that is the head is no base
    if base.sha is None:
        raise NothingToCompare(f"nothing to compare the head with: {base.note.split(';')[0]}")
    started = time.perf_counter()
    with ExitStack() as stack:
        head_tree = stack.enter_context(gitutil.checkout(repo, head_sha))
        base_tree = stack.enter_context(gitutil.checkout(repo, base.sha))
        base_fp, head_fp = fingerprint_sides(base_tree, head_tree, options.archs, kernels=options.kernels, log=log)
    data = decide(base.sha, head_sha, base_fp, head_fp, options.costs, started)
    data["dependency_changes"] = dependency_changes(repo, base.sha, head_sha)
    return data, changes_report.markdown(data)


def _decide(options: Options) -> int:
    data, text = run(options)
    print(text)
    append_step_summary_or_fallback(text, lambda line: print(f"ci.speed.changes: {line}", file=sys.stderr))
    if options.json:
        write_json_atomic(options.json, data)  # refused: the runner's one line, and gpu_needed=true (_failed)
    if options.github_output:
        changes_report.append_github_output(data, options.github_output)
    return 2 if data["failures"] and not any(data["by_arch"].values()) else 0


def _failed(args: argparse.Namespace, record: dict[str, Any]) -> None:
    """Whatever stopped the decision, the GPU job runs (gpu_needed=true for the workflow too), unless the gate would
    stop the same way (NothingToCompare: gpu_needed=false)."""
    if getattr(args, "github_output", False) and os.environ.get("GITHUB_OUTPUT"):
        changes_report.append_github_output(record, Path(os.environ["GITHUB_OUTPUT"]))


COMMAND = Command(
    "python -m ci.speed.changes",
    __doc__ or "",
    _arguments,
    options_from_args,
    _decide,
    {0: "decided (whatever the decision)"},
    error_fields={"schema": changes_report.SCHEMA, "gpu_needed": True},
    on_error=_failed,
)


def main(argv: Sequence[str] | None = None) -> int:
    return COMMAND.main(argv)


if __name__ == "__main__":
    sys.exit(main())
