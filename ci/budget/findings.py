"""What the budget gate found about one target, as codes and numbers: whether it fails is decided from the codes
alone (``Reason.fails``), never from the sentences people read (ci.budget.wording)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class Reason(enum.Enum):
    """A finding's code and ``fails``: whether a target with it fails (else it is a note a person should see)."""

    def __init__(self, _: str, fails: bool) -> None:
        self.fails = fails

    MISSING_TARGET = "missing_target", True  # in the base or the budget, no longer built at head
    COMPILE_FAILED = "compile_failed", True  # head's compiler raised
    SPILLS = "spills", True  # spills or scratch: never budgetable
    SHARED_OVER_HARDWARE = "shared_over_hardware", True  # LDS / shared memory above what the hardware has
    CANNOT_LAUNCH = "cannot_launch", True  # occupancy 0
    NO_BUDGET_ENTRY = "no_budget_entry", True
    OVER_BUDGET = "over_budget", True  # beyond its limit by more than the tolerance, or losing an occupancy step
    WORSE_THAN_BASE = "worse_than_base", True  # grew vs base by more than tolerance + what the budget edit loosened
    REMOVAL_INTENDED = "removal_intended", False  # gone at head, its budget entry deleted in the same change
    BASE_DID_NOT_COMPILE = "base_did_not_compile", False  # head compiles where the base did not
    BASE_HAD_NO_ENTRY = "base_had_no_entry", False  # the base's measured numbers stand in for its entry
    OVER_BUDGET_WITHIN_TOLERANCE = "over_budget_within_tolerance", False
    WORSE_THAN_BASE_WITHIN_TOLERANCE = "worse_than_base_within_tolerance", False
    BUDGET_EDIT_EXEMPT = "budget_edit_exempt", False  # the growth is exactly what this change's budget edit loosened


# A budget edit cannot accept these: the gate proposes no entry for a target that has one.
NOT_BUDGETABLE = frozenset({Reason.SPILLS})


@dataclass(frozen=True)
class OccupancyStep:
    """A resource's growth that costs occupancy on its own: ``resource`` alone allowed ``then``, now ``now``."""

    resource: str
    then: int
    now: int
    unit: str


@dataclass(frozen=True)
class Finding:
    """One thing the gate found: its code, the compared field (if any) and the numbers the report words.

    ``facts`` by code: MISSING_TARGET: listed_in (where it still is); COMPILE_FAILED: error; SPILLS: counts {field: n};
    SHARED_OVER_HARDWARE: shared_bytes, shared_limit; CANNOT_LAUNCH: limited_by; OVER_BUDGET[_WITHIN_TOLERANCE]: value,
    key, limit, over, tolerance; WORSE_THAN_BASE[_WITHIN_TOLERANCE], BUDGET_EDIT_EXEMPT: value, before, growth,
    tolerance, loosening, key, base_limit, limit, base_tolerance (the base's lower tolerance, else None). ``step``: the
    occupancy step the growth loses, where that is why it fails.
    """

    code: Reason
    metric: str | None = None
    facts: Mapping[str, Any] = field(default_factory=dict)
    step: OccupancyStep | None = None

    @property
    def fails(self) -> bool:
        return self.code.fails

    def to_json(self) -> dict[str, Any]:
        step = None if self.step is None else vars(self.step)
        return {
            "code": self.code.name,
            "fails": self.fails,
            "metric": self.metric,
            "facts": dict(self.facts),
            "step": step,
        }
