"""The speed gate's outcomes as codes (ci.speed.report.markdown words them); each value is the token the JSON record
keeps, so older records replay unchanged: code compares members (``status is Status.GATED``), never sentences.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class Status(enum.Enum):
    """What the gate does with a benchmark (ci.speed.decide.selection decides it from both surveys)."""

    GATED = "gated"  # runs at base and head, head correct: timed and decided
    WRONG_RESULT = "wrong result"  # head computes a wrong result: fails the gate, not timed
    NEW = "new"  # runs at head only
    REMOVED = "removed"  # runs at base only
    NOT_APPLICABLE = "n/a"  # runs on neither side here
    UNCHANGED_IDENTICAL = "unchanged (identical code)"  # same speed fingerprint at base and head: a pass, not measured


class Check(enum.Enum):
    """A correctness check's outcome as ci.speed.engine.survey records it."""

    PASS = "pass"
    FAIL = "fail"  # a wrong result
    ERROR = "error"  # the kernel raised
    NOT_APPLICABLE = "n/a"  # the check cannot run here (unsupported shape or device)

    @classmethod
    def of(cls, check: Mapping[str, Any]) -> Check:
        return cls(check["status"])


class Stop(enum.Enum):
    """What ended the measuring of a benchmark."""

    DECISION = "decision"  # a look of the plan decided
    ROUND_BUDGET = "round budget"
    TIME_BUDGET = "time budget"  # --max-minutes
    FIXED_ROUNDS = "fixed rounds"  # --plan rounds=N
    END_OF_RECORD = "end of record"  # --replay: the recorded rounds ran out
    PR_FAILED = "pr failed"  # another benchmark had already failed the PR (a regression or a wrong result)
    INTERRUPTED = "interrupted"  # SIGINT or SIGTERM (a cancelled job, its timeout): the complete rounds are kept


# Why the benchmarks Stop.PR_FAILED left are undecided, by whether this run's own decisions fail the PR (a replay of an
# older record may decide otherwise than the run that recorded it).
PR_FAILED_WHY = {
    True: "the PR had failed (the regression or wrong result below), so no round started after it: its status was "
    "known",
    False: "the recorded run stopped measuring them when its PR had failed; decided again here, no benchmark fails",
}


class Excluded(enum.Enum):
    """Why a round cannot be used (ci.speed.decide.exclusion); the value starts the recorded label."""

    NOT_MEASURED = "not measured"
    GPU_BUSY = "GPU busy"
    MEASUREMENT_FAILED = "measurement failed"
    THROTTLED = "throttled"
    BELOW_CLOCK_FLOOR = "SM clock below the floor"
    UNSTEADY = "timing not steady"


@dataclass(frozen=True)
class Exclusion:
    """One round's exclusion: its code, and for THROTTLED the slowdown reasons seen."""

    code: Excluded
    throttle: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """The form harness.paired counts and the JSON keeps ("throttled: hw_slowdown", "GPU busy", ...)."""
        return f"{self.code.value}: {', '.join(self.throttle)}" if self.throttle else self.code.value
