"""asv's regressions page from the project's change-point detector: one way to say a step, everywhere.

asv finds steps in each graph with its own method (``asv.step_detect.detect_steps``, an L1 piecewise
fit whose penalty it tunes per series) and lists those beyond a threshold on its Regressions page.
That was a third answer beside the kernel pages' and the main job's, and the largest cost of a
publish (about 60% of it over 1000 commits). The plug-in (ci/history/site/asv_html.py) puts
:func:`detect_steps` in its place when asv loads it: the same segments, in asv's format, cut where
harness.changepoints finds a change (docs/CHANGE_POINTS.md). asv's own rule then decides what its
page lists (``regressions_thresholds`` in asv.conf.json), over the same steps the kernel pages
shade.

asv's graphs are seconds (lower is better); the detector finds changes either way, and asv's
``detect_regressions`` says which are regressions. Imports numpy, asv's step module and
harness.changepoints.
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
