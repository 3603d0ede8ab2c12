"""Head vs merge-base vs budget, per compile target: its findings, its status from their codes, and the entry that
would accept a failing target (or, for a passing one below its entry, the tightened entry: the ratchet)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ci.budget.budget_file import BUDGET_SCHEMA, Budget
from ci.budget.findings import NOT_BUDGETABLE, Finding, OccupancyStep, Reason
from ci.budget.metrics import BUDGET_KEYS, METRICS, SPILL_FIELDS, Metric
from ci.budget.wording import sentence
from harness.resources import occupancy_by_resource


@dataclass
class TargetCheck:
    target: str
    status: str = "pass"  # "pass" | "fail" | "removed"
    findings: list[Finding] = field(default_factory=list)
    head: dict[str, Any] | None = None
    base: dict[str, Any] | None = None
    budget: dict[str, Any] | None = None
    suggested_budget: dict[str, Any] | None = None  # failed: the entry that accepts the head
    tightened_budget: dict[str, Any] | None = None  # passed below its entry: the ratchet

    @property
    def failed(self) -> bool:
        return any(f.fails for f in self.findings)

    @property
    def codes(self) -> set[Reason]:
        return {f.code for f in self.findings}

    @property
    def reasons(self) -> list[str]:
        return [sentence(f) for f in self.findings if f.fails]

    @property
    def notes(self) -> list[str]:
        """What passed but deserves a look (a tolerance or a budget edit used), in words."""
        return [sentence(f) for f in self.findings if not f.fails]


def evaluate(
    head: Mapping[str, Mapping[str, Any]],
    base: Mapping[str, Mapping[str, Any]] | None,
    budget: Budget,
    base_budget: Budget | None,
    selected: Callable[[str], bool] = lambda target: True,
) -> list[TargetCheck]:
    """One check per target in head, base or budget (those ``selected``)."""
    names = set(head) | set(base or {}) | set(budget.entries)
    picked = [name for name in sorted(names) if selected(name)]
    return [_check_target(name, head.get(name), (base or {}).get(name), budget, base_budget) for name in picked]


def _check_target(name, head_result, base_result, budget: Budget, base_budget: Budget | None) -> TargetCheck:
    entry = budget.entries.get(name)
    base_entry = None if base_budget is None else base_budget.entries.get(name)
    check = TargetCheck(name, budget=budget.entry_with_overrides(name), base=(base_result or {}).get("usage"))
    found = check.findings
    if head_result is None:
        if entry is None and base_entry is not None:
            check.status = "removed"
            found.append(Finding(Reason.REMOVAL_INTENDED))
            return check
        listed_in = [where for where, present in (("the base", base_result), ("the budget", entry)) if present]
        found.append(Finding(Reason.MISSING_TARGET, facts={"listed_in": listed_in}))
    elif not head_result["ok"]:
        found.append(Finding(Reason.COMPILE_FAILED, facts={"error": head_result.get("error", "?")}))
    else:
        usage = check.head = head_result["usage"]
        base_usage = base_result["usage"] if base_result is not None and base_result["ok"] else None
        if base_result is not None and base_usage is None:
            found.append(Finding(Reason.BASE_DID_NOT_COMPILE))
        found.extend(_hard_limits(usage))
        if entry is None:
            found.append(Finding(Reason.NO_BUDGET_ENTRY))
        elif base_usage is not None and base_entry is None:
            found.append(Finding(Reason.BASE_HAD_NO_ENTRY))
        needed: dict[str, int] = {}
        for metric in METRICS:
            limit = _check_metric(check, metric, usage, base_usage, entry, base_entry, budget, base_budget)
            if limit is not None and metric.budget_key is not None:  # a limit is only ever found for a key
                needed[metric.budget_key] = limit
        override = budget.tolerance_overrides.get(name)
        if check.failed and not check.codes & NOT_BUDGETABLE:
            check.suggested_budget = _accepting_entry(usage, entry, needed, override)
        elif not check.failed and entry is not None:
            check.tightened_budget = _tightened_entry(usage, entry, override)
    check.status = "fail" if check.failed else "pass"
    return check


def _hard_limits(usage: Mapping[str, Any]) -> list[Finding]:
    """What no budget can accept: spills and scratch, LDS beyond the hardware, a kernel that cannot launch."""
    found = []
    spills = {f: int(usage[f]) for f in SPILL_FIELDS if usage.get(f)}
    if spills:
        found.append(Finding(Reason.SPILLS, facts={"counts": spills}))
    if usage["shared_bytes"] > usage["shared_limit"]:
        sizes = {"shared_bytes": usage["shared_bytes"], "shared_limit": usage["shared_limit"]}
        found.append(Finding(Reason.SHARED_OVER_HARDWARE, "shared_bytes", sizes))
    elif usage["occupancy"] == 0:
        found.append(Finding(Reason.CANNOT_LAUNCH, "occupancy", {"limited_by": usage.get("occupancy_limited_by")}))
    return found


def _check_metric(
    check: TargetCheck, metric: Metric, usage, base_usage, entry, base_entry, budget: Budget, base_budget: Budget | None
) -> int | None:
    """Compare one field with its budget limit and its base value; return the limit that would accept it, or None."""
    if usage.get(metric.field) is None:
        return None  # not measured on this arch (AGPRs, SGPRs, copies on sm_90; spill bytes on gfx950)
    name, value = metric.field, int(usage[metric.field])
    tolerance = budget.tolerance(check.target, name)
    key = metric.budget_key
    limit = None if entry is None or key is None else entry.get(key)
    needed = None

    if limit is not None:
        over = metric.worse_by(value, limit)
        step = _lost_occupancy_step(name, usage, limit) if 0 < over <= tolerance else None
        facts = {"value": value, "key": key, "limit": limit, "over": over, "tolerance": tolerance}
        if over > tolerance or step:
            check.findings.append(Finding(Reason.OVER_BUDGET, name, facts, step))
            needed = value
        elif over > 0:
            check.findings.append(Finding(Reason.OVER_BUDGET_WITHIN_TOLERANCE, name, facts))

    before = None if base_usage is None or base_usage.get(name) is None else int(base_usage[name])
    if before is None:
        return needed
    growth = metric.worse_by(value, before)
    if growth <= 0:
        return needed
    # What this change's budget edit loosened for this field. A base without an entry (or a
    # legacy one without this key) is taken at its measured value: an entry is no blank cheque.
    base_limit = before if base_entry is None or key not in base_entry else base_entry[key]
    loosening = max(0, metric.worse_by(limit, base_limit)) if limit is not None and key is not None else 0
    facts = {
        "value": value,
        "before": before,
        "growth": growth,
        "tolerance": tolerance,
        "loosening": loosening,
        "key": key,
        "base_limit": base_limit,
        "limit": limit,
        "base_tolerance": None,
    }
    if growth <= loosening:
        check.findings.append(Finding(Reason.BUDGET_EDIT_EXEMPT, name, facts))
        return needed
    tolerated = growth <= loosening + tolerance
    step = _lost_occupancy_step(name, usage, metric.worsened(before, loosening)) if tolerated else None
    if tolerated and not step:
        if base_budget is not None and base_budget.schema == BUDGET_SCHEMA:
            base_tolerance = base_budget.tolerance(check.target, name)
            if base_tolerance < tolerance:
                facts["base_tolerance"] = base_tolerance
        check.findings.append(Finding(Reason.WORSE_THAN_BASE_WITHIN_TOLERANCE, name, facts))
        return needed
    check.findings.append(Finding(Reason.WORSE_THAN_BASE, name, facts, step))
    if key is not None:
        # The limit whose loosening over the base's admits the growth (the tolerance cannot cover a lost step).
        required = metric.worsened(base_limit, growth if step else growth - tolerance)
        needed = required if needed is None else metric.loosest(needed, required)
    return needed


def _lost_occupancy_step(name: str, usage: Mapping[str, Any], from_value: int) -> OccupancyStep | None:
    """The occupancy ``name`` going from ``from_value`` to its value at head costs on its own; None when none."""
    try:
        now = occupancy_by_resource(usage).get(name)
        then = occupancy_by_resource(dict(usage, **{name: from_value})).get(name)
    except (KeyError, ValueError):  # no occupancy model for this arch or record
        return None
    if now is None or then is None or now >= then:
        return None
    return OccupancyStep(name, then, now, usage["occupancy_unit"])


def _accepting_entry(usage, entry, needed: Mapping[str, int], override) -> dict[str, Any]:
    """The entry that accepts the head: each limit loosened just as far as its failing check needs."""
    accepting: dict[str, Any] = {}
    for key, metric in BUDGET_KEYS.items():
        if usage.get(metric.field) is None:
            continue
        candidates = [int(usage[metric.field]) if entry is None or key not in entry else entry[key]]
        if key in needed:
            candidates.append(needed[key])
        accepting[key] = metric.loosest(*candidates)
    if override:
        accepting["tolerance"] = dict(override)
    return accepting


def _tightened_entry(usage, entry, override) -> dict[str, Any] | None:
    """The entry lowered to what the head uses where it uses less (never loosened); None when already tight."""
    tightened = dict(entry)
    for key, limit in entry.items():
        value = usage.get(BUDGET_KEYS[key].field)
        if value is not None:
            tightened[key] = BUDGET_KEYS[key].tightest(limit, int(value))
    if tightened == dict(entry):
        return None
    return dict(tightened, tolerance=dict(override)) if override else tightened
