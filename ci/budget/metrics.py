"""The resource fields the budget gate compares (one :class:`Metric` each), and which way is worse for each."""

from __future__ import annotations

from dataclasses import dataclass

from harness.resources.usage import SPILL_FIELDS


@dataclass(frozen=True)
class Metric:
    """One compared field of a resource record (harness.resources.ResourceUsage)."""

    field: str
    budget_key: str | None  # None: spills and scratch, which must be 0 and cannot be budgeted
    higher_is_worse: bool = True

    def worse_by(self, value: int, reference: int) -> int:
        """How much worse ``value`` is than ``reference`` (negative: better)."""
        return value - reference if self.higher_is_worse else reference - value

    def worsened(self, reference: int, amount: int) -> int:
        return reference + amount if self.higher_is_worse else reference - amount

    def loosest(self, *values: int) -> int:
        return max(values) if self.higher_is_worse else min(values)

    def tightest(self, *values: int) -> int:
        return min(values) if self.higher_is_worse else max(values)

    @property
    def comparison(self) -> str:
        return ">" if self.higher_is_worse else "<"

    @property
    def grew(self) -> str:
        return "grew" if self.higher_is_worse else "dropped"


METRICS = (
    Metric("registers", "max_registers"),
    Metric("arch_vgpr", "max_arch_vgpr"),
    Metric("agpr", "max_agpr"),
    Metric("sgpr", "max_sgpr"),
    Metric("shared_bytes", "max_shared_bytes"),
    Metric("occupancy", "min_occupancy", higher_is_worse=False),
    Metric("accvgpr_copies", "max_accvgpr_copies"),
    Metric("accvgpr_copies_in_loop", "max_accvgpr_copies_in_loop"),
    *(Metric(name, None) for name in SPILL_FIELDS),
)
METRIC_BY_FIELD = {m.field: m for m in METRICS}
BUDGET_KEYS = {m.budget_key: m for m in METRICS if m.budget_key}
# Which budget keys an entry must have (and may have), by arch family: every field the arch measures.
FAMILY_KEYS = {"gfx": tuple(BUDGET_KEYS), "sm": ("max_registers", "max_shared_bytes", "min_occupancy")}
