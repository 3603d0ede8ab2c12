"""The one error the budget gate reports as "cannot decide" (exit 2)."""


class HarnessError(RuntimeError):
    """The gate could not decide (bad ref, malformed budget, unreadable results, selectors matching nothing)."""
