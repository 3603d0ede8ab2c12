"""The ``asv-results`` branch: results_branch (written with GitPython, safe when runners race) and branch_sync
(what the branch adds to ``.asv/results`` and what this machine adds to the branch)."""
