"""The PR speed gate: is the head slower than its base, per (kernel, config, shape), with confidence?

Decides: regression / improvement / no change / inconclusive per benchmark, and
the gate's exit code. Reads: the two commits' kernels (git worktrees), the
thresholds file (``ci/speed_thresholds.json``), an optional calibration. Writes:
Markdown (stdout and the step summary), ``--json`` with every raw sample
(replayable), ``--plot``. Command: ``python -m ci.speed`` (front: ``gate``).
"""
