"""One kernel's figure: TFLOPS by commit (higher is better), fraction of peak, register/LDS headroom and spills.

Four rows on one commit axis (plotly subplots sharing x, commits in history order): a kernel engineer
sees a TFLOPS step and the register or LDS change of the same commit one above the other. Each line
is one (machine, kernel config, shape); a point's hover says its TFLOPS, time, clocks and flags, a
click opens the commit on asv's graph. A step is said one way only: change points
(ci.history.page_changes, the detector of the main job's summary) as shaded commit ranges labelled
with their size and interval. Flagged measurements are drawn as crosses. An empty row says why.

Two axes: ``category`` (each commit a column labelled by its short hash: the recent window) and
``ordinal`` (commits by their position in the history, labelled at a few ticks: the whole history,
whose points ci.history.store.thinned has already cut down).

Imports plotly and this package's data modules.
"""

from __future__ import annotations

from urllib.parse import quote

import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from ci.history import device_peaks, page_changes
from ci.history.store import History, Point, lines

# Architectural limits (harness.resources.occupancy.LIMITS), repeated: the page must not import the harness's parsers.
REGISTER_LIMIT = {"gfx950": 512, "sm_90": 255}  # unified VGPRs per lane / registers per thread
LDS_LIMIT_KIB = {"gfx950": 160, "sm_90": 227}  # LDS per CU / shared memory per block
ROW_TITLES = (
    "TFLOPS by commit (higher is better)",
    "Fraction of the device's peak for the math the kernel runs (higher is better)",
    "Register headroom and spills (compile-only; headroom: higher is better)",
    "LDS / shared-memory headroom (compile-only, KiB; higher is better)",
)


def asv_graph_url(point: Point) -> str:
    """asv's graph of this point's benchmark and parameters, with its commit selected (from html/kernels/)."""
    benchmark = "bench_gemm.GemmOnCpu.track_time" if point.is_cpu else "bench_gemm.GemmOnGpu.track_time"
    query = f"p-kernel_config={quote(repr(point.kernel_config))}&p-shape={quote(repr(point.shape))}&commits={point.commit}"
    return f"../index.html#{benchmark}?{query}"


def line_name(machine: str, kernel_config: str, shape: str, device: str) -> str:
    where = f"{machine}, CPU: not the GPU history" if device == "cpu" else f"{machine}, {device}"
    return f"{kernel_config} {shape} ({where})"


def _hover(point: Point) -> list[str]:
    return [point.commit[:12], f"{point.median_s * 1e3:.4g} ms", point.clocks or "not recorded", "; ".join(point.flags) or "none"]


def _short(value: float) -> float:
    """Five significant digits: what a reader can see, and half the page's bytes."""
    return float(f"{value:.5g}")


HOVER = (
    "<b>%{y:.4g} TFLOPS</b><br>commit %{customdata[0]}<br>time (median) %{customdata[1]}"
    "<br>clocks %{customdata[2]}<br>flags %{customdata[3]}<extra>%{fullData.name}</extra>"
)
# A click opens the point's commit on asv's graph; the URL is built here from the trace's meta (benchmark, config,
# shape) and the point's commit, not stored per point.
CLICK_TO_COMMIT = (
    "<script>document.getElementById('kernel-graph').on('plotly_click', function (e) {"
    " var p = e.points[0], m = p.data.meta; if (!m || !p.customdata) return;"
    " location.href = '../index.html#' + m[0] + '?p-kernel_config=' + encodeURIComponent(\"'\" + m[1] + \"'\")"
    " + '&p-shape=' + encodeURIComponent(\"'\" + m[2] + \"'\") + '&commits=' + m[3][p.pointNumber]; });</script>"
)


def _trace(row: int, kind: str = "scatter", **properties) -> dict:
    """A trace as plotly's JSON, on ``row``'s axes. Traces carry every point, so they skip plotly's validation (most
    of the page's build time at 1000 commits): the layout, built with plotly's API, is still validated."""
    axis = "" if row == 1 else str(row)
    return {"type": kind, "xaxis": f"x{axis}", "yaxis": f"y{axis}", **properties}


def kernel_figure(kernel: str, history: History, changes: list | None = None, axis: str = "category",
                  title_note: str = "") -> tuple[dict, dict]:
    """The figure (plotly's JSON: plotly.io.to_html(figure, validate=False)) and what the page says beside it:
    {"lines": [...], "peaks": {...}, "empty_rows": {...}}.

    ``changes``: this kernel's change points (ci.history.page_changes.for_kernel), drawn as shaded commit ranges.
    ``axis``: "category" (a column per commit) or "ordinal" (commits by position; for a long, thinned history).
    """
    commit_axis = history.commit_axis()
    position = {c: i for i, c in enumerate(commit_axis)}
    x_of = (lambda c: c[:8]) if axis == "category" else position.__getitem__
    fig = make_subplots(rows=4, cols=1, shared_xaxes=True, vertical_spacing=0.06, row_heights=[0.4, 0.2, 0.2, 0.2], subplot_titles=ROW_TITLES)
    mine = [p for p in history.points if p.kernel_config.partition(":")[0] == kernel]
    said: dict = {"lines": [], "peaks": {}, "empty_rows": {}}
    palette = qualitative.Plotly  # one colour per line, the same in the TFLOPS and the peak rows
    kind = "scatter" if axis == "category" else "scattergl"
    traces: list[dict] = []
    for number, ((machine, kernel_config, shape), line) in enumerate(lines(mine).items()):
        colour = palette[number % len(palette)]
        name = line_name(machine, kernel_config, shape, line[-1].device)
        said["lines"].append((name, (machine, kernel_config, shape), line))
        x = [x_of(p.commit) for p in line]
        custom = [_hover(p) for p in line]
        symbols = ["x" if p.flags else "circle" for p in line]
        benchmark = "bench_gemm.GemmOnCpu.track_time" if line[-1].is_cpu else "bench_gemm.GemmOnGpu.track_time"
        traces.append(_trace(
            1, kind, x=x, y=[_short(p.tflops) for p in line], customdata=custom, name=name, legendgroup=name, mode="lines+markers",
            marker={"symbol": symbols, "size": 8 if axis == "category" else 5, "color": colour},
            meta=[benchmark, kernel_config, shape, [p.commit for p in line]],
            line={"dash": "dot" if line[-1].is_cpu else "solid", "color": colour}, hovertemplate=HOVER))
        peak = device_peaks.peak_for(kernel_config, line[-1].device)
        if peak is not None:
            said["peaks"][f"{peak.device}: {peak.math}"] = peak
            traces.append(_trace(
                2, kind, x=x, y=[_short(100 * p.tflops / peak.tflops) for p in line], name=name, legendgroup=name,
                showlegend=False, mode="lines+markers", marker={"symbol": symbols, "size": 6 if axis == "category" else 4, "color": colour},
                line={"color": colour},
                hovertemplate=f"%{{y:.2f}}% of {peak.tflops:g} TFLOPS ({peak.math})<br>commit %{{x}}<extra>{name}</extra>"))
    page_changes.draw(fig, changes or [], position, len(commit_axis), labels=axis == "category")
    traces += _resource_rows(kernel, history, x_of)
    _explain_empty_rows(fig, traces, mine, said, bool(history.resources))
    if axis == "category":
        # Every row labels its commits (a row above an empty one still reads on its own), up to a few dozen; past
        # that the labels of one row would cover the next row's title: the bottom row alone, thinned.
        few = len(commit_axis) <= 40
        fig.update_xaxes(type="category", categoryorder="array", categoryarray=[c[:8] for c in commit_axis], showticklabels=few,
                         nticks=None if few else 25)
        if not few:
            fig.update_xaxes(showticklabels=True, row=4, col=1)
    else:
        ticks = list(range(0, len(commit_axis), max(1, len(commit_axis) // 10)))
        fig.update_xaxes(type="linear", tickvals=ticks, ticktext=[f"{i}: {commit_axis[i][:8]}" for i in ticks],
                         range=[-0.5, len(commit_axis) - 0.5], showticklabels=False)
        fig.update_xaxes(showticklabels=True, row=4, col=1)
    fig.update_xaxes(title_text="commit (oldest to newest)" + title_note, row=4, col=1)
    # Not from zero: the steps this page exists for are 1-3% (a zero-based axis drew the H200's +1% and +3%
    # steps as one flat line); the fraction-of-peak row below keeps zero for scale.
    fig.update_yaxes(title_text="TFLOPS", rangemode="normal", row=1, col=1)
    fig.update_yaxes(title_text="% of peak", rangemode="tozero", row=2, col=1)
    fig.update_yaxes(title_text="registers", row=3, col=1)
    fig.update_yaxes(title_text="KiB", row=4, col=1)
    fig.update_layout(
        height=1100, hovermode="closest", template="plotly_white", margin={"t": 60, "r": 20},
        legend={"orientation": "h", "yanchor": "top", "y": -0.06, "x": 0},
        title={"text": f"{kernel}: TFLOPS by commit, higher is better"},
    )
    figure = fig.to_plotly_json()
    figure["data"] = traces
    return figure, said


def _resource_rows(kernel: str, history: History, x_of) -> list[dict]:
    traces = []
    for (name, arch, metric), values in sorted(history.resources.items()):
        if name != kernel:
            continue
        values = sorted(values)
        x, y = [x_of(c) for _, c, _ in values], [v for _, _, v in values]
        if metric == "registers" and arch in REGISTER_LIMIT:
            traces.append(_trace(3, x=x, y=[REGISTER_LIMIT[arch] - v for v in y], name=f"register headroom {arch} (of {REGISTER_LIMIT[arch]})",
                                 mode="lines+markers", hovertemplate="%{y:.0f} registers free<extra>%{fullData.name}</extra>"))
        elif metric in ("spilled_registers", "spill_bytes"):
            unit = "registers" if metric == "spilled_registers" else "bytes"
            traces.append(_trace(3, x=x, y=y, name=f"spills {arch} ({unit}; lower is better)", mode="lines+markers",
                                 line={"dash": "dash"}, hovertemplate=f"%{{y:.0f}} {unit} spilled<extra>%{{fullData.name}}</extra>"))
        elif metric == "shared_memory_bytes" and arch in LDS_LIMIT_KIB:
            traces.append(_trace(4, x=x, y=[LDS_LIMIT_KIB[arch] - v / 1024 for v in y], name=f"LDS headroom {arch} (of {LDS_LIMIT_KIB[arch]} KiB)",
                                 mode="lines+markers", hovertemplate="%{y:.1f} KiB free<extra>%{fullData.name}</extra>"))
    return traces


def _explain_empty_rows(fig: go.Figure, traces: list[dict], mine: list[Point], said: dict, compiled_any: bool) -> None:
    has_rows = {1: bool(mine), 2: bool(said["peaks"])}
    has_rows[3] = any(t["yaxis"] == "y3" for t in traces)
    has_rows[4] = any(t["yaxis"] == "y4" for t in traces)
    reasons = {
        1: "No TFLOPS measured for this kernel in these results (see the reasons below the graph).",
        2: "No peak to compare with: " + ("no GPU measurement here (CPU timings have no device peak)." if not any(not p.is_cpu for p in mine)
                                          else "this device's peak for the kernel's math is not in ci/history/device_peaks.py."),
        3: "No compile-only register counts in these results (asv machine 'compile-only': python -m ci.history --tracks cpu).",
        4: "No compile-only LDS counts in these results (asv machine 'compile-only': python -m ci.history --tracks cpu).",
    }
    if compiled_any:  # the compile-only track ran: this kernel has no count there (n/a on both archs, or failed)
        reasons[3] = reasons[4] = ("No compile-only count for this kernel: n/a when it does not compile without a GPU for gfx950 or sm_90 "
                                   "(python -m ci.budget.resources says why), or it was left out of the run (--bench)")
    for row, has in has_rows.items():
        if not has:
            said["empty_rows"][row] = reasons[row]
            low, high = fig.layout["yaxis" if row == 1 else f"yaxis{row}"].domain
            fig.add_annotation(text=reasons[row], xref="paper", yref="paper", x=0.5, y=(low + high) / 2,
                               showarrow=False, font={"size": 13, "color": "#555"}, name="why-empty")
