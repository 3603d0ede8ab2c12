"""The PR resource gate: did registers, spills, LDS or occupancy regress against the budget and the base?

Decides: pass / fail per compile target (kernel x arch x config) and the exit
code. Reads: the committed budget (``ci/register_budget.json``) at head and
merge-base, and each side's compiled ISA/PTX (compile-only, no GPU). Writes:
Markdown, ``--json``, and with ``--update-budget`` the tightened budget.
Commands: ``python -m ci.budget`` (the gate), ``python -m ci.budget.resources``
(the resource table of every target).
"""
