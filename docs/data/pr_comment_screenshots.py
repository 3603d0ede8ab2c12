"""Screenshots of the PR comment and a regression issue as GitHub would show them (docs/img/pr_comment_*.png).

    PYTHONPATH=.:tests .venv/bin/python docs/data/pr_comment_screenshots.py docs/img

Each example of tests/data/pr_comment (real gate records, docs/data/pr_comment_examples.py)
is rendered by ``python -m ci.notify comment``'s renderer, turned into HTML by cmark-gfm
(GitHub's own Markdown library, through ``cmarkgfm``) and screenshot by headless Chromium
with a stylesheet close to GitHub's comment view. The regression example is shot twice:
as posted (its ``<details>`` folded) and unfolded, and a third time capped: with 25 changed
compiled codes of 300 instruction rows each and the cap lowered to 6000 characters, so the
cut shows on one screen (the real cap is GitHub's 65536; the same code cuts). ``judged``: the
PR of tests/judge_scenario.py (real H200 rounds, the tracked config 2% slower, the thresholds
file edited to hide it), judged by this checkout's gate (``python -m ci.notify judge``). The
issue is rendered from tests/data/history_changes.json.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import cmarkgfm
from cmarkgfm.cmark import Options
from PIL import Image, ImageOps

from ci.notify.bundle import load_inputs
from ci.notify.comment import Inputs, Links, render, render_capped
from ci.notify.records import changes_record
from ci.notify.regression_issues.history import load_history_changes
from ci.notify.regression_issues.issues import Context, finding_body, title

DATA = Path(__file__).resolve().parents[2] / "tests" / "data"
RUN = "https://github.com/OWNER/REPO/actions/runs/1000"
HEAD = "5d1c0ffee0ddba11c0debabe5eed5caffe0ff1ce"
CSS = """
body { margin: 0; background: #fff; font: 14px/1.5 -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif;
       color: #1f2328; }
.box { margin: 12px; border: 1px solid #d1d9e0; border-radius: 6px; width: 880px; }
.hdr { background: #f6f8fa; border-bottom: 1px solid #d1d9e0; padding: 8px 16px; color: #59636e; border-radius: 6px 6px 0 0; }
.md { padding: 16px; }
.md > :first-child { margin-top: 0; }
h3 { font-size: 1.25em; margin: 16px 0 12px; }
code { font: 85% ui-monospace, "DejaVu Sans Mono", monospace; background: #eff1f3; padding: .2em .4em; border-radius: 6px; }
pre { background: #f6f8fa; padding: 16px; border-radius: 6px; overflow: auto; }
pre code { background: none; padding: 0; }
table { border-collapse: collapse; margin: 0 0 16px; display: block; overflow: auto; }
th, td { border: 1px solid #d1d9e0; padding: 6px 13px; }
th { font-weight: 600; } tr:nth-child(2n) { background: #f6f8fa; }
details { margin: 0 0 16px; } summary { cursor: pointer; }
a { color: #0969da; text-decoration: none; } p, ul { margin: 0 0 16px; }
sub { color: #59636e; }
"""


def page(markdown: str, header: str, unfold: bool = False) -> str:
    # Raw HTML kept (GitHub then sanitizes it to its allow-list, which keeps details, summary, code, sub, br).
    body = cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)
    if unfold:
        body = body.replace("<details>", "<details open>")
    return (
        f"<!doctype html><meta charset=utf-8><style>{CSS}</style><div class=box><div class=hdr>{header}</div>"
        f"<div class=md>{body}</div></div>"
    )


def shoot(html: str, out: Path, height: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "page.html"
        src.write_text(html, encoding="utf-8")
        subprocess.run(
            [
                "chromium",
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                f"--user-data-dir={tmp}/profile",
                f"--screenshot={out}",
                f"--window-size=906,{height}",
                src.as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
    if not out.is_file():  # chromium exits 0 when it could not write the file
        raise SystemExit(f"chromium wrote no {out}")
    # The window is taller than the comment: cut the blank rows below it (12 px of margin kept).
    image = Image.open(out).convert("RGB")
    box = ImageOps.invert(image).getbbox()
    if box:
        image = image.crop((0, 0, image.width, min(image.height, box[3] + 12)))
    # A 64-colour palette keeps antialiased text legible at a third of the size.
    image.quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(out, optimize=True)
    print(f"wrote {out}", file=sys.stderr)


def capped(folder: Path, links: Links, limit: int = 6000) -> str:
    """The regression example with far more changed code than fits: 25 compiled codes of 300 changed rows each."""
    inputs = load_inputs(folder, 1, folder / "jobs.json")
    changes = json.loads((folder / "speed-changes-attempt1" / "changes.json").read_text())
    one = changes["code_changes"][0]
    one["instruction_mix"] = [dict(one["instruction_mix"][0], instructions=f"op_{i}", delta="+1") for i in range(300)]
    changes["code_changes"] = [dict(one, target=f"flydsl_gfx950_4wave/gfx950/config_{i:02d}") for i in range(25)]
    inputs = Inputs(inputs.speed, changes_record(changes), inputs.budget, inputs.jobs)
    return render_capped(inputs, links, limit=limit).text


def judged() -> str:
    """The comment on the PR that edits the thresholds to hide its slowdown (tests/judge_scenario.py), as posted."""
    import judge_scenario as scenario

    from ci.notify.gate_files import files_record

    with tempfile.TemporaryDirectory() as tmp:
        made = scenario.make(Path(tmp) / "pr")
        shutil.copytree(
            DATA / "pr_comment" / "identical" / "budget-gate-attempt1", made.artifacts / "budget-gate-attempt1"
        )
        verdict, files, jobs = Path(tmp) / "judged.json", Path(tmp) / "pr-files.json", Path(tmp) / "jobs.json"
        subprocess.run(
            [sys.executable, "-m", "ci.notify", "judge", "--artifacts", str(made.artifacts), "--out", str(verdict)],
            check=True,
            capture_output=True,
        )
        files.write_text(json.dumps(files_record([scenario.PR_NUMBER], scenario.PR_FILES)))
        jobs.write_text(json.dumps({"jobs": scenario.jobs()}))
        inputs = load_inputs(made.artifacts, 1, jobs, verdict, files)
        return render(inputs, Links(scenario.RUN_URL, f"{scenario.RUN_URL}/artifacts/4242", scenario.SHA, 1))


def main(argv: list[str]) -> int:
    out = (Path(argv[0]) if argv else Path("docs/img")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    bot = "<b>github-actions</b> bot commented"
    heights = {"identical": 400, "regression": 900, "wrong": 700, "inconclusive": 600, "error": 600}
    for outcome, height in heights.items():
        folder = DATA / "pr_comment" / outcome
        plot = f"{RUN}/artifacts/4242" if (folder / "speed-gate-attempt1").is_dir() else None  # no GPU job, no plot
        markdown = render(load_inputs(folder, 1, folder / "jobs.json"), Links(RUN, plot, HEAD, 1))
        shoot(page(markdown, bot), out / f"pr_comment_{outcome}.png", height)
        if outcome == "regression":
            shoot(page(markdown, bot, unfold=True), out / "pr_comment_regression_unfolded.png", 1400)
            shoot(page(capped(folder, Links(RUN, plot, HEAD, 1)), bot), out / "pr_comment_capped.png", 900)
    shoot(page(judged(), bot), out / "pr_comment_judged.png", 900)
    changes = load_history_changes(json.loads((DATA / "history_changes.json").read_text()))
    context = Context(
        "OWNER/REPO",
        "https://github.com/OWNER/REPO/actions/runs/2000",
        site_url=changes.site_url,
        results_commit=changes.results_commit,
    )
    slowdown = next(f for f in changes.findings if hasattr(f, "recovery") and f.recovery is None)
    drift = next(f for f in changes.findings if hasattr(f, "failed") and f.failed)
    for name, finding, body in (
        ("issue_slowdown", slowdown, finding_body(slowdown, context)),
        ("issue_drift", drift, finding_body(drift, context)),
    ):
        shoot(page(body, f"<b>{title(finding)}</b>"), out / f"pr_comment_{name}.png", 1200)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
