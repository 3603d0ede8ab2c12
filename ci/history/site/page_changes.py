"""Change points on the kernel pages: the main job's detector over each GPU line, drawn as shaded commit ranges.

Why: docs/HISTORY.md, "site/page_changes.py".
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from ci.history.asv_results.store import GEMM_KEY
from ci.history.site.commit_info import iso
from ci.history.trends import regressions
from harness import changepoints

LineKey = tuple[str, str, str]  # (machine, kernel config, shape): one line of the page
GAIN_COLOUR, REGRESSION_COLOUR = "#1a9850", "#d73027"
METHOD = (
    "Multi-scale local comparison of each GPU line's commit levels (the median of every sample of each commit), "
    "each change confirmed between its neighbouring changes; under 1% of pure-noise histories of 1000 commits "
    "get any; a change is kept only where the median levels between it and its neighbouring changes differ by at "
    "least 0.5%, and the size shown is measured over the commits nearest it (up to 100 a side), so it can be smaller "
    "(docs/CHANGE_POINTS.md); as in the main job's "
    "summary"
)


def from_checks(checks: list[dict[str, Any]]) -> dict[LineKey, list[regressions.CommitChange]]:
    """Each GPU line's change points, by (machine, kernel config, shape), from the machines' history checks
    (ci.history.trends.regressions.history_checks); lines without one are left out."""
    out: dict[LineKey, list[regressions.CommitChange]] = {}
    for machine in checks:
        for entry in machine["change_points"]:
            match = GEMM_KEY.match(entry["benchmark"])
            if match is None or match.group(1) != "GemmOnGpu":
                continue
            out.setdefault((entry["machine"], match.group(2), match.group(3)), []).append(
                regressions.CommitChange.from_json(entry)
            )
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


def for_kernel(
    changes: dict[LineKey, list[regressions.CommitChange]], kernel: str
) -> list[tuple[LineKey, regressions.CommitChange]]:
    return [(line, c) for line, found in sorted(changes.items()) if line[1].partition(":")[0] == kernel for c in found]


def size_label(change: regressions.CommitChange) -> str:
    """'regression −3.1% [−3.6, −2.6]': direction, size, and its interval (percent)."""
    c = change.change
    size, low, high = (f"{v * 100:+.1f}".replace("-", "\u2212") for v in (c.relative_change, *c.interval))
    return f"{c.direction} {size}% [{low}, {high}]"


def colour(change: regressions.CommitChange) -> str:
    return REGRESSION_COLOUR if change.change.direction == changepoints.REGRESSION else GAIN_COLOUR


# Band labels drawn on each row at most, newest first, each at a height of its own (hover and the table say all); a
# label only where no label of its row is nearer than LABEL_GAP of the axis (a label is ~200 px of a plot ~870-960 px
# wide: closer, the newest eight of a long history stacked in one column over the lines).
LABELLED = 8
LABEL_GAP = 0.25


def draw(
    fig: go.Figure,
    found: list[tuple[LineKey, regressions.CommitChange]],
    when: dict[str, float],
    axes: dict[str, tuple[str, str]],
) -> dict[str, Any]:
    """A shaded range per change point on its machine's GPU TFLOPS row, labelled with its size and interval where no
    other label of the row is within LABEL_GAP of the axis (the newest first, at most LABELLED a row; labels stack so
    that none hides another), and a marker over every band, on an invisible y axis over its row (0 to 1), whose hover
    says the same label. Returns what was drawn, for the page's sentences: {"bands": n, "labelled": k}.

    ``axes``: machine -> (its row's y axis, e.g. "y2"; the invisible axis over it, e.g. "y9"); a change of a machine
    without one is not drawn. ``when``: commit -> its place on the date axis (seconds); a change whose first commit at
    the new level is off the axis (older than a window of the newest commits) is left out, one whose last old commit is
    off it starts at the axis's first commit. The markers' traces (plotly JSON) are returned under "traces"."""
    # Shapes and labels go in as one layout update: plotly's add_vrect / add_annotation re-validate every shape and
    # label already there on each call, so a page with hundreds of change points cost seconds per band drawn.
    shown = sorted(
        ((line, c) for line, c in found if c.first_after in when and line[0] in axes),
        key=lambda item: when[item[1].first_after],
        reverse=True,
    )
    if not shown:
        return {"bands": 0, "labelled": 0, "traces": []}
    first, last = min(when.values()), max(when.values())
    span = max(last - first, 1.0)
    bands: list[dict] = []
    notes: list[dict] = []
    labelled: dict[str, list[float]] = {}
    marks: dict[str, dict[str, list]] = {}
    for (machine, kernel_config, shape), change in shown:
        axis, hover_axis = axes[machine]
        end = when[change.first_after]
        start = when.get(change.last_before, first)
        # Over months of history a one-commit band would be under a pixel: at least 1/300 of the axis wide.
        widen = max(0.0, (span / 300 - (end - start)) / 2)
        label = size_label(change)
        bands.append(
            {
                "type": "rect",
                "xref": "x",
                "yref": f"{axis} domain",
                "x0": iso(start - widen),
                "x1": iso(end + widen),
                "y0": 0,
                "y1": 1,
                "fillcolor": colour(change),
                "opacity": 0.18,
                "line": {"width": 0},
                "layer": "below",
                "name": f"change point: {label} ({kernel_config} {shape}, {machine})",
            }
        )
        middle = (start + end) / 2
        mark = marks.setdefault(hover_axis, {"x": [], "text": [], "color": []})
        mark["x"].append(iso(middle))
        mark["color"].append(colour(change))
        mark["text"].append(
            f"<b>{label}</b><br>{kernel_config} {shape} on {machine}<br>"
            f"suspected commits {change.last_before[:8]}..{change.first_after[:8]}"
        )
        near = labelled.setdefault(axis, [])
        if len(near) < LABELLED and all(abs(middle - other) > LABEL_GAP * span for other in near):
            # The label runs into the wider side of the graph from the band, never past the axis.
            left_half = middle < first + span / 2
            notes.append(
                {
                    "x": iso(end if left_half else start),
                    "y": 0.97 - 0.07 * len(near),
                    "xref": "x",
                    "yref": f"{axis} domain",
                    "showarrow": False,
                    "text": f"<b>{label}</b>",  # in the table too
                    "font": {"size": 11, "color": colour(change)},
                    "bgcolor": "rgba(255,255,255,0.8)",
                    "xanchor": "left" if left_half else "right",
                    "name": "change-point",
                }
            )
            near.append(middle)
    fig.update_layout(shapes=[*fig.layout.shapes, *bands], annotations=[*fig.layout.annotations, *notes])
    traces = [
        {
            "type": "scatter",
            "x": mark["x"],
            "y": [1.0] * len(mark["x"]),
            "mode": "markers",
            "hovertext": mark["text"],
            "hoverinfo": "text",
            "marker": {"symbol": "triangle-down", "size": 9, "color": mark["color"]},
            "cliponaxis": False,
            "showlegend": False,
            "name": "change points",
            "xaxis": "x",
            "yaxis": hover_axis,
        }
        for hover_axis, mark in marks.items()
    ]
    return {"bands": len(bands), "labelled": len(notes), "traces": traces}


def spans(
    found: list[tuple[LineKey, regressions.CommitChange]], line_commits: dict[LineKey, list[str]]
) -> dict[tuple[LineKey, str], int]:
    """(line, first commit at the new level) -> how many of the line's commits are at that level: from that commit up
    to the next change point of the line, or to its newest commit. ``line_commits``: each line's commits in order, over
    the whole history (a window's or a thinned page's points would count fewer)."""
    out = {}
    by_line: dict[LineKey, list[str]] = {}
    for line, change in found:
        by_line.setdefault(line, []).append(change.first_after)
    for line, firsts in by_line.items():
        commits = line_commits.get(line, [])
        position = {c: i for i, c in enumerate(commits)}
        starts = sorted(position[c] for c in firsts if c in position)
        for here, following in zip(starts, [*starts[1:], len(commits)]):
            out[(line, commits[here])] = following - here
    return out
