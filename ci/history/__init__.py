"""The main job: the asv history of ``main`` on this runner, recorded so that nothing is lost.

Fronts here (main_job, publish, options, run, messages); the rest by subsystem: asv_results, branch,
measure, trends, site (docs/HISTORY.md, "Layout").
"""
