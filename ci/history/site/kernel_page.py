"""The per-kernel pages published beside asv's HTML: html/kernels/index.html and html/kernels/<kernel>.html.

A kernel's shapes on one TFLOPS-by-commit view with fraction of peak, register/LDS headroom, change points and
drift; ``<kernel>.html`` holds the newest ``window`` commits, ``<kernel>-all.html`` the whole history thinned.
Written by the site build or by the asv plug-in; plotly.js is written once beside them, no CDN
(docs/HISTORY.md, "site/kernel_page.py").
"""

from __future__ import annotations

import datetime
import html
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import plotly.utils
from markupsafe import Markup

from ci.common.files import write_json_atomic, write_text_atomic
from ci.history.asv_results import store
from ci.history.asv_results.store import History, lines
from ci.history.site import commit_info, issue_links, offline_html, page_changes
from ci.history.site.kernel_figure import CLICK_TO_COMMIT, kernel_figure
from ci.history.trends import regressions, views

REPO_ROOT = Path(__file__).resolve().parents[3]
PAGES_DIR = "kernels"
CHANGE_POINTS_JSON = "change_points.json"  # every change point of the whole history (asv's Regressions page lists them)
PLOTLY_JS = "plotly-basic.min.js"  # plotly.js's basic bundle, pinned in ci/history/vendor/lock.json ("kernel_pages")
WINDOW = 200  # commits on a kernel page; the whole history is on <kernel>-all.html
# Pixel columns of <kernel>-all.html's commit axis (its plot is ~870-960 px wide at 1366-1600 px windows): each line
# keeps its lowest and highest TFLOPS per column (ci.history.trends.views.thinned), at most twice this many points.
ALL_COLUMNS = 1000
GPU_HISTORY_HELP = (
    "GPU history comes from the GPU runner: the main job on a GPU machine (MI355X, H200) measures the GEMM "
    "timings and pushes them to the <code>asv-results</code> branch. To see it here, run the main job in a clone "
    "that can fetch that branch (<code>python -m ci.history --tracks cpu</code> publishes every machine's results "
    "from it), or copy the branch's <code>results/</code> into <code>.asv/results/</code> and run "
    "<code>asv publish</code>."
)
# The pages' HTML (kernel_pages.html), autoescaped: what arrives here as HTML (the graph, a link) is marked Markup.
_TEMPLATE = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent), autoescape=True, trim_blocks=True, lstrip_blocks=True
).get_template(
    "kernel_pages.html",
    globals={
        "plotly_js": PLOTLY_JS,
        "all_columns": ALL_COLUMNS,
        "method": page_changes.METHOD,
        "drift_window": regressions.DRIFT_WINDOW,
        "size_label": page_changes.size_label,
        "gpu_history_help": Markup(GPU_HISTORY_HELP),
    },
)


def publish(
    html_dir: Path, results_dir: Path, revisions: dict[str, int] | None = None, window: int = WINDOW
) -> list[Path]:
    """Write the kernel pages of ``results_dir``'s whole history under ``html_dir``/kernels (a plain asv publish),
    read from the history store line by line."""
    kept = store.Store(store.default_path(results_dir))
    try:
        kept.update(results_dir)
        commits = kept.commits(revisions)
        checks = regressions.store_checks(kept, commits)
        info = commit_info.with_git(REPO_ROOT, commit_info.from_dates(kept.dates()))
        when = commit_info.axis_seconds(commit_axis(commits), info)
        data = page_data_from_store(kept, commits, page_changes.from_checks(checks), window, when)
    finally:
        kept.close()
    return publish_pages(html_dir, data, checks, info=info)


@dataclass
class PageData:
    """What the kernel pages are drawn from, cut from the whole history (:func:`page_data`) or read from the store
    line by line (:func:`page_data_from_store`): the same pages either way."""

    commits: dict[str, int]  # every commit of the history -> its order
    recent: History  # the newest ``window`` commits, every point
    whole: History | None  # every line thinned (views.thinned); None: the history is no longer than the window
    line_commits: dict  # each line with a change point -> its commits over the whole history (page_changes.spans)
    kernels: list[str]
    best: dict[str, store.Point]  # kernel -> its highest TFLOPS over the whole history
    no_gpu: str  # _no_gpu of the whole history


def commit_axis(commits: dict[str, int]) -> list[str]:
    return [c for c, _ in sorted(commits.items(), key=lambda item: (item[1], item[0]))]


def _kept_commits(changes: dict) -> set[str]:
    return {c for found in changes.values() for change in found for c in (change.last_before, change.first_after)}


def _best(best: dict[str, store.Point], points: list[store.Point]) -> None:
    for p in points:
        kernel = p.kernel_config.partition(":")[0]
        if kernel not in best or p.tflops > best[kernel].tflops:
            best[kernel] = p


def page_data(history: History, changes: dict, window: int, when: dict[str, float]) -> PageData:
    recent = views.newest(history, window)
    longer = len(history.commits) > len(recent.commits)
    whole = views.thinned(history, ALL_COLUMNS, _kept_commits(changes), when) if longer else None
    by_line = {line: [p.commit for p in points] for line, points in lines(history.points).items() if line in changes}
    best: dict[str, store.Point] = {}
    _best(best, history.points)
    return PageData(history.commits, recent, whole, by_line, history.kernels(), best, _no_gpu(history))


def page_data_from_store(
    kept: store.Store, commits: dict[str, int], changes: dict, window: int, when: dict[str, float]
) -> PageData:
    """:func:`page_data` of the history ``kept`` holds at ``commits``, read a line at a time (the newest ``window``
    commits whole): memory bounded by one line and the page's own data, not the history."""
    axis = commit_axis(commits)
    recent = kept.history(commits, only=set(axis[-window:]))
    longer = len(commits) > len(recent.commits)
    keep = _kept_commits(changes)
    columns = views.Axis.of(commits, ALL_COLUMNS, when)
    points: list[store.Point] = []
    by_line: dict = {}
    best: dict[str, store.Point] = {}
    for machine, key in kept.line_keys():
        found = kept.line_arrays(machine, key, commits)  # a line as arrays; Points made only of what is kept
        if found is None or store.split_key(key) is None:
            continue
        line, shas = found
        commits_of_line = shas.tolist()
        _best(
            best,
            [kept.point(machine, key, row) for row in kept.rows_at([int(line.rowid[line.tflops.argmax()])], commits)],
        )
        name = (machine, *(store.split_key(key) or ("", "")))
        if name in changes:
            by_line[name] = commits_of_line
        if longer:
            chosen = columns.chosen(commits_of_line, line.tflops, line.flagged, keep)
            rowids = line.rowid.tolist() if chosen is None else line.rowid[chosen].tolist()
            points += [kept.point(machine, key, row) for row in kept.rows_at(rowids, commits)]
    kernels = sorted({split[0].partition(":")[0] for key in kept.keys() if (split := store.split_key(key))})
    whole = None
    if longer:
        resources = {}
        for key in sorted(k for k in kept.keys() if k.startswith(store.RESOURCES_PREFIX)):
            split = store.split_key(key)
            if split is not None and (values := kept.changed_counts(key, commits)):
                resources[(*split, key[len(store.RESOURCES_PREFIX) :].partition("(")[0])] = values
        used = {p.commit for p in points} | {v[1] for values in resources.values() for v in values} | keep
        whole = History(
            points=points,
            missing=kept.newest_missing(commits, used),
            resources=resources,
            commits={c: o for c, o in commits.items() if c in used},
        )
    return PageData(commits, recent, whole, by_line, kernels, best, kept.no_gpu(commits))


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
    when = commit_info.axis_seconds(history.commit_axis(), info)
    data = page_data(history, page_changes.from_checks(checks), window, when)
    return publish_pages(html_dir, data, checks, stamp, info, issues)


def publish_pages(
    html_dir: Path,
    data: PageData,
    checks: list[dict],
    stamp: str = "",
    info: dict[str, commit_info.CommitInfo] | None = None,
    issues: issue_links.Issues | None = None,
) -> list[Path]:
    """:func:`publish_history`'s pages from ``data`` (:func:`page_data` or :func:`page_data_from_store`)."""
    info = info or {}
    changes = page_changes.from_checks(checks)
    drifts = page_changes.drift_by_line(checks)
    when = commit_info.axis_seconds(commit_axis(data.commits), info)
    subjects = {c: i.subject for c, i in info.items()}
    everything = [(line, c) for line, found in changes.items() for c in found]
    spans = page_changes.spans(everything, data.line_commits)
    folder = html_dir / PAGES_DIR
    folder.mkdir(parents=True, exist_ok=True)
    written = [offline_html.copy_locked(offline_html.kernel_page_assets()[PLOTLY_JS], folder / PLOTLY_JS)]
    longer = data.whole is not None
    context = PageContext(drifts, spans, when, subjects, stamp, len(data.commits) if longer else 0, issues)
    for kernel in data.kernels:
        mine = page_changes.for_kernel(changes, kernel)
        page = folder / f"{kernel}.html"
        write_text_atomic(page, kernel_page(kernel, data.recent, mine, context))
        written.append(page)
        if data.whole is not None:
            page = folder / f"{kernel}-all.html"
            write_text_atomic(page, kernel_page(kernel, data.whole, mine, context, whole=True))
            written.append(page)
    write_text_atomic(folder / "index.html", index_page(data, stamp, changes, longer, info))
    written.append(folder / "index.html")
    write_json_atomic(folder / CHANGE_POINTS_JSON, change_points_json(everything, spans, info, longer, issues))
    written.append(folder / CHANGE_POINTS_JSON)
    return written


# The figure travels compact (compact_figure) and is made whole in the browser before plotly draws it: each TFLOPS
# trace's dates, hover and commits from the page's one table of commits, each fraction-of-peak trace from its TFLOPS
# trace. The same figure as before; the newest-200 page of 3 GPU machines went from 1.27 MB to 0.14 MB.
EXPAND = """<script>(function () {
  var f = JSON.parse(document.getElementById('kernel-figure').textContent), T = f.table;
  // Dates as plotly reads them, UTC text (a number on a date axis is read as a year when it is short).
  T.dates = T.x.map(function (s) { return new Date((T.t0 + s) * 1000).toISOString().slice(0, 19).replace('T', ' '); });
  f.data.forEach(function (t) {
    if (t._at) {
      var at = t._at, k = at.length, c = t._clocks, ms = t._ms || t.y.map(function (v) {
        return +(t._flop / v).toPrecision(4) + ' ms'; }), fl = t._flags || {}, commits = new Array(k);
      t.x = new Array(k); t.customdata = new Array(k);
      for (var i = 0; i < k; i++) {
        var n = at[i], sha = T.commits[n], flags = fl[i] === undefined ? '' : T.flags[fl[i]];
        commits[i] = sha; t.x[i] = T.dates[n];
        t.customdata[i] = [sha.slice(0, 12), ms[i], typeof c === 'string' ? c : c[i], flags || 'none', T.subjects[n]];
      }
      t.meta[3] = commits;
      if (t._symbols) t.marker.symbol = at.map(function (_, i) { return fl[i] === undefined ? 'circle' : 'x'; });
    }
  });
  f.data.forEach(function (t) {
    if (t._peak) {
      var s = f.data[t._peak[0]], p = t._peak[1];
      t.x = s.x; t.y = s.y.map(function (v) { return +(100 * v / p).toPrecision(5); });
      if (s._symbols) t.marker.symbol = s.marker.symbol;
    }
  });
  Plotly.newPlot('kernel-graph', f.data, f.layout, {displaylogo: false, responsive: true});
})();</script>"""


def compact_figure(fig: dict, subjects: dict[str, str]) -> dict:
    """``fig`` (kernel_figure's) with its TFLOPS traces' dates, hover and commits as positions in one table of the
    page's commits (``table``: each commit's sha, date and subject once, not once a line) and its fraction-of-peak
    traces' data left to the page's script (EXPAND), which makes the same figure again in the browser."""
    index: dict[str, int] = {}
    # Shas to 12 digits (asv's graph finds a commit by its prefix), dates as seconds after the oldest (``t0``), each
    # flag's text once.
    table: dict[str, Any] = {"commits": [], "x": [], "subjects": [], "flags": []}
    flag_index: dict[str, int] = {}
    starts = [_epoch(x) for trace in fig["data"] if trace.get("meta") and "customdata" in trace for x in trace["x"][:1]]
    table["t0"] = t0 = int(min(starts, default=0))
    data = []
    for trace in fig["data"]:
        meta = trace.get("meta")
        if trace.get("_peak"):
            marker = {k: v for k, v in trace.get("marker", {}).items() if k != "symbol"}
            data.append({k: v for k, v in trace.items() if k not in ("x", "y", "marker")} | {"marker": marker})
            continue
        if not meta or "customdata" not in trace:
            data.append(trace)
            continue
        at = []
        for commit, x in zip(meta[3], trace["x"]):
            if commit not in index:
                index[commit] = len(table["commits"])
                table["commits"].append(commit[:12])
                table["x"].append(int(_epoch(x)) - t0)
                table["subjects"].append(html.escape(subjects.get(commit, "")))
            at.append(index[commit])
        hover = trace["customdata"]
        clocks = [h[2] for h in hover]
        symbol = trace.get("marker", {}).get("symbol")
        marker = {k: v for k, v in trace["marker"].items() if k != "symbol"} | (
            {"symbol": symbol} if isinstance(symbol, str) else {}
        )
        data.append(
            {k: v for k, v in trace.items() if k not in ("x", "customdata", "meta", "marker")}
            | {
                "meta": meta[:3],
                "marker": marker,
                "_at": at,
                **_times(hover, trace["y"]),
                "_clocks": clocks[0] if len(set(clocks)) == 1 else clocks,
                "_flags": {
                    i: flag_index.setdefault(h[3], len(flag_index)) for i, h in enumerate(hover) if h[3] != "none"
                },
            }
            | ({"_symbols": True} if isinstance(symbol, list) else {})
        )
    table["flags"] = list(flag_index)
    return {"data": data, "layout": fig["layout"], "table": table}


def _epoch(date: str) -> float:
    """commit_info.iso's text (UTC) -> seconds since the epoch."""
    return datetime.datetime.fromisoformat(date).replace(tzinfo=datetime.timezone.utc).timestamp()


def _times(hover: list[list[str]], tflops: list[float]) -> dict:
    """Each point's median time for its hover: ``_flop`` (one number, GFLOP: ms = _flop / TFLOPS) where the line's
    points all have one size, else each point's text (``_ms``)."""
    try:
        flop = [float(h[1].removesuffix(" ms")) * y for h, y in zip(hover, tflops)]
    except ValueError:
        flop = []
    if flop and max(flop) - min(flop) <= 2e-3 * abs(flop[0]):
        return {"_flop": float(f"{flop[0]:.6g}")}
    return {"_ms": [h[1] for h in hover]}


def graph_html(fig: dict, subjects: dict[str, str]) -> str:
    """The graph's div, its figure as JSON (compact_figure; in a script element of type application/json, escaped so
    that no text of it can close the element) and the script that draws it."""
    text = json.dumps(compact_figure(fig, subjects), separators=(",", ":"), cls=plotly.utils.PlotlyJSONEncoder)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    height = fig["layout"].get("height", 900)
    return (
        f"<div id='kernel-graph' style='height: {height}px; width: 100%'></div>\n"
        f"<script type='application/json' id='kernel-figure'>{text}</script>\n{EXPAND}"
    )


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


def kernel_page(kernel: str, history: History, changes: list, context: PageContext, whole: bool = False) -> str:
    """``changes``: this kernel's change points (page_changes.for_kernel); ``context``: what the pages share."""
    total = context.total
    note = (
        f" (all {total} commits, each line its lowest and highest per pixel column)"
        if whole
        else (f" (the newest {len(history.commits)} of {total})" if total else "")
    )
    fig, said = kernel_figure(
        kernel, history, changes, when=context.when, subjects=context.subjects, whole=whole, title_note=note
    )
    graph = graph_html(fig, context.subjects)
    shown = changes if whole else [(line, c) for line, c in changes if c.first_after in history.commits]
    issues = context.issues
    linked = issues if issues is not None and issues.known else None
    rows = [
        (
            line,
            change,
            context.spans.get((line, change.first_after), "?"),
            linked.link(change.machine, change.benchmark, change.last_before, change.first_after) if linked else None,
        )
        for line, change in sorted(shown, key=lambda item: item[1].change.index, reverse=True)
    ]
    newest: dict[tuple[str, str, str], tuple[int, str]] = {}  # (machine, config, shape) -> its newest n/a or failure
    for m in history.missing:
        key = (m.machine, m.kernel_config, m.shape)
        if m.kernel_config.partition(":")[0] == kernel and (key not in newest or newest[key][0] <= m.order):
            newest[key] = (m.order, m.why)
    unavailable: dict[tuple[str, str], list[str]] = {}
    for (machine, config, shape), (_, why) in sorted(newest.items()):
        unavailable.setdefault((machine, why), []).append(f"{config} {shape}")
    return _TEMPLATE.render(
        index=False,
        kernel=kernel,
        whole=whole,
        stamp=context.stamp,
        total=total,
        commits=len(history.commits),
        no_gpu=_no_gpu(history),
        graph=Markup(f"{graph}\n{CLICK_TO_COMMIT}"),
        said=said,
        found=changes,
        rows=rows,
        issues=issues,
        linked=linked,
        drifts=[(name, context.drifts[key]) for name, key, _ in said["lines"] if key in context.drifts],
        has_gpu=any(not p.is_cpu for p in history.points if p.kernel_config.startswith(kernel + ":")),
        unavailable=unavailable,
    )


def _no_gpu(history: History) -> str:
    """Where no GPU measured, when these results hold no GPU measurement at all (a CPU-only machine's publish)."""
    if any(not p.is_cpu for p in history.points):
        return ""
    timed = sorted({p.machine for p in history.points} | {m.machine for m in history.missing})
    return f"on {', '.join(timed)}" if timed else "in these results"


def index_page(data: PageData, stamp: str, changes: dict, whole: bool, info: dict[str, commit_info.CommitInfo]) -> str:
    """One row per kernel: its best TFLOPS, its change points over the whole history and the newest of them, links to
    its pages (``whole``: a whole-history page exists too)."""
    kernels = []
    for kernel in data.kernels:
        best = data.best.get(kernel)
        found = page_changes.for_kernel(changes, kernel)
        line, newest = max(
            found,
            key=lambda item: (
                info[item[1].first_after].date if item[1].first_after in info else "",
                item[1].first_after,
            ),
            default=(None, None),
        )
        kernels.append(
            {
                "name": kernel,
                "best": f"{best.tflops:.4g} ({best.kernel_config} {best.shape} on {best.machine})"
                if best
                else "no TFLOPS here (the page says why)",
                "found": len(found),
                "down": sum(c.change.direction == "regression" for _, c in found),
                "line": line,
                "newest": newest,
                "date": info[newest.first_after].date if newest and newest.first_after in info else "",
            }
        )
    return _TEMPLATE.render(index=True, whole=whole, stamp=stamp, total=0, no_gpu=data.no_gpu, kernels=kernels)
