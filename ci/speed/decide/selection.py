"""What the speed gate measures: the base's and the head's surveys (ci.speed.engine.survey) combined.

Per benchmark (kernel, config, shape), from what each side has on this device and each side's correctness
check, one status (ci.speed.decide.codes.Status): gated (the only one timed), wrong result, new, removed,
n/a, unchanged. A kernel raising in the head's check, a selector matching nothing or a selection with nothing
that runs is a :class:`SelectionError`. The table of statuses: docs/SPEED_GATE.md, "Inside the code".
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ci.common.errors import UsageError
from ci.common.options import name_matches, name_pattern
from ci.speed.decide.codes import Check, Status
from ci.speed.engine.rounds import Benchmark
from ci.speed.engine.survey import parse_shape


class SelectionError(UsageError, RuntimeError):
    """The selection is unusable (a selector matches nothing, a kernel raised at head); the message says which."""


@dataclass
class Entry:
    benchmark: Benchmark
    status: Status
    note: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.status, Status):  # a bare string would compare unequal to every code, silently
            raise TypeError(f"Entry.status must be a ci.speed.decide.codes.Status, got {self.status!r}")


@dataclass
class Selection:
    entries: list[Entry]
    correctness: list[dict[str, Any]]  # each survey's correctness records, with "side"

    @property
    def gated(self) -> list[Benchmark]:
        return [e.benchmark for e in self.entries if e.status is Status.GATED]

    def mark_wrong_at_shape(self, round_record: Mapping[str, Any]) -> set[str]:
        """Take the gated benchmarks whose timed output was wrong at their shape in this round off the gate.

        The round's wrong-result records (ci.speed.engine.worker.wrong_result_record) name them. A wrong
        head makes the benchmark WRONG_RESULT (the gate fails); a wrong base only makes it NEW,
        reported, since the head may be what fixes it. Each becomes a correctness record too.
        Returns the ids of the benchmarks taken off.
        """
        wrong: dict[str, dict[str, str]] = {}
        for proc in round_record["processes"]:
            for bench_id, rec in proc["records"].items():
                if isinstance(rec, Mapping) and rec.get("wrong_result"):
                    wrong.setdefault(bench_id, {})[proc["side"]] = rec["error"]
        taken = set()
        for entry in self.entries:
            sides = wrong.get(entry.benchmark.id)
            if not sides or entry.status is not Status.GATED:
                continue
            bench = entry.benchmark
            for side, message in sides.items():
                self.correctness.append(
                    {
                        "side": side,
                        "kernel": bench.kernel,
                        "config": bench.config,
                        "shape": [bench.m, bench.n, bench.k],
                        "status": Check.FAIL.value,
                        "message": message,
                        "timed_shape": True,
                    }
                )
            if "head" in sides:
                entry.status, entry.note = Status.WRONG_RESULT, f"head: {sides['head']}"
            else:
                side, message = next(iter(sides.items()))
                entry.status, entry.note = Status.NEW, f"{side} computed a wrong result, not compared: {message}"
            taken.add(bench.id)
        return taken


@dataclass(frozen=True)
class Selector:
    """--kernel / --config / --shape, compiled once (:meth:`of`): what every step of a run selects by."""

    kernels: tuple[str, ...]  # the patterns as given: a survey request and the errors name them
    configs: tuple[str, ...]
    kernel: re.Pattern[str]  # the patterns compiled (ci.common.options.name_pattern)
    config: re.Pattern[str]
    sizes: Mapping[str, tuple[int, int, int] | None]  # each --shape once, in order: its MxNxK, None for a name

    @classmethod
    def of(cls, kernels: Sequence[str] = (), configs: Sequence[str] = (), shapes: Sequence[str] = ()) -> Selector:
        sizes = {text: parse_shape(text) for text in shapes}
        return cls(tuple(kernels), tuple(configs), name_pattern(kernels), name_pattern(configs), sizes)

    def takes(self, kernel: str, config: str) -> bool:
        return self.kernel.match(kernel) is not None and self.config.match(config) is not None


def check_selectors(surveys: Mapping[str, Mapping[str, Any] | None], selector: Selector) -> None:
    """Every --kernel / --config / --shape selector must match something on some side."""
    present = [s for s in surveys.values() if s is not None]
    registered = [k for s in present for k in s["registered"]]
    for pattern in selector.kernels:
        if not any(name_matches(k["name"], [pattern]) for k in registered):
            names = sorted({k["name"] for k in registered})
            raise SelectionError(f"--kernel {pattern!r} matches no registered kernel (registered: {', '.join(names)})")
    chosen = [k for k in registered if selector.kernel.match(k["name"])]
    for pattern in selector.configs:
        if not any(name_matches(c, [pattern]) for k in chosen for c in k["configs"]):
            have = sorted({f"{k['name']}[{c}]" for k in chosen for c in k["configs"]})
            raise SelectionError(f"--config {pattern!r} matches no config of the selected kernels ({', '.join(have)})")
    unknown = sorted({u for s in present for u in s.get("unknown_shapes", [])})
    if unknown:
        raise SelectionError(
            f"--shape {unknown[0]!r} is neither MxNxK nor a known shape name "
            "(harness/shapes.py BENCHMARK_SHAPES, asv_bench/common.py CPU_SHAPES)"
        )


def select(
    head: Mapping[str, Any], base: Mapping[str, Any] | None, base_note: str = "", others: Sequence[Entry] = ()
) -> Selection:
    """Combine the surveys; raise SelectionError for a kernel raising at head or an empty selection.

    ``others``: entries decided without a survey (unchanged, identical code), listed after the surveyed ones.
    """
    correctness = [dict(c, side="head") for c in head["correctness"]]
    if base is not None:
        correctness += [dict(c, side="base") for c in base["correctness"]]
    checks = {(c["side"], c["kernel"], c["config"]): c for c in correctness}
    for c in correctness:
        if c["side"] == "head" and Check.of(c) is Check.ERROR:
            shape = "x".join(map(str, c["shape"]))
            raise SelectionError(
                f"{c['kernel']}[{c['config']}] raised at head in its correctness check at {shape}: {c['message']}"
            )

    head_b = {Benchmark.from_json(b).id: b for b in head["benchmarks"]}
    base_b = {Benchmark.from_json(b).id: b for b in base["benchmarks"]} if base is not None else {}
    entries = []
    for bench_id in list(head_b) + [i for i in base_b if i not in head_b]:
        h, b = head_b.get(bench_id), base_b.get(bench_id)
        seen = h if h is not None else base_b[bench_id]
        bench = Benchmark.from_json(seen)
        key = (bench.kernel, bench.config)
        head_check, base_check = checks.get(("head",) + key), checks.get(("base",) + key)
        runs_head = h is not None and h["available"]
        runs_base = b is not None and b["available"]
        if runs_head and head_check and Check.of(head_check) is Check.NOT_APPLICABLE:
            runs_head, h = False, dict(seen, reason=f"correctness check not possible: {head_check['message']}")
        base_raised = runs_base and base_check is not None and Check.of(base_check) is Check.ERROR
        if runs_head and head_check and Check.of(head_check) is Check.FAIL:
            entries.append(Entry(bench, Status.WRONG_RESULT, f"head: {head_check['message']}"))
        elif runs_head and runs_base and not base_raised:
            base_wrong = base_check is not None and Check.of(base_check) is Check.FAIL
            note = f"base computed a wrong result ({base_check['message']})" if base_check and base_wrong else ""
            entries.append(Entry(bench, Status.GATED, note))
        elif runs_head:
            why = (
                f"base raised: {base_check['message']}"
                if base_raised and base_check is not None
                else base_note or "not in the base"
                if b is None
                else f"n/a at base: {b['reason']}"
            )
            entries.append(Entry(bench, Status.NEW, why))
        elif runs_base:
            entries.append(
                Entry(bench, Status.REMOVED, "not in the head" if h is None else f"n/a at head: {h['reason']}")
            )
        else:
            entries.append(Entry(bench, Status.NOT_APPLICABLE, (h or seen)["reason"]))
    entries += others
    if all(e.status is Status.NOT_APPLICABLE for e in entries):
        reasons = sorted({e.note for e in entries}) or ["no benchmark matches the selectors"]
        raise SelectionError("nothing to measure on this device: " + "; ".join(reasons[:5]))
    return Selection(entries, correctness)
