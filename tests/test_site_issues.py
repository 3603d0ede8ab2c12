"""Each change point's regression issue on the published history (issue 38, "both visible in the published history").

The issue filer's record (``python -m ci.notify regression-issues --json``, schema
mxfp4-regression-issues/2) is joined to the site build's change points by
ci.common.regression_identity -- the function the filer matches with -- and shown on the kernel
pages' change-point table and asv's Regressions page (kernels/change_points.json, drawn by
notes.js): the issue's number linked to it, and its state in words. Checked here: a closed issue is
never shown open, a recovered one names its fixing commit, the join is the filer's identity (not a
name, title or label), hostile text is escaped, and a missing or bad record shows no state and says
why while the pages still build.
"""

from __future__ import annotations

import copy
import html
import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from published_changes import MACHINE, cp, sha

from ci.history.asv_results.store import History
from ci.history.site import issue_links, kernel_page, page_changes
from ci.history.site.issue_links import IssueRecordError, Issues, for_site, join, parse

REPO = "https://github.com/OWNER/REPO"
PROJECT = Path(__file__).resolve().parents[1]


def bench(name: str) -> str:
    return f"bench_gemm.GemmOnGpu.track_time('{name}:default', 'square_m04096_n04096_k04096')"


def checks(*points: dict) -> list[dict]:
    machines = sorted({p["machine"] for p in points})
    return [{"machine": m, "change_points": [p for p in points if p["machine"] == m], "drift": []} for m in machines]


def member(
    benchmark: str,
    at: int,
    change: float,
    *,
    machine: str = MACHINE,
    status: str = "active",
    fixed_at: int | None = None,
) -> dict:
    return {
        "machine": machine,
        "benchmark": benchmark,
        "index": at,
        "last_before": sha(at - 1),
        "first_after": sha(at),
        "orders": [at - 1, at],
        "relative_change": change,
        "status": status,
        "fixed_in": [sha(fixed_at - 1), sha(fixed_at)] if fixed_at else None,
    }


def record(*issues: dict) -> dict:
    return {
        "schema": "mxfp4-regression-issues/2",
        "repository": REPO,
        "run_url": f"{REPO}/actions/runs/5",
        "results_commit": sha(1000),
        "issues": list(issues),
        "actions": [],
        "deferred": 0,
    }


def issue(number: int, state: str, status: str, *members: dict, **extra) -> dict:
    return {
        "number": number,
        "kind": "slowdown",
        "status": status,
        "state": state,
        "members": list(members),
        "drifts": [],
        **extra,
    }


def written(tmp_path: Path, data, name: str = "regression-issues.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def change_table(checks_: list[dict], issues: Issues) -> str:
    """The kernel page's change-point section (note and table), as HTML."""
    found = [(line, c) for line, cs in page_changes.from_checks(checks_).items() for c in cs]
    history = History(commits={sha(i): i for i in range(100)})
    context = kernel_page.PageContext({}, {}, {sha(i): float(i) for i in range(100)}, {}, issues=issues)
    return kernel_page.kernel_page("kernel00", history, found, context, whole=True).split("<h2>Change points</h2>")[1]


def table_cells(checks_: list[dict], issues: Issues) -> dict[str, str]:
    """The kernel page's change-point table: size label -> the row's issue cell (its inner HTML)."""
    text = change_table(checks_, issues)
    rows = re.findall(r"<tr class='[^']*'>(.*?)</tr>", text)
    out = {}
    for row in rows:
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
        out[html.unescape(re.sub("<[^>]+>", "", cells[1]))] = cells[-1]
    return out


def assert_no_state(section: str) -> None:
    """A change-point section that knows no issue: the note says why; no issue column, link or state word."""
    assert "Regression issues are not shown" in html.unescape(section)
    table = section.split("id='change-points'", 1)[1].split("</table>", 1)[0]
    assert "regression issue" not in table and "class='issue" not in table and "/issues/" not in table
    assert not re.search(r"#\d+ (open|closed)", table)


def words(cell: str) -> str:
    return html.unescape(re.sub("<[^>]+>", "", cell))


# ---------------------------------------------------------------------------
# the state in words, and the link
# ---------------------------------------------------------------------------


A, B, C, D = bench("a"), bench("b"), bench("c"), bench("d")
POINTS = (
    cp(A, 30, -0.05),
    cp(A, 40, 0.052, direction="improvement"),
    cp(B, 45, -0.04),
    cp(C, 56, -0.06),
    cp(D, 66, -0.02),
)
RECORD = record(
    issue(7, "closed", "recovered", member(A, 30, -0.05, status="recovered", fixed_at=40)),
    issue(8, "open", "open", member(B, 45, -0.04)),
    issue(9, "closed", "not-confirmed", member(C, 56, -0.06, status="dissolved")),
)


def _by_line(cells: dict[str, str]) -> dict[str, str]:
    """size label -> the issue cell's words."""
    return {label: words(cell) for label, cell in cells.items()}


def test_each_change_point_shows_its_issue_linked_and_its_state_in_words(tmp_path):
    issues = for_site(written(tmp_path, RECORD), checks(*POINTS))
    assert issues.known, issues.note
    cells = table_cells(checks(*POINTS), issues)
    shown = {label.split(" ")[1]: text for label, text in _by_line(cells).items()}
    assert shown == {
        "\u22125.0%": f"#7 closed: recovered at {sha(40)[:12]}",
        "+5.2%": "",
        "\u22124.0%": "#8 open",
        "\u22126.0%": "#9 closed: not confirmed",
        "\u22122.0%": "",
    }  # an improvement, and a change point without an issue, say nothing
    links = {m.group(2): m.group(1) for c in cells.values() for m in [re.search(r"href='([^']*)'>#(\d+)</a>", c)] if m}
    assert links == {n: f"{REPO}/issues/{n}" for n in ("7", "8", "9")}
    assert f"<code>{sha(40)[:12]}</code>" in next(c for c in cells.values() if "#7" in c)


def test_a_retired_issue_is_shown_retired_not_unconfirmed(tmp_path):
    """Issue 47: the filer retires a member whose benchmark is no longer measured (renamed or removed) and closes its
    issue as "retired"; the record says so and the page says it in words (before, the record said "not-confirmed" and
    "dissolved" for it, as the site knew no other word, and the page said "not confirmed")."""
    data = record(issue(9, "closed", "retired", member(C, 56, -0.06, status="retired")), issue(8, "open", "open"))
    issues = for_site(written(tmp_path, data), checks(*POINTS))
    assert issues.known, issues.note
    shown = {label.split(" ")[1]: text for label, text in _by_line(table_cells(checks(*POINTS), issues)).items()}
    assert shown["\u22126.0%"] == "#9 closed: retired (the benchmark is no longer measured)"


def test_the_filer_records_a_retired_issue_as_retired():
    from ci.notify.post import _issue_json
    from ci.notify.regression_issues.issue_state import IssueState, Member

    gone = Member("m", bench("c"), 56, sha(55), sha(56), (55, 56), -0.06, (-0.07, -0.05), 0.0, "retired", None)
    written_ = _issue_json(9, IssueState("slowdown", "retired", (gone,), ()), False)
    assert written_["status"] == "retired" and written_["members"][0]["status"] == "retired"
    parse(record(written_))  # and the site reads it


def test_a_closed_issue_is_never_shown_open():
    # GitHub's state decides open or closed: the bot's status is open, but a person closed the issue.
    data = record(
        issue(8, "closed", "open", member(B, 45, -0.04)),
        issue(7, "closed", "recovered", member(A, 30, -0.05, status="recovered", fixed_at=40)),
    )
    links = join(checks(*POINTS), parse(data))
    said = {k[1]: v.words() for k, v in links.items()}
    assert said[B] == "#8 closed by a person: the change point is still there"
    assert said[A].startswith("#7 closed:") and "open" not in said[A]
    reopened = copy.deepcopy(data)
    reopened["issues"][0]["state"] = "open"
    assert {k[1]: v.words() for k, v in join(checks(*POINTS), parse(reopened)).items()}[B] == "#8 open"


def test_a_recovered_issue_names_its_fixing_commit_and_one_without_it_is_refused(tmp_path):
    links = join(checks(*POINTS), parse(RECORD))
    fixed = links[(MACHINE, A, sha(29), sha(30))]
    assert fixed.fixing_commit == sha(40) and sha(40)[:12] in fixed.words() and sha(40)[:12] in fixed.html()
    broken = copy.deepcopy(RECORD)
    broken["issues"][0]["members"][0]["fixed_in"] = None
    with pytest.raises(IssueRecordError, match=r"issues\[0\]\.members\[0\]\.fixed_in: expected the recovering commits"):
        parse(broken)
    issues = for_site(written(tmp_path, broken), checks(*POINTS))
    assert not issues.known and issues.links == {} and "fixed_in" in issues.note
    assert_no_state(change_table(checks(*POINTS), issues))


# ---------------------------------------------------------------------------
# the join: the filer's identity, nothing else
# ---------------------------------------------------------------------------


def test_the_join_is_the_filers_identity_not_a_name_a_title_or_a_label():
    here = cp(B, 45, -0.04)
    named = bench("b")  # the same benchmark, named alike everywhere below
    cases = {
        "another machine, same benchmark and commits": (
            issue(11, "open", "open", member(named, 45, -0.04, machine="h200-b")),
            None,
        ),
        "same series, 10 commits away": (issue(12, "open", "open", member(named, 55, -0.04)), None),
        "same commits' neighbour, a quarter of the size": (issue(13, "open", "open", member(named, 46, -0.01)), None),
        "title and label name it, no member does": (
            issue(14, "open", "open", title=f"Slowdown -4.0% of {named} on {MACHINE}", labels=["perf-regression"]),
            None,
        ),
        "settled one commit later, alike": (issue(15, "open", "open", member(named, 46, -0.041)), 15),
        "the same commits": (issue(16, "open", "open", member(named, 45, -0.04)), 16),
    }
    for why, (item, expected) in cases.items():
        links = join(checks(here), parse(record(item)))
        got = next(iter(links.values())).number if links else None
        assert got == expected, why


def test_the_site_joins_exactly_as_the_filer_matches():
    """ci.history.site.issue_links.join and ci.notify.regression_issues.matching pair the same change points with the
    same members.
    """
    from ci.notify.regression_issues.issue_state import IssueState, Member, Tracked
    from ci.notify.regression_issues.matching import _match

    rng = random.Random(5)
    for _ in range(200):
        points = [
            cp(
                bench(rng.choice("ab")),
                rng.randint(20, 40),
                -rng.choice((0.01, 0.02, 0.04, 0.05)),
                machine=rng.choice((MACHINE, "h200-b")),
            )
            for _ in range(rng.randint(1, 4))
        ]
        points = list({(p["machine"], p["benchmark"], p["first_after"]): p for p in points}.values())
        issues, tracked = [], []
        for number in range(1, rng.randint(2, 5)):
            ms = [
                member(
                    bench(rng.choice("ab")),
                    rng.randint(20, 40),
                    -rng.choice((0.01, 0.02, 0.04, 0.05)),
                    machine=rng.choice((MACHINE, "h200-b")),
                )
                for _ in range(rng.randint(1, 3))
            ]
            state = rng.choice(("open", "closed"))
            issues.append(issue(number, state, "open", *ms))
            tracked.append(
                Tracked(
                    number,
                    state == "open",
                    "",
                    "",
                    IssueState(
                        "slowdown",
                        "open",
                        tuple(
                            Member(
                                m["machine"],
                                m["benchmark"],
                                m["index"],
                                m["last_before"],
                                m["first_after"],
                                tuple(m["orders"]),
                                m["relative_change"],
                                (0, 0),
                                0.0,
                                "active",
                            )
                            for m in ms
                        ),
                    ),
                )
            )
        site = {(k[1], k[0], k[3]): v.number for k, v in join(checks(*points), parse(record(*issues))).items()}
        found = [
            Member(
                p["machine"],
                p["benchmark"],
                p["change"]["index"],
                p["last_before"],
                p["first_after"],
                tuple(p["orders"]),
                p["change"]["relative_change"],
                (0, 0),
                0.0,
                "active",
            )
            for m in checks(*points)
            for p in m["change_points"]
        ]
        filer = {
            (found[fi].benchmark, found[fi].machine, found[fi].first_after): tracked[ii].number
            for fi, (ii, _) in _match(found, tracked).items()
        }
        assert site == filer


# ---------------------------------------------------------------------------
# hostile text
# ---------------------------------------------------------------------------


HOSTILE = "k'><img src=x onerror=alert(1)><script>alert(2)</script>"


def test_a_hostile_benchmark_name_in_the_record_reaches_the_page_only_escaped(tmp_path):
    hostile = (
        f"bench_gemm.GemmOnGpu.track_time('kernel01:{HOSTILE.replace(chr(39), '')}', 'square_m04096_n04096_k04096')"
    )
    points = (cp(hostile, 45, -0.04), cp(A, 30, -0.05))
    data = record(
        issue(3, "open", "open", member(hostile, 45, -0.04)),
        issue(
            4,
            "closed",
            "not-confirmed",
            member(HOSTILE + "\n<!-- x -->", 30, -0.05, machine=HOSTILE, status="dissolved"),
        ),
    )
    issues = for_site(written(tmp_path, data), checks(*points))
    cells = table_cells(checks(*points), issues)
    page = change_table(checks(*points), issues)
    assert "<img" not in page and "<script" not in page and "&lt;img src=x" in page  # the line's name, escaped
    assert [words(c) for c in cells.values() if c] == ["#3 open"]
    # The Regressions page's list: the hostile name is data (JSON), its issue's words are fixed text.
    found = [(line, c) for line, cs in page_changes.from_checks(checks(*points)).items() for c in cs]
    rows = kernel_page.change_points_json(found, {}, {}, False, issues)["change_points"]
    assert {r["issue"]["words"] if r["issue"] else None for r in rows} == {"#3 open", None}


@pytest.mark.parametrize(
    "field, value",
    [
        ("repository", "https://github.com/OWNER/REPO'><script>alert(1)</script>"),
        ("repository", "javascript:alert(1)//github.com/o/r"),
        ("issues.0.number", "7<script>"),
        ("issues.0.state", "<b>open</b>"),
        ("issues.0.members.0.first_after", "<img src=x onerror=alert(1)>"),
        ("issues.0.members.0.fixed_in", ["<script>alert(1)</script>", "0" * 40]),
    ],
)
def test_a_hostile_value_is_refused_and_the_note_saying_so_is_escaped(tmp_path, field, value):
    data = copy.deepcopy(RECORD)
    where = data
    *path, last = field.split(".")
    for part in path:
        where = where[int(part)] if part.isdigit() else where[part]
    where[int(last) if last.isdigit() else last] = value
    issues = for_site(written(tmp_path, data), checks(*POINTS))
    assert not issues.known and issues.links == {}
    note = issues.note_html()
    assert (
        "Regression issues are not shown" in note and "<script" not in note and "<img" not in note and "<b>" not in note
    )


# ---------------------------------------------------------------------------
# a missing or bad record: no state, the reason said, the pages still built
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content, says",
    [
        (None, "regression-issues.json is missing"),
        ("{not json", "not valid JSON"),
        (json.dumps({**RECORD, "schema": "mxfp4-regression-issues/1"}), "schema: expected mxfp4-regression-issues/2"),
        ('{"schema": "mxfp4-regression-issues/2", "schema": "x"}', "duplicate key 'schema'"),
        (
            json.dumps({**RECORD, "issues": [{**RECORD["issues"][0], "state": "reopened"}]}),
            "state: expected open or closed",
        ),
    ],
)
def test_a_missing_or_bad_record_shows_no_state_and_says_why(tmp_path, content, says):
    path = tmp_path / "regression-issues.json"
    if content is not None:
        path.write_text(content)
    issues = for_site(path, checks(*POINTS))
    assert not issues.known and issues.links == {} and says in issues.note, issues.note
    assert_no_state(change_table(checks(*POINTS), issues))
    assert issue_links.for_site(None, checks(*POINTS)).note.startswith(
        "Regression issues are not shown: this build was given"
    )


def test_the_kernel_pages_build_with_a_bad_record_and_say_so(tmp_path):
    """The whole kernel-page publish over a small grown history: a bad record costs the states, not the pages."""
    from issue_growth import Memos, Scenario, history_of, levels

    from ci.history.trends import regressions

    scenario = Scenario(benchmarks=3, runs=40)
    values = levels(scenario)
    history = history_of(scenario, values, scenario.commits)
    found = regressions.all_checks(history, Memos())
    path = written(tmp_path, "[1, 2", "bad.json")
    written_files = kernel_page.publish_history(
        tmp_path / "site", history, found, 60, "stamp", {}, for_site(path, found)
    )
    page = (tmp_path / "site" / "kernels" / "kernel00.html").read_text()
    assert any(p.name == "kernel00.html" for p in written_files)
    assert "Regression issues are not shown: bad.json: not valid JSON" in html.unescape(page)
    assert_no_state(page.split("<h2>Change points</h2>")[1])
    listed = json.loads((tmp_path / "site" / "kernels" / "change_points.json").read_text())
    assert listed["issues_known"] is False and all("issue" not in r for r in listed["change_points"])
    assert listed["issues_note"].startswith("Regression issues are not shown: bad.json")


# ---------------------------------------------------------------------------
# the seam: what ci.notify writes is what the site reads
# ---------------------------------------------------------------------------


def test_the_record_the_filer_writes_is_the_record_the_site_reads(tmp_path):
    if shutil.which("gh") is None:
        pytest.skip("gh (the GitHub CLI) is not installed; ci/setup.sh installs it")
    from fake_github import FakeGitHub, State

    history = json.loads((PROJECT / "tests" / "data" / "history_changes.json").read_text())
    changes = written(tmp_path, history, "changes.json")
    out = tmp_path / "issues.json"
    with FakeGitHub(tmp_path, State()) as server:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "ci.notify",
                "regression-issues",
                "--github-repo",
                "OWNER/REPO",
                "--changes",
                str(changes),
                "--run-url",
                f"{REPO}/actions/runs/77",
                "--write-interval",
                "0",
                "--json",
                str(out),
            ],
            cwd=PROJECT,
            env=server.env(dict(os.environ)),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        numbers = {i["number"] for i in server.state.issues}
    loaded = issue_links.load(out)
    assert loaded.repository == REPO and set(loaded.issues) == numbers and numbers
    links = join(history["machines"], loaded)
    # every issue's change points are on the page with it, and nothing else is
    assert {v.number for v in links.values()} == numbers
    assert all((m.machine, m.benchmark, m.last_before, m.first_after) in links for m in loaded.members)


# ---------------------------------------------------------------------------
# asv's Regressions page (notes.js draws kernels/change_points.json)
# ---------------------------------------------------------------------------


REGRESSIONS_PAGE = """<!doctype html><html><head><meta charset='utf-8'><script src="mxfp4/notes.js"></script></head>
<body><div id="regressions-display" style="display: block"><div id="regressions-body"><div class="regression-div">
<table class="table"></table></div></div></div></body></html>"""


def _regressions_dom(tmp_path: Path, listed: dict) -> str:
    """Chromium's DOM of a minimal asv Regressions page with notes.js and ``listed`` as kernels/change_points.json."""
    from test_published_html import CHROMIUM, served_dom

    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    from ci.history.site.asv_html import NOTES_JS

    site = tmp_path / "html"
    (site / "mxfp4").mkdir(parents=True)
    (site / "kernels").mkdir()
    shutil.copyfile(NOTES_JS, site / "mxfp4" / "notes.js")
    (site / "index.html").write_text(REGRESSIONS_PAGE)
    (site / "mxfp4" / "index.json").write_text(
        json.dumps(
            {
                "empty": {},
                "standing": {},
                "measured": [],
                "regressions_context": {"commits": 80, "machines": [MACHINE], "gpu_machines": [MACHINE]},
            }
        )
    )
    (site / "kernels" / "change_points.json").write_text(json.dumps(listed))
    return served_dom(site, "index.html", tmp_path / "profile")


def _listed(issues: Issues) -> dict:
    found = [(line, c) for line, cs in page_changes.from_checks(checks(*POINTS)).items() for c in cs]
    return kernel_page.change_points_json(found, {}, {}, False, issues)


def test_the_regressions_page_links_each_issue_and_escapes_what_it_shows(tmp_path):
    listed = _listed(for_site(written(tmp_path, RECORD), checks(*POINTS)))
    # What notes.js must not trust either: a hostile subject (an attribute) and issue fields from a tampered file.
    listed["change_points"][0]["subject"] = 'x" onmouseover="alert(1)'
    listed["change_points"][1]["issue"] = {
        "number": 99,
        "url": "javascript:alert(1)",
        "state": "open",
        "words": "#99 open<img src=x onerror=alert(1)>",
    }
    dom = _regressions_dom(tmp_path, listed)
    table = dom.split('id="mxfp4-change-points"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr class=\"mxfp4-[a-z]+\">(.*?)</tr>", table)
    assert len(rows) == len(POINTS)
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", r)[-1] for r in rows]
    assert f'<a href="{REPO}/issues/7">#7</a> closed: recovered at {sha(40)[:12]}' in "".join(cells)
    assert f'<a href="{REPO}/issues/8">#8</a> open' in "".join(cells)
    assert f'<a href="{REPO}/issues/9">#9</a> closed: not confirmed' in "".join(cells)
    assert "javascript:" not in dom and "<img" not in dom and 'onmouseover="alert' not in dom
    assert "#99 open&lt;img" in dom
    assert "Regression issues as the issue filer left them" in html.unescape(dom)


def test_the_regressions_page_with_a_bad_record_says_why_and_shows_no_issue_column(tmp_path):
    dom = _regressions_dom(tmp_path, _listed(for_site(tmp_path / "absent.json", checks(*POINTS))))
    table = dom.split('id="mxfp4-change-points"', 1)[1].split("</table>", 1)[0]
    assert len(re.findall(r"<tr class=\"mxfp4-", table)) == len(POINTS)
    assert "regression issue" not in table and "/issues/" not in table
    assert "Regression issues are not shown: absent.json is missing" in html.unescape(dom)
