"""The per-kernel pages published beside asv's HTML: html/kernels/index.html and html/kernels/<kernel>.html.

The page a kernel engineer opens first: the kernel's shapes on one TFLOPS-by-commit view (higher
is better), the fraction of the device's peak with the peak's source, register/LDS headroom and
spills on the same commit axis, the steps beyond noise listed as gains and regressions, and why
anything is empty. Written by the asv publish plug-in (ci/history/asv_html.py) from the results
it publishes (every ``asv publish``, the main job's included): one way to make them.

plotly draws it; plotly.js is written once to html/kernels/plotly.min.js from the pinned plotly
package and loaded by a relative path: no CDN, no network when viewed, and the page works from
file:// too (it reads no data files).

Imports plotly and this package's data modules.
"""

from __future__ import annotations

import html as html_text
from pathlib import Path

import plotly.offline

from ci.history import page_changes
from ci.history.kernel_figure import asv_graph_url, kernel_figure
from ci.history.tflops_points import History, read_history
from harness.report import write_text_atomic

PAGES_DIR = "kernels"
PLOTLY_JS = "plotly.min.js"
GPU_HISTORY_HELP = (
    "GPU history comes from the GPU runner: the main job on a GPU machine (MI355X, H200) measures the GEMM "
    "timings and pushes them to the <code>asv-results</code> branch. To see it here, run the main job in a clone "
    "that can fetch that branch (<code>python -m ci.history --tracks cpu</code> publishes every machine's results "
    "from it), or copy the branch's <code>results/</code> into <code>.asv/results/</code> and run "
    "<code>asv publish</code>."
)
STYLE = """body { font: 15px/1.45 sans-serif; margin: 1.2em 2em; color: #222; max-width: 1400px }
.note { background: #f4f6f8; border-left: 4px solid #8aa; padding: .5em 1em; margin: .6em 0 }
.no-gpu { border-left-color: #d9a400; background: #fff8e1 }
table { border-collapse: collapse; margin: .5em 0 } td, th { border: 1px solid #ccc; padding: 2px 8px; text-align: left }
tr.gain td.change, tr.gain-range td.change { color: #1a9850; font-weight: bold }
tr.regression td.change, tr.regression-range td.change { color: #d73027; font-weight: bold }
code { background: #eef; padding: 0 3px }"""


def publish(html_dir: Path, results_dir: Path, revisions: dict[str, int] | None = None) -> list[Path]:
    """Write the kernel pages under ``html_dir``/kernels; returns the files written."""
    history = read_history(results_dir, revisions)
    changes = page_changes.find(results_dir, history)
    folder = html_dir / PAGES_DIR
    folder.mkdir(parents=True, exist_ok=True)
    written = [folder / PLOTLY_JS]
    write_text_atomic(written[0], plotly.offline.get_plotlyjs())
    for kernel in history.kernels():
        page = folder / f"{kernel}.html"
        write_text_atomic(page, kernel_page(kernel, history, changes))
        written.append(page)
    write_text_atomic(folder / "index.html", index_page(history))
    written.append(folder / "index.html")
    return written


def _page(title: str, body: str) -> str:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html_text.escape(title)}</title>"
        f"<style>{STYLE}</style><script src='{PLOTLY_JS}'></script></head><body>{body}</body></html>\n"
    )


def _no_gpu_note(history: History) -> str:
    """Said when these results hold no GPU measurement at all (a CPU-only machine's publish)."""
    if any(not p.is_cpu for p in history.points):
        return ""
    timed = sorted({p.machine for p in history.points} | {m.machine for m in history.missing})
    where = f"on {', '.join(timed)}" if timed else "in these results"
    return (
        f"<div class='note no-gpu' id='no-gpu'><b>No GPU measurements {html_text.escape(where)}</b>: this machine has no GPU, "
        f"so the GPU shapes are n/a here and only CPU timings (marked CPU, not the GPU history) are shown. {GPU_HISTORY_HELP}</div>"
    )


def _common_notes() -> str:
    return (
        "<div class='note'><b>Higher is better.</b> TFLOPS = 2&middot;M&middot;N&middot;K / median time, from the same samples "
        "asv keeps as seconds (no extra measurement). asv's own graphs show those seconds, lower is better: a TFLOPS gain is a "
        "time drop there, an improvement, never a regression. Each line is one machine; machines are never mixed. "
        "Crosses are flagged measurements (idle check overridden, clocks throttled, warm-up never steady, inputs may be "
        "cache resident); hover a point for TFLOPS, time, clocks and flags, click it to open the commit on asv's graph. "
        "Shaded ranges are change points (red: TFLOPS down, a regression; green: up), labelled with the size and its "
        "95% interval; triangles compare one commit with the previous one.</div>"
    )


def kernel_page(kernel: str, history: History, changes: dict | None = None) -> str:
    """``changes``: every line's change points (ci.history.page_changes.find); this kernel's are drawn and listed."""
    mine = page_changes.for_kernel(changes or {}, kernel)
    fig, said = kernel_figure(kernel, history, mine)
    graph = fig.to_html(full_html=False, include_plotlyjs=False, div_id="kernel-graph", config={"displaylogo": False})
    parts = ["<p><a href='index.html'>all kernels</a> &middot; <a href='../index.html'>asv's graphs (seconds, lower is better)</a></p>",
             f"<h1>{html_text.escape(kernel)}</h1>", _no_gpu_note(history), _common_notes(), graph, _click_to_commit()]
    parts.append(_change_points(mine, history))
    parts.append(_changes_table(said["steps"], said["quiet"], mine))
    parts.append(_peaks(said["peaks"], any(not p.is_cpu for p in history.points if p.kernel_config.startswith(kernel + ":"))))
    parts.append(_empty_rows(said["empty_rows"]))
    parts.append(_unavailable(kernel, history))
    return _page(f"{kernel}: TFLOPS by commit", "\n".join(p for p in parts if p))


def _click_to_commit() -> str:
    return ("<script>document.getElementById('kernel-graph').on('plotly_click', function (e) {"
            " var d = e.points[0].customdata; if (d && d[4]) location.href = d[4]; });</script>")


def _change_points(found: list, history: History) -> str:
    """The change points drawn as shaded ranges, as a table: the suspected commits, the size and its interval."""
    text = f"<h2>Change points</h2><p>{html_text.escape(page_changes.METHOD)}. CPU lines are not checked (their timings moved 19-45% between runs).</p>"
    if not found:
        return text + f"<p class='note' id='no-change-points'>No change point on any GPU line of this kernel over {len(history.commits)} commits.</p>"
    rows = []
    for (machine, kernel_config, shape), change in found:
        c = change.change
        rows.append(
            f"<tr class='{'regression' if c.direction == 'regression' else 'gain'}-range'><td>{c.direction}</td>"
            f"<td class='change'>{html_text.escape(page_changes.size_label(change))}</td>"
            f"<td class='range'>{change.last_before[:8]}..{change.first_after[:8]}</td><td>{c.p_value:.2g} (level {c.level:.2g})</td>"
            f"<td>{html_text.escape(f'{kernel_config} {shape} on {machine}')}</td></tr>")
    return text + ("<table id='change-points'><tr><th></th><th>TFLOPS change [95% interval, %]</th><th>suspected commits "
                   "(after the first, up to the second)</th><th>p</th><th>line</th></tr>" + "".join(rows) + "</table>")


def _changes_table(found: list, quiet: list, change_points: list) -> str:
    rows = []
    for name, step in found:
        line = (step.after.machine, step.after.kernel_config, step.after.shape)
        confirmed = "yes" if page_changes.confirms(change_points, line, step.after.commit, step.kind) else "no"
        rows.append(
            f"<tr class='{step.kind}'><td>{step.kind}</td><td class='change'>{step.change:+.1%}</td>"
            f"<td>{step.before.tflops:.4g} &rarr; {step.after.tflops:.4g}</td><td>&plusmn;{step.noise:.1%}</td>"
            f"<td><a href='{html_text.escape(asv_graph_url(step.after))}'>{step.after.commit[:8]}</a></td><td>{html_text.escape(name)}</td><td class='confirmed'>{confirmed}</td></tr>"
        )
    text = ("<h2>Changes beyond noise, commit to commit</h2><p>Each commit against the previous one of its line (the triangles): "
            "a quick look that also sees the newest commit, where a change point needs two commits after it. A step that is "
            "not a change point is one measurement the history does not (yet) confirm; the change points above are the "
            "main job's verdict.</p>")
    if rows:
        text += ("<table id='changes'><tr><th></th><th>TFLOPS change</th><th>TFLOPS</th><th>noise</th><th>commit</th><th>line</th><th>a change point</th></tr>"
                 + "".join(rows) + "</table>")
    else:
        text += "<p class='note' id='no-changes'>No change beyond noise in any line.</p>"
    if quiet:
        text += "<ul class='quiet'>" + "".join(
            f"<li>{html_text.escape(name)}: no change detected over {n} commit{'s' if n != 1 else ''}"
            + (" (one point: nothing to compare yet)" if n == 1 else "") + "</li>" for name, n in quiet) + "</ul>"
    return text + ("<p>Noise: the two measurements' relative IQRs added, at least 2% on a GPU and 45% on a CPU "
                   "(one commit's CPU timing moved 19-45% between runs on the shared runner).</p>")


def _peaks(peaks: dict, has_gpu: bool) -> str:
    if not peaks:
        return "" if not has_gpu else "<p class='note'>No peak is known for this device and math (ci/history/device_peaks.py).</p>"
    items = "".join(f"<li><b>{html_text.escape(label)}: {p.tflops:,.0f} TFLOPS</b>. Source: {html_text.escape(p.source)}</li>" for label, p in peaks.items())
    return f"<h2>Peaks the fraction is taken of</h2><ul id='peaks'>{items}</ul>"


def _empty_rows(reasons: dict[int, str]) -> str:
    if not reasons:
        return ""
    return "<h2>Empty rows</h2><ul class='why-empty'>" + "".join(f"<li>{html_text.escape(r)}</li>" for r in reasons.values()) + "</ul>"


def _unavailable(kernel: str, history: History) -> str:
    """Why a (machine, config, shape) has no number: the newest commit's n/a or failure reason, grouped."""
    newest: dict[tuple[str, str, str], tuple[int, str]] = {}
    for m in history.missing:
        if m.kernel_config.partition(":")[0] == kernel:
            key = (m.machine, m.kernel_config, m.shape)
            if key not in newest or newest[key][0] <= m.order:
                newest[key] = (m.order, m.why)
    if not newest:
        return ""
    grouped: dict[tuple[str, str], list[str]] = {}
    for (machine, config, shape), (_, why) in sorted(newest.items()):
        grouped.setdefault((machine, why), []).append(f"{config} {shape}")
    items = "".join(f"<li>on {html_text.escape(machine)}: <b>{html_text.escape(why)}</b> ({len(what)}: {html_text.escape(', '.join(what))})</li>"
                    for (machine, why), what in grouped.items())
    return f"<h2>Not measured at the newest commit</h2><ul id='unavailable'>{items}</ul>"


def index_page(history: History) -> str:
    kernels = history.kernels()
    items = []
    for kernel in kernels:
        mine = [p for p in history.points if p.kernel_config.partition(":")[0] == kernel]
        best = max(mine, key=lambda p: p.tflops, default=None)
        about = f"best {best.tflops:.4g} TFLOPS ({best.kernel_config} {best.shape} on {best.machine})" if best else "no TFLOPS here (see the page: why)"
        items.append(f"<li><a href='{html_text.escape(kernel)}.html'>{html_text.escape(kernel)}</a>: {html_text.escape(about)}</li>")
    listing = f"<ul id='kernels'>{''.join(items)}</ul>" if items else (
        "<p class='note'>No results to show: no GEMM records and no compile-only counts in the results folder. "
        f"Run the main job (<code>python -m ci.history</code>). {GPU_HISTORY_HELP}</p>")
    return _page("TFLOPS by kernel", "<p><a href='../index.html'>asv's graphs (seconds, lower is better)</a></p>"
                 "<h1>TFLOPS by kernel (higher is better)</h1>" + _no_gpu_note(history) + _common_notes() + listing)

