"""The gate's change-aware selection: a (kernel, config) with identical code at base and head on the runner's arch
(ci.speed.scope.fingerprints' decision data, or ``--changes``) is "unchanged (identical code)", not surveyed, not
measured, a pass; the others are measured, each saying why. Also what the skips saved and what the measuring cost.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ci.speed.decide.codes import Status
from ci.speed.decide.selection import Entry, Selector
from ci.speed.engine.rounds import Benchmark, cost_summary
from ci.speed.engine.survey import log
from ci.speed.options import SpeedOptions
from ci.speed.scope.arch import resolve_arch
from ci.speed.scope.dependencies import warning_lines
from ci.speed.scope.fingerprints import decide, fingerprint_sides
from ci.speed.scope.summary import ChangesFileError, code_changes_lines, estimated_cost_s
from harness.report import markdown_table

_ID = re.compile(r"^(?P<kernel>[^\[]+)\[(?P<config>[^\]]*)\]/(?P<shape>.+)$")
IDENTICAL = "IDENTICAL"  # ci.common.code_fingerprint.Outcome.IDENTICAL.name, as the JSON keeps it
REMOVED = "REMOVED"  # Outcome.REMOVED.name: at base only
REMOVED_NOTE = "removed at head"


@dataclass
class CodeDecision:
    """Per selected (kernel, config) on the arch: identical or not, and the words for it."""

    arch: str | None
    how: str  # how the arch was found, and where the fingerprints came from
    pairs: dict[tuple[str, str], tuple[bool, str]] = field(default_factory=dict)  # -> (identical, describe())
    listed: list[Benchmark] = field(default_factory=list)  # the benchmarks the fingerprints list on the arch
    removed: list[Benchmark] = field(default_factory=list)  # the base's benchmarks on the arch that the head lacks
    data: Mapping[str, Any] = field(default_factory=dict)  # the decision data (code_changes, registered, ...)
    measure_identical: bool = False

    @property
    def identical_pairs(self) -> set[tuple[str, str]]:
        return set() if self.measure_identical else {p for p, (same, _) in self.pairs.items() if same}

    def why_measured(self, kernel: str, config: str) -> str:
        if self.arch is None:
            return f"measure: the runner's arch is unknown ({self.how})"
        same, text = self.pairs.get((kernel, config), (False, "measure: not fingerprinted on this arch"))
        return "measured (--measure-identical): " + text if same else text


def decision_from_data(data: Mapping[str, Any], arch: str, how: str, measure_identical: bool) -> CodeDecision:
    """The per-(kernel, config) decision for ``arch`` from decision data (ci.speed.scope.summary.report_data)."""
    results = (data.get("by_arch") or {}).get(arch)
    if results is None:
        raise ChangesFileError(
            f"the changes data has no fingerprints for {arch} (it has {', '.join(data.get('archs') or [])})"
        )
    pairs: dict[tuple[str, str], tuple[bool, str]] = {}
    for bench_id, result in results.items():
        match = _ID.match(bench_id)
        if match is None:
            continue
        if result["outcome"] == REMOVED:  # nothing at head to measure or skip: listed as removed instead
            continue
        key = (match["kernel"], match["config"])
        same = result["outcome"] == IDENTICAL
        if key not in pairs or not same:  # any non-identical benchmark of the pair measures the pair
            pairs[key] = (same and pairs.get(key, (True, ""))[0], result["summary"])
    listed = [Benchmark.from_json(b) for b in (data.get("benchmarks_by_arch") or {}).get(arch, [])]
    removed = [Benchmark.from_json(b) for b in (data.get("removed_by_arch") or {}).get(arch, [])]
    return CodeDecision(arch, how, pairs, listed, removed, data, measure_identical)


def unchanged_entries(decision: CodeDecision, selector: Selector) -> list[Entry]:
    """The selected benchmarks of identical (kernel, config)s, named as a survey would name them."""
    runs_here = [b for b in decision.listed if (b.kernel, b.config) in decision.identical_pairs]
    runs_here = [b for b in runs_here if selector.takes(b.kernel, b.config)]
    if selector.sizes:  # as ci.speed.engine.survey._shapes: MxNxK is a shape of its own; a name must be one listed
        names = {b.shape: (b.m, b.n, b.k) for b in decision.listed}
        sizes = selector.sizes.items()
        chosen = [("x".join(map(str, mnk)), mnk) if mnk else (t, names[t]) for t, mnk in sizes if mnk or t in names]
        pairs = dict.fromkeys((b.kernel, b.config) for b in runs_here)
        runs_here = [Benchmark(k, c, name, *mnk) for k, c in pairs for name, mnk in chosen]
    why = f"the same {decision.arch} speed fingerprint at base and head"
    return [Entry(b, Status.UNCHANGED_IDENTICAL, why) for b in runs_here]


def removed_entries(decision: CodeDecision, selector: Selector) -> list[Entry]:
    """The selected benchmarks the base has on the arch and the head does not: "removed", never measured (the gate
    adds them when its survey is narrowed to the changed (kernel, config)s, which leaves them out)."""
    wanted = {*selector.sizes, *("x".join(map(str, mnk)) for mnk in selector.sizes.values() if mnk)}
    return [
        Entry(b, Status.REMOVED, f"{REMOVED_NOTE} ({decision.arch})")
        for b in decision.removed
        if selector.takes(b.kernel, b.config) and (not wanted or b.shape in wanted or f"{b.m}x{b.n}x{b.k}" in wanted)
    ]


def measured_pairs(decision: CodeDecision, selector: Selector) -> list[tuple[str, str]] | None:
    """The (kernel, config)s to survey and measure; None: every selected one (no decision to go by)."""
    if decision.arch is None or decision.measure_identical:
        return None
    return sorted(p for p in decision.pairs if p not in decision.identical_pairs and selector.takes(*p))


def cost_record(
    decision: CodeDecision | None,
    skipped: Sequence[Entry],
    rounds: Sequence[Mapping[str, Any]],
    removed: Sequence[Entry] = (),
) -> dict[str, Any]:
    """The JSON record's "code" and "costs" parts: what was skipped, the seconds saved (estimated) and spent; per
    benchmark its "costs" (each process's wall time shared equally by the benchmarks it timed: what ci.speed.changes
    --costs reads) and "rounds_to_verdict" (the rounds it was measured in: a decided one is measured no more)."""
    summary = cost_summary(rounds)  # the one tally of the rounds' seconds; the report's "GPU runner" line reads it too
    spent = summary["startup_s"] + summary["measure_s"]
    saved = {e.benchmark.id: round(estimated_cost_s(e.benchmark.m, e.benchmark.n, e.benchmark.k), 1) for e in skipped}
    costs: dict[str, float] = {}
    measured_in: Counter[str] = Counter()
    for rnd in rounds:
        measured_in.update({bench_id for proc in rnd["processes"] for bench_id in proc["records"]})
        for proc in rnd["processes"]:
            for bench_id in proc["records"]:
                costs[bench_id] = costs.get(bench_id, 0.0) + proc["wall_s"] / len(proc["records"])
    return {
        "code": None
        if decision is None
        else {
            "arch": decision.arch,
            "how": decision.how,
            "measure_identical": decision.measure_identical,
            "decisions": {f"{k}[{c}]": text for (k, c), (_, text) in sorted(decision.pairs.items())},
            "code_changes": list(decision.data.get("code_changes") or []),
        },
        "skipped_identical": [e.benchmark.id for e in skipped],
        "removed_at_head": [e.benchmark.id for e in removed],
        "gpu_seconds_saved_estimated": round(sum(saved.values()), 1),
        "gpu_seconds_spent": round(spent, 1),
        "costs": {k: round(v, 2) for k, v in costs.items()},
        "rounds_to_verdict": dict(measured_in),
    }


def code_decision(
    options: SpeedOptions, base_sha: str, head_sha: str, base_tree: Path | None, head_tree: Path
) -> CodeDecision:
    """Fingerprint both trees for the runner's arch (or read --changes) and decide per (kernel, config); the
    fingerprint children compile on the CPU: nothing here touches the GPU."""
    arch, how = resolve_arch(options.arch, options.device)
    if arch is None:
        log(f"speed_gate: the runner's arch is unknown ({how}): every benchmark is measured")
        return CodeDecision(None, how, measure_identical=options.measure_identical)
    if options.changes_data is not None:
        for side, expected in (("base", base_sha), ("head", head_sha)):  # the file must be of this comparison
            if options.changes_data.get(side) != expected:
                raise ChangesFileError(
                    f"--changes {options.changes}: its {side} is {str(options.changes_data.get(side))[:12]}, "
                    f"this gate's {side} is {expected[:12]}: fingerprints of other commits"
                )
        where = f"{arch} ({how}); fingerprints from --changes {options.changes}"
        try:
            return decision_from_data(options.changes_data, arch, where, options.measure_identical)
        except ChangesFileError as exc:
            raise ChangesFileError(f"--changes {options.changes}: {exc}") from None
    started = time.perf_counter()
    base, head = fingerprint_sides(base_tree, head_tree, [arch], log=lambda line: log(f"  [fingerprint] {line}"))
    data = decide(base_sha, head_sha, base, head, started=started)
    log(f"speed_gate: fingerprints for {arch} in {data['fingerprint_seconds']:.0f} s")
    where = f"{arch} ({how}); fingerprints computed in {data['fingerprint_seconds']:.0f} s"
    return decision_from_data(data, arch, where, options.measure_identical)


def preface_lines(
    decision: CodeDecision | None,
    measured: Sequence[tuple[str, str]] | None,
    costs: Mapping[str, Any],
    dependency_changes: Sequence[str] = (),
) -> list[str]:
    """Above the verdict: the arch, what each measured (kernel, config) changed, the ISA and resource diffs, the costs;
    ``measured == []`` (every selected benchmark has identical code): the code line and one line of what it saved."""
    if decision is None:
        return warning_lines(list(dependency_changes))
    lines = [
        f"**Code** for {decision.arch or 'an unknown arch'}: {decision.how}"
        + (" · --measure-identical: identical code measured too" if decision.measure_identical else ""),
        "",
    ]
    lines += warning_lines(list(dependency_changes))
    if measured == []:
        removed = len(costs.get("removed_at_head") or [])
        gone = f" ({removed} removed at head)" if removed else ""
        return lines + [
            f"every selected benchmark has identical code{gone}: nothing measured, 0 GPU seconds, "
            f"~{costs['gpu_seconds_saved_estimated']:.0f} s saved (estimated)",
            "",
        ]
    if decision.arch is not None:
        shown = sorted(decision.pairs) if measured is None else measured
        rows = [{"kernel[config]": f"{k}[{c}]", "code": decision.why_measured(k, c)} for k, c in shown]
        lines += [
            markdown_table(rows, empty="_every selected kernel[config] has identical code: nothing is measured_"),
            "",
        ]
        lines += code_changes_lines(decision.data.get("code_changes") or [])
    # What the rounds spent is the "GPU runner" line of the run's header (ci.speed.report.write), from the same tally.
    return lines + [
        f"{len(costs['skipped_identical'])} benchmark(s) unchanged (identical code), not measured: "
        f"~{costs['gpu_seconds_saved_estimated']:.0f} s of GPU runner saved (estimated)",
        "",
    ]
