"""The published history as people read it (issue 39): a synthetic history published, then read in headless Chromium.

A clone of this repository gets 160 synthetic commits dated in the past (tests/synthetic_history.py: the H200 machine's
30 GEMM lines with 3 steps each, and compile-only's counts) and ``python -m ci.history.publish`` builds the site:
asv's pages over the newest 100 commits, the kernel pages over the newest 50 and the whole history. The site is
served on 127.0.0.1; a probe page loads a page in a same-origin iframe of a given size and reports the bounding
boxes of what a reader must see. Checked:

* asv's graph: the notes panel never covers the plot (its box and the plot's box are apart, and the plot is in
  the window) at 1600x1200 and 1366x768;
* asv's index: a thumbnail says "empty" only where no machine has data;
* asv's Regressions page lists every change point of the whole history (most are older than asv's window);
* the kernel pages: the span column counts the commits up to the line's next change (from git's order and the
  change points, computed here again), the labels the page says it draws are drawn, each as the table says it;
  the legend covers no axis title; the kernels index loads no plotly.
"""

from __future__ import annotations

import html as html_text
import json
import os
import re
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest
import synthetic_history as synthetic
from browser import CHROMIUM, probe_result, served_dom
from test_published_history import _clone

SPEC = synthetic.Spec(commits=160, seed=11)
ASV_WINDOW, PAGE_WINDOW = 100, 50
GPU_GRAPH = "bench_gemm.GemmOnGpu.track_time?p-kernel_config='triton_dot_scaled:m128_n128_k128_w8_s3'"
KERNEL = "triton_dot_scaled"

# Loads ?page= in an iframe of ?w= x ?h=, waits for ?ready= (a CSS selector) and a second more (the page settles),
# then reports the boxes of ?sel= ({name: selector}) in the iframe's viewport, its size, and flot's finite points.
LAYOUT_PROBE = b"""<!doctype html><html><body style="margin: 0"><pre id="result">pending</pre>
<iframe id="page" style="border: 0"></iframe>
<script>
const q = new URLSearchParams(location.search);
const frame = document.getElementById('page');
frame.width = q.get('w'); frame.height = q.get('h'); frame.src = q.get('page');
const selectors = JSON.parse(q.get('sel') || '{}');
function report(value) { document.getElementById('result').textContent = JSON.stringify(value); }
let looks = 0, seen = 0;
function check() {
  looks++;
  try {
    const w = frame.contentWindow, d = w.document;
    if (!d.querySelector(q.get('ready'))) {
      if (looks < 400) { setTimeout(check, 100); return; }
      report({error: 'never ready: ' + q.get('ready')}); return;
    }
    if (!seen) { seen = looks; setTimeout(check, 1000); return; }
    const out = {width: w.innerWidth, height: w.innerHeight, points: null};
    const $ = w.jQuery, plot = $ && $('#main-graph').data('plot');
    if (plot) out.points = plot.getData().reduce(
      (n, s) => n + s.data.filter(p => p && p[1] !== null && isFinite(p[1])).length, 0);
    out.thumbnails = {};  // id -> [y axis min, max, data min, max] of each drawn thumbnail
    if ($) $('.benchmark-plot').each(function () {
      const thumb = $(this).data('plot'); if (!thumb) return;
      const ys = [].concat(...thumb.getData().map(
        s => s.data.filter(p => p && p[1] !== null && isFinite(p[1])).map(p => p[1])));
      const axis = thumb.getAxes().yaxis;
      out.thumbnails[this.id] = [axis.min, axis.max, Math.min(...ys), Math.max(...ys)];
    });
    for (const name of Object.keys(selectors)) {
      out[name] = Array.from(d.querySelectorAll(selectors[name])).filter(e => e.getClientRects().length > 0).map(e => {
        const r = e.getBoundingClientRect(); return {box: [r.left, r.top, r.right, r.bottom], text: e.textContent};
      });
    }
    report(out);
  } catch (e) { report({error: String(e)}); }
}
check();
</script></body></html>"""


def layout(site: Path, page: str, size: tuple[int, int], ready: str, selectors: dict[str, str], profile: Path) -> dict:
    """The boxes of ``selectors`` on ``page`` (served from ``site``) in a window of ``size``, once ``ready`` is
    there.
    """
    query = urllib.parse.urlencode(
        {"page": page, "w": size[0], "h": size[1], "ready": ready, "sel": json.dumps(selectors)}
    )
    proc = served_dom(
        site,
        f"__layout__.html?{query}",
        profile,
        probes={"/__layout__.html": LAYOUT_PROBE},
        budget_ms=60000,
        window=(size[0] + 50, size[1] + 200),
        timeout_s=300,
    )
    return probe_result(proc)


def overlap(a: list[float], b: list[float]) -> float:
    """The area two boxes [left, top, right, bottom] share."""
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A past-dated synthetic history published: the site, the build's --json report, the clone, the truth."""
    tmp = tmp_path_factory.mktemp("site-pages")
    clone = _clone(tmp / "clone")
    # The generator dates its commits in the past, as a real history is (the newest an hour before now).
    truth, _ = synthetic.make_history(clone, SPEC)
    report = tmp / "changes.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ci.history.publish",
            "--local-branch",
            "--out",
            str(tmp / "site"),
            "--asv-window",
            str(ASV_WINDOW),
            "--page-window",
            str(PAGE_WINDOW),
            "--json",
            str(report),
        ],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONPATH": str(clone)},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return {"site": tmp / "site", "report": json.loads(report.read_text()), "clone": clone, "truth": truth, "tmp": tmp}


def _gpu_change_points(report: dict) -> list[dict]:
    return [
        c for m in report["machines"] for c in m["change_points"] if c["benchmark"].startswith("bench_gemm.GemmOnGpu.")
    ]


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
@pytest.mark.parametrize("size", [(1600, 1200), (1366, 768)])
def test_asvs_notes_never_cover_its_graph(site, size):
    boxes = layout(
        site["site"],
        f"index.html#{GPU_GRAPH}",
        size,
        '#mxfp4-notes[data-complete="1"]',
        {"plot": "#main-graph", "overview": "#overview", "notes": "#mxfp4-notes"},
        site["tmp"] / f"chromium-{size[0]}",
    )
    assert boxes["points"] and boxes["points"] > 0, boxes  # the H200's lines were drawn
    [plot], [overview], [notes] = boxes["plot"], boxes["overview"], boxes["notes"]
    assert "TFLOPS" in notes["text"], notes  # the notes are there, and say something
    assert notes["box"][3] - notes["box"][1] > 20, notes
    for part in (plot, overview):
        assert overlap(part["box"], notes["box"]) == 0, (size, part["box"], notes["box"])
        assert part["box"][3] <= boxes["height"], (size, part["box"], boxes["height"])  # in the window, not below it
    assert plot["box"][3] - plot["box"][1] >= 0.3 * size[1], plot  # and still a graph one reads


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
def test_a_thumbnail_says_empty_only_where_its_graph_is_empty(site):
    cell = "[id='summarygrid-{}']"
    boxes = layout(
        site["site"],
        "index.html",
        (1600, 1200),
        "#summarygrid-display .benchmark-plot",
        {
            "gpu": cell.format("bench_gemm.GemmOnGpu.track_time") + " .mxfp4-empty",
            "registers": cell.format("bench_resources.CompiledResources.track_registers") + " .mxfp4-empty",
            "cpu": cell.format("bench_gemm.GemmOnCpu.track_time") + " .mxfp4-empty",
            "cells": ".benchmark-plot",
        },
        site["tmp"] / "chromium-grid",
    )
    assert len(boxes["cells"]) == len(json.loads((site["site"] / "index.json").read_text())["benchmarks"]), boxes[
        "cells"
    ]
    assert boxes["gpu"] == [] and boxes["registers"] == [], boxes  # data on the H200 / compile-only: no "empty"
    # asv draws a thumbnail from zero, where a GEMM's steps are a flat line on the box's edge: fitted to its data, the
    # line spans most of the box.
    low, high, data_low, data_high = boxes["thumbnails"]["summarygrid-bench_gemm.GemmOnGpu.track_time"]
    assert low <= data_low and data_high <= high and (data_high - data_low) / (high - low) > 0.5, (
        low,
        high,
        data_low,
        data_high,
    )
    # No machine of this history times the CPU GEMMs: that graph is empty, and says so.
    assert len(boxes["cpu"]) == 1 and boxes["cpu"][0]["text"].startswith("empty: "), boxes["cpu"]


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
def test_asvs_regressions_page_lists_every_change_point_of_the_whole_history(site):
    expected = _gpu_change_points(site["report"])
    newest = set(
        subprocess.run(
            ["git", "-C", str(site["clone"]), "rev-list", f"--max-count={ASV_WINDOW}", "main"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    )
    assert any(c["first_after"] not in newest for c in expected), "no change point older than asv's window: no test"
    boxes = layout(
        site["site"],
        "index.html#/regressions",
        (1600, 1200),
        "#mxfp4-change-points",
        {
            "rows": "#mxfp4-change-points tr.mxfp4-regression, #mxfp4-change-points tr.mxfp4-improvement",
            "title": "#mxfp4-change-points-title",
        },
        site["tmp"] / "chromium-regressions",
    )
    assert boxes["title"][0]["text"].endswith(f": {len(expected)}"), boxes["title"]
    listed = sorted(re.search(r"([0-9a-f]{8})\.\.([0-9a-f]{8})", r["text"]).group(2) for r in boxes["rows"])
    assert listed == sorted(c["first_after"][:8] for c in expected)


def _table_rows(page: str) -> list[tuple[str, str, int, str]]:
    """(size label, first commit at the new level, commits at the new level, line) of a kernel page's table."""
    rows = re.findall(
        r"<td class='change'>([^<]*)</td><td class='range'>[0-9a-f]{8}\.\.([0-9a-f]{8})</td>"
        r"<td class='span'>([^<]*)</td><td>([^<]*)</td>",
        page,
    )
    return [
        (html_text.unescape(label), first, int(span), html_text.unescape(line)) for label, first, span, line in rows
    ]


@pytest.mark.slow
def test_each_change_points_span_is_the_commits_up_to_the_lines_next_change(site):
    """Computed again here from git's order and the build's change points: the span of a change is the commits from
    its first at the new level up to the line's next change, or to the newest commit (every commit measures every
    line in this history)."""
    order = subprocess.run(
        ["git", "-C", str(site["clone"]), "rev-list", "--reverse", f"--max-count={SPEC.commits}", "main"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert order == site["truth"].commits
    position = {c[:8]: i for i, c in enumerate(order)}
    by_line: dict[str, list[int]] = {}
    for c in _gpu_change_points(site["report"]):
        by_line.setdefault(c["benchmark"], []).append(position[c["first_after"][:8]])
    expected = {}
    for benchmark, starts in by_line.items():
        config, shape = re.match(r".*\('([^']*)', '([^']*)'\)", benchmark).groups()
        starts.sort()
        for here, following in zip(starts, [*starts[1:], len(order)]):
            expected[(f"{config} {shape}", order[here][:8])] = following - here
    mine = {k: v for k, v in expected.items() if k[0].startswith(KERNEL + ":")}
    assert len(set(mine.values())) > 2, mine  # spans that differ: a constant column would not pass
    page = (site["site"] / "kernels" / f"{KERNEL}-all.html").read_text()
    shown = {(line.rsplit(" on ", 1)[0], first): span for _, first, span, line in _table_rows(page)}
    assert shown == mine


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
@pytest.mark.parametrize("which", ["", "-all"])
def test_the_labels_a_kernel_page_says_it_draws_are_drawn_as_its_table_says(site, which):
    page = f"kernels/{KERNEL}{which}.html"
    text = (site["site"] / page).read_text()
    table = {label for label, *_ in _table_rows(text)}
    boxes = layout(
        site["site"],
        page,
        (1600, 1200),
        "#kernel-graph .main-svg",
        {
            "labels": "#kernel-graph .annotation-text",
            "bands": "#kernel-graph .shapelayer path",
            "legend": "#kernel-graph .legend .bg",
            "titles": "#kernel-graph .g-xtitle text, #kernel-graph .g-ytitle text",
            "reading": "#reading",
        },
        site["tmp"] / f"chromium-kernel{which}",
    )
    said = boxes["reading"][0]["text"]
    bands = int(re.search(r"change points on the GPU lines \((\d+) on this graph", said).group(1))
    drawn = [b for b in boxes["bands"]]
    assert len(drawn) >= bands > 0, (bands, len(drawn))
    labels = [b["text"] for b in boxes["labels"] if re.match(r"(regression|improvement) [+\u2212]", b["text"])]
    stated = re.search(r"(each|(\d+)) labelled with the size and its 95% interval", said)
    assert stated, said
    assert len(labels) == (bands if stated.group(1) == "each" else int(stated.group(2))), (said, labels)
    assert labels and set(labels) <= table, (labels, table)  # each label is its change's, as the table says it
    [legend] = boxes["legend"]
    for title in boxes["titles"]:
        assert overlap(legend["box"], title["box"]) == 0, (legend, title)


def test_the_kernels_index_loads_no_plotly_and_the_pages_put_commits_at_their_dates(site):
    kernels = site["site"] / "kernels"
    assert "plotly" not in (kernels / "index.html").read_text()
    page = (kernels / f"{KERNEL}.html").read_text()
    assert "src='plotly-basic.min.js'" in page and '"type":"date"' in page
    newest = site["truth"].commits[-1]
    date = subprocess.run(
        ["git", "-C", str(site["clone"]), "log", "-1", "--format=%cd", "--date=format-local:%Y-%m-%d %H:%M:%S", newest],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "TZ": "UTC"},
    ).stdout.strip()
    subject = subprocess.run(
        ["git", "-C", str(site["clone"]), "log", "-1", "--format=%s", newest],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # The newest point's x is its date; its hover says its subject (the page's one table of commits: kernel_page).
    figure = json.loads(re.search(r"id='kernel-figure'>(.*?)</script>", page, re.S).group(1))
    table = figure["table"]
    at = table["commits"].index(newest[:12])
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(table["t0"] + table["x"][at]))
    assert stamp == date and table["subjects"][at] == html_text.escape(subject), (stamp, date)
    assert date < time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())  # a history dated in the past, as a real one is
    labels = [b["label"] for b in figure["layout"]["updatemenus"][0]["buttons"]]
    assert labels[-1] == "all" and set(labels) <= {"last week", "last month", "all"}, labels
