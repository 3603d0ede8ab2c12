"""Change points on the kernel pages: the main job's detector over each GPU line, drawn as shaded commit ranges.

The same method, level and series as the main job's summary and JSON (ci.history.regressions:
E-divisive means over one (machine, benchmark), every sample of each commit, level 0.01,
docs/CHANGE_POINTS.md), so the page and the summary never disagree about a change. A change is
drawn where it is suspected: the commits after the last one measured at the old level up to the
first at the new (``(last_before, first_after]``), shaded in red for a TFLOPS drop (a regression)
and green for a gain (an improvement), labelled with its size and 95% interval.

Only GPU lines are checked, as in the main job: a CPU machine's timings moved 19-45% between runs
(ci.history.regressions.CPU_NOT_CHECKED). Machines are never mixed: a series is one machine's.

The consecutive-step triangles (ci.history.tflops_points.steps) stay as a quick look at one
commit against the previous one, the newest commit included (a change point needs two commits
after it); the page says which is which and whether a step is confirmed by a change point.
"""

from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go

from ci.history import regressions
from ci.history.summary import GEMM_KEY
from ci.history.tflops_points import History
from harness import changepoints

LineKey = tuple[str, str, str]  # (machine, kernel config, shape): one line of the page
GAIN_COLOUR, REGRESSION_COLOUR = "#1a9850", "#d73027"
METHOD = ("E-divisive means over each GPU line's commits (every sample of each commit), "
          "level 0.01 (docs/CHANGE_POINTS.md), as in the main job's summary")


def find(results_dir: Path, history: History) -> dict[LineKey, list[regressions.CommitChange]]:
    """Each GPU line's change points, by (machine, kernel config, shape); lines without one are left out."""
    commits = [c for c, _ in sorted(history.commits.items(), key=lambda item: (item[1], item[0]))]
    out: dict[LineKey, list[regressions.CommitChange]] = {}
    for machine in sorted({p.machine for p in history.points if not p.is_cpu}):
        for key, series in regressions.machine_series(results_dir, machine, commits).items():
            match = GEMM_KEY.match(key)
            if match is None or match.group(1) != "GemmOnGpu":
                continue
            found = regressions.change_points(series)
            if found:
                out[(machine, match.group(2), match.group(3))] = found
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


def draw(fig: go.Figure, found: list[tuple[LineKey, regressions.CommitChange]], commit_axis: list[str]) -> None:
    """A shaded range per change point on the TFLOPS row, with its label; labels stack so that none hides another."""
    column = {c: i for i, c in enumerate(commit_axis)}
    drawn = False
    for number, ((machine, kernel_config, shape), change) in enumerate(found):
        start, end = column.get(change.last_before[:8]), column.get(change.first_after[:8])
        if start is None or end is None:
            continue
        # Category positions are column indices: the band covers the columns of the suspected commits.
        fig.add_vrect(x0=start + 0.5, x1=end + 0.5, row=1, col=1, fillcolor=colour(change), opacity=0.18, line_width=0,
                      layer="below", name=f"change point: {size_label(change)}")
        # The label runs into the wider side of the graph from the band, never past the commit axis.
        left_half = end + 0.5 < len(commit_axis) / 2
        fig.add_annotation(x=end + 0.5 if left_half else start + 0.5, y=0.97 - 0.07 * (number % 8), xref="x", yref="y domain",
                           showarrow=False, text=f"<b>{size_label(change)}</b> ({kernel_config} {shape}, {machine})",
                           font={"size": 11, "color": colour(change)}, bgcolor="rgba(255,255,255,0.8)",
                           xanchor="left" if left_half else "right", name="change-point")
        drawn = True
    if drawn:  # the axis is the commits': labels must not widen it (plotly's autorange makes room for them)
        fig.update_xaxes(range=[-0.5, len(commit_axis) - 0.5], row=1, col=1)


def confirms(found: list[tuple[LineKey, regressions.CommitChange]], line: LineKey, commit: str, kind: str) -> bool:
    """Whether a consecutive step (gain or regression) at ``commit`` is a change point of the same line and sign."""
    direction = changepoints.REGRESSION if kind == "regression" else changepoints.IMPROVEMENT
    return any(key == line and c.first_after == commit and c.change.direction == direction for key, c in found)
