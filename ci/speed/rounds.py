"""Rounds of fresh processes, each measuring one commit's kernels with this checkout's harness.

The speed gate's unit of measurement is a *round*: one fresh process per side,
run one after another, each timing every benchmark of the round in one fixed
order (ci.speed.child measure). Rounds rotate the order of the sides
(:func:`rotating_order`: A B, B A, A B, ... for two sides), so drift and
warm-up land on both sides alike. Any number of sides can share a round:

    sides = [Side("base", base_tree), Side("base-again", base_tree2), Side("head", head_tree)]
    for i in range(20):
        record = measure_round(sides, rotating_order([s.name for s in sides], i), benchmarks,
                               device="cuda", round_index=i, budget=TimingBudget(rep_ms=200))

A round record is plain JSON (``RoundRecord.to_json``): the order, and per
process its side, pid, wall time and every benchmark's full Timing (all
samples, steady flag, input sets, GPU state before/after, idle report).
ci.speed.exclusion pairs two sides of such records into harness.paired rounds.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, is_dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ci.common.commit_tree import kernels_of, run_forwarding_stderr
from ci.common.interrupts import MARKER

# One child: a survey runs a correctness check per (kernel, config); a round times every benchmark
# (at the GPU shapes: operand generation, compilation, up to 3 s of warm-up and 0.5 s of launches each).
CHILD_TIMEOUT_S = 3600


class ChildFailed(RuntimeError):
    """A child process died or wrote no answer; the message names the side and what it was doing."""


@dataclass(frozen=True)
class Side:
    """A named tree whose ``kernels`` package is measured (a git worktree, or the working tree)."""

    name: str
    tree: Path


@dataclass(frozen=True)
class Benchmark:
    kernel: str
    config: str
    shape: str  # a harness.shapes name, an asv CPU shape name, or "MxNxK"
    m: int
    n: int
    k: int

    @property
    def id(self) -> str:
        return f"{self.kernel}[{self.config}]/{self.shape}"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, **asdict(self)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Benchmark":
        """From a survey's or a record's benchmark entry (extra keys ignored)."""
        return cls(data["kernel"], data["config"], data["shape"], int(data["m"]), int(data["n"]), int(data["k"]))


@dataclass
class ProcessRecord:
    """One side's measurements in one round: a fresh process, or (ci.speed.warm) that side's warm workers."""

    side: str
    pid: int | None  # None when several workers (devices) measured this side
    wall_s: float
    records: dict[str, Any]  # benchmark id -> Timing.to_json() or {"error", "error_type", "busy"}
    budget: dict[str, Any] | None = None
    started: float | None = None
    # Cost accounting: seconds of starting (process start to ready: imports, device, and for warm
    # workers operands and compilation) and of measuring, summed over this side's processes.
    startup_s: float | None = None
    measure_s: float | None = None
    workers: list[dict[str, Any]] | None = None  # warm: per worker {device, pid, generation, started_round, ...}

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RoundRecord:
    index: int
    order: list[str]
    processes: list[ProcessRecord] = field(default_factory=list)
    engine: str = "fresh"  # "fresh": a process per side per round; "warm": ci.speed.warm's workers
    devices: list[dict[str, Any]] | None = None  # warm: per device its benchmarks, wall seconds, failure
    wall_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        out = {"index": self.index, "order": list(self.order), "processes": [p.to_json() for p in self.processes],
               "engine": self.engine, "wall_s": self.wall_s}
        if self.devices is not None:
            out["devices"] = self.devices
        return out


# The run's --max-minutes deadline (time.time()), set once by the gate before its first child:
# every child -- survey, correctness, a fresh round -- is killed there, so a hanging kernel cannot
# outlive the limit (a process-wide value: the children are started from several threads and modules).
_deadline: float | None = None
CHILD_GRACE_S = 30.0  # a child started just before the deadline still gets this long to answer


def set_deadline(deadline: float | None) -> None:
    global _deadline
    _deadline = deadline


def child_timeout() -> float:
    """A child's time limit: what is left until the deadline (at least CHILD_GRACE_S), else CHILD_TIMEOUT_S."""
    if _deadline is None:
        return CHILD_TIMEOUT_S
    return min(CHILD_TIMEOUT_S, max(CHILD_GRACE_S, _deadline - time.time()))


def rotating_order(sides: Sequence[str], round_index: int) -> list[str]:
    """Round ``i`` runs the sides rotated by ``i``: A B, B A, A B, ... (three sides: A B C, B C A, C A B).

    Over every ``len(sides)`` consecutive rounds each side runs once in each position,
    so a drift that is linear in time adds the same to every side.
    """
    if not sides:
        raise ValueError("rotating_order: no sides")
    shift = round_index % len(sides)
    return list(sides[shift:]) + list(sides[:shift])


def run_child(
    tree: Path,
    command: str,
    request: Mapping[str, Any],
    *,
    what: str,
    log: Callable[[str], None] | None = None,
    timeout_s: float | None = None,
) -> dict[str, Any]:
    """Run ``python -m ci.speed.child COMMAND`` on ``tree``'s kernels; return its JSON answer.

    ``timeout_s``: None for :func:`child_timeout` (what is left of the run's --max-minutes).
    The child's stderr (progress) is echoed through ``log`` prefixed with ``what``.
    Raises :class:`ChildFailed` when it exits non-zero or writes no answer.
    """
    timeout_s = child_timeout() if timeout_s is None else timeout_s
    with kernels_of(tree) as (folder, env), tempfile.TemporaryDirectory(prefix=f"{MARKER}{os.getpid()}-speed-child-") as io_dir:
        request_path, answer_path = Path(io_dir, "request.json"), Path(io_dir, "answer.json")
        request_path.write_text(json.dumps(request))
        cmd = [sys.executable, "-m", "ci.speed.child", command, str(request_path), str(answer_path)]
        run = run_forwarding_stderr(
            cmd, cwd=folder, env=env, timeout_s=timeout_s, log=(lambda line: log(f"  [{what}] {line}")) if log else (lambda line: None)
        )
        if run.timed_out:
            raise ChildFailed(f"{what}: ci.speed.child {command} took over {timeout_s:.0f} s")
        if run.returncode != 0 or not answer_path.exists():
            raise ChildFailed(f"{what}: ci.speed.child {command} exited {run.returncode} in {tree}: {run.tail(3)}")
        return json.loads(answer_path.read_text())


def survey_side(side: Side, request: Mapping[str, Any], *, log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Which benchmarks ``side``'s commit has on this device, and its correctness results (ci.speed.child
    survey) -- in a child process of its own; ``request`` is :func:`survey_request`'s."""
    return run_child(side.tree, "survey", request, what=f"{side.name} survey", log=log)


def survey_request(
    *,
    device: str,
    kernels: Sequence[str] = (),
    configs: Sequence[str] = (),
    shapes: Sequence[str] = (),
    check: bool = True,
    pairs: Sequence[Sequence[str]] | None = None,
) -> dict[str, Any]:
    """What ci.speed.child survey is asked (by a survey child, or by a warm worker's "survey")."""
    return {"device": device, "kernels": list(kernels), "configs": list(configs), "shapes": list(shapes), "check": check,
            "pairs": None if pairs is None else [list(p) for p in pairs]}


def measure_round(
    sides: Sequence[Side],
    order: Sequence[str],
    benchmarks: Sequence[Benchmark],
    *,
    device: str,
    round_index: int = 0,
    budget: Any = None,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> RoundRecord:
    """One round: a fresh process per side, in ``order``, each timing ``benchmarks`` in the order given.

    ``budget``: a harness.timing.TimingBudget (every field sent), a mapping of TimingBudget fields
    to override in the asv suite's budget for the device, or None for that budget as it is.
    (This parent process never imports torch: it only starts the children.)
    """
    by_name = {s.name: s for s in sides}
    missing = [name for name in order if name not in by_name]
    if missing or len(set(order)) != len(order):
        raise ValueError(f"order {list(order)} must name each of the sides {sorted(by_name)} at most once")
    overrides = asdict(budget) if is_dataclass(budget) else dict(budget or {})
    record = RoundRecord(round_index, list(order))
    round_started = time.time()
    for name in order:
        request = {"device": device, "benchmarks": [b.to_json() for b in benchmarks], "budget": overrides,
                   "seed": seed, "side": name, "round": round_index}
        started = time.time()
        answer = run_child(by_name[name].tree, "measure", request, what=f"round {round_index + 1} {name}", log=log)
        wall = round(time.time() - started, 3)
        records = answer.get("records", {})
        measure_s = round(sum(r.get("measure_s", 0.0) for r in records.values() if isinstance(r, dict)), 3)
        record.processes.append(ProcessRecord(name, answer.get("pid"), wall, records, answer.get("budget"), started,
                                              startup_s=round(max(wall - measure_s, 0.0), 3), measure_s=measure_s))
    record.wall_s = round(time.time() - round_started, 3)
    return record


class FreshEngine:
    """Today's rounds behind the engine interface of ci.speed.warm.WarmEngine: a fresh process per side per round."""

    kind = "fresh"

    def __init__(self, sides: Sequence[Side], *, device: str, budget: Any = None, seed: int = 0,
                 log: Callable[[str], None] | None = None):
        self.sides, self.device, self.budget, self.seed, self.log = list(sides), device, budget, seed, log

    def measure_round(self, order: Sequence[str], benchmarks: Sequence[Benchmark], *, round_index: int) -> RoundRecord:
        return measure_round(self.sides, order, benchmarks, device=self.device, round_index=round_index,
                             budget=self.budget, seed=self.seed, log=self.log)

    def close(self) -> None:
        """Nothing outlives a fresh round."""

    def __enter__(self) -> "FreshEngine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
