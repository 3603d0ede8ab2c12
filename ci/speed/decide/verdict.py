"""From recorded rounds to verdicts, and the JSON record (:data:`GATE_SCHEMA`) that keeps both.

The gate, the calibration and ``--replay`` decide here; the record keeps every raw measurement, so a verdict can be
recomputed without the GPU.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ci.common.errors import InputError
from ci.common.json_file import JsonFileError, read_json
from ci.speed.decide.codes import Status, Stop
from ci.speed.decide.exclusion import ExclusionRule, PairedRound, paired_rounds
from ci.speed.decide.selection import Entry
from ci.speed.decide.thresholds import Thresholds
from ci.speed.engine.rounds import Benchmark
from harness import paired
from harness.paired.noise import LookNoise, Spread
from harness.paired.sequential import METHOD, Decision, RoundsNoise, SequentialPlan
from harness.paired.verdict import Verdict
from harness.paired.zone import planned_rounds

GATE_SCHEMA = "mxfp4-speed-gate/1"
CALIBRATION_PATH = "ci/speed_calibration.json"
# The resolvable effect is the slowdown flagged as regression with this probability by the last look.
RESOLVE_POWER = 0.99


class RecordError(InputError, ValueError):
    """A recorded JSON file cannot be replayed or read as a calibration; the message names the file and key."""


@dataclass
class BenchmarkResult:
    benchmark: Benchmark
    status: Status
    note: str = ""
    threshold: float | None = None
    threshold_source: str = ""
    decision: Decision | None = None
    rounds: list[PairedRound] = field(default_factory=list)
    resolvable: float | None = None
    resolvable_source: str = ""
    stopped_by: Stop | None = None

    @property
    def id(self) -> str:
        return self.benchmark.id

    @property
    def verdict(self) -> Verdict | None:
        return None if self.decision is None else self.decision.verdict

    def used_rounds(self) -> list[paired.Round]:
        """The usable rounds the decision consumed (the base and head TFLOPS and the noise come from these)."""
        seen = self.decision.rounds_seen if self.decision is not None else len(self.rounds)
        return [r.round for r in self.rounds[:seen] if r.round.excluded is None]

    def median_tflops(self, side: str) -> float | None:
        used = self.used_rounds()
        return statistics.median(getattr(r, side) for r in used) if used else None

    def to_json(self) -> dict[str, Any]:
        return {
            **self.benchmark.to_json(),
            "status": self.status.value,
            "note": self.note or None,
            "threshold": self.threshold,
            "threshold_source": self.threshold_source or None,
            "verdict": None if self.verdict is None else self.verdict.value,
            "decision": None if self.decision is None else self.decision.to_json(),
            "stopped_by": None if self.stopped_by is None else self.stopped_by.value,
            "base_tflops": self.median_tflops("base"),
            "head_tflops": self.median_tflops("head"),
            "resolvable_effect": self.resolvable,
            "resolvable_effect_source": self.resolvable_source or None,
            "rounds": [r.to_json() for r in self.rounds],
        }


def resolvable_effect(
    bench_id: str,
    used: Sequence[paired.Round],
    threshold: float,
    plan: SequentialPlan,
    calibrations: Mapping[str, Any],
    noise: RoundsNoise | None = None,
    restart_every: int = 4,
) -> tuple[float | None, str]:
    """(The smallest slowdown flagged as regression w.p. RESOLVE_POWER by the plan's last look at ``threshold``, where
    its noise came from): the noise model's (the zone: the threshold, by its planned look), else the calibration file's
    SD bound, else this run's rounds' (docs/SPEED_GATE.md, "Resolvable effect").
    """
    look = None
    if plan.variance == "model" and noise is not None and noise.noise is not None:
        look = LookNoise(noise.noise, noise.spread)
    if plan.rule == "zone":
        n = planned_rounds(look, threshold, plan, restart_every)
        if look is None:
            return None, "no noise model entry: the rounds decide when they can (the last look always does)"
        if n is None:
            return None, (
                f"the zone plan cannot decide every effect by its last look ({plan.max_rounds} rounds) under the model"
            )
        return threshold, f"the zone plan: any effect decided by round {n} under the model"
    if look is not None:
        return paired.model_resolvable_effect(look, threshold, plan, restart_every, RESOLVE_POWER), "the noise model"
    cal = calibrations.get(bench_id)
    if cal is not None:
        sd, source = float(cal["ratio_sd_upper"]), f"calibration ({cal.get('source', '?')})"
    elif len(used) >= 3:
        sd = paired.calibrate(used, plan).ratio_sd_upper
        source = f"this run's {len(used)} rounds (95% upper SD bound)"
    else:
        return None, f"{len(used)} usable rounds: too few to estimate the noise"
    return paired.resolvable_effect(sd, threshold, plan, RESOLVE_POWER), source


def decide_entry(
    entry: Entry,
    rounds: Sequence[Mapping[str, Any]],
    thresholds: Thresholds,
    plan: SequentialPlan,
    rule: ExclusionRule,
    calibrations: Mapping[str, Any] = {},
    *,
    ran_out: Stop | None = None,
    noise: RoundsNoise | None = None,
    restart_every: int = 4,
    with_resolvable: bool = True,
) -> BenchmarkResult:
    """The result of one benchmark: its decision over the recorded rounds when it is gated.

    ``ran_out``: what ended the measuring (an undecided benchmark is inconclusive for it); ``noise``: the noise model's
    view of its rounds (ci.speed.decide.generations); ``with_resolvable``: also the report's resolvable effect.
    """
    bench = entry.benchmark
    result = BenchmarkResult(bench, entry.status, entry.note)
    if entry.status is not Status.GATED:
        return result
    result.threshold, result.threshold_source = thresholds.lookup(bench.id)
    result.rounds = paired_rounds(rounds, bench.id, "base", "head", rule)
    if plan.rule == "zone" and noise is None:  # no model entry: the zone still needs the worker generations
        noise = RoundsNoise(None, Spread(), tuple(r.generation for r in result.rounds))
    decision = paired.sequential_decision([r.round for r in result.rounds], result.threshold, plan, noise)
    result.stopped_by = Stop.DECISION if decision.complete else ran_out  # the report words it (decision_reason)
    result.decision = decision
    if with_resolvable:
        result.resolvable, result.resolvable_source = resolvable_effect(
            bench.id, result.used_rounds(), result.threshold, plan, calibrations, noise, restart_every
        )
    return result


EXIT_INCONCLUSIVE = 3


def exit_code(results: Sequence[BenchmarkResult], fail_on_inconclusive: bool) -> int:
    """0 pass, 1 a regression or a wrong result at head (or any inconclusive benchmark with fail_on_inconclusive),
    3 inconclusive under the zone rule (undecided: a failed measurement, or the time or round budget ran out; re-run);
    under version 5's band rule an inconclusive benchmark passes with a warning."""
    failing = {Verdict.REGRESSION} | ({Verdict.INCONCLUSIVE} if fail_on_inconclusive else set())
    if any(r.status is Status.WRONG_RESULT or (r.status is Status.GATED and r.verdict in failing) for r in results):
        return 1
    zone_failed = any(
        r.status is Status.GATED
        and r.verdict is Verdict.INCONCLUSIVE
        and r.decision is not None
        and r.decision.rule == "zone"
        and r.stopped_by is not Stop.PR_FAILED
        for r in results
    )
    return EXIT_INCONCLUSIVE if zone_failed else 0


_RECORD_KEYS = {"rounds": list, "benchmarks": list, "plan": dict, "exclusion": dict, "thresholds": dict}  # a replay's


def load_record(path: str | Path) -> dict[str, Any]:
    """A recorded verdict JSON (gate or calibration run), checked enough to replay."""
    path = Path(path)
    try:
        data = read_json(path)
    except JsonFileError as exc:
        raise RecordError(str(exc)) from None
    if not isinstance(data, dict) or data.get("schema") != GATE_SCHEMA:
        schema = data.get("schema") if isinstance(data, dict) else None
        raise RecordError(f'{path}: not a {GATE_SCHEMA} record ("schema" is {schema!r})')
    for key, kind in _RECORD_KEYS.items():
        if not isinstance(data.get(key), kind):
            raise RecordError(f'{path}: "{key}" is missing or not a {kind.__name__}')
    return data


def entries_of(record: Mapping[str, Any]) -> list[Entry]:
    return [Entry(Benchmark.from_json(b), Status(b["status"]), b.get("note") or "") for b in record["benchmarks"]]


RETIRED_PLAN = (
    "was decided with the signed-rank plan (Hodges-Lehmann ratio, exact signed-rank interval, the "
    "fresh-process engine's), retired in issue 28: it cannot be replayed under its own plan, and its "
    "rounds are not re-decided under the warm plan in its place (docs/PERF_NOTES.md keeps what it found)"
)


def plan_of(data: Mapping[str, Any], where: str = "the record") -> SequentialPlan:
    """The plan a record was decided with; RecordError for a plan this gate no longer has (never another in its
    place). Older warm-plan records replay without the rules they predate (docs/SPEED_GATE.md, "Replay")."""
    points = tuple(data["look_points"])  # a plan without looks is malformed, not a retired plan
    method = data.get("method", "signed_rank")
    if method != METHOD:
        raise RecordError(
            f"{where} {RETIRED_PLAN}" if method == "signed_rank" else f"{where}: unknown plan method {method!r}"
        )
    spending = data.get("spending")
    zone: dict[str, Any] = {}
    if data.get("rule", "band") == "zone":  # version 6's keys (a record before it has none: the band)
        zone = {
            "rule": "zone",
            "prior_df_cap": data.get("prior_df_cap"),
            "between_floor": float(data["between_floor"]),
            "bench_check_level": data.get("bench_check_level"),
            "forced_limit": float(data["forced_limit"]),
            "first_round_level": data.get("first_round_level"),
            "learn": bool(data.get("learn", False)),  # version 7's variance (a version 6 record has no key)
            "conflict_level": float(data.get("conflict_level", SequentialPlan.conflict_level)),
        }
    return SequentialPlan(
        min_rounds=data["min_rounds"],
        max_rounds=data["max_rounds"],
        looks=points,
        alpha=data["alpha"],
        alpha_per_tail=bool(data.get("alpha_per_tail", False)),
        futility=bool(data.get("futility", False)),
        miss_alpha=data.get("miss_alpha"),
        spending=None if spending is None else tuple(spending),
        variance=data.get("variance", "rounds"),
        guard_level=data.get("guard_level", SequentialPlan.guard_level),
        **zone,
    )  # a t plan's record has none


def load_calibrations(path: str | Path) -> dict[str, Any]:
    """{benchmark id: calibration} from a calibration record; each entry carries its source."""
    data = load_record(path)
    cals = data.get("calibrations")
    if not isinstance(cals, dict):
        raise RecordError(f'{path}: no "calibrations" (write one with python -m ci.speed.calibrate --json {path})')
    where = f"{path}, {data.get('created', '?')}, {data.get('environment', {}).get('gpu') or 'cpu'}"
    out = {}
    for bench_id, cal in cals.items():
        sd = cal.get("ratio_sd_upper") if isinstance(cal, dict) else None
        if not isinstance(sd, (int, float)) or not math.isfinite(sd):
            raise RecordError(f"{path}: calibrations[{bench_id!r}].ratio_sd_upper is missing or not a number")
        out[bench_id] = dict(cal, source=where)
    return out
