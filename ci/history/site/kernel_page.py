"""The per-kernel pages published beside asv's HTML: html/kernels/index.html and html/kernels/<kernel>.html.

A kernel's shapes on one TFLOPS-by-commit view with fraction of peak, register/LDS headroom, change points and
drift; ``<kernel>.html`` holds the newest ``window`` commits, ``<kernel>-all.html`` the whole history thinned.
Written by the site build or by the asv plug-in; plotly.js is written once beside them, no CDN
(docs/HISTORY.md, "site/kernel_page.py").
"""

from __future__ import annotations

import html as html_text
from dataclasses import dataclass
from pathlib import Path

import plotly.io
import plotly.offline

from ci.common.files import write_json_atomic, write_text_atomic
from ci.history.asv_results import store
from ci.history.asv_results.store import History, lines
from ci.history.site import commit_info, issue_links, page_changes
from ci.history.site.kernel_figure import CLICK_TO_COMMIT, kernel_figure
from ci.history.trends import regressions, views

REPO_ROOT = Path(__file__).resolve().parents[3]
PAGES_DIR = "kernels"
CHANGE_POINTS_JSON = "change_points.json"  # every change point of the whole history (asv's Regressions page lists them)
PLOTLY_JS = "plotly.min.js"
WINDOW = 200  # commits on a kernel page; the whole history is on <kernel>-all.html
ALL_POINTS = 1500  # points per line on <kernel>-all.html
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
table { border-collapse: collapse; margin: .5em 0 }
td, th { border: 1px solid #ccc; padding: 2px 8px; text-align: left }
tr.gain td.change, tr.gain-range td.change { color: #1a9850; font-weight: bold }
tr.regression td.change, tr.regression-range td.change { color: #d73027; font-weight: bold }
span.regression { color: #d73027; font-weight: bold } span.gain { color: #1a9850; font-weight: bold }
code { background: #eef; padding: 0 3px }
td.issue { white-space: nowrap } span.issue a { font-weight: bold }
span.issue-open a { color: #d73027 } span.issue-closed { color: #555 }
#issues-note.no-issues { border-left-color: #d9a400; background: #fff8e1 }"""


def publish(
    html_dir: Path, results_dir: Path, revisions: dict[str, int] | None = None, window: int = WINDOW
) -> list[Path]:
    """Write the kernel pages of ``results_dir``'s whole history under ``html_dir``/kernels (a plain asv publish)."""
    kept = store.Store(store.default_path(results_dir))
    try:
        summaries = kept.summaries(results_dir)
        history = store.history(summaries, revisions)
        checks = regressions.all_checks(history, kept)
    finally:
        kept.close()
    return publish_history(html_dir, history, checks, window, info=commit_info.read(REPO_ROOT, summaries))


def publish_history(
    html_dir: Path,
    history: History,
    checks: list[dict],
    window: int = WINDOW,
    stamp: str = "",
    info: dict[str, commit_info.CommitInfo] | None = None,
    issues: issue_links.Issues | None = None,
) -> list[Path]:
    """Write the kernel pages from ``history`` and its machines' ``checks`` (regressions.all_checks); returns the files.
    ``info``: each commit's date and subject (ci.history.site.commit_info.read), for the date axis and the hover.
    ``issues``: each change point's regression issue (ci.history.site.issue_links.for_site); None: nothing said of
    issues (a plain asv publish); a record that could not be read: its note, and no issue column."""
    info = info or {}
    changes = page_changes.from_checks(checks)
    drifts = page_changes.drift_by_line(checks)
    when = commit_info.axis_seconds(history.commit_axis(), info)
    subjects = {c: i.subject for c, i in info.items()}
    everything = [(line, c) for line, found in changes.items() for c in found]
    spans = page_changes.spans(
        everything, {line: [p.commit for p in points] for line, points in lines(history.points).items()}
    )
    folder = html_dir / PAGES_DIR
    folder.mkdir(parents=True, exist_ok=True)
    written = [folder / PLOTLY_JS]
    write_text_atomic(written[0], plotly.offline.get_plotlyjs())
    recent = views.newest(history, window)
    longer = len(history.commits) > len(recent.commits)
    keep = {c for found in changes.values() for change in found for c in (change.last_before, change.first_after)}
    whole = views.thinned(history, ALL_POINTS, keep) if longer else None
    context = PageContext(drifts, spans, when, subjects, stamp, len(history.commits) if longer else 0, issues)
    for kernel in history.kernels():
        mine = page_changes.for_kernel(changes, kernel)
        page = folder / f"{kernel}.html"
        write_text_atomic(page, kernel_page(kernel, recent, mine, context))
        written.append(page)
        if whole is not None:
            page = folder / f"{kernel}-all.html"
            write_text_atomic(page, kernel_page(kernel, whole, mine, context, whole=True))
            written.append(page)
    write_text_atomic(folder / "index.html", index_page(history, stamp, changes, longer, info))
    written.append(folder / "index.html")
    write_json_atomic(folder / CHANGE_POINTS_JSON, change_points_json(everything, spans, info, longer, issues))
    written.append(folder / CHANGE_POINTS_JSON)
    return written


@dataclass(frozen=True)
class PageContext:
    """What every page of one publish shares: the drift guard per line, each change point's span, the date axis."""

    drifts: dict
    spans: dict  # (line, first commit at the new level) -> commits at that level (page_changes.spans)
    when: dict[str, float]  # commit -> its place on the date axis, seconds
    subjects: dict[str, str]
    stamp: str = ""
    total: int = 0  # commits in the whole history when a page shows fewer (a window, or a thinned whole)
    # Each change point's regression issue; None: not shown (a plain asv publish).
    issues: issue_links.Issues | None = None


def change_points_json(
    found: list, spans: dict, info: dict, whole_page: bool, issues: issue_links.Issues | None = None
) -> dict:
    """Every change point of the whole history, newest first: what asv's Regressions page lists beside its own
    (ci/history/site/asv_html_notes.js), since asv's window of the newest commits holds few of them; with ``issues``,
    each one's regression issue (null: none) and the sentence about where the issues come from (``issues_note``)."""
    rows = []
    for (machine, kernel_config, shape), change in found:
        c = change.change
        kernel = kernel_config.partition(":")[0]
        rows.append(
            {
                "machine": machine,
                "kernel_config": kernel_config,
                "shape": shape,
                "direction": c.direction,
                "label": page_changes.size_label(change),
                "relative_change": c.relative_change,
                "interval": list(c.interval),
                "last_before": change.last_before,
                "first_after": change.first_after,
                "date": info[change.first_after].date if change.first_after in info else None,
                "subject": info[change.first_after].subject if change.first_after in info else "",
                "commits_at_new_level": spans.get(((machine, kernel_config, shape), change.first_after)),
                "page": f"{PAGES_DIR}/{kernel}{'-all' if whole_page else ''}.html",
            }
        )
        if issues is not None and issues.known:
            link = issues.link(machine, change.benchmark, change.last_before, change.first_after)
            rows[-1]["issue"] = link.to_json() if link else None
    rows.sort(key=lambda r: (r["date"] or "", r["first_after"]), reverse=True)
    out = {"schema": "mxfp4-change-points/1", "method": page_changes.METHOD, "change_points": rows}
    return out if issues is None else {**out, "issues_note": issues.note, "issues_known": issues.known}


def _page(title: str, body: str, plotly_js: bool = True) -> str:
    """``plotly_js``: the page draws a graph (plotly.js is 4.8 MB: a page without one does not load it)."""
    script = f"<script src='{PLOTLY_JS}'></script>" if plotly_js else ""
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html_text.escape(title)}</title>"
        f"<style>{STYLE}</style>{script}</head><body>{body}</body></html>\n"
    )


def _no_gpu_note(history: History) -> str:
    """Said when these results hold no GPU measurement at all (a CPU-only machine's publish)."""
    if any(not p.is_cpu for p in history.points):
        return ""
    timed = sorted({p.machine for p in history.points} | {m.machine for m in history.missing})
    where = f"on {', '.join(timed)}" if timed else "in these results"
    return (
        f"<div class='note no-gpu' id='no-gpu'><b>No GPU measurements {html_text.escape(where)}</b>: this machine has "
        f"no GPU, so the GPU shapes are n/a here and only CPU timings (marked CPU, not the GPU history) are shown. "
        f"{GPU_HISTORY_HELP}</div>"
    )


def _common_notes(said: dict | None = None) -> str:
    """The reading notes; a kernel page's (``said``: what its figure drew) also say how to read its graph, and the
    change-point sentence says what that graph draws, no more."""
    general = (
        "<b>Higher is better.</b> TFLOPS = 2&middot;M&middot;N&middot;K / median time, from the same samples "
        "asv keeps as seconds (no extra measurement). asv's own graphs show those seconds, lower is better: a "
        "TFLOPS gain is a time drop there, an improvement, never a regression. Each line is one machine; "
        "machines are never mixed, and GPU and CPU lines never share an axis. "
    )
    if said is None:
        return f"<div class='note' id='reading'>{general}</div>"
    if said["bands"]:
        labelled = said["labelled"]
        which = (
            "each labelled"
            if labelled == said["bands"]
            else f"the newest {labelled} labelled"
            if labelled
            else "none labelled"
        )
        bands = (
            f"Shaded ranges are change points on the GPU lines ({said['bands']} on this graph; red: TFLOPS down, "
            f"a regression; green: up), {which} with the size and its 95% interval; the marker over each band "
            "says its size, line and commits on hover, and the table below lists every one. "
        )
    else:
        bands = "No change point is drawn on this graph (the table below says why). "
    return (
        f"<div class='note' id='reading'>{general}The x axis is each commit's date (UTC); the buttons over the graph "
        f"show the last week, the last month or all of it (it opens on {said.get('opens_on', 'all')}). Crosses are "
        "flagged measurements (idle check overridden, clocks throttled, warm-up never steady, inputs may be cache "
        "resident); hover a point for TFLOPS, date, commit and subject, time, clocks and flags, click it to open the "
        "commit on asv's graph. "
        + bands
        + "The newest commits are the drift guard's (the table below the graph).</div>"
    )


def kernel_page(kernel: str, history: History, changes: list, context: PageContext, whole: bool = False) -> str:
    """``changes``: this kernel's change points (page_changes.for_kernel); ``context``: what the pages share."""
    total = context.total
    note = (
        f" (all {total} commits, each line thinned to ~{ALL_POINTS} points)"
        if whole
        else (f" (the newest {len(history.commits)} of {total})" if total else "")
    )
    fig, said = kernel_figure(
        kernel, history, changes, when=context.when, subjects=context.subjects, whole=whole, title_note=note
    )
    graph = plotly.io.to_html(
        fig,
        validate=False,
        full_html=False,
        include_plotlyjs=False,
        div_id="kernel-graph",
        config={"displaylogo": False},
    )
    parts = [
        "<p><a href='index.html'>all kernels</a> &middot; <a href='../index.html'>asv's graphs (seconds, lower is "
        "better)</a></p>",
        f"<h1>{html_text.escape(kernel)}{' (whole history)' if whole else ''}</h1>",
        _stamp(context.stamp),
        _views(kernel, history, total, whole),
        _no_gpu_note(history),
        graph,
        CLICK_TO_COMMIT,
        _common_notes(said),
        _change_points(changes, history, whole, context.spans, context.issues),
        _drift_table(said["lines"], context.drifts),
        _peaks(said["peaks"], any(not p.is_cpu for p in history.points if p.kernel_config.startswith(kernel + ":"))),
        _empty_rows(said["empty_rows"]),
        _unavailable(kernel, history),
    ]
    return _page(f"{kernel}: TFLOPS by commit", "\n".join(p for p in parts if p))


def _stamp(stamp: str) -> str:
    return f"<p class='stamp' id='site-stamp'>{html_text.escape(stamp)}</p>" if stamp else ""


def _views(kernel: str, history: History, total: int, whole: bool) -> str:
    if not total:
        return ""
    name = html_text.escape(kernel)
    if whole:
        return (
            f"<p class='note' id='views'>All {total} commits, each line thinned to about {ALL_POINTS} points: per "
            "bucket of commits its lowest and highest TFLOPS, and every flagged measurement and change point kept. "
            f"<a href='{name}.html'>The newest commits in full detail</a>.</p>"
        )
    return (
        f"<p class='note' id='views'>The newest {len(history.commits)} of {total} commits. "
        f"<a href='{name}-all.html'>The whole history</a> (every change point, each line thinned).</p>"
    )


def _change_points(
    found: list, history: History, whole: bool, spans: dict, issues: issue_links.Issues | None = None
) -> str:
    """The change points drawn as shaded ranges, as a table: the suspected commits, the size and its interval; with
    ``issues``, each one's regression issue and its state (ci.history.site.issue_links), and where they come from."""
    text = (
        f"<h2>Change points</h2><p>{html_text.escape(page_changes.METHOD)}. CPU lines are not checked (their "
        "timings moved 19-45% between runs).</p>"
    )
    shown = found if whole else [(line, c) for line, c in found if c.first_after in history.commits]
    if not found:
        return text + (
            f"<p class='note' id='no-change-points'>No change point on any GPU line of this kernel over "
            f"{len(history.commits)} commits.</p>"
        )
    rows = []
    for (machine, kernel_config, shape), change in sorted(shown, key=lambda item: item[1].change.index, reverse=True):
        c = change.change
        rows.append(
            f"<tr class='{'regression' if c.direction == 'regression' else 'gain'}-range'><td>{c.direction}</td>"
            f"<td class='change'>{html_text.escape(page_changes.size_label(change))}</td>"
            f"<td class='range'>{change.last_before[:8]}..{change.first_after[:8]}</td>"
            f"<td class='span'>{spans.get(((machine, kernel_config, shape), change.first_after), '?')}</td>"
            f"<td>{html_text.escape(f'{kernel_config} {shape} on {machine}')}</td>{_issue_cell(change, issues)}</tr>"
        )
    older = len(found) - len(shown)
    more = (
        (
            f"<p>{older} older change points of this kernel: on <a "
            f"href='{html_text.escape(found[0][0][1].partition(':')[0])}-all.html'>"
            "the whole history</a>.</p>"
        )
        if older
        else ""
    )
    if not rows:
        return (
            text
            + f"<p class='note' id='no-change-points'>No change point in these {len(history.commits)} commits.</p>"
            + more
        )
    if issues is not None:
        text += issues.note_html()
    return text + (
        "<table id='change-points'><tr><th></th><th>TFLOPS change [95% interval, %]</th><th>suspected "
        "commits (after the first, up to the second)</th><th>commits at the new level (up to the line's "
        "next change, or its newest commit; over the whole history)</th><th>line</th>"
        + ("<th>regression issue</th>" if issues is not None and issues.known else "")
        + "</tr>"
        + "".join(rows)
        + "</table>"
        + more
    )


def _issue_cell(change: regressions.CommitChange, issues: issue_links.Issues | None) -> str:
    """The change point's issue and its state; empty without one (an improvement, too small or old to file, or found
    after the issue record was written). No cell at all when no record could be read (the note above the table says
    why): an empty column would read as "no issue"."""
    if issues is None or not issues.known:
        return ""
    link = issues.link(change.machine, change.benchmark, change.last_before, change.first_after)
    return f"<td class='issue'>{link.html() if link else ''}</td>"


def _drift_table(lines_shown: list, drifts: dict) -> str:
    """The drift guard per line: its newest commit against the best of its recent ones (regressions.drift)."""
    rows = []
    for name, key, _ in lines_shown:
        d = drifts.get(key)
        if d is None:
            continue
        verdict = "below its threshold" if not d["failed"] else "FAILS"
        rows.append(
            f"<tr class='{'regression' if d['failed'] else 'quiet'}'><td>{html_text.escape(name)}</td>"
            f"<td class='change'>{-d['drop']:+.2%}</td><td>{d['threshold']:.2%}</td><td>{verdict}</td></tr>"
        )
    if not rows:
        return ""
    return (
        "<h2>The newest commit: the drift guard</h2><p>Each GPU line's newest commit against the best of its last "
        f"{regressions.DRIFT_WINDOW} measured commits (a change point needs three commits after it; this looks at "
        "the newest now). Threshold: max(2%, 3 x the line's commit-to-commit noise).</p>"
        "<table id='drift'><tr><th>line</th><th>newest vs best</th><th>threshold</th><th></th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _peaks(peaks: dict, has_gpu: bool) -> str:
    if not peaks:
        return (
            ""
            if not has_gpu
            else "<p class='note'>No peak is known for this device and math (ci/history/site/device_peaks.py).</p>"
        )
    items = "".join(
        f"<li><b>{html_text.escape(label)}: {p.tflops:,.0f} TFLOPS</b>. Source: {html_text.escape(p.source)}</li>"
        for label, p in peaks.items()
    )
    return f"<h2>Peaks the fraction is taken of</h2><ul id='peaks'>{items}</ul>"


def _empty_rows(reasons: dict[int, str]) -> str:
    if not reasons:
        return ""
    return (
        "<h2>Empty rows</h2><ul class='why-empty'>"
        + "".join(f"<li>{html_text.escape(r)}</li>" for r in reasons.values())
        + "</ul>"
    )


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
    items = "".join(
        f"<li>on {html_text.escape(machine)}: <b>{html_text.escape(why)}</b> ({len(what)}: "
        f"{html_text.escape(', '.join(what))})</li>"
        for (machine, why), what in grouped.items()
    )
    return f"<h2>Not measured at the newest commit</h2><ul id='unavailable'>{items}</ul>"


def index_page(
    history: History,
    stamp: str = "",
    changes: dict | None = None,
    whole: bool = False,
    info: dict[str, commit_info.CommitInfo] | None = None,
) -> str:
    """One row per kernel: its best TFLOPS, its change points over the whole history and the newest of them, links to
    its pages (``whole``: a whole-history page exists too). No graph here, so no plotly either."""
    changes, info = changes or {}, info or {}
    rows = []
    for kernel in history.kernels():
        mine = [p for p in history.points if p.kernel_config.partition(":")[0] == kernel]
        best = max(mine, key=lambda p: p.tflops, default=None)
        about = (
            f"{best.tflops:.4g} ({best.kernel_config} {best.shape} on {best.machine})"
            if best
            else "no TFLOPS here (the page says why)"
        )
        found = page_changes.for_kernel(changes, kernel)
        down = sum(c.change.direction == "regression" for _, c in found)
        newest = max(
            found,
            key=lambda item: (
                info[item[1].first_after].date if item[1].first_after in info else "",
                item[1].first_after,
            ),
            default=None,
        )
        latest = (
            ""
            if newest is None
            else (
                f"<span class='{'regression' if newest[1].change.direction == 'regression' else 'gain'}'>"
                f"{html_text.escape(page_changes.size_label(newest[1]))}</span> {html_text.escape(newest[0][1])} "
                f"{html_text.escape(newest[0][2])}"
                + (f", {info[newest[1].first_after].date[:10]}" if newest[1].first_after in info else "")
            )
        )
        name = html_text.escape(kernel)
        pages = f"<a href='{name}.html'>{'newest commits' if whole else 'page'}</a>" + (
            f" &middot; <a href='{name}-all.html'>whole history</a>" if whole else ""
        )
        rows.append(
            f"<tr><td><b>{name}</b></td><td style='white-space: "
            f"nowrap'>{pages}</td><td>{html_text.escape(about)}</td><td>{len(found)} ({down} regressions, "
            f"{len(found) - down} improvements)</td><td>{latest}</td></tr>"
        )
    listing = (
        (
            "<table id='kernels'><tr><th>kernel</th><th>pages</th><th>best TFLOPS (line)</th><th>change points, "
            f"whole history</th><th>the newest change point</th></tr>{''.join(rows)}</table>"
        )
        if rows
        else (
            "<p class='note'>No results to show: no GEMM records and no compile-only counts in the results folder. "
            f"Run the main job (<code>python -m ci.history</code>). {GPU_HISTORY_HELP}</p>"
        )
    )
    return _page(
        "TFLOPS by kernel",
        "<p><a href='../index.html'>asv's graphs (seconds, lower is better)</a></p>"
        "<h1>TFLOPS by kernel (higher is better)</h1>"
        + _stamp(stamp)
        + _no_gpu_note(history)
        + listing
        + _common_notes(),
        plotly_js=False,
    )
