"""One kernel's figure: TFLOPS by commit (higher is better), fraction of peak, register/LDS headroom and spills.

Why: docs/HISTORY.md, "site/kernel_figure.py".
"""

from __future__ import annotations

import html as html_text
import textwrap

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
    names = [name for name in ROWS if name != "cpu" or any(p.is_cpu for p in mine)]
    row = {name: i + 1 for i, name in enumerate(names)}
    total = sum(ROW_HEIGHT[n] for n in names)
    fig = make_subplots(
        rows=len(names),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.05,
        row_heights=[ROW_HEIGHT[n] / total for n in names],
        subplot_titles=[ROWS[n] for n in names],
    )
    said: dict = {"lines": [], "peaks": {}, "empty_rows": {}, "rows": row}
    palette = qualitative.Plotly  # one colour per line, the same in the TFLOPS and the peak rows
    kind = "scattergl" if whole else "scatter"
    x_of = {c: iso(when[c]) for c in commit_axis}
    traces: list[dict] = []
    for number, ((machine, kernel_config, shape), line) in enumerate(lines(mine).items()):
        device, cpu = line[-1].device, line[-1].is_cpu
        name = f"{kernel_config} {shape} ({machine}, {'CPU: not the GPU history' if cpu else device})"
        said["lines"].append((name, (machine, kernel_config, shape), line))
        symbols = ["x" if p.flags else "circle" for p in line]
        both = {  # the TFLOPS trace's and its fraction of peak's: one colour per line, one legend entry
            "x": [x_of[p.commit] for p in line],
            "name": legend_name(machine, kernel_config, shape, device, len({p.machine for p in mine})),
            "legendgroup": name,
            "mode": "lines+markers",
        }
        colour = palette[number % len(palette)]
        benchmark = "bench_gemm.GemmOnCpu.track_time" if cpu else "bench_gemm.GemmOnGpu.track_time"
        traces.append(
            _trace(
                row["cpu" if cpu else "gpu"],
                kind,
                **both,
                y=[_short(p.tflops) for p in line],
                customdata=[_hover(p, subjects.get(p.commit, "")) for p in line],
                marker={"symbol": symbols, "size": 5 if whole else 7, "color": colour},
                meta=[benchmark, kernel_config, shape, [p.commit for p in line]],
                line={"dash": "dot" if cpu else "solid", "color": colour},
                hovertemplate=HOVER.replace("%{fullData.name}", html_text.escape(name)),
            )
        )
        peak = device_peaks.peak_for(kernel_config, device)
        if peak is not None:
            said["peaks"][f"{peak.device}: {peak.math}"] = peak
            traces.append(
                _trace(
                    row["peak"],
                    kind,
                    **both,
                    y=[_short(100 * p.tflops / peak.tflops) for p in line],
                    showlegend=False,
                    marker={"symbol": symbols, "size": 4 if whole else 5, "color": colour},
                    line={"color": colour},
                    hovertemplate=f"%{{y:.2f}}% of {peak.tflops:g} TFLOPS ({peak.math})<br>%{{x|%Y-%m-%d %H:%M}} "
                    f"UTC<extra>{html_text.escape(name)}</extra>",
                )
            )
    hover_axis = len(names) + 1
    # The bands of this page's commits only; their markers' hover on an invisible axis over the GPU row.
    drawn = page_changes.draw(fig, changes or [], {c: when[c] for c in commit_axis}, f"y{hover_axis}")
    said |= {"bands": drawn["bands"], "labelled": drawn["labelled"]}
    if drawn["trace"] is not None:
        traces.append(drawn["trace"])
    traces += _resource_rows(kernel, history, x_of, row)
    _explain_empty_rows(fig, traces, mine, said, bool(history.resources))
    # Dates on the bottom row only (plotly picks their format for the zoom: days, then hours): on every row they
    # covered the next row's title.
    fig.update_xaxes(type="date", showticklabels=False)
    fig.update_xaxes(
        showticklabels=True, title_text="commit date (UTC), oldest to newest" + title_note, row=len(names), col=1
    )
    # Not from zero: the steps this page exists for are 1-3% (a zero-based axis drew the H200's +1% and +3%
    # steps as one flat line); the fraction-of-peak row below keeps zero for scale.
    fig.update_yaxes(title_text="GPU TFLOPS", rangemode="normal", row=row["gpu"], col=1)
    if "cpu" in row:
        fig.update_yaxes(title_text="CPU TFLOPS", rangemode="normal", row=row["cpu"], col=1)
    fig.update_yaxes(title_text="% of peak", rangemode="tozero", row=row["peak"], col=1)
    fig.update_yaxes(title_text="registers", row=row["registers"], col=1)
    fig.update_yaxes(title_text="KiB", row=row["lds"], col=1)
    menu = _range_buttons(traces, row, when, commit_axis, OPENS_ON[whole])
    fig.update_layout(
        {f"yaxis{hover_axis}": {"overlaying": "y", "range": [0, 1], "visible": False, "fixedrange": True}},
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
        said["opens_on"] = OPENS_ON[whole]
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
        start = oldest if length is None else max(oldest, newest - length)
        pad = max(newest - start, 60.0) * 0.01
        layout = {"xaxis.range": [iso(start - pad, ms=True), iso(newest + pad, ms=True)]}
        for number in (row[name] for name in ("gpu", "cpu") if name in row):
            values = [
                y
                for t in traces
                if t.get("yaxis") == f"y{_suffix(number)}" and t.get("meta")
                for x, y in zip(t["x"], t["y"])
                if x >= iso(start)
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
        "active": [b["label"] for b in buttons].index(opens_on),
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
