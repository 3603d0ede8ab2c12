"""The main job: the asv history of ``main`` on this runner, recorded so that nothing is lost.

Decides: which commits to measure, whether each results file is sound (else
quarantined and re-measured), and the job's exit code. Reads: the git history,
the ``asv-results`` branch, asv's results and the per-measurement records.
Writes: the ``asv-results`` branch (results/<machine>/), the published HTML,
a summary (Markdown, ``--json``). Command: ``python -m ci.history``.

Fronts here (main_job, publish, options, run, messages); the rest by subsystem: asv_results, branch,
measure, trends, site (docs/HISTORY.md, "Layout").
"""
