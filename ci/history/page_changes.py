"""Change points on the kernel pages: the main job's detector over each GPU line, drawn as shaded commit ranges.

The same method, settings and series as the main job's summary and JSON (ci.history.regressions,
harness.changepoints, docs/CHANGE_POINTS.md): the site build computes each machine's checks once
and both the pages and the JSON are drawn from them, so they never disagree about a change. A
change is drawn where it is suspected: the commits after the last one measured at the old level up
to the first at the new (``(last_before, first_after]``), shaded in red for a TFLOPS drop (a
regression) and green for a gain (an improvement), labelled with its size and 95% interval.

Only GPU lines are checked, as in the main job: a CPU machine's timings moved 19-45% between runs
(ci.history.regressions.CPU_NOT_CHECKED). Machines are never mixed: a series is one machine's.
The newest commits, where a change point needs three commits after it, are the drift guard's
(shown per line beside the change points).
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from ci.history import regressions
from ci.history.summary import GEMM_KEY
from harness import changepoints

LineKey = tuple[str, str, str]  # (machine, kernel config, shape): one line of the page
GAIN_COLOUR, REGRESSION_COLOUR = "#1a9850", "#d73027"
METHOD = ("Multi-scale local comparison of each GPU line's commit levels (the median of every sample of each commit), "
          "each change confirmed between its neighbouring changes; under 1% of pure-noise histories of 1000 commits get "
          "any, and a change must move the level by at least 0.5% (docs/CHANGE_POINTS.md); as in the main job's summary")


def from_checks(checks: list[dict[str, Any]]) -> dict[LineKey, list[regressions.CommitChange]]:
    """Each GPU line's change points, by (machine, kernel config, shape), from the machines' history checks
    (ci.history.regressions.history_checks); lines without one are left out."""
    out: dict[LineKey, list[regressions.CommitChange]] = {}
    for machine in checks:
        for entry in machine["change_points"]:
            match = GEMM_KEY.match(entry["benchmark"])
            if match is None or match.group(1) != "GemmOnGpu":
                continue
            out.setdefault((entry["machine"], match.group(2), match.group(3)), []).append(regressions.CommitChange.from_json(entry))
    return out


def drift_by_line(checks: list[dict[str, Any]]) -> dict[LineKey, dict[str, Any]]:
    """(machine, kernel config, shape) -> the drift guard's verdict on its newest commit (Drift.to_json())."""
    out = {}
    for machine in checks:
        for entry in machine["drift"]:
            match = GEMM_KEY.match(entry["benchmark"])
            if match is not None:
                out[(entry["machine"], match.group(2), match.group(3))] = entry
    return out


def for_kernel(changes: dict[LineKey, list[regressions.CommitChange]], kernel: str) -> list[tuple[LineKey, regressions.CommitChange]]:
    return [(line, c) for line, found in sorted(changes.items()) if line[1].partition(":")[0] == kernel for c in found]


def _percent(value: float) -> str:
    return f"{value * 100:+.1f}%".replace("-", "\u2212")


def size_label(change: regressions.CommitChange) -> str:
    """'regression −3.1% [−3.6, −2.6]': direction, size, and its interval (percent)."""
    c = change.change
    low, high = (f"{v * 100:+.1f}".replace("-", "\u2212") for v in c.interval)
    return f"{c.direction} {_percent(c.relative_change)} [{low}, {high}]"


def colour(change: regressions.CommitChange) -> str:
    return REGRESSION_COLOUR if change.change.direction == changepoints.REGRESSION else GAIN_COLOUR


def draw(fig: go.Figure, found: list[tuple[LineKey, regressions.CommitChange]], position: dict[str, int], columns: int,
         labels: bool = True) -> None:
    """A shaded range per change point on the TFLOPS row, with its label (``labels``; the whole history's page has
    too many: its table lists them); labels stack so that none hides another.

    ``position``: commit -> its column on the axis (category index or ordinal); a range reaching outside the
    axis (a window of the newest commits) is cut at its edge."""
    # Shapes and labels go in as one layout update: plotly's add_vrect / add_annotation re-validate every shape and
    # label already there on each call, so a page with hundreds of change points cost seconds per band drawn.
    bands: list[dict] = []
    notes: list[dict] = []
    for number, ((machine, kernel_config, shape), change) in enumerate(found):
        end = position.get(change.first_after)
        if end is None:
            continue
        start = position.get(change.last_before, -1)
        # Category positions are column indices: the band covers the columns of the suspected commits; over thousands
        # of commits a one-commit band would be under a pixel, so it is at least 1/300 of the axis wide there.
        widen = max(0.0, (columns / 300 - (end - start)) / 2)
        # Row 1 is the first subplot: its axes are x and y; "y domain" spans the row's height.
        bands.append({"type": "rect", "xref": "x", "yref": "y domain", "x0": start + 0.5 - widen, "x1": end + 0.5 + widen,
                      "y0": 0, "y1": 1, "fillcolor": colour(change), "opacity": 0.18, "line": {"width": 0},
                      "layer": "below", "name": f"change point: {size_label(change)} ({kernel_config} {shape}, {machine})"})
        # The label runs into the wider side of the graph from the band, never past the commit axis.
        left_half = (start + end) / 2 < columns / 2
        if labels and number < 12:  # beyond a dozen, the table below the graph lists them; labels would hide the lines
            notes.append({"x": end + 0.5 if left_half else start + 0.5, "y": 0.97 - 0.07 * (number % 8), "xref": "x",
                          "yref": "y domain", "showarrow": False, "text": f"<b>{size_label(change)}</b>",  # in the table too
                          "font": {"size": 11, "color": colour(change)}, "bgcolor": "rgba(255,255,255,0.8)",
                          "xanchor": "left" if left_half else "right", "name": "change-point"})
    if bands:
        fig.update_layout(shapes=[*fig.layout.shapes, *bands], annotations=[*fig.layout.annotations, *notes])
        # The axis is the commits': labels must not widen it (plotly's autorange makes room for them), on
        # every row (the rows' axes match one another, and an unset one would widen them all)
        fig.update_xaxes(range=[-0.5, columns - 0.5])


