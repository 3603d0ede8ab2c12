"""asv's regressions page from the project's change-point detector: one way to say a step, everywhere.

Why: docs/HISTORY.md, "site/asv_steps.py".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from harness import changepoints


def detect_steps(y: Sequence[Any], w: Sequence[Any] | None = None) -> list[tuple[int, int, float, float, float]]:
    """asv's ``detect_steps`` contract: segments (left, right, value, min, mean |y - value|) over the non-missing
    points of ``y``, left inclusive and right exclusive in ``y``'s indices, cut at the detector's change points."""
    kept = [
        (i, float(v))
        for i, v in enumerate(y)
        if v is not None and not (isinstance(v, float) and math.isnan(v)) and (w is None or w[i] is None or w[i] > 0)
    ]
    if not kept:
        return []
    index = [i for i, _ in kept]
    values = np.array([v for _, v in kept])
    if np.all(values > 0):
        cuts = [c.position for c in changepoints.find(np.log(values))]
    else:  # asv's graphs hold positive seconds and counts; a zero count (no spill) has no log: no cut is safer
        cuts = []
    bounds = [0, *cuts, len(values)]
    steps = []
    for left, right in zip(bounds, bounds[1:]):
        part = values[left:right]
        value = float(np.median(part))
        steps.append(
            (index[left], index[right - 1] + 1, value, float(part.min()), float(np.mean(np.abs(part - value))))
        )
    return steps


def install() -> None:
    """Make asv's graphs use :func:`detect_steps` (asv.graph calls ``step_detect.detect_steps`` at call time; its
    worker processes fork after the plug-in is imported, so they see it too)."""
    from asv import step_detect

    step_detect.detect_steps = detect_steps
