"""Every kernel page says what it shows, and shows it where a reader can see it (issue 48).

A synthetic history of three GPU-like machines and compile-only (tests/synthetic_summaries.py: no git, no asv), its
newest-commits page spanning about a week and its whole history about three months, becomes kernel pages
(ci.history.site.kernel_page.publish_history). :func:`disagreements` reads one page -- its sentences and its figure
as the browser gets it -- and lists where they disagree; each page of the site must have none. In headless Chromium
at 1600x1200 and 1366x768: the legend covers no plot, and the kernels index fits the window.
"""

from __future__ import annotations

import calendar
import json
import re
import time
from pathlib import Path

import pytest
import synthetic_history as synthetic
from browser import CHROMIUM, probe_result, served_dom
from synthetic_summaries import summaries as synthetic_summaries

from ci.history.asv_results import store
from ci.history.site import commit_info, kernel_figure, kernel_page, offline_html, page_changes
from ci.history.trends import regressions, views

DAY = 86_400.0
END = 1_780_000_000.0  # 2026-05-28: dated in the past
COMMITS, WINDOW = 600, 50  # ~3.5 h apart (median): the newest 50 span under a month, all of them months
MACHINES = 3
SIZES = ((1600, 1200), (1366, 768))
BASIC_TRACES = {"scatter", "bar", "pie"}  # what plotly.js's basic bundle draws


def _history() -> tuple[store.History, list[dict], dict]:
    everything: dict = {}
    dates: dict[str, int] = {}
    made: list[str] = []
    for number in range(MACHINES):
        spec = synthetic.Spec(
            commits=COMMITS,
            seed=20 + number,
            gpu_machine=f"gpu{number}",
            compile_only=number == 0,
            end=END,
            gap_median_s=3.5 * 3600,
            flagged_share=0.02,
        )
        made, summaries = synthetic_summaries(spec)
        for machine, files in summaries.items():
            for summary in files:
                summary["date"] = dates.setdefault(summary["commit"], summary["date"])
            everything[machine] = files
    history = store.history(everything, {c: i for i, c in enumerate(made)})
    kept = store.Store(None)
    try:
        checks = regressions.all_checks(history, kept)
    finally:
        kept.close()
    return history, checks, commit_info.from_summaries(everything)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("truth")
    history, checks, info = _history()
    files = kernel_page.publish_history(out, history, checks, WINDOW, "test", info=info)
    return {"site": out, "files": files, "history": history, "info": info}


def _seconds(text: str) -> float:
    whole, _, fraction = text.replace("T", " ").partition(".")
    return calendar.timegm(time.strptime(whole, "%Y-%m-%d %H:%M:%S")) + float("0." + fraction if fraction else 0)


def figure_of(page: str) -> dict:
    """The figure as the page's script makes it whole (kernel_page.EXPAND), done here in Python."""
    compact = json.loads(re.search(r"id='kernel-figure'>(.*?)</script>", page, re.S).group(1))
    table = compact["table"]
    for trace in compact["data"]:
        if "_at" in trace:
            trace["x"] = [commit_info.iso(table["t0"] + table["x"][i]) for i in trace["_at"]]
            trace["commits"] = [table["commits"][i] for i in trace["_at"]]
    for trace in compact["data"]:
        if "_peak" in trace:
            source = compact["data"][trace["_peak"][0]]
            trace["x"], trace["y"] = source["x"], [100 * y / trace["_peak"][1] for y in source["y"]]
    return compact


def _text(page: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", re.sub(r"<script.*?</script>", "", page, flags=re.S)))


def disagreements(page: str, newest_commit_date: float) -> list[str]:
    """Where a kernel page's text and its figure disagree, and what of the figure no reader could see; [] when none."""
    found = []
    fig = figure_of(page)
    layout, data, text = fig["layout"], fig["data"], _text(page)
    lines = [t for t in data if "_at" in t]
    if not lines:
        return found
    xs = [_seconds(x) for t in lines for x in t["x"]]
    oldest, newest = min(xs), max(xs)
    span_days = (newest - oldest) / DAY
    # The range buttons and the sentence about them.
    menu = layout["updatemenus"][0]
    labels = [b["label"] for b in menu["buttons"]]
    lengths = dict(kernel_figure.RANGES)
    for label in labels:
        if lengths[label] is not None and lengths[label] >= newest - oldest:
            found.append(f"button {label!r} over {span_days:.1f} days of data: it shows all of it")
    active = labels[menu["active"]]
    said = re.search(
        r"the buttons over the graph show ([^(]*) of its (\d+(?:\.\d)?) days of commits \(it opens on ([^)]*)\)", text
    )
    if len(labels) > 1:
        if not said:
            found.append("the page does not say which range buttons it has")
        else:
            if said.group(1).strip() != ", ".join(labels):
                found.append(f"the page names the buttons {said.group(1)!r}, the graph has {labels}")
            if said.group(3) != active:
                found.append(f"the page says it opens on {said.group(3)!r}, the graph opens on {active!r}")
            if abs(float(said.group(2)) - span_days) > max(0.6, 0.02 * span_days):
                found.append(f"the page says {said.group(2)} days, the data span {span_days:.1f}")
    # Nothing drawn in the future: the axis ends at the newest commit, and so does every button's range.
    for label, button in zip(labels, menu["buttons"]):
        right = _seconds(button["args"][0]["xaxis.range"][1])
        if right > newest + 1:
            found.append(f"button {label!r} ends {(right - newest) / DAY:.2f} days after the newest commit")
    if _seconds(layout["xaxis"]["range"][1]) > newest_commit_date + 1:
        found.append("the x axis runs past the newest commit")
    # The dates are under a row that has data (plotly draws no ticks under an empty one).
    used = {t["yaxis"] for t in data if t.get("x")}
    dated = [k for k, v in layout.items() if k.startswith("xaxis") and v.get("showticklabels")]
    if len(dated) != 1 or ("y" + dated[0][5:]) not in used:
        found.append(f"the dates are on {dated}, rows with data: {sorted(used)}")
    # Change points: as many bands and labels as the page says; labels apart.
    bands = [s for s in layout.get("shapes", []) if s.get("name", "").startswith("change point")]
    notes = [a for a in layout.get("annotations", []) if a.get("name") == "change-point"]
    count = re.search(r"Shaded ranges are change points on the GPU lines \((\d+) on this graph", text)
    if bands and (not count or int(count.group(1)) != len(bands)):
        found.append(f"{len(bands)} bands drawn, the page says {count.group(1) if count else 'nothing'}")
    by_row: dict[str, list[float]] = {}
    for note in notes:
        by_row.setdefault(note["yref"], []).append(_seconds(note["x"]))
    for row, at in by_row.items():
        at.sort()
        if any(b - a < 0.1 * (newest - oldest) for a, b in zip(at, at[1:])):
            found.append(f"labels of {row} closer than a tenth of the axis: they stack")
    if "a change must move the level by at least 0.5%" in text:
        sizes = re.findall(r"(?:regression|improvement) ([+\u2212-]\d+\.\d)% \[", text)
        under = [size for size in sizes if abs(float(size.replace("\u2212", "-"))) < 0.45]
        if under:
            found.append(f"change points of {under}%, the page says each moves the level by at least 0.5%")
    if "95% interval" in text and "the slow wander of a machine between commits is not in it" not in text:
        found.append("the 95% interval is not said to be of the commits' noise only")
    # Several machines: one TFLOPS row each, each row one machine's lines.
    machines = {t["name"]: t for t in lines}  # noqa: F841 (names below)
    titles = {a["text"]: a for a in layout.get("annotations", []) if a.get("text", "").startswith("GPU TFLOPS on ")}
    gpu_lines = [t for t in lines if t["meta"][0].startswith("bench_gemm.GemmOnGpu")]
    hosts = {re.search(r"\(([^,]+), ", t["hovertemplate"].rpartition("<extra>")[2]).group(1) for t in gpu_lines}
    if len(hosts) > 1:
        for t in gpu_lines:
            host = re.search(r"\(([^,]+), ", t["hovertemplate"].rpartition("<extra>")[2]).group(1)
            axis = t["yaxis"][1:]
            number = int(axis) if axis else 1
            title = [k for k in titles if k == f"GPU TFLOPS on {host} (higher is better)"]
            if not title or not layout.get(f"yaxis{axis}", {}).get("domain"):
                found.append(f"{host}'s line {t['name']!r} has no row of its own")
                continue
            low, high = layout[f"yaxis{axis}"]["domain"]
            if not low <= titles[title[0]]["y"] - 0.0 <= high + 0.06:
                found.append(f"{host}'s line is on row {number}, under another machine's title")
    return found


def test_each_page_says_what_its_figure_shows(site):
    history, info = site["history"], site["info"]
    newest = _seconds(info[history.commit_axis()[-1]].date)
    pages = sorted(p for p in site["files"] if p.suffix == ".html" and p.name != "index.html")
    assert any(p.name.endswith("-all.html") for p in pages)
    problems = {p.name: disagreements(p.read_text(), newest) for p in pages}
    assert {name: found for name, found in problems.items() if found} == {}
    recent = figure_of((site["site"] / "kernels" / "triton_dot_scaled.html").read_text())
    dates = [_seconds(x) for t in recent["data"] if "_at" in t for x in t["x"]]
    assert (
        7 * DAY < max(dates) - min(dates) < 30 * DAY
    )  # the case of the issue: the newest page spans days, not a month
    assert [b["label"] for b in recent["layout"]["updatemenus"][0]["buttons"]] == ["last week", "all"]


def test_the_check_finds_what_the_old_pages_said():
    """The findings of issue 48, made by hand on a page: each is found."""
    layout = {
        "updatemenus": [
            {
                "active": 1,
                "buttons": [
                    {"label": label, "args": [{"xaxis.range": ["2026-05-01 00:00:00", "2026-05-13 00:00:00"]}]}
                    for label in ("last week", "last month", "all")
                ],
            }
        ],
        "xaxis": {"range": ["2026-05-01 00:00:00", "2026-05-13 00:00:00"], "showticklabels": False},
        "xaxis2": {"showticklabels": True},
        "annotations": [],
        "shapes": [],
    }
    trace = {"_at": [0, 1], "y": [1.0, 2.0], "yaxis": "y", "meta": ["bench_gemm.GemmOnGpu.track_time"],
             "hovertemplate": "<extra>a b (m, NVIDIA H200)</extra>", "name": "a"}  # fmt: skip
    t0 = _seconds("2026-05-01 00:00:00")
    table = {"t0": t0, "x": [0, 8 * DAY], "commits": ["a", "b"], "subjects": ["", ""], "flags": []}
    figure = json.dumps({"data": [trace], "layout": layout, "table": table})
    page = (
        f"<script type='application/json' id='kernel-figure'>{figure}</script><p>the buttons over the graph show "
        "last week, last month, all of its 8 days of commits (it opens on last month).</p>"
    )
    page += "<p>a change must move the level by at least 0.5%</p><td>regression \u22120.3% [\u22120.4, \u22120.2]</td>"
    found = disagreements(page, _seconds("2026-05-09 00:00:00"))
    assert any("change points of ['\u22120.3']%" in f for f in found), found
    assert any("'last month' over 8.0 days" in f for f in found), found
    assert any("ends 4.00 days after the newest commit" in f for f in found), found
    assert any("the x axis runs past" in f for f in found), found
    assert any("the dates are on ['xaxis2']" in f for f in found), found


def test_whole_history_lines_keep_per_pixel_column_extremes_steps_spikes_and_flagged():
    """views.thinned over a date axis: at most two points a column and those it must keep; the spike, both sides of
    the step and every flagged point survive."""
    n, columns = 5000, 100
    commits = [f"{i:040x}" for i in range(n)]
    when = {c: 1.7e9 + 600.0 * i * (1 + (i % 7 == 0)) for i, c in enumerate(commits)}
    level = [100.0 if i < 3000 else 97.0 for i in range(n)]
    level[1234] = 130.0  # a one-commit spike
    flagged = {17, 2500, 4999}

    def point(i: int) -> store.Point:
        return store.Point(
            "m", "k:c", "s", "key", commits[i], i, level[i] + (i % 5) * 0.01, 1e-3, 0.0, 0.0, 0.0, "GPU",
            ("throttled",) if i in flagged else (), "", None,
        )  # fmt: skip

    history = store.History(points=[point(i) for i in range(n)], commits={c: i for i, c in enumerate(commits)})
    keep = {commits[2999], commits[3000]}
    thin = views.thinned(history, columns, keep, when)
    kept = {p.commit for p in thin.points}
    assert len(thin.points) <= 2 * columns + len(flagged) + len(keep) + 1
    assert commits[1234] in kept and {commits[i] for i in flagged} <= kept and keep <= kept
    first, last = min(when.values()), max(when.values())
    for column in range(columns):
        inside = [p for p in history.points if int((when[p.commit] - first) / (last - first) * columns) == column]
        if inside:
            assert min(inside, key=lambda p: p.tflops).commit in kept
            assert max(inside, key=lambda p: p.tflops).commit in kept


def test_the_pages_load_the_pinned_basic_bundle_and_draw_only_what_it_has(site):
    folder = site["site"] / "kernels"
    asset = offline_html.kernel_page_assets()[kernel_page.PLOTLY_JS]
    assert offline_html.sha256_mismatches({asset.file: asset}) == []
    assert (folder / kernel_page.PLOTLY_JS).read_bytes() == (offline_html.VENDOR_DIR / asset.file).read_bytes()
    assert (offline_html.VENDOR_DIR / asset.license).is_file() and asset.package.startswith("plotly.js-basic-dist-min@")
    assert not (folder / "plotly.min.js").exists()
    for page in folder.glob("*.html"):
        if page.name == "index.html":
            continue
        text = page.read_text()
        assert f"<script src='{kernel_page.PLOTLY_JS}'></script>" in text
        kinds = {t.get("type", "scatter") for t in figure_of(text)["data"]}
        assert kinds <= BASIC_TRACES, (page.name, kinds)
    assert max(p.stat().st_size for p in folder.iterdir()) < 5e6


# Loads ?page= in an iframe of ?w= x ?h=, waits for the graph (or the page's load, without one), reports the legend's
# box, each plot area's box, and how wide the document is against the window.
PROBE = b"""<!doctype html><html><body style="margin: 0"><pre id="result">pending</pre>
<iframe id="page" style="border: 0"></iframe>
<script>
const q = new URLSearchParams(location.search);
const frame = document.getElementById('page');
frame.width = q.get('w'); frame.height = q.get('h'); frame.src = q.get('page');
function box(e) { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; }
let looks = 0;
function check() {
  const w = frame.contentWindow, d = w && w.document, gd = d && d.getElementById('kernel-graph');
  if (!d || d.readyState !== 'complete' || (gd && !gd.querySelector('.main-svg'))) {
    if (++looks < 1200) { setTimeout(check, 100); return; }
    document.getElementById('result').textContent = JSON.stringify({error: 'never drawn'}); return;
  }
  const out = {width: w.innerWidth, scroll: d.documentElement.scrollWidth, legend: null, plots: []};
  if (gd) {
    const legend = gd.querySelector('.legend');
    out.legend = legend ? box(legend) : null;
    out.plots = Array.from(gd.querySelectorAll('.nsewdrag')).map(box);
  }
  document.getElementById('result').textContent = JSON.stringify(out);
}
setTimeout(check, 100);
</script></body></html>"""


def _overlap(a: list[float], b: list[float]) -> float:
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_no_legend_over_a_plot_and_the_index_fits_the_window(site, size, tmp_path):
    for page in ("kernels/triton_dot_scaled-all.html", "kernels/index.html"):
        proc = served_dom(
            site["site"],
            f"__probe__.html?page={page}&w={size[0]}&h={size[1]}",
            tmp_path / "chromium",
            probes={"/__probe__.html": PROBE},
            # Virtual time: up to 120 s of the probe's polling, so a loaded machine's slow draw is waited for (two
            # shared cores at load ~10 drew nothing within 30 s); the real limit is the subprocess's.
            budget_ms=120000,
            window=size,
            timeout_s=300,
        )
        found = probe_result(proc)
        assert found["scroll"] <= found["width"], (page, found)  # nothing cut at the right edge
        if page.endswith("-all.html"):
            assert found["legend"] and len(found["plots"]) >= MACHINES, found
            assert all(_overlap(found["legend"], plot) == 0 for plot in found["plots"]), found


def test_a_page_of_several_machines_has_a_tflops_row_each(site):
    page = (site["site"] / "kernels" / "triton_dot_scaled-all.html").read_text()
    titles = [a["text"] for a in figure_of(page)["layout"]["annotations"]]
    assert [t for t in titles if t.startswith("GPU TFLOPS on ")] == [
        f"GPU TFLOPS on gpu{n} (higher is better)" for n in range(MACHINES)
    ]
    assert page_changes.LABEL_GAP >= 0.1
    assert Path(site["site"] / "kernels" / "change_points.json").is_file()


def test_a_plain_asv_publish_keeps_the_newest_commits_in_each_graph_file(tmp_path):
    """asv writes every commit into each graph file (9.5 MB at 20,000 commits); the plug-in keeps the newest
    PLAIN_WINDOW (asv_html.bound_graphs), so no file grows past ~3 MB however long the history."""
    from ci.history.site import asv_html

    graph = tmp_path / "graphs" / "machine-x" / "bench.json"
    graph.parent.mkdir(parents=True)
    revisions = {f"{i:040x}": i for i in range(10)}
    graph.write_text(json.dumps([[i, [1.0 * i, None]] for i in range(10)]))
    assert asv_html.bound_graphs(tmp_path, ["graphs/machine-x/bench"], revisions, window=4) == [str(graph)]
    assert json.loads(graph.read_text()) == [[i, [1.0 * i, None]] for i in range(6, 10)]
    assert asv_html.bound_graphs(tmp_path, ["graphs/machine-x/bench"], revisions, window=40) == []
    assert asv_html.PLAIN_WINDOW * 700 < 5e6  # ~0.7 KB a commit (docs/PERF_NOTES.md): under the 5 MB bound
