"""A kernel page's range buttons, clicked in headless Chromium (issue 39: "a range selector (last week / month / all)
with the newest weeks readable on one screen").

A synthetic history of ~9 weeks (tests/synthetic_summaries.py: no git, no asv) becomes kernel pages
(ci.history.site.kernel_page.publish_history); the newest-commits page is served on 127.0.0.1 and a probe page loads it
in a same-origin iframe, reads plotly's x range as the page opens, then clicks each button in turn and reads it
again. Each range must be what its button says: it ends at the newest commit and starts a week, a month or the
page's oldest commit before it; the page opens on its documented default (kernel_figure.OPENS_ON).
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
from ci.history.site import commit_info, kernel_figure, kernel_page

DAY = 86_400.0
# Commits ~8 h apart on average (median 4 h, heavy-tailed): the newest 160 span ~7 weeks, so a week, a month and all
# are three different ranges (at the generator's 1.5 h it took 600 commits, 4x the seconds).
SPEC = synthetic.Spec(
    commits=200, seed=5, compile_only=False, end=1_780_000_000.0, gap_median_s=4 * 3600
)  # ends 2026-05-28
WINDOW = 160  # the newest-commits page: more than a month
KERNEL = "triton_dot_scaled"

# Loads ?page= in an iframe, waits for plotly's graph, reports its x range, then clicks each ?labels= button in turn
# (as a reader does: a click event on the button) and reports the range after each, and the active button.
PROBE = b"""<!doctype html><html><body><pre id="result">pending</pre>
<iframe id="page" width="1600" height="1200" style="border: 0"></iframe>
<script>
const q = new URLSearchParams(location.search);
const frame = document.getElementById('page');
frame.src = q.get('page');
const labels = JSON.parse(q.get('labels'));
const out = {clicked: {}};
function report(value) { document.getElementById('result').textContent = JSON.stringify(value); }
function state(gd) { return {range: gd.layout.xaxis.range.slice(), active: gd.layout.updatemenus[0].active}; }
let looks = 0;
function start() {
  const d = frame.contentDocument, gd = d && d.getElementById('kernel-graph');
  if (!gd || !gd.layout || !d.querySelector('.updatemenu-button')) {
    if (++looks < 300) { setTimeout(start, 100); return; }
    report({error: 'no graph'}); return;
  }
  out.opened = state(gd);
  click(gd, 0);
}
function click(gd, i) {
  if (i === labels.length) { report(out); return; }
  const button = Array.from(frame.contentDocument.querySelectorAll('.updatemenu-button'))
    .find(b => b.textContent.trim() === labels[i]);
  if (!button) { out.clicked[labels[i]] = null; click(gd, i + 1); return; }
  button.dispatchEvent(new MouseEvent('click', {bubbles: true}));
  setTimeout(() => { out.clicked[labels[i]] = state(gd); click(gd, i + 1); }, 300);
}
start();
</script></body></html>"""


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """The kernel pages of SPEC's history, and the newest-commits page's oldest and newest commit dates (seconds)."""
    site = tmp_path_factory.mktemp("ranges")
    made, summaries = synthetic_summaries(SPEC)
    history = store.history(summaries, {c: i for i, c in enumerate(made)})
    info = commit_info.from_summaries(summaries)
    kernel_page.publish_history(site, history, [], WINDOW, "test", info=info)
    shown = made[-WINDOW:]
    return {"site": site, "oldest": _seconds(info[shown[0]].date), "newest": _seconds(info[shown[-1]].date)}


def _seconds(plotly_date: str) -> float:
    """plotly's date string (UTC, as the page's axis is) -> epoch seconds."""
    text = plotly_date.replace("T", " ")
    whole, _, fraction = text.partition(".")
    parsed = time.strptime(whole if len(whole) > 10 else whole + " 00:00:00", "%Y-%m-%d %H:%M:%S")
    return calendar.timegm(parsed) + float("0." + fraction if fraction else 0)


def _probe(site: Path, page: str, labels: list[str], profile: Path) -> dict:
    proc = served_dom(
        site,
        f"__probe__.html?page={page}&labels={json.dumps(labels)}",
        profile,
        probes={"/__probe__.html": PROBE},
        budget_ms=30000,
        window=(1700, 1400),
    )
    return probe_result(proc)


def _check_range(shown: list[str], label: str, oldest: float, newest: float) -> None:
    """``shown`` (plotly's x range) is what ``label`` says: it ends just after the newest commit and starts its
    length before it (the page's oldest commit for "all"), each end padded by at most a few percent of the span."""
    low, high = (_seconds(v) for v in shown)
    length = dict(kernel_figure.RANGES)[label]
    start = oldest if length is None else max(oldest, newest - length)
    slack = 0.03 * (newest - start)
    assert newest <= high <= newest + slack, (label, shown, newest)
    assert start - slack <= low <= start, (label, shown, start)


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
def test_each_range_button_sets_the_range_it_names_and_the_page_opens_on_its_default(pages, tmp_path):
    oldest, newest = pages["oldest"], pages["newest"]
    assert newest - oldest > 31 * DAY, "the page spans no more than a month: the buttons would not differ"
    labels = [label for label, _ in kernel_figure.RANGES]
    # From the default (last month) each click moves the range: a button that does nothing keeps the one before.
    order = ["last week", "all", "last month"]
    result = _probe(pages["site"], f"kernels/{KERNEL}.html", order, tmp_path / "chromium")
    opens_on = kernel_figure.OPENS_ON[False]
    _check_range(result["opened"]["range"], opens_on, oldest, newest)
    assert labels[result["opened"]["active"]] == opens_on, result["opened"]
    for label in order:
        assert result["clicked"][label] is not None, f"no button {label!r}"
        _check_range(result["clicked"][label]["range"], label, oldest, newest)
        assert labels[result["clicked"][label]["active"]] == label, (label, result["clicked"][label])
    page = (pages["site"] / "kernels" / f"{KERNEL}.html").read_text()
    assert f"(it opens on {opens_on})" in page  # the page says where it opens


def test_the_whole_history_page_opens_on_all(pages):
    """The whole history's page, read from its figure's JSON (its x range and active button as plotly gets them)."""
    page = (pages["site"] / "kernels" / f"{KERNEL}-all.html").read_text()
    figure = json.loads(re.search(r"id='kernel-figure'>(.*?)</script>", page, re.S).group(1))["layout"]
    menu = figure["updatemenus"][0]
    assert menu["buttons"][menu["active"]]["label"] == kernel_figure.OPENS_ON[True] == "all"
    assert figure["xaxis"]["range"] == menu["buttons"][menu["active"]]["args"][0]["xaxis.range"]
    assert "(it opens on all)" in page
