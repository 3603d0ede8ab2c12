"""A judge the PR cannot edit (issue 37): the speed verdict the comment and the status show is the base's.

The PR of tests/judge_scenario.py slows the tracked H200 config by 2% (real recorded rounds, the
head shifted) and edits ``ci/speed_thresholds_h200.json`` to hide it: its own job reports PASS.
pr-comment.yml is run here as GitHub would run it, step by step, from the workflow file itself
(:func:`run_publisher`): its ``run:`` lines with their ``env:``, the artifact steps emulated, ``gh``
against tests/fake_github.py. The comment must say FAIL, judged by the base, name the PR as changing
the gate, and the commit status must be a failure. The same pipeline with the judge given the PR's
thresholds, or with the record's own decision, says PASS: so these assertions fail when the judge
is not the base's (:func:`test_a_judge_that_takes_the_prs_thresholds_would_pass_it`).
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import judge_scenario as scenario
import pytest
import yaml
from fake_github import BOT, FakeGitHub, State

from ci.notify.comment import MARKER
from ci.notify.speed_table import threshold_text
from ci.notify.status import CONTEXT

PROJECT = Path(__file__).resolve().parents[1]
WORKFLOW = PROJECT / ".github" / "workflows" / "pr-comment.yml"


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> scenario.Scenario:
    return scenario.make(tmp_path_factory.mktemp("hidden-slowdown"))


@pytest.fixture
def github(tmp_path):
    if shutil.which("gh") is None:
        pytest.skip("gh (the GitHub CLI, Debian package gh) is not installed; ci/setup.sh installs it")
    state = State()
    state.add_pull(scenario.PR_NUMBER, scenario.FORK, scenario.BRANCH, scenario.SHA)
    state.files[scenario.PR_NUMBER] = list(scenario.PR_FILES)
    state.runs[scenario.RUN_ID] = {"jobs": scenario.jobs(), "artifacts": scenario.artifact_list()}
    with FakeGitHub(tmp_path, state) as server:
        yield server


# ---------------------------------------------------------------------------
# pr-comment.yml, run from its own file
# ---------------------------------------------------------------------------


def _expressions(server: FakeGitHub, temp: Path) -> dict[str, str]:
    """The values of the ``${{ }}`` expressions pr-comment.yml uses, for this event."""
    run = "github.event.workflow_run"
    return {
        "github.token": "fake-token",
        "github.repository": server.state.repo,
        "github.server_url": "https://github.com",
        f"{run}.id": str(scenario.RUN_ID),
        f"{run}.run_attempt": str(scenario.ATTEMPT),
        f"{run}.html_url": scenario.RUN_URL,
        f"{run}.head_sha": scenario.SHA,
        f"{run}.head_branch": scenario.BRANCH,
        f"{run}.head_repository.full_name": scenario.FORK,
        "runner.temp": str(temp),
    }


def _value(text: str, values: dict[str, str]) -> str:
    return re.sub(r"\$\{\{\s*([\w.]+)\s*\}\}", lambda m: values[m.group(1)], str(text))


def _command(line: str, env: dict[str, str]) -> tuple[list[str], Path | None]:
    """A run line as argv (the shell's "$VAR" expanded; python3 and a venv's python are this interpreter), and the
    file a ``> "$RUNNER_TEMP/..."`` sends its output to."""
    words = [re.sub(r"\$(\w+)", lambda m: env[m.group(1)], w) for w in shlex.split(line)]
    out = None
    if ">" in words:
        out = Path(words[words.index(">") + 1])
        words = words[: words.index(">")]
    if words[0] == "python3" or words[0].endswith("/bin/python"):
        words[0] = sys.executable
    return words, out


def run_publisher(
    server: FakeGitHub, pr_run: Path, temp: Path, replace_judge: list[str] | None = None
) -> dict[str, int]:
    """Every job of pr-comment.yml in order, each step as GitHub runs it; ``pr_run``: the pr-checks run's artifacts.

    The actions are emulated: checkout is this checkout (cwd), download-artifact copies from the pr-checks run
    (``run-id``: ``pr_run``, matched by ``pattern``) or from this run's uploads (``name``), upload-artifact keeps a
    path under its name. The venv and its pip install are skipped (this interpreter has the pinned packages).
    ``replace_judge``: argv run instead of the judge's ``ci.notify judge`` line (a mutation). Returns each command's
    exit code by its step's name.
    """
    workflow = yaml.safe_load(WORKFLOW.read_text())
    uploads: dict[str, list[Path]] = {}
    codes: dict[str, int] = {}
    for job_id, job in workflow["jobs"].items():
        job_temp = temp / job_id  # each job on its own runner
        job_temp.mkdir(parents=True)
        values = _expressions(server, job_temp)
        for step in job["steps"]:
            uses, args = str(step.get("uses", "")), {k: _value(v, values) for k, v in (step.get("with") or {}).items()}
            if uses.startswith("actions/download-artifact@"):
                dest = Path(args["path"])
                if "run-id" in args:
                    for folder in sorted(pr_run.iterdir()):
                        if fnmatch.fnmatch(folder.name, args["pattern"]):
                            shutil.copytree(folder, dest / folder.name)
                elif args["name"] in uploads:
                    for src in uploads[args["name"]]:
                        shutil.copytree(src, dest, dirs_exist_ok=True) if src.is_dir() else (
                            dest.mkdir(parents=True, exist_ok=True),
                            shutil.copy(src, dest / src.name),
                        )
                continue
            if uses.startswith("actions/upload-artifact@"):
                # One path, or several files of one folder (a line each): the artifact holds them at its root.
                kept = [Path(p.strip()) for p in args["path"].splitlines() if p.strip() and Path(p.strip()).exists()]
                if kept:
                    uploads[args["name"]] = kept
                continue
            env = {
                **server.env(dict(os.environ)),
                "RUNNER_TEMP": str(job_temp),
                **{k: _value(v, values) for k, v in (step.get("env") or {}).items()},
            }
            for line in [s for s in re.sub(r"\\\n\s*", " ", str(step.get("run", ""))).splitlines() if s.strip()]:
                if " -m venv " in line or " -m pip install " in line:
                    continue
                argv, out = _command(line, env)
                if replace_judge and argv[1:4] == ["-m", "ci.notify", "judge"]:
                    Path(argv[argv.index("--out") + 1]).parent.mkdir(parents=True, exist_ok=True)
                    argv = [sys.executable, *[a.replace("{out}", argv[argv.index("--out") + 1]) for a in replace_judge]]
                done = subprocess.run(argv, cwd=PROJECT, env=env, capture_output=True, text=True, timeout=600)
                if out is not None:
                    out.write_text(done.stdout)
                codes[f"{job_id}: {step.get('name')}"] = done.returncode
                assert done.returncode == 0, f"{job_id}: {line}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return codes


def _posted(server: FakeGitHub) -> tuple[str, dict]:
    (comment,) = [c for c in server.state.comments[scenario.PR_NUMBER] if c["user"]["login"] == BOT]
    return comment["body"], server.state.statuses[scenario.SHA][-1]


# ---------------------------------------------------------------------------
# the PR that hides its own slowdown
# ---------------------------------------------------------------------------


def test_the_prs_own_job_says_pass(made):
    record = json.loads(made.record.read_text())
    assert record["verdict"] == "pass" and record["exit_code"] == 0
    (bench,) = [b for b in record["benchmarks"] if b["id"] == scenario.BENCH]
    assert bench["threshold"] == scenario.PR_THRESHOLD and bench["verdict"] == "no change"
    assert bench["decision"]["estimate"]["point"] < 0.985  # the slowdown is in the rounds: it was hidden, not absent


def test_a_pr_that_edits_the_thresholds_to_hide_its_slowdown_is_fail(made, github, tmp_path):
    codes = run_publisher(github, made.artifacts, tmp_path / "runner-temp")
    assert set(codes) >= {
        "judge: decide the PR's rounds with the base's gate (python -m ci.speed --replay --judge)",
        "render: the PR's files that are the gate itself (GitHub's list)",
        "post: find the PR from the event, post or edit its comment, set the status",
    }
    body, status = _posted(github)
    first = body.splitlines()[0]
    assert first.startswith("### FAIL — speed ✗ **FAIL**"), first
    assert "**The PR's own job reported PASS; judged with the base's gate: FAIL.**" in body
    assert "decided by the base's gate with its `ci/speed_thresholds_h200.json` and `ci/speed_noise_h200.json`" in body
    # The regression row: the benchmark, its base and head TFLOPS, the change in words.
    kernel, shape = scenario.BENCH.rsplit("/", 1)
    row = next(line for line in body.splitlines() if line.startswith(f"| `{kernel}/`<br>`{shape}` |"))
    threshold = scenario.base_threshold()
    assert threshold <= 0.01 and f"| {threshold_text(threshold)} |" in row, (
        threshold,
        row,
    )  # the base's, not the PR's 5%
    assert "| 111.6 | 109.4 | **−2.0%** slower<br>" in row, row
    # Named as changing the gate: the thresholds file, not the kernel or the docs.
    gate = body[body.index("This PR changes the gate itself") :]
    assert "`ci/speed_thresholds_h200.json`" in gate and "the speed thresholds (policy)" in gate
    assert "kernels/triton_mxfp4.py" not in gate and body.rstrip().endswith(MARKER)
    assert status["state"] == "failure" and status["context"] == CONTEXT
    assert status["description"].startswith("FAIL: 1 regression(s), judged by the base's gate") and status[
        "description"
    ].endswith("the PR changes the gate"), status
    assert status["target_url"] == scenario.RUN_URL
    # The PR's files came from GitHub's list (every page), never a checkout of the PR.
    assert any(
        p.startswith(f"/api/v3/repos/OWNER/REPO/pulls/{scenario.PR_NUMBER}/files") for m, p, _ in github.state.requests
    )


JUDGE_MUTATIONS = {
    # The judge handed the PR's thresholds file: the PR's edit decides again.
    "the PR's thresholds": lambda made: [
        "-m",
        "ci.speed",
        "--replay",
        str(made.record),
        "--judge",
        "--thresholds",
        str(made.pr_thresholds),
        "--json",
        "{out}",
    ],
    # A plain replay: the plan, thresholds and noise model the record names (the PR's).
    "the record's own thresholds and plan": lambda made: [
        "-m",
        "ci.speed",
        "--replay",
        str(made.record),
        "--json",
        "{out}",
    ],
}


@pytest.mark.parametrize("mutation", sorted(JUDGE_MUTATIONS))
def test_a_judge_that_takes_the_prs_thresholds_would_pass_it(made, github, tmp_path, mutation):
    # The same pipeline, the judge's command replaced: the slowdown is hidden again -- no FAIL, no regression row,
    # no failed status for it -- so the assertions of the test above fail unless the judge uses the base's thresholds.
    run_publisher(github, made.artifacts, tmp_path / "runner-temp", replace_judge=JUDGE_MUTATIONS[mutation](made))
    body, status = _posted(github)
    first = body.splitlines()[0]
    assert not first.startswith("### FAIL") and "**Regressions" not in body, first
    assert "judged with the base's gate: FAIL" not in body and not status["description"].startswith("FAIL"), status


def test_a_record_too_short_for_the_bases_plan_is_not_green(github, tmp_path):
    # Fewer rounds than the base's plan looks first at (A/A rounds, nothing slowed). The PR's own (edited) gate
    # claims "no change" for every benchmark from them -- no plan of the base's can, so the claim is written into
    # the record as a PR that edits harness/paired/ would write it. The judge re-decides: undecided; never a pass.
    from ci.speed.options import Mode, SpeedOptions

    first_look = SpeedOptions(Mode.REPLAY).the_plan(model=True).look_points[0]
    short = scenario.make(tmp_path / "short", rounds=first_look - 1, shift=0.0)
    record = json.loads(short.record.read_text())
    for bench in record["benchmarks"]:
        if bench["status"] == "gated":
            bench.update(verdict="no change", stopped_by="decision")
            bench["decision"]["verdict"] = "no change"
    short.record.write_text(json.dumps(dict(record, verdict="pass", exit_code=0)))
    run_publisher(github, short.artifacts, tmp_path / "runner-temp")
    body, status = _posted(github)
    assert "speed ⚠ **INCONCLUSIVE**" in body.splitlines()[0], body.splitlines()[0]
    assert "**The PR's own job reported PASS; judged with the base's gate: INCONCLUSIVE.**" in body
    assert status["state"] == "failure" and status["description"].startswith("inconclusive: re-run"), status


def test_no_judged_verdict_is_an_error_never_the_prs_own(made, github, tmp_path):
    # The judge stopped (here: a record it refuses): the PR's PASS is not shown as the speed verdict.
    broken = tmp_path / "broken-run"
    shutil.copytree(made.artifacts, broken)
    verdict = broken / f"speed-gate-attempt{scenario.ATTEMPT}" / "verdict.json"
    data = json.loads(verdict.read_text())
    del data["plan"]
    verdict.write_text(json.dumps(data))
    run_publisher(github, broken, tmp_path / "runner-temp")
    body, status = _posted(github)
    assert "speed ⚠ **ERROR**" in body.splitlines()[0] and "The base's gate could not judge" in body
    assert status["state"] == "error"


# ---------------------------------------------------------------------------
# --replay --judge itself
# ---------------------------------------------------------------------------


def test_the_judge_picks_this_checkouts_files_by_the_records_runner():
    from ci.speed.modes.replay import judge_files

    root = PROJECT / "ci"
    assert judge_files({"gpu": "NVIDIA H200"}) == (root / "speed_thresholds_h200.json", root / "speed_noise_h200.json")
    noise = root / "speed_noise.json"
    for environment in ({"gpu": None}, {"gpu": "AMD Instinct MI355X"}, {}):
        assert judge_files(environment) == (root / "speed_thresholds.json", noise if noise.is_file() else None)


def test_judge_is_a_replay_option():
    done = scenario.speed("--help")
    assert done.returncode == 0 and "--judge" in done.stdout and "never the record's" in " ".join(done.stdout.split())
    for args, message in (
        (["--judge"], "--judge only applies to --replay"),
        (["--replay", str(scenario.SOURCE), "--judge", "--decisions", "3"], "--judge and --decisions"),
    ):
        done = scenario.speed(*args)
        assert done.returncode == 2 and message in done.stderr, done.stderr


def test_the_judge_keeps_nothing_the_record_decided(made, tmp_path):
    # The record's thresholds and verdicts say PASS at 5%; the judged record names this checkout's files and its own
    # verdicts.
    out = tmp_path / "judged.json"
    done = scenario.speed("--replay", str(made.record), "--judge", "--json", str(out))
    assert done.returncode == 1, done.stderr
    judged = json.loads(out.read_text())
    assert judged["judged"]["recorded"] == {"verdict": "pass", "exit_code": 0, "thresholds": str(made.pr_thresholds)}
    assert judged["thresholds"]["source"] == "ci/speed_thresholds_h200.json of this checkout (--judge)"
    assert judged["noise"]["model"]["source"] == "ci/speed_noise_h200.json of this checkout (--judge)"
    (bench,) = [b for b in judged["benchmarks"] if b["id"] == scenario.BENCH]
    assert bench["verdict"] == "regression" and bench["threshold"] == scenario.base_threshold() != scenario.PR_THRESHOLD


# ---------------------------------------------------------------------------
# the PR's files and the status, on their own
# ---------------------------------------------------------------------------


def test_the_gate_files_come_from_every_page_of_githubs_list_and_renames_count(github, tmp_path):
    files = [{"filename": f"kernels/generated_{i:03d}.py", "status": "added"} for i in range(250)]
    files.append(
        {"filename": "docs/moved_timing.py", "previous_filename": "harness/timing/gemm.py", "status": "renamed"}
    )
    files.append({"filename": ".github/workflows/pr-checks.yml", "status": "modified"})
    github.state.files[scenario.PR_NUMBER] = files
    out = tmp_path / "pr-files.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ci.notify",
            "pr-files",
            "--github-repo",
            "OWNER/REPO",
            "--head-repo",
            scenario.FORK,
            "--head-branch",
            scenario.BRANCH,
            "--head-sha",
            scenario.SHA,
            "--out",
            str(out),
        ],
        cwd=PROJECT,
        env=github.env(dict(os.environ)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    record = json.loads(out.read_text())
    assert record["files_listed"] == 252 and record["pull_requests"] == [scenario.PR_NUMBER]
    assert [(g["path"], g["what"]) for g in record["gate_files"]] == [
        ("docs/moved_timing.py", "the measuring code (timing, statistics)"),
        (".github/workflows/pr-checks.yml", "the workflows"),
    ]
    assert any("files" in p and "page=3" in p for m, p, _ in github.state.requests)


def test_a_pr_files_failure_says_the_gate_change_is_not_known(tmp_path):
    from ci.notify.comment import Inputs, gate_change_block
    from ci.notify.gate_files import files_record
    from ci.notify.records import pr_files_record

    record = pr_files_record(files_record([], [], error="GitHub's list of the PR's files failed: 502"))
    assert "Whether this PR changes the gate is not known" in gate_change_block(
        Inputs(None, None, None, None, pr_files=record)
    )
    cut = pr_files_record(
        files_record([7], [{"filename": f"x/{i}", "status": "added"} for i in range(3000)], truncated=True)
    )
    assert "GitHub lists only the first 3000 files" in gate_change_block(Inputs(None, None, None, None, pr_files=cut))


def test_no_speed_record_is_nothing_to_judge(tmp_path):
    # A docs-only PR: the GPU job never ran, the judge's download found no artifact (and made no folder).
    out = tmp_path / "judged.json"
    done = subprocess.run(
        [sys.executable, "-m", "ci.notify", "judge", "--artifacts", str(tmp_path / "pr-artifacts"), "--out", str(out)],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "nothing to judge" in done.stderr and not out.exists(), done.stderr


def test_identical_code_is_a_green_status_without_a_judge():
    from ci.notify import bundle
    from ci.notify.status import status_of

    folder = PROJECT / "tests" / "data" / "pr_comment" / "identical"
    inputs = bundle.load_inputs(folder, 1, folder / "jobs.json", folder / "no-judged.json")  # nothing was judged
    status = status_of(inputs)
    assert status["state"] == "success" and status["description"] == "PASS: identical code, nothing measured"


def test_the_status_is_checked_before_it_is_sent():
    from ci.common.errors import InputError as RecordError
    from ci.notify.post import checked_status

    good = {"schema": "mxfp4-commit-status/1", "state": "failure", "context": CONTEXT, "description": "FAIL"}
    assert checked_status(good)["state"] == "failure"
    for bad in (
        dict(good, state="green"),
        dict(good, context="another check"),
        dict(good, description="x" * 141),
        dict(good, target_url="javascript:alert(1)"),
    ):
        with pytest.raises(RecordError):
            checked_status(bad)


def test_a_later_gates_words_are_shown_as_they_are():
    # Version 6 says "inconclusive" of a whole run; a verdict or status this publisher does not know is shown as text.
    from ci.notify.comment import Inputs, Links, render
    from ci.notify.records import speed_record

    data = json.loads(
        (PROJECT / "tests" / "data" / "pr_comment" / "regression" / "speed-gate-attempt1" / "verdict.json").read_text()
    )
    data.update(verdict="inconclusive", exit_code=3)
    first = data["benchmarks"][0]
    first.update(verdict="not a regression <b>")
    first["decision"]["verdict"] = "not a regression <b>"
    data["benchmarks"].append(
        dict(first, id="torch_dequant[fp32]/256x256x1024", status="skipped by policy", decision=None)
    )
    markdown = render(Inputs(speed_record(data), None, None, None), Links(scenario.RUN_URL))
    assert "**Other verdicts (1)**" in markdown and "`not a regression <b>`" in markdown
    assert "1 `skipped by policy`" in markdown
    assert "speed ⚠ **INCONCLUSIVE** (re-run)" in markdown.splitlines()[0]
