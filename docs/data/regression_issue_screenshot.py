"""Regression issues as GitHub shows them: a closed one (docs/img/regression_issue_closed.png) and a runner-wide one.

    PYTHONPATH=. .venv/bin/python docs/data/regression_issue_screenshot.py docs/img

The issue is what ``python -m ci.notify regression-issues`` files and then closes from
tests/data/history_changes.json: a first run without the triton kernel's improvement opens its
slowdown's issue, a second run with it closes the issue as recovered, naming the fixing commit.
Both come from the code the workflow runs (ci.notify.regression_issues.matching, ci.notify.regression_issues.issues); the Markdown
is turned into HTML by cmark-gfm (GitHub's own library) and shot by headless Chromium with the
stylesheet of docs/data/pr_comment_screenshots.py.

The runner-wide one (docs/img/regression_issue_group.png) is what the same code files from the
change points of tests/issue_growth.py's synthetic history (seed 0) after its 80th commit: a 2%
slowdown of 20 benchmarks at one commit, one issue listing them.
"""

from __future__ import annotations

import copy
import html
import json
import sys
from pathlib import Path

import cmarkgfm
from cmarkgfm.cmark import Options

from ci.notify.regression_issues.history import load_history_changes
from ci.notify.regression_issues.issue_state import Tracked
from ci.notify.regression_issues.issues import Context, body, title, transition_comment
from ci.notify.regression_issues.matching import plan
from docs.data.pr_comment_screenshots import CSS, shoot

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "history_changes.json"
SERVER, REPO = "https://github.com", "OWNER/REPO"
EXTRA_CSS = """
.title { margin: 12px; width: 880px; font-size: 26px; font-weight: 400; overflow-wrap: anywhere; }
.title .n { color: #59636e; }
.state { display: inline-block; margin: 0 12px 4px; padding: 4px 12px; border-radius: 16px; background: #8250df;
         color: #fff; font-weight: 600; font-size: 14px; }
.meta { color: #59636e; margin-left: 8px; font-size: 14px; }
.event { margin: 4px 12px 4px 28px; color: #59636e; }
"""


def closed_issue() -> tuple[str, str, str]:
    """(title, body, closing comment) of the triton regression, opened by one run and closed by the next."""
    full = json.loads(DATA.read_text())
    first = copy.deepcopy(full)
    for machine in first["machines"]:
        machine["change_points"] = [c for c in machine["change_points"] if c["change"]["direction"] == "regression"]
    context = Context(
        REPO, "https://github.com/OWNER/REPO/actions/runs/2000", SERVER, full["site_url"], full["results_commit"]
    )
    opened = {}
    for number, p in enumerate(plan(load_history_changes(first), []).plans, start=1):
        state = p.new.with_(run_url=context.run_url, results_commit=context.results_commit, site_url=context.site_url)
        opened[number] = Tracked(number, True, title(state), body(state, SERVER, REPO), state)
    later = Context(
        REPO, "https://github.com/OWNER/REPO/actions/runs/2001", SERVER, full["site_url"], full["results_commit"]
    )
    for p in plan(load_history_changes(full), list(opened.values())).plans:
        if p.old is not None and p.new.status == "recovered":
            state = p.new.with_(run_url=later.run_url, results_commit=later.results_commit, site_url=later.site_url)
            return title(state), body(state, SERVER, REPO), transition_comment(p.old.status, state.status, state, later)
    raise SystemExit("no issue was closed: the example data changed")


def group_issue() -> tuple[str, str]:
    sys.path.insert(0, str(DATA.parents[1]))  # the synthetic scenario lives with the tests
    from issue_growth import Memos, Scenario, changes_of, levels

    scenario = Scenario(seed=0)
    changes = load_history_changes(changes_of(scenario, levels(scenario), scenario.commits, Memos()))
    context = Context(
        REPO, "https://github.com/OWNER/REPO/actions/runs/3000", SERVER, changes.site_url, changes.results_commit
    )
    group = max(plan(changes, []).plans, key=lambda p: len(p.new.members))
    state = group.new.with_(run_url=context.run_url, results_commit=context.results_commit, site_url=context.site_url)
    return title(state), body(state, SERVER, REPO)


def markdown_html(text: str) -> str:
    return cmarkgfm.github_flavored_markdown_to_html(text, options=Options.CMARK_OPT_UNSAFE)


def main(argv: list[str]) -> int:
    out = (Path(argv[0]) if argv else Path("docs/img")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    issue_title, issue_body, comment = closed_issue()
    page = (
        f"<!doctype html><meta charset=utf-8><style>{CSS}{EXTRA_CSS}</style>"
        f"<div class=title>{html.escape(issue_title)} <span class=n>#2</span></div>"
        "<div><span class=state>Closed</span><span class=meta><b>github-actions</b> bot opened this issue</span></div>"
        f"<div class=box><div class=hdr><b>github-actions</b> bot commented</div><div class=md>{markdown_html(issue_body)}</div></div>"
        f"<div class=box><div class=hdr><b>github-actions</b> bot commented</div><div class=md>{markdown_html(comment)}</div></div>"
        "<div class=event>github-actions bot closed this as completed</div>"
    )
    shoot(page, out / "regression_issue_closed.png", 1500)
    group_title, group_body = group_issue()
    page = (
        f"<!doctype html><meta charset=utf-8><style>{CSS}{EXTRA_CSS}</style>"
        f"<div class=title>{html.escape(group_title)} <span class=n>#4</span></div>"
        "<div><span class=state style='background:#1f883d'>Open</span>"
        "<span class=meta><b>github-actions</b> bot opened this issue</span></div>"
        f"<div class=box><div class=hdr><b>github-actions</b> bot commented</div><div class=md>{markdown_html(group_body)}</div></div>"
    )
    shoot(page, out / "regression_issue_group.png", 2600)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
