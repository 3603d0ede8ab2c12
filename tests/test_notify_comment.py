"""The PR comment (issue 30): the gates' real records -> Markdown -> HTML as GitHub renders it (cmark-gfm).

The records in tests/data/pr_comment are the gates' own output on this CPU
(docs/data/pr_comment_examples.py): a head with identical code only, a regression with an
ISA and register diff (and a failed budget), a wrong result, an inconclusive benchmark, and a
speed gate that stopped with exit 2. Each is rendered and parsed by cmarkgfm (GitHub's
cmark-gfm): the structure is checked on the HTML, not on the Markdown text, so a table that
GFM would not parse as a table, or a <details> that swallows the rest, fails here. Untrusted
text is checked to stay text: no tag, link, image or @mention can come out of an artifact.
"""

from __future__ import annotations

import copy
import html
import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from ci.notify import bundle
from ci.notify.comment import (
    JOB_APPROVE,
    JOB_CHANGES,
    JOB_CPU,
    JOB_GPU,
    MARKER,
    STEP_BUDGET,
    STEP_CHANGES,
    STEP_GPU_TESTS,
    STEP_SPEED,
    STEP_TESTS,
    Inputs,
    Links,
    render,
    render_capped,
)
from ci.notify.markdown import GITHUB_BODY_LIMIT, code
from ci.notify.records import changes_record, jobs_record, speed_record
from ci.notify.untrusted import MAX_BYTES, Rejected

cmarkgfm = pytest.importorskip("cmarkgfm", reason="cmarkgfm (GitHub's cmark-gfm) comes with the test extra")
from cmarkgfm.cmark import Options  # noqa: E402

PROJECT = Path(__file__).resolve().parents[1]
DATA = PROJECT / "tests" / "data" / "pr_comment"
RUN = "https://github.com/OWNER/REPO/actions/runs/1000"
LINKS = Links(RUN, f"{RUN}/artifacts/4242", "0123456789abcdef0123456789abcdef01234567", 1)
# What GitHub's sanitizer lets through that the renderer may produce; anything else came from an artifact.
ALLOWED_TAGS = {
    "h3",
    "p",
    "strong",
    "em",
    "code",
    "pre",
    "a",
    "ul",
    "li",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "details",
    "summary",
    "sub",
    "br",
}
HOSTILE = (
    "x|y`` `<script>alert(1)</script>@octocat [link](https://evil.example) ![img](https://evil.example/p.png) "
    "www.evil.example </details></summary>\n### injected heading <!-- -->"
)


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text_outside_code: list[str] = []
        self._code = 0

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._code += tag in ("code", "pre")

    def handle_endtag(self, tag):
        self._code -= tag in ("code", "pre")

    def handle_data(self, data):
        if not self._code:
            self.text_outside_code.append(data)


def html_of(markdown: str) -> str:
    return cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)


def parse(markdown: str) -> Tags:
    tags = Tags()
    tags.feed(html_of(markdown))
    return tags


def comment(outcome: str) -> str:
    folder = DATA / outcome
    return render(bundle.load_inputs(folder, 1, folder / "jobs.json"), LINKS)


def tables(page: str) -> list[list[list[str]]]:
    """Each <table> as rows of cell texts."""
    out = []
    for table in re.findall(r"<table>(.*?)</table>", page, re.S):
        rows = re.findall(r"<tr>(.*?)</tr>", table, re.S)
        out.append(
            [
                [
                    html.unescape(re.sub(r"<[^>]+>", "", c)).strip()
                    for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", r, re.S)
                ]
                for r in rows
            ]
        )
    return out


@pytest.mark.parametrize(
    "outcome, first_line",
    [
        ("identical", "### PASS — speed ✓ **PASS** · resources ✓ **PASS** · correctness ✓ **PASS**"),
        ("regression", "### FAIL — speed ✗ **FAIL** · resources ✗ **FAIL** · correctness ✓ **PASS**"),
        ("wrong", "### FAIL — speed ✗ **FAIL** · resources ✓ **PASS** · correctness ✗ **FAIL**"),
        # An undecided benchmark is not green (issue 37): the remedy is a re-run.
        (
            "inconclusive",
            "### INCONCLUSIVE — speed ⚠ **INCONCLUSIVE** (1 benchmark not decided: re-run) · resources ✓ **PASS** · "
            "correctness ✓ **PASS**",
        ),
        ("error", "### ERROR — speed ⚠ **ERROR** · resources ✓ **PASS** · correctness ✓ **PASS**"),
    ],
)
def test_each_outcome_says_its_verdict_in_the_first_line(outcome, first_line):
    markdown = comment(outcome)
    assert markdown.splitlines()[0] == first_line
    assert markdown.rstrip().endswith(MARKER) and markdown.count(MARKER) == 1
    tags = parse(markdown)
    assert {t for t, _ in tags.tags} <= ALLOWED_TAGS
    assert [a["href"] for t, a in tags.tags if t == "a"][-3:] == [RUN, f"{RUN}#artifacts", f"{RUN}/artifacts/4242"]


def test_identical_code_only_fits_on_one_screen():
    markdown = comment("identical")
    lines = [line for line in markdown.splitlines() if line.strip()]
    assert len(lines) <= 8, markdown
    assert "20 benchmark(s) unchanged (identical code): not measured" in markdown
    assert "0 s spent, ~265 s saved" in markdown
    assert "<table>" not in html_of(markdown)


def test_a_regression_shows_its_interval_threshold_and_the_folded_isa_diff():
    markdown = comment("regression")
    html = html_of(markdown)
    regressions, budget, mix, resources = tables(html)
    assert regressions[0] == [
        "benchmark",
        "base TFLOPS",
        "head TFLOPS",
        "head vs base (interval of head/base)",
        "threshold",
        "rounds",
    ]
    # Base and head TFLOPS as the record has them (the medians of the rounds used), the change in words (issue 38).
    assert regressions[1][:4] == [
        "torch_dequant[bf16]/256x256x1024",
        "0.00806",
        "0.00269",
        "−66.6% slower0.328 – 0.339",
    ]
    assert "**−66.6%** slower<br>0.328 – 0.339" in markdown and regressions[1][4] == "±1.0%"
    assert (
        budget[1][0] == "flydsl_gfx950_4wave/gfx950/default"
        and "registers 418 > budget max_registers 408" in budget[1][1]
    )
    # The ISA and resource diff is folded (no `open`), after the verdicts, and holds only the changed rows.
    assert "<details><summary><code>flydsl_gfx950_4wave/gfx950/default</code>" in html and "<details open" not in html
    assert html.index("<details>") > html.index("Register budget exceeded")
    assert ["v_accvgpr move", "512", "204", "-308"] in mix and not any(r[0] == "scaled MFMA" for r in mix)
    assert ["accvgpr_copies_in_loop", "0", "132", "+132"] in resources
    assert html.index("<table>", html.index("<details>")) < html.index("</details>")  # the tables are inside it


def test_a_wrong_result_names_the_benchmark_and_the_accuracy_message_once():
    markdown = comment("wrong")
    assert markdown.count("relative error 5.006e-02 > 3.906e-03") == 1
    assert "The GPU correctness tests failed ([log](https://github.com/OWNER/REPO/actions/runs/1000/job/3))" in markdown


def test_inconclusive_says_why():
    (table,) = tables(html_of(comment("inconclusive")))
    assert table[0][-1] == "why" and "straddles an edge of the band" in table[1][-1]


def test_a_gate_that_stopped_says_so_and_why():
    markdown = comment("error")
    assert "The speed gate stopped (exit 2): `error: torch_dequant[bf16] raised at head" in markdown
    assert "injected: torch_dequant is broken" in markdown


def test_no_speed_record_is_explained_from_the_job_list():
    folder = DATA / "regression"
    jobs = json.loads((folder / "jobs.json").read_text())
    gpu = next(j for j in jobs["jobs"] if j["name"] == JOB_GPU)
    changes = bundle.load_inputs(folder, 1, None).changes
    budget = bundle.load_inputs(folder, 1, None).budget
    for conclusion, expected in (
        ("timed_out", "The GPU job timed out before the speed gate had a verdict"),
        ("cancelled", "The GPU job was cancelled before"),
    ):
        gpu.update(conclusion=conclusion, steps=[dict(s, conclusion=None) for s in gpu["steps"]])
        markdown = render(Inputs(None, changes, budget, jobs_record(jobs)), LINKS)
        assert "speed ⚠ **ERROR**" in markdown.splitlines()[0] and expected in markdown
    gpu.update(conclusion="skipped", steps=[])
    jobs["jobs"].append({"name": JOB_APPROVE, "conclusion": "failure", "steps": []})
    markdown = render(Inputs(None, changes, budget, jobs_record(jobs)), LINKS)
    assert "speed – **NOT RUN**" in markdown and "the fork's GPU run was not approved" in markdown


def _speed_data() -> dict:
    return json.loads((DATA / "regression" / "speed-gate-attempt1" / "verdict.json").read_text())


def test_untrusted_text_stays_text():
    data = _speed_data()
    data["benchmarks"][0]["id"] = HOSTILE
    data["benchmarks"][0]["decision"]["reason"] = HOSTILE
    changes = json.loads((DATA / "regression" / "speed-changes-attempt1" / "changes.json").read_text())
    changes["code_changes"][0]["target"] = HOSTILE
    changes["code_changes"][0]["instruction_mix"][0]["instructions"] = HOSTILE
    markdown = render(Inputs(speed_record(data), changes_record(changes), None, None), LINKS)
    tags = parse(markdown)
    assert {t for t, _ in tags.tags} <= ALLOWED_TAGS, {t for t, _ in tags.tags}
    assert all("evil" not in a.get("href", "") for t, a in tags.tags if t == "a")
    outside = " ".join(tags.text_outside_code)
    assert "@octocat" not in outside and "evil.example" not in outside and "injected heading" not in outside
    assert "<h3>" not in html_of(markdown)[20:]  # one heading: the verdict line
    regressions = tables(html_of(markdown))[0]
    assert len(regressions[1]) == len(regressions[0]) == 6  # the | in the name did not add a column
    assert HOSTILE.split("\n")[0][:40] in regressions[1][0]
    rendered = html_of(markdown)
    assert rendered.count("<details>") == rendered.count("</details>") == 1


def test_code_spans_hold_any_backticks():
    for text in ("`", "a``b", "``x``", "ends with `"):
        (span,) = re.findall(r"<code>(.*?)</code>", html_of(code(text)))
        assert span.replace("&amp;", "&") == text.strip()


def test_unknown_schema_and_bad_fields_are_shown_as_such(tmp_path):
    folder = tmp_path / "run"
    shutil_copy = __import__("shutil").copytree
    shutil_copy(DATA / "regression", folder)
    verdict = folder / "speed-gate-attempt1" / "verdict.json"
    data = _speed_data()
    verdict.write_text(json.dumps(dict(data, schema="mxfp4-speed-gate/9")))
    markdown = render(bundle.load_inputs(folder, 1, folder / "jobs.json"), LINKS)
    assert "speed ⚠ **ERROR**" in markdown.splitlines()[0]
    assert "unknown schema mxfp4-speed-gate/9 (this publisher reads mxfp4-speed-gate/1)" in markdown
    bad = copy.deepcopy(data)
    bad["benchmarks"][0]["decision"]["estimate"]["point"] = "fast"
    verdict.write_text(json.dumps(bad))
    assert "verdict.json.benchmarks[0].decision.estimate.point: expected a finite number, got fast" in render(
        bundle.load_inputs(folder, 1, None), LINKS
    )
    verdict.write_text(json.dumps(data) + " " * MAX_BYTES)
    inputs = bundle.load_inputs(folder, 1, None)
    assert isinstance(inputs.speed, Rejected) and f"over {MAX_BYTES} bytes" in inputs.speed.reason
    verdict.write_text('{"schema": "mxfp4-speed-gate/1", "verdict": NaN}')
    assert "not JSON" in bundle.load_inputs(folder, 1, None).speed.reason


def test_the_comment_is_capped_at_githubs_limit_without_breaking_a_block():
    changes = json.loads((DATA / "regression" / "speed-changes-attempt1" / "changes.json").read_text())
    one = changes["code_changes"][0]
    one["instruction_mix"] = [
        dict(one["instruction_mix"][0], instructions=f"op_{i}" * 8, delta="+1") for i in range(300)
    ]
    changes["code_changes"] = [dict(one, target=f"kernel_{i}/gfx950/default") for i in range(25)]
    capped = render_capped(Inputs(speed_record(_speed_data()), changes_record(changes), None, None), LINKS)
    assert len(capped.text) <= GITHUB_BODY_LIMIT and capped.left_out > 0
    assert capped.text.count("<details>") == capped.text.count("</details>") > 0
    assert "more section(s) left out" in capped.text and capped.text.rstrip().endswith(MARKER)
    small = render_capped(Inputs(speed_record(_speed_data()), changes_record(changes), None, None), LINKS, limit=3000)
    assert len(small.text) <= 3000 and small.text.splitlines()[0].startswith("### FAIL")
    # Whatever is left out, the GPU line and the links the note points to are kept (issue 38), after the note.
    for text in (capped.text, small.text):
        note = text.index("more section(s) left out")
        assert "artifacts (linked below) have everything" in text
        assert (
            note
            < text.index("GPU runner: 5 s spent")
            < text.index(f"[run]({RUN})")
            < text.index(f"[artifacts]({RUN}#artifacts)")
        )
        assert "[speed plot (ratios.png)](https://github.com/OWNER/REPO/actions/runs/1000/artifacts/4242)" in text


# ---------------------------------------------------------------------------
# the contract with pr-checks.yml and the publishing workflow
# ---------------------------------------------------------------------------


def _workflow(name: str) -> dict:
    return yaml.safe_load((PROJECT / ".github" / "workflows" / name).read_text())


def test_the_names_the_comment_reads_are_the_ones_pr_checks_uses():
    jobs = _workflow("pr-checks.yml")["jobs"]
    steps = {job["name"]: {s.get("name") for s in job.get("steps", [])} for job in jobs.values()}
    for job, step in (
        (JOB_CPU, STEP_TESTS),
        (JOB_CPU, STEP_BUDGET),
        (JOB_CHANGES, STEP_CHANGES),
        (JOB_GPU, STEP_GPU_TESTS),
        (JOB_GPU, STEP_SPEED),
    ):
        assert step in steps.get(job, set()), (job, step)
    assert JOB_APPROVE in steps
    uploads = {
        s["with"]["name"]: (s, job)
        for job in jobs.values()
        for s in job.get("steps", [])
        if str(s.get("uses", "")).startswith("actions/upload-artifact@")
    }
    for name, (file, _, _) in bundle.FILES.items():
        step, job = uploads[f"{name}-attempt${{{{ github.run_attempt }}}}"]
        # Uploaded even when the gate failed or stopped, and the file the gate writes is in it.
        assert "!cancelled()" in str(step.get("if", "")), name
        runs = " ".join(s.get("run", "") for s in job["steps"])
        path = step["with"]["path"]
        assert (path.rstrip("/") + "/" + file if path.endswith("/") else path) in runs.replace(
            "--json ", ""
        ) or path == file, (name, path, runs)
    render_job = _workflow("pr-comment.yml")["jobs"]["render"]
    download = next(s for s in render_job["steps"] if str(s.get("uses", "")).startswith("actions/download-artifact@"))
    assert download["with"]["pattern"] == "*-attempt*"


def test_a_rerun_attempt_keeps_the_records_of_the_jobs_it_did_not_rerun(tmp_path):
    folder = tmp_path / "run"
    __import__("shutil").copytree(DATA / "regression", folder)
    (folder / "speed-gate-attempt1").rename(folder / "speed-gate-attempt2")  # only the GPU job ran again
    inputs = bundle.load_inputs(folder, 2, None)
    assert inputs.speed is not None and inputs.budget is not None and inputs.changes is not None
    assert bundle.load_inputs(folder, 1, None).speed is None  # attempt 1 does not see attempt 2's


def test_the_publisher_needs_nothing_installed():
    # The publishing workflows run `python3 -m ci.notify` with the runner's python, no pip install:
    # every module it imports must be the standard library's or this checkout's.
    probe = (
        "import sys; sys.path.insert(0, '.'); import ci.notify.front, ci.notify.commands; "
        "print(sorted({m.split('.')[0] for m in sys.modules} - set(sys.stdlib_module_names)))"
    )
    done = subprocess.run([sys.executable, "-S", "-E", "-c", probe], cwd=PROJECT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # this checkout's packages (the command runner reads kernels' and harness' error roots, plain Python)
    assert set(eval(done.stdout)) <= {"__main__", "ci", "harness", "kernels", "asv_bench"}, done.stdout


def test_the_front_answers_help_and_refuses_bad_options(tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "ci.notify", *args], cwd=PROJECT, capture_output=True, text=True)

    assert run("--help").returncode == 0 and "regression-issues" in run("--help").stdout
    body = tmp_path / "c.md"
    body.write_text("x")
    for args, message in (
        (
            [
                "post-comment",
                "--github-repo",
                "not a repo",
                "--head-repo",
                "a/b",
                "--head-branch",
                "b",
                "--head-sha",
                "a" * 40,
                "--body",
                str(body),
            ],
            "--github-repo 'not a repo': expected OWNER/NAME",
        ),
        (
            ["comment", "--artifacts", str(tmp_path), "--run-url", "http://insecure", "--out", str(body)],
            "--run-url 'http://insecure': expected an https:// address",
        ),
        (
            [
                "post-comment",
                "--github-repo",
                "a/b",
                "--head-repo",
                "a/b",
                "--head-branch",
                "b\nx",
                "--head-sha",
                "a" * 40,
                "--body",
                str(body),
            ],
            "--head-branch",
        ),
        (
            ["regression-issues", "--github-repo", "a/b", "--changes", str(tmp_path / "none.json"), "--run-url", RUN],
            "--changes",
        ),
    ):
        done = run(*args)
        assert done.returncode == 2 and message in done.stderr, done.stderr


def test_a_job_link_that_could_break_out_of_markdown_is_dropped():
    jobs = {
        "jobs": [
            {
                "name": JOB_GPU,
                "conclusion": "failure",
                "html_url": "https://github.com/a) [evil](https://evil.example",
                "steps": [{"name": STEP_GPU_TESTS, "conclusion": "failure"}],
            }
        ]
    }
    markdown = render(Inputs(None, None, None, jobs_record(jobs)), LINKS)
    assert "The GPU correctness tests failed." in markdown and "evil" not in markdown


def test_a_changes_record_that_found_nothing_to_compare_says_the_gate_did_not_run():
    """Issue 49: ci.speed.changes stops with gpu_needed false where the gate would stop the same way (base = head);
    the comment must not say that every benchmark was measured."""
    stopped = {
        "schema": "mxfp4-changes/1",
        "verdict": "error",
        "exit_code": 2,
        "error": "nothing to compare the head with: no base: the merge-base of HEAD and main is HEAD itself",
    }
    assert changes_record(dict(stopped, gpu_needed=False)).gpu_needed is False
    assert changes_record(dict(stopped, gpu_needed=True)).gpu_needed is True
    assert changes_record(stopped).gpu_needed is True  # an older record: the GPU job ran
    markdown = render(Inputs(None, changes_record(dict(stopped, gpu_needed=False)), None, None), LINKS)
    assert "the fingerprinting stopped" in markdown and "the speed gate did not run" in markdown, markdown
    assert "every benchmark was measured" not in markdown
