"""The PR resource gate: did registers, spills, LDS or occupancy regress against the budget and the base?

Decides: pass / fail per compile target (kernel x arch x config) and the exit
code. Reads: the committed budget (``ci/register_budget.json``) at head and
merge-base, and each side's compiled ISA/PTX (compile-only, no GPU). Writes:
Markdown, ``--json``, and with ``--update-budget`` the tightened budget.
Commands: ``python -m ci.budget`` (the gate), ``python -m ci.budget.resources``
(the resource table of every target).

Modules, front to back:
  gate.py / resources.py  the two fronts: argparse -> options -> run -> exit code
  options.py              GateOptions, ResourcesOptions: frozen, checked whole before any work
  run.py                  one gate run: resolve (ci.common.gitutil), measure, compare, report
  measure.py              one checkout's resources, through a child ``ci.budget.resources``
  targets.py              what the registry can compile here; one line per failure
  compiling.py            compile-only targets and their resource table (the resources command's work)
  budget_file.py          the budget JSON: schema, parse, validate, ratchet writes
  metrics.py              the compared fields and which way is worse
  compare.py              head vs base vs budget -> TargetCheck with findings
  findings.py             Reason codes (decisions read these) and Finding
  wording.py              the sentence for each finding
  report.py               table, Markdown, entries to paste, JSON verdict
"""
