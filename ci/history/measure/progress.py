"""The main job's output on one screen: numbered steps that count right, and asv's progress in a few lines.

asv prints a line per benchmark (and pip prints its warnings while asv builds an environment): all of it
goes to the job's log file (ci.history.messages.log_detail). The screen gets, per ``asv run``, a progress
bar rewritten in place where stderr is a terminal, or in CI a plain line per quarter
of the way or per minute.
"""

from __future__ import annotations

import re
import sys
import time
from typing import TextIO

from ci.history.messages import log, log_detail

_PERCENT = re.compile(r"^\[\s*(\d+(?:\.\d+)?)%\]\s*[·.]*\s*(.*)$")
PLAIN_STEP_PERCENT = 25  # CI: a line per quarter of an asv run,
PLAIN_EVERY_S = 60.0  # or per minute on long work, whichever comes first


class Steps:
    """``[k/n]`` step lines whose counter never skips: the total is known before the first step."""

    def __init__(self, total: int):
        self.total = total
        self.done = 0
        self.seconds: dict[str, float] = {}  # "k: first words of the step" -> its wall seconds (the report's cost)
        self._current: tuple[str, float] | None = None

    def start(self, text: str) -> None:
        self._close()
        self.done += 1
        log(f"[{self.done}/{self.total}] {text}")
        self._current = (f"{self.done}: {' '.join(text.split()[:3]).rstrip(':,')}", time.monotonic())

    def _close(self) -> None:
        if self._current is not None:
            name, since = self._current
            self.seconds[name] = round(time.monotonic() - since, 2)
            self._current = None

    def finish(self) -> dict[str, float]:
        """Each step's wall seconds, the last one closed now."""
        self._close()
        return dict(self.seconds)


class AsvProgress:
    """Feed it asv's output line by line: everything to the log file, progress to the screen."""

    def __init__(self, label: str, stream: TextIO | None = None, echo: bool = False, quiet: bool = False):
        self.label = label
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.echo = echo  # --show-stderr: the whole output on the screen too
        self.quiet = quiet  # short work (asv publish): nothing on the screen
        self.shown = 0.0  # the first line at a quarter: "0%" says nothing the step line did not
        self.shown_at = time.monotonic()
        self.bar_drawn = False

    def feed(self, line: str) -> None:
        log_detail(line)
        if self.echo:
            self.stream.write(line if line.endswith("\n") else line + "\n")
            return
        match = None if self.quiet else _PERCENT.match(line.strip())
        if not match:
            return
        percent, what = float(match.group(1)), match.group(2).split()[0] if match.group(2).split() else ""
        if "." not in what and percent < 100:
            return  # asv's "For <commit>", "Building ...", "Benchmarking ...": the step line said it already
        if self.tty:
            filled = int(percent / 5)
            self.stream.write(f"\r  {self.label} [{'#' * filled}{' ' * (20 - filled)}] {percent:3.0f}% {what[:60]:<60}")
            self.stream.flush()
            self.bar_drawn = True
        elif (
            percent >= self.shown + PLAIN_STEP_PERCENT
            or (percent >= 100 and self.shown < 100)
            or time.monotonic() - self.shown_at >= PLAIN_EVERY_S
        ):
            self.shown = int(percent // PLAIN_STEP_PERCENT) * PLAIN_STEP_PERCENT
            self.shown_at = time.monotonic()
            log(f"  {self.label}: {percent:.0f}% {what}")

    def close(self) -> None:
        if self.bar_drawn:
            self.stream.write("\n")
            self.stream.flush()
