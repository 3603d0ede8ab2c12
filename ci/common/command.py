"""One shape for every ``python -m ci.X`` front (asv's ``Command`` classes and its one ``main`` in spirit): a tool
declares its options, its checked options object and ``run(options) -> int``; :meth:`Command.main` owns the exit codes,
``--traceback``, the one error line, the signals and the error JSON (README.md, "Commands with one front").
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from ci.common import interrupts
from ci.common.errors import HarnessError, UsageError, WriteError
from harness.errors import MeasurementError
from kernels.errors import KernelError

HARNESS_ERROR = "harness error: bad input, a missing or unwritable file, a tool that failed, or a crash (one line)"
STOPPED = "child processes stopped, temporary files removed, no result"
USER_ERRORS = (HarnessError, MeasurementError, KernelError)  # what a user causes: ci/'s root, harness/', kernels/'


class Parser(argparse.ArgumentParser):
    """A bad argument is a :class:`UsageError` (the runner's one line), not argparse's own exit."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} ({self.prog} --help)")


@dataclass(frozen=True)
class Command:
    prog: str  # "python -m ci.speed": the error prefix and the usage line
    doc: str  # its first paragraph is the description, the rest the epilog of --help
    arguments: Callable[[argparse.ArgumentParser], None]
    options: Callable[[argparse.Namespace], Any]  # the checked options object; a bad value raises HarnessError
    run: Callable[[Any], int]
    exits: Mapping[int, str]  # the tool's own meanings of 0, 1 and 3; 2 and 130/143 are the runner's
    # The tool's schema in the error JSON at --json; None: its --json is state that an error must not overwrite.
    error_fields: Mapping[str, Any] | None = field(default_factory=dict)
    on_error: Callable[[argparse.Namespace, dict[str, Any]], None] | None = None  # besides the error JSON
    stopped: str = STOPPED  # what an interrupt leaves, in the help and the last line (the main job keeps results)

    def __post_init__(self) -> None:  # python -m ci.budget.gate, the module of a front, would do nothing and exit 0
        ran = f"python -m {spec.name}" if (spec := getattr(sys.modules["__main__"], "__spec__", None)) else sys.argv[0]
        if self.arguments.__module__ == "__main__" and ran != self.prog:
            print(f"{ran}: error: not a command; run {self.prog}", file=sys.stderr)
            raise SystemExit(2)

    def parser(self) -> argparse.ArgumentParser:
        description, _, epilog = self.doc.strip().partition("\n\n")
        codes = {**self.exits, 2: HARNESS_ERROR, 130: f"interrupted by SIGINT (143: SIGTERM): {self.stopped}"}
        section = "exit codes:\n" + "\n".join(f"  {code:<4} {codes[code]}" for code in sorted(codes))
        parser = Parser(
            prog=self.prog,
            description=description,
            epilog=f"{epilog}\n\n{section}".strip(),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        self.arguments(parser)
        traceback_help = "on an error, also print the Python traceback"
        parser.add_argument("--traceback", action="store_true", help=traceback_help)
        subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        for sub in (p for a in subcommands for p in a.choices.values()):  # not resetting a --traceback given before
            sub.add_argument("--traceback", action="store_true", default=argparse.SUPPRESS, help=traceback_help)
        return parser

    def main(self, argv: Sequence[str] | None = None) -> int:
        """Parse, check, run; every way out is one of the exit codes above, with one line on stderr if not 0/1/3."""
        try:  # the signals' one mechanism for the run; the previous handlers are put back after
            before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
            interrupts.install()
        except ValueError:  # not the main thread (a test's worker thread): the caller's handlers stay
            before = {}
        argv = list(sys.argv[1:] if argv is None else argv)
        args = argparse.Namespace(traceback="--traceback" in argv)
        parser = self.parser()
        try:
            args = self._parse(parser, argv)
            return _work(self, args)
        except USER_ERRORS as exc:  # UsageError too: one line, as every other error (--help has the usage)
            # A refused write: what was written (or its fallback) is not replaced by an error record.
            fields = getattr(exc, "record_fields", {})  # what the error itself says of the run (ci.speed.changes)
            return self._stop(args, f"error: {exc}", 2, keep_json=isinstance(exc, WriteError), fields=fields)
        except KeyboardInterrupt as exc:  # interrupts.Interrupted too (SIGTERM)
            signum = getattr(exc, "signum", signal.SIGINT)
            return self._stop(args, f"interrupted by {signal.Signals(signum).name}: {self.stopped}", 128 + signum)
        except Exception as exc:  # a defect, never "passed", "failed" or "inconclusive"
            hint = "" if args.traceback else "; run again with --traceback for the Python traceback"
            return self._stop(args, f"error: internal error ({type(exc).__name__}: {exc}){hint}", 2)
        finally:
            for signum, handler in before.items():
                signal.signal(signum, handler)

    def checked(self, argv: Sequence[str]) -> Any:
        """The options object of ``argv``, as the front builds it (a bad argument raises UsageError): for tests."""
        return self.options(self._parse(self.parser(), argv))

    @staticmethod
    def _parse(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
        args = parser.parse_args(list(argv))
        args.command_line = tuple(argv)  # as given, for a tool's record
        return args

    def _stop(
        self,
        args: argparse.Namespace,
        message: str,
        code: int,
        keep_json: bool = False,
        fields: Mapping[str, Any] | None = None,
    ) -> int:
        if code >= 128:
            interrupts.ignore()  # a second Ctrl-C must not cut the line and the record short
        if args.traceback and code == 2 and sys.exc_info()[0] is not None:
            traceback.print_exc()
        json_path = getattr(args, "json", None)
        if json_path and code >= 128 and _holds_a_result(json_path):
            # An interrupt never replaces an earlier run's record with less (issue 49): it is kept, and said so.
            message, keep_json = f"{message}; the earlier record at {json_path} is kept (this run wrote none)", True
        print(f"{self.prog}: {' '.join(message.split())}", file=sys.stderr, flush=True)
        record = {**(self.error_fields or {}), **(fields or {})}
        record.update(verdict="error", exit_code=code, error=message)
        if json_path and self.error_fields is not None and not keep_json:
            from harness.report import write_json_atomic

            try:
                write_json_atomic(json_path, record)
            except OSError:
                pass  # the line above said what stopped; a JSON that cannot be written is not a second error
        if self.on_error is not None:
            self.on_error(args, record)
        return code


def _holds_a_result(path: Any) -> bool:
    """Whether ``path`` holds an earlier run's record that is not an error record (what an interrupt must not replace);
    an unreadable or malformed file holds nothing worth keeping."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(data, dict) and data.get("verdict") not in (None, "error")


# The seam where tests/test_command_shape.py injects its faults.
def _work(command: Command, args: argparse.Namespace) -> int:
    return command.run(command.options(args))
