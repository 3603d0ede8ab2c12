"""The sentence for each finding (table, notes, JSON). Only words: tests and reviewers know them, change on purpose."""

from __future__ import annotations

from collections.abc import Callable

from ci.budget.budget_file import BUDGET_PATH
from ci.budget.findings import Finding, OccupancyStep, Reason
from ci.budget.metrics import METRIC_BY_FIELD, Metric


def sentence(finding: Finding) -> str:
    return _SENTENCES[finding.code](finding)


def _step(step: OccupancyStep) -> str:
    return (
        f"crosses an occupancy step ({step.resource} alone allows {step.then} -> {step.now} {step.unit}): "
        "no tolerance covers that, only a budget edit"
    )


def _metric(f: Finding) -> Metric:
    assert f.metric is not None, f"a {f.code.name} finding names its field"
    return METRIC_BY_FIELD[f.metric]


def _over_budget(f: Finding) -> str:
    facts, metric = f.facts, _metric(f)
    tolerance, over = facts["tolerance"], facts["over"]
    beyond = f" by {over}, more than its tolerance {tolerance}" if tolerance and over > tolerance else ""
    which = f", which {_step(f.step)}" if f.step else ""
    return f"{f.metric} {facts['value']} {metric.comparison} budget {facts['key']} {facts['limit']}{beyond}{which}"


def _over_budget_within_tolerance(f: Finding) -> str:
    facts, metric = f.facts, _metric(f)
    return (
        f"{f.metric} {facts['value']} {metric.comparison} budget {facts['key']} {facts['limit']} by {facts['over']}: "
        f"within its tolerance {facts['tolerance']}"
    )


def _change(f: Finding) -> str:
    facts = f.facts
    return f"{f.metric} {_metric(f).grew} by {facts['growth']} vs base ({facts['before']} -> {facts['value']})"


def _edit(f: Finding) -> str:
    return f"{f.facts['key']} {f.facts['base_limit']} -> {f.facts['limit']}"


def _worse_than_base(f: Finding) -> str:
    if f.step:
        return f"{_change(f)}, which {_step(f.step)}"
    tolerance, loosening = f.facts["tolerance"], f.facts["loosening"]
    allowed = f"allowed {loosening + tolerance} (tolerance {tolerance}" + (
        f" + {loosening} loosened by this change's budget edit: {_edit(f)})" if loosening else ")"
    )
    return f"{_change(f)}, {allowed}"


def _worse_than_base_within_tolerance(f: Finding) -> str:
    tolerance, loosening, base_tolerance = f.facts["tolerance"], f.facts["loosening"], f.facts["base_tolerance"]
    by_edit = f" plus {loosening} from this change's budget edit ({_edit(f)})" if loosening else ""
    raised = f"; this change raises its tolerance {base_tolerance} -> {tolerance}" if base_tolerance is not None else ""
    return f"{_change(f)}: within its tolerance {tolerance}{by_edit}{raised}"


_SENTENCES: dict[Reason, Callable[[Finding], str]] = {
    Reason.MISSING_TARGET: lambda f: (
        f"no longer compiled at head: listed in {' and '.join(f.facts['listed_in'])} but not by head's registry"
    ),
    Reason.COMPILE_FAILED: lambda f: f"does not compile at head: {f.facts['error']}",
    Reason.SPILLS: lambda f: "spills/scratch must be 0: " + ", ".join(f"{k}={v}" for k, v in f.facts["counts"].items()),
    Reason.SHARED_OVER_HARDWARE: lambda f: (
        f"shared memory/LDS {f.facts['shared_bytes']} B exceeds the hardware limit {f.facts['shared_limit']} B"
    ),
    Reason.CANNOT_LAUNCH: lambda f: f"occupancy 0: cannot launch ({f.facts['limited_by']})",
    Reason.NO_BUDGET_ENTRY: lambda f: f"no budget entry in {BUDGET_PATH}",
    Reason.OVER_BUDGET: _over_budget,
    Reason.WORSE_THAN_BASE: _worse_than_base,
    Reason.REMOVAL_INTENDED: lambda f: "gone at head; its budget entry was deleted in this change",
    Reason.BASE_DID_NOT_COMPILE: lambda f: "fixed: the base failed to compile",
    Reason.BASE_HAD_NO_ENTRY: lambda f: (
        "the base had this target but no budget entry: its measured numbers stand in "
        "for one, so this entry exempts only what it sets above them"
    ),
    Reason.OVER_BUDGET_WITHIN_TOLERANCE: _over_budget_within_tolerance,
    Reason.WORSE_THAN_BASE_WITHIN_TOLERANCE: _worse_than_base_within_tolerance,
    Reason.BUDGET_EDIT_EXEMPT: lambda f: f"{_change(f)}: accepted by this change's budget edit ({_edit(f)})",
}
