"""One kernel's figure: TFLOPS by commit (higher is better), fraction of peak, register/LDS headroom and spills.

Why: docs/HISTORY.md, "site/kernel_figure.py".
"""

from __future__ import annotations

import html as html_text
import textwrap
from typing import Any

import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from ci.history.asv_results.store import History, Point, lines
from ci.history.site import device_peaks, page_changes
from ci.history.site.commit_info import iso

# Architectural limits (harness.resources.occupancy.LIMITS), repeated: the page must not import the harness's parsers.
REGISTER_LIMIT = {"gfx950": 512, "sm_90": 255}  # unified VGPRs per lane / registers per thread
LDS_LIMIT_KIB = {"gfx950": 160, "sm_90": 227}  # LDS per CU / shared memory per block
# The rows, top to bottom (the CPU row only when the kernel has CPU timings): a GPU's TFLOPS and a CPU's are
# ~1000x apart, so they never share an axis (on one, the GPU lines' 1-3% steps would flatten).
ROWS = {
    "gpu": "GPU TFLOPS by commit (higher is better)",
    "cpu": "CPU TFLOPS (timings for reading, not the GPU history; never checked for change points)",
    "peak": "Fraction of the device's peak for the math the kernel runs (higher is better)",
    "registers": "Register headroom and spills (compile-only; headroom: higher is better)",
    "lds": "LDS / shared-memory headroom (compile-only, KiB; higher is better)",
}
ROW_HEIGHT = {"gpu": 0.4, "cpu": 0.16, "peak": 0.16, "registers": 0.16, "lds": 0.16}
GPU_ROW_PREFIX = (
    "gpu:"  # with several GPU machines, one TFLOPS row each: "gpu:<machine>" (30 lines on one were unreadable)
)
DAY = 86_400.0
RANGES = (("last week", 7 * DAY), ("last month", 30 * DAY), ("all", None))  # the range buttons, newest first
# The range a page opens on: the newest commits' page on the last month (its whole window where that is shorter), so
# the newest weeks fill the screen however slowly the history moves; the whole history's page on all of it.
OPENS_ON = {False: "last month", True: "all"}


def legend_name(machine: str, kernel_config: str, shape: str, device: str, machines: int) -> str:
    """The legend's shorter name, on two lines (the page is the kernel's; the machine is said when the page has
    several; hover says the full name): a legend as wide as the full names left the graph half the page."""
    config = kernel_config.partition(":")[2] or kernel_config
    where = [machine] if machines > 1 else []
    where += ["CPU"] if device == "cpu" else []
    return f"{config}<br>{shape}" + (f" ({', '.join(where)})" if where else "")


def _hover(point: Point, subject: str) -> list[str]:
    return [
        point.commit[:12],
        f"{point.median_s * 1e3:.4g} ms",
        point.clocks or "not recorded",
        "; ".join(point.flags) or "none",
        html_text.escape(subject),
    ]  # plotly reads hover text as HTML


def _short(value: float) -> float:
    """Five significant digits: what a reader can see, and half the page's bytes."""
    return float(f"{value:.5g}")


HOVER = (
    "<b>%{y:.4g} TFLOPS</b><br>%{x|%Y-%m-%d %H:%M} UTC, commit %{customdata[0]}<br>%{customdata[4]}<br>time (median) "
    "%{customdata[1]}<br>clocks %{customdata[2]}<br>flags %{customdata[3]}<extra>%{fullData.name}</extra>"
)
# A click opens the point's commit on asv's graph; the URL is built here from the trace's meta (benchmark, config,
# shape) and the point's commit, not stored per point.
CLICK_TO_COMMIT = (
    "<script>document.getElementById('kernel-graph').on('plotly_click', function (e) {"
    " var p = e.points[0], m = p.data.meta; if (!m || !p.customdata) return;"
    " location.href = '../index.html#' + m[0] + '?p-kernel_config=' + encodeURIComponent(\"'\" + m[1] + \"'\")"
    " + '&p-shape=' + encodeURIComponent(\"'\" + m[2] + \"'\") + '&commits=' + m[3][p.pointNumber]; });</script>"
)


def _suffix(row: int) -> str:
    """What plotly appends to a row's axis names: x, y on the first row, x2, y2 on the second..."""
    return "" if row == 1 else str(row)


def _trace(row: int, kind: str = "scatter", **properties) -> dict:
    """A trace as plotly's JSON, on ``row``'s axes. Traces carry every point, so they skip plotly's validation (most
    of the page's build time at 1000 commits): the layout, built with plotly's API, is still validated."""
    return {"type": kind, "xaxis": f"x{_suffix(row)}", "yaxis": f"y{_suffix(row)}", **properties}


def kernel_figure(
    kernel: str,
    history: History,
    changes: list | None = None,
    when: dict[str, float] | None = None,
    subjects: dict[str, str] | None = None,
    whole: bool = False,
    title_note: str = "",
) -> tuple[dict, dict]:
    """The figure (plotly's JSON: plotly.io.to_html(figure, validate=False)) and what the page says beside it:
    {"lines": [...], "peaks": {...}, "empty_rows": {...}, "bands": n, "labelled": k}.

    ``changes``: this kernel's change points (ci.history.site.page_changes.for_kernel), drawn as shaded commit ranges.
    ``when``: commit -> its place on the date axis, seconds (ci.history.site.commit_info.axis_seconds; without it, the
    commits one second apart); ``subjects``: commit -> its subject, for the hover. ``whole``: a long, thinned
    history (WebGL traces, smaller markers).
    """
    commit_axis = history.commit_axis()
    when = when if when is not None else {c: float(i) for i, c in enumerate(commit_axis)}
    subjects = subjects or {}
    mine = [p for p in history.points if p.kernel_config.partition(":")[0] == kernel]
    gpu_machines = sorted({p.machine for p in mine if not p.is_cpu})
    gpu_rows = [GPU_ROW_PREFIX + m for m in gpu_machines] if len(gpu_machines) > 1 else ["gpu"]
    names = [
        *gpu_rows,
        *(name for name in ROWS if name != "gpu" and (name != "cpu" or any(p.is_cpu for p in mine))),
    ]
    row = {name: i + 1 for i, name in enumerate(names)}
    titles = {GPU_ROW_PREFIX + m: f"GPU TFLOPS on {m} (higher is better)" for m in gpu_machines} | ROWS
    heights = [ROW_HEIGHT["gpu"] * (0.75 if name.startswith(GPU_ROW_PREFIX) else 1) if name in gpu_rows else
               ROW_HEIGHT[name] for name in names]  # fmt: skip
    fig = make_subplots(
        rows=len(names),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.05 if len(names) < 7 else 0.035,
        row_heights=[h / sum(heights) for h in heights],
        subplot_titles=[titles[n] for n in names],
    )
    said: dict = {"lines": [], "peaks": {}, "empty_rows": {}, "rows": row, "machines": len(gpu_machines)}
    palette = qualitative.Plotly  # one colour per line, the same in the TFLOPS and the peak rows
    kind = "scatter"  # SVG: the pages load plotly.js's basic bundle (no WebGL), and a page holds what a screen shows
    x_of = {c: iso(when[c]) for c in commit_axis}
    traces: list[dict] = []
    # With a TFLOPS row per GPU machine, a config and shape is one colour and one legend entry on every machine's row
    # (the row names the machine; a click on the entry shows or hides it on all of them).
    per_row = len(gpu_machines) > 1
    groups: dict[tuple[str, str, bool], int] = {}
    for number, ((machine, kernel_config, shape), line) in enumerate(lines(mine).items()):
        device, cpu = line[-1].device, line[-1].is_cpu
        name = f"{kernel_config} {shape} ({machine}, {'CPU: not the GPU history' if cpu else device})"
        said["lines"].append((name, (machine, kernel_config, shape), line))
        symbols = ["x" if p.flags else "circle" for p in line]
        group = (kernel_config, shape, cpu)
        first_of_group = group not in groups
        groups.setdefault(group, len(groups))
        both: dict[str, Any] = {  # the TFLOPS trace's and its fraction of peak's: one colour per line, one legend entry
            "x": [x_of[p.commit] for p in line],
            "name": legend_name(
                machine, kernel_config, shape, device, 1 if per_row else len({p.machine for p in mine})
            ),
            "legendgroup": f"{kernel_config} {shape} {'cpu' if cpu else 'gpu'}" if per_row else name,
            "mode": "lines+markers",
        }
        if per_row and not first_of_group:
            both["showlegend"] = False
        colour = palette[(groups[group] if per_row else number) % len(palette)]
        benchmark = "bench_gemm.GemmOnCpu.track_time" if cpu else "bench_gemm.GemmOnGpu.track_time"
        where = row["cpu"] if cpu else row.get(GPU_ROW_PREFIX + machine, row.get("gpu", 1))
        tflops = _trace(
            where,
            kind,
            **both,
            y=[_short(p.tflops) for p in line],
            customdata=[_hover(p, subjects.get(p.commit, "")) for p in line],
            marker={"symbol": symbols, "size": 7, "color": colour},
            meta=[benchmark, kernel_config, shape, [p.commit for p in line]],
            line={"dash": "dot" if cpu else "solid", "color": colour, "width": 1.5},
            hovertemplate=HOVER.replace("%{fullData.name}", html_text.escape(name)),
            cliponaxis=False,
        )
        if whole:  # thousands of points: the line alone, and a cross at each flagged measurement (a trace of its own)
            tflops |= {"mode": "lines", "marker": {"color": colour}}
            flagged = [i for i, p in enumerate(line) if p.flags]
            if flagged:
                traces.append(tflops)
                tflops = {
                    **tflops,
                    **{key: [tflops[key][i] for i in flagged] for key in ("x", "y", "customdata")},
                    "meta": [benchmark, kernel_config, shape, [line[i].commit for i in flagged]],
                    "mode": "markers",
                    "marker": {"symbol": "x", "size": 7, "color": colour},
                    "showlegend": False,
                }
        traces.append(tflops)
        peak = device_peaks.peak_for(kernel_config, device)
        first_of_line = len(traces) - (2 if whole and any(p.flags for p in line) else 1)
        if peak is not None:
            said["peaks"][f"{peak.device}: {peak.math}"] = peak
            traces.append(
                _trace(
                    row["peak"],
                    kind,
                    **{**both, "showlegend": False},
                    y=[_short(100 * p.tflops / peak.tflops) for p in line],
                    marker={"symbol": symbols, "size": 5, "color": colour},
                    line={"color": colour, "width": 1.5},
                    # The page's script draws it from the TFLOPS trace (``_peak``: its index, the peak): not sent twice.
                    _peak=[first_of_line, peak.tflops],
                    hovertemplate=f"%{{y:.2f}}% of {peak.tflops:g} TFLOPS ({peak.math})<br>%{{x|%Y-%m-%d %H:%M}} "
                    f"UTC<extra>{html_text.escape(name)}</extra>",
                )
                | {"mode": "lines"}  # the crosses are on the TFLOPS row above; 6,000 markers less to draw
            )
    # The bands of this page's commits only, on their machine's GPU row; their markers' hover on an invisible axis over
    # that row (one per GPU row, numbered after the rows).
    hover_axes = {
        machine: (f"y{_suffix(row[name])}", f"y{len(names) + 1 + k}")
        for k, (machine, name) in enumerate(
            (m, GPU_ROW_PREFIX + m if len(gpu_machines) > 1 else "gpu") for m in gpu_machines
        )
    }
    drawn = page_changes.draw(fig, changes or [], {c: when[c] for c in commit_axis}, hover_axes)
    said |= {"bands": drawn["bands"], "labelled": drawn["labelled"]}
    traces += drawn["traces"]
    traces += _resource_rows(kernel, history, x_of, row)
    _explain_empty_rows(fig, traces, mine, said, bool(history.resources))
    # Dates on the bottom row only (plotly picks their format for the zoom: days, then hours): on every row they
    # covered the next row's title.
    # The lowest row that holds data carries them: plotly draws no ticks on a row without traces (torch_dequant's
    # compile-only rows, empty, left its page without a single date).
    used = {t["yaxis"] for t in traces}
    dated = max((n for n in row.values() if f"y{_suffix(n)}" in used), default=len(names))
    fig.update_xaxes(type="date", showticklabels=False)
    fig.update_xaxes(
        showticklabels=True, title_text="commit date (UTC), oldest to newest" + title_note, row=dated, col=1
    )
    said["dated_row"] = dated
    # Not from zero: the steps this page exists for are 1-3% (a zero-based axis drew the H200's +1% and +3%
    # steps as one flat line); the fraction-of-peak row below keeps zero for scale.
    for name in gpu_rows:
        fig.update_yaxes(title_text="GPU TFLOPS", rangemode="normal", row=row[name], col=1)
    if "cpu" in row:
        fig.update_yaxes(title_text="CPU TFLOPS", rangemode="normal", row=row["cpu"], col=1)
    fig.update_yaxes(title_text="% of peak", rangemode="tozero", row=row["peak"], col=1)
    fig.update_yaxes(title_text="registers", row=row["registers"], col=1)
    fig.update_yaxes(title_text="KiB", row=row["lds"], col=1)
    menu = _range_buttons(traces, row, when, commit_axis, OPENS_ON[whole])
    fig.update_layout(
        {
            f"yaxis{hover[1:]}": {"overlaying": axis, "range": [0, 1], "visible": False, "fixedrange": True}
            for axis, hover in hover_axes.values()
        },
        height=300 + 180 * len(names),
        hovermode="closest",
        template="plotly_white",
        margin={"t": 90, "r": 20},
        # On the right, beside the rows: below them it covered the commit axis's title.
        legend={"orientation": "v", "yanchor": "top", "y": 1, "x": 1.01, "xanchor": "left", "font": {"size": 11}},
        title={"text": f"{kernel}: TFLOPS by commit, higher is better"},
        updatemenus=[menu],
    )
    if menu:  # the page opens as its button would set it: the same x (every row's) and TFLOPS ranges
        opening = menu["buttons"][menu["active"]]["args"][0]
        fig.update_xaxes(range=opening["xaxis.range"])
        fig.update_layout({key: value for key, value in opening.items() if key != "xaxis.range"})
        said["opens_on"] = menu["buttons"][menu["active"]]["label"]
        said["buttons"] = [b["label"] for b in menu["buttons"]]
        said["span_days"] = (when[commit_axis[-1]] - when[commit_axis[0]]) / DAY
    return {**fig.to_plotly_json(), "data": traces}, said


def _range_buttons(
    traces: list[dict], row: dict[str, int], when: dict[str, float], commit_axis: list[str], opens_on: str
) -> dict:
    """Buttons over the graph: the last week, the last month, all; each sets the commit axis and the TFLOPS rows' y
    ranges to what that stretch holds (plotly's own range selector leaves y at the whole history's range, where a
    week's 1% step is a few pixels). ``opens_on``: the active one's label."""
    if not commit_axis:
        return {}
    newest, oldest = when[commit_axis[-1]], when[commit_axis[0]]
    buttons = []
    for label, length in RANGES:
        if length is not None and length >= newest - oldest:
            continue  # it would show all of it: a button that says "last month" over 8 days of commits is not one
        start = oldest if length is None else newest - length
        # Room before the first point only: the axis ends at the newest commit (nothing is drawn in the future); the
        # newest marker is not clipped (the traces' cliponaxis is off).
        pad = max(newest - start, 60.0) * 0.01
        layout = {"xaxis.range": [iso(start - pad, ms=True), iso(newest, ms=True)]}
        since = iso(start)  # once, not once a point (at 10,000 commits it was 730,000 calls)
        for number in (number for name, number in row.items() if name == "cpu" or name.startswith("gpu")):
            values = [
                y
                for t in traces
                if t.get("yaxis") == f"y{_suffix(number)}" and t.get("meta")
                for x, y in zip(t["x"], t["y"])
                if x >= since
            ]
            if values:
                low, high = min(values), max(values)
                margin = max(high - low, abs(high) * 0.002) * 0.08
                layout[f"yaxis{_suffix(number)}.range"] = [low - margin, high + margin]
        buttons.append({"label": label, "method": "relayout", "args": [layout]})
    return {
        "type": "buttons",
        "direction": "right",
        "x": 1.0,
        "xanchor": "right",
        "y": 1.0,
        "yanchor": "bottom",
        "pad": {"b": 28},
        "showactive": True,
        "active": next((i for i, b in enumerate(buttons) if b["label"] == opens_on), len(buttons) - 1),
        "buttons": buttons,
        "font": {"size": 12},
    }


def _resource_rows(kernel: str, history: History, x_of: dict[str, str], row: dict[str, int]) -> list[dict]:
    traces = []
    for (name, arch, metric), values in sorted(history.resources.items()):
        if name != kernel:
            continue
        shown = [(x_of[c], v) for _, c, v in sorted(values) if c in x_of]
        dash = "solid"
        if metric == "registers" and arch in REGISTER_LIMIT:
            where, label = "registers", f"register headroom {arch} (of {REGISTER_LIMIT[arch]})"
            y, hover = [REGISTER_LIMIT[arch] - v for _, v in shown], "%{y:.0f} registers free"
        elif metric in ("spilled_registers", "spill_bytes"):
            unit = "registers" if metric == "spilled_registers" else "bytes"
            where, label, dash = "registers", f"spills {arch} ({unit}; lower is better)", "dash"
            y, hover = [v for _, v in shown], f"%{{y:.0f}} {unit} spilled"
        elif metric == "shared_memory_bytes" and arch in LDS_LIMIT_KIB:
            where, label = "lds", f"LDS headroom {arch} (of {LDS_LIMIT_KIB[arch]} KiB)"
            y, hover = [LDS_LIMIT_KIB[arch] - v / 1024 for _, v in shown], "%{y:.1f} KiB free"
        else:
            continue
        traces.append(
            _trace(
                row[where],
                x=[x for x, _ in shown],
                y=y,
                name=label,
                mode="lines+markers",
                line={"dash": dash},
                hovertemplate=f"{hover}<extra>%{{fullData.name}}</extra>",
            )
        )
    return traces


def _explain_empty_rows(fig: go.Figure, traces: list[dict], mine: list[Point], said: dict, compiled_any: bool) -> None:
    used = {t["yaxis"] for t in traces}
    counts = (
        # the compile-only track ran: this kernel has no count there (n/a on both archs, or failed)
        "No compile-only count for this kernel: n/a when it does not compile without a GPU for gfx950 or sm_90 "
        "(python -m ci.budget.resources says why), or it was left out of the run (--bench)"
        if compiled_any
        else "No compile-only {} counts in these results (asv machine 'compile-only': python -m ci.history --tracks "
        "cpu)."
    )
    reasons = {
        "gpu": (
            "No GPU TFLOPS for this kernel in these results: only CPU timings (the row below)."
            if mine
            else "No TFLOPS measured for this kernel in these results (see the reasons below the graph)."
        ),
        "peak": "No peak to compare with: "
        + (
            "no GPU measurement here (CPU timings have no device peak)."
            if all(p.is_cpu for p in mine)
            else "this device's peak for the kernel's math is not in ci/history/site/device_peaks.py."
        ),
        "registers": counts.format("register"),
        "lds": counts.format("LDS"),
    }
    for name, number in said["rows"].items():
        if f"y{_suffix(number)}" not in used and name in reasons:
            said["empty_rows"][number] = reasons[name]
            low, high = fig.layout[f"yaxis{_suffix(number)}"].domain
            fig.add_annotation(
                text="<br>".join(textwrap.wrap(reasons[name], 110)),
                xref="paper",
                yref="paper",
                x=0.5,
                y=(low + high) / 2,
                showarrow=False,
                font={"size": 13, "color": "#555"},
                name="why-empty",
            )
