"""The PR resource gate: did registers, spills, LDS or occupancy regress against the budget and the base?

Commands: ``python -m ci.budget`` (the gate), ``python -m ci.budget.resources`` (every target's resources). Fronts
``gate.py`` / ``resources.py`` build ``options.py``'s frozen objects; ``run.py`` resolves, ``measure.py`` measures each
checkout (a child ``ci.budget.resources``, whose work is ``compiling.py`` over ``targets.py``), ``compare.py`` decides
against ``budget_file.py`` by the fields of ``metrics.py`` into ``findings.py``'s reason codes; ``wording.py`` and
``report.py`` turn them into sentences, Markdown and JSON. docs/BUDGET_GATE.md says what fails and why.
"""
