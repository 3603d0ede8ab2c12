"""The PR resource gate: did registers, spills, LDS or occupancy regress against the budget and the base?

Its modules, and what fails and why: docs/BUDGET_GATE.md.
"""
