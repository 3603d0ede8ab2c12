"""Seconds to draw N change-point bands on a kernel page's figure (docs/PERF_NOTES.md, "The history at scale").

    PYTHONPATH=. .venv/bin/python docs/data/change_bands_cost.py 300

Synthetic change points, one every 3 commits of a 1000-commit axis, on a 3-row figure as the kernel pages draw
(ci.history.site.page_changes.draw). Prints N, the seconds, and how many shapes and labels the figure got.
"""

import sys
import time
from types import SimpleNamespace

from plotly.subplots import make_subplots

from ci.history.site import page_changes
from harness import changepoints

n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
fig = make_subplots(rows=3, cols=1, shared_xaxes=True)
fig.add_scatter(x=list(range(1000)), y=list(range(1000)), row=1, col=1)
found = [
    (
        ("machine", "kernel[config]", "shape"),
        SimpleNamespace(
            first_after=f"c{3 * i + 1}",
            last_before=f"c{3 * i}",
            change=SimpleNamespace(direction=changepoints.REGRESSION, relative_change=-0.02, interval=(-0.03, -0.01)),
        ),
    )
    for i in range(n)
]
started = time.perf_counter()
page_changes.draw(fig, found, {f"c{i}": i for i in range(1000)}, 1000)
print(
    f"{n} bands: {time.perf_counter() - started:.2f} s, {len(fig.layout.shapes)} shapes, "
    f"{len(fig.layout.annotations)} labels"
)
