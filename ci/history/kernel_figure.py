"""One kernel's figure: TFLOPS by commit (higher is better), fraction of peak, register/LDS headroom and spills.

Four rows on one commit axis (plotly subplots sharing x, commits in history order, labelled by
their short hash): a kernel engineer sees a TFLOPS step and the register or LDS change of the same
commit one above the other. Each line is one (machine, kernel config, shape); a point's hover says
its TFLOPS, time, clocks and flags, a click opens the commit on asv's graph. Steps beyond noise
(ci.history.tflops_points.steps) are drawn as green up-triangles (gain) and red down-triangles
(regression); change points (ci.history.page_changes) as shaded commit ranges labelled with their
size and interval; flagged measurements are drawn as crosses. An empty row says why it is empty.

Imports plotly and this package's data modules.
"""

from __future__ import annotations

from urllib.parse import quote

import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from ci.history import device_peaks, page_changes
from ci.history.tflops_points import History, Point, lines, steps

# Architectural limits (harness.resources.occupancy.LIMITS), repeated: the page must not import the harness's parsers.
REGISTER_LIMIT = {"gfx950": 512, "sm_90": 255}  # unified VGPRs per lane / registers per thread
LDS_LIMIT_KIB = {"gfx950": 160, "sm_90": 227}  # LDS per CU / shared memory per block
ROW_TITLES = (
    "TFLOPS by commit (higher is better)",
    "Fraction of the device's peak for the math the kernel runs (higher is better)",
    "Register headroom and spills (compile-only; headroom: higher is better)",
    "LDS / shared-memory headroom (compile-only, KiB; higher is better)",
)
GAIN_COLOUR, REGRESSION_COLOUR = "#1a9850", "#d73027"


def asv_graph_url(point: Point) -> str:
    """asv's graph of this point's benchmark and parameters, with its commit selected (from html/kernels/)."""
    benchmark = "bench_gemm.GemmOnCpu.track_time" if point.is_cpu else "bench_gemm.GemmOnGpu.track_time"
    query = f"p-kernel_config={quote(repr(point.kernel_config))}&p-shape={quote(repr(point.shape))}&commits={point.commit}"
    return f"../index.html#{benchmark}?{query}"


def line_name(machine: str, kernel_config: str, shape: str, device: str) -> str:
    where = f"{machine}, CPU: not the GPU history" if device == "cpu" else f"{machine}, {device}"
    return f"{kernel_config} {shape} ({where})"


def _hover(point: Point) -> list[str]:
    return [
        point.commit[:12],
        f"{point.median_s * 1e3:.4g} ms",
        point.clocks or "not recorded",
        "; ".join(point.flags) or "none",
        asv_graph_url(point),
    ]


HOVER = (
    "<b>%{y:.4g} TFLOPS</b><br>commit %{customdata[0]}<br>time (median) %{customdata[1]}"
    "<br>clocks %{customdata[2]}<br>flags %{customdata[3]}<extra>%{fullData.name}</extra>"
)


def kernel_figure(kernel: str, history: History, changes: list | None = None) -> tuple[go.Figure, dict]:
    """The figure and what the page says beside it: {"steps": [...], "quiet": [...], "peaks": {...}, "empty_rows": {...}}.

    ``changes``: this kernel's change points (ci.history.page_changes.for_kernel), drawn as shaded commit ranges.
    """
    commit_axis = [c[:8] for c, _ in sorted(history.commits.items(), key=lambda item: (item[1], item[0]))]
    fig = make_subplots(rows=4, cols=1, shared_xaxes=True, vertical_spacing=0.06, row_heights=[0.4, 0.2, 0.2, 0.2], subplot_titles=ROW_TITLES)
    mine = [p for p in history.points if p.kernel_config.partition(":")[0] == kernel]
    said = {"steps": [], "quiet": [], "peaks": {}, "empty_rows": {}}
    gains, regressions = [], []
    palette = qualitative.Plotly  # one colour per line, the same in the TFLOPS and the peak rows
    for number, ((machine, kernel_config, shape), line) in enumerate(lines(mine).items()):
        colour = palette[number % len(palette)]
        name = line_name(machine, kernel_config, shape, line[-1].device)
        x = [p.commit[:8] for p in line]
        custom = [_hover(p) for p in line]
        symbols = ["x" if p.flags else "circle" for p in line]
        fig.add_trace(
            go.Scatter(x=x, y=[p.tflops for p in line], customdata=custom, name=name, legendgroup=name, mode="lines+markers",
                       marker={"symbol": symbols, "size": 8, "color": colour},
                       line={"dash": "dot" if line[-1].is_cpu else "solid", "color": colour}, hovertemplate=HOVER),
            row=1, col=1,
        )
        peak = device_peaks.peak_for(kernel_config, line[-1].device)
        if peak is not None:
            said["peaks"][f"{peak.device}: {peak.math}"] = peak
            fig.add_trace(
                go.Scatter(x=x, y=[100 * p.tflops / peak.tflops for p in line], customdata=custom, name=name, legendgroup=name,
                           showlegend=False, mode="lines+markers", marker={"symbol": symbols, "size": 6, "color": colour}, line={"color": colour},
                           hovertemplate=f"%{{y:.2f}}% of {peak.tflops:g} TFLOPS ({peak.math})<br>commit %{{customdata[0]}}<extra>{name}</extra>"),
                row=2, col=1,
            )
        line_steps = [s for s in steps(line) if s.kind != "none"]
        for step in line_steps:
            (gains if step.kind == "gain" else regressions).append(step)
            said["steps"].append((name, step))
        if not line_steps:
            said["quiet"].append((name, len(line)))
    for kind, found, colour, symbol in (("gain", gains, GAIN_COLOUR, "triangle-up"), ("regression", regressions, REGRESSION_COLOUR, "triangle-down")):
        if found:
            fig.add_trace(
                go.Scatter(x=[s.after.commit[:8] for s in found], y=[s.after.tflops for s in found], mode="markers",
                           name=f"{kind}: TFLOPS {'up' if kind == 'gain' else 'down'} beyond noise",
                           customdata=[[f"{s.change:+.1%}", s.after.commit[:12]] for s in found],
                           marker={"symbol": symbol, "size": 16, "color": colour, "line": {"width": 1, "color": "black"}},
                           hovertemplate=f"<b>{kind}</b> %{{customdata[0]}} TFLOPS at %{{customdata[1]}}<extra></extra>"),
                row=1, col=1,
            )
    page_changes.draw(fig, changes or [], commit_axis)
    _resource_rows(fig, kernel, history)
    _explain_empty_rows(fig, mine, said, bool(history.resources))
    # Every row labels its commits: a row above an empty one still reads on its own.
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=commit_axis, showticklabels=True)
    fig.update_xaxes(title_text="commit (oldest to newest)", row=4, col=1)
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
    return fig, said


def _resource_rows(fig: go.Figure, kernel: str, history: History) -> None:
    for (name, arch, metric), values in sorted(history.resources.items()):
        if name != kernel:
            continue
        values = sorted(values)
        x, y = [c[:8] for _, c, _ in values], [v for _, _, v in values]
        if metric == "registers" and arch in REGISTER_LIMIT:
            fig.add_trace(go.Scatter(x=x, y=[REGISTER_LIMIT[arch] - v for v in y], name=f"register headroom {arch} (of {REGISTER_LIMIT[arch]})",
                                     mode="lines+markers", hovertemplate="%{y:.0f} registers free<extra>%{fullData.name}</extra>"), row=3, col=1)
        elif metric in ("spilled_registers", "spill_bytes"):
            unit = "registers" if metric == "spilled_registers" else "bytes"
            fig.add_trace(go.Scatter(x=x, y=y, name=f"spills {arch} ({unit}; lower is better)", mode="lines+markers",
                                     line={"dash": "dash"}, hovertemplate=f"%{{y:.0f}} {unit} spilled<extra>%{{fullData.name}}</extra>"), row=3, col=1)
        elif metric == "shared_memory_bytes" and arch in LDS_LIMIT_KIB:
            fig.add_trace(go.Scatter(x=x, y=[LDS_LIMIT_KIB[arch] - v / 1024 for v in y], name=f"LDS headroom {arch} (of {LDS_LIMIT_KIB[arch]} KiB)",
                                     mode="lines+markers", hovertemplate="%{y:.1f} KiB free<extra>%{fullData.name}</extra>"), row=4, col=1)


def _explain_empty_rows(fig: go.Figure, mine: list[Point], said: dict, compiled_any: bool) -> None:
    has_rows = {1: bool(mine), 2: bool(said["peaks"])}
    has_rows[3] = any(t.yaxis == "y3" for t in fig.data)
    has_rows[4] = any(t.yaxis == "y4" for t in fig.data)
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
