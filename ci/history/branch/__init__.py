"""The ``asv-results`` branch (results_branch): written with GitPython, safe when runners race; what it adds to
``.asv/results`` and what this machine adds to it."""
