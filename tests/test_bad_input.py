"""Bad input to every front is one line naming the argument, exit 2, never "internal error" (issue 49, item 6).

A ref beyond a shallow clone's history, a ref that names nothing (which argument it was), a JSON file nested
thousands deep or larger than any file of these tools, a malformed --noise model that an identical-code run would
never read, and an output file in a folder that does not exist (refused, not created).
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_asv_suite import git

from ci.common.errors import HarnessError

ROOT = Path(__file__).resolve().parents[1]
NESTED = "[" * 100_000 + "]" * 100_000  # json.loads: RecursionError, caught by nothing before issue 49
CAP = 64 << 20  # ci.common.json_file.MAX_BYTES, as docs/RELIABILITY.md states it (checked after the fronts ran)


def _front(module: str, *argv: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_STEP_SUMMARY", "CI", "GITHUB_ACTIONS")}
    env["PYTHONPATH"] = str(ROOT)  # this checkout's tools, run in another repository
    return subprocess.run(
        [sys.executable, "-m", module, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def assert_one_line(done: subprocess.CompletedProcess, module: str, *parts: str) -> str:
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"python -m {module}: error: "), last
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert all(part in last for part in parts), (parts, last)
    return last


@pytest.fixture(scope="module")
def shallow(tmp_path_factory) -> Path:
    """actions/checkout's default: one commit of two. GitPython resolves HEAD~1 from the sha the commit names, which
    the clone does not have: git merge-base then failed (GitCommandError, an "internal error")."""
    where = tmp_path_factory.mktemp("shallow")
    repo = where / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for text in ("one\n", "two\n"):
        (repo / "README.md").write_text(text)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", text.strip())
    clone = where / "clone"
    git(where, "clone", "-q", "--depth", "1", f"file://{repo}", str(clone))
    return clone


@pytest.mark.parametrize("module", ["ci.speed.changes", "ci.budget", "ci.speed"])
def test_a_base_beyond_a_shallow_clone_is_one_line_saying_how_to_deepen(shallow, module):
    done = _front(module, "--base", "HEAD~1", cwd=shallow)
    assert_one_line(
        done, module, "--base 'HEAD~1' does not name a commit", "this is a shallow clone", "git fetch --unshallow"
    )


@pytest.mark.parametrize(
    "module, argv, named",
    [
        ("ci.speed.changes", ["--head", "no-such-ref"], "--head 'no-such-ref' does not name a commit"),
        ("ci.budget", ["--head", "no-such-ref"], "--head 'no-such-ref' does not name a commit"),
        ("ci.budget", ["--base", "no-such-ref"], "--base 'no-such-ref' does not name a commit"),
        ("ci.speed.changes", ["--base", "no-such-ref"], "--base 'no-such-ref' does not name a commit"),
        ("ci.speed", ["--base", "no-such-ref"], "--base 'no-such-ref' does not name a commit"),
        ("ci.speed", ["--head", "no-such-ref"], "--head 'no-such-ref' does not name a commit"),
        (
            "ci.bisect",
            ["--good", "no-such-ref", "--bad", "HEAD", "--benchmark", "k[c]/s"],
            "--good 'no-such-ref' does not name a commit",
        ),
        ("ci.bisect", ["--good", "HEAD", "--bad", "nope", "--benchmark", "k[c]/s"], "--bad 'nope' does not name"),
    ],
)
def test_a_ref_that_names_nothing_says_which_argument_it_was(shallow, module, argv, named):
    assert_one_line(_front(module, *argv, cwd=shallow), module, named)


# The file options of the fronts, each given a file nested too deeply and one too large (a sparse file: no disk).
FILE_OPTIONS = [
    ("ci.speed", ["--replay"]),
    ("ci.speed", ["--changes"]),
    ("ci.speed", ["--thresholds"]),
    ("ci.speed", ["--calibration"]),
    ("ci.speed", ["--noise"]),
    ("ci.bisect", ["--from-change-point"]),
    ("ci.budget", ["--kernel", "no_such_kernel", "--budget"]),
]


@pytest.mark.parametrize("module, argv", FILE_OPTIONS, ids=[f"{m} {a[-1]}" for m, a in FILE_OPTIONS])
def test_a_json_file_nested_too_deeply_is_one_line_naming_the_option(tmp_path, module, argv):
    nested = tmp_path / "nested.json"
    nested.write_text(NESTED)
    done = _front(module, *argv, str(nested), cwd=ROOT)
    assert_one_line(done, module, f"{argv[-1]} {nested}: nested too deeply")


@pytest.mark.parametrize("module, argv", FILE_OPTIONS, ids=[f"{m} {a[-1]}" for m, a in FILE_OPTIONS])
def test_a_json_file_over_the_cap_is_not_read(tmp_path, module, argv):
    """ci.notify caps its input at 2 MB; the tools' own files (a calibration's every round: 2 MB) at 64 MiB."""
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as f:
        f.truncate(CAP + 1)  # sparse
    done = _front(module, *argv, str(huge), cwd=ROOT)
    assert_one_line(done, module, f"{argv[-1]} {huge}: over {CAP >> 20} MiB: not read")
    from ci.common.json_file import MAX_BYTES  # here: the front's behaviour is checked first, on any code

    assert MAX_BYTES == CAP


def test_a_malformed_noise_model_is_refused_before_any_work(tmp_path, capsys):
    """With identical code the gate never read --noise and passed; now the file is read with the options."""
    from ci.speed import gate

    bad = tmp_path / "noise.json"
    bad.write_text('{"schema": "mxfp4-speed-noise/1"}\n')
    assert gate.main(["--noise", str(bad), "--working-tree"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"python -m ci.speed: error: --noise {bad}: ") and "missing" in line, line


RUN_URL = "https://github.com/o/n/actions/runs/1"
NOTIFY_HEAD = ["--head-repo", "o/n", "--head-branch", "b", "--head-sha", "0" * 40]
# Every front that checks an output file before its work, and the argv that reaches that check ({tmp}: a folder
# that exists).
OUTPUTS = [
    ("ci.speed.gate", "GATE", ["--json", "{out}"]),
    ("ci.speed.gate", "GATE", ["--plot", "{out}"]),
    ("ci.speed.gate", "CALIBRATE", ["--json", "{out}"]),
    ("ci.speed.changes", "COMMAND", ["--json", "{out}"]),
    ("ci.budget.gate", "COMMAND", ["--json", "{out}"]),
    ("ci.budget.resources", "COMMAND", ["--json", "{out}"]),
    ("ci.bisect.options", "COMMAND", ["--good", "HEAD~1", "--bad", "HEAD", "--benchmark", "k[c]/s", "--json", "{out}"]),
    ("ci.history.main_job", "COMMAND", ["--json", "{out}"]),
    ("ci.history.publish", "COMMAND", ["--json", "{out}"]),
    ("ci.notify.front", "COMMAND", ["judge", "--artifacts", "{tmp}", "--out", "{out}"]),
    ("ci.notify.front", "COMMAND", ["comment", "--artifacts", "{tmp}", "--run-url", RUN_URL, "--out", "{out}"]),
    (
        "ci.notify.front",
        "COMMAND",
        ["comment", "--artifacts", "{tmp}", "--run-url", RUN_URL, "--out", "{tmp}/c.md", "--status-out", "{out}"],
    ),
    ("ci.notify.front", "COMMAND", ["pr-files", *NOTIFY_HEAD, "--github-repo", "o/n", "--out", "{out}"]),
    (
        "ci.notify.front",
        "COMMAND",
        ["regression-issues", "--github-repo", "o/n", "--changes", "tests/data/history_changes.json"]
        + ["--run-url", RUN_URL, "--json", "{out}"],
    ),
]


def _output_id(module: str, argv: list[str]) -> str:
    subcommand = [] if argv[0].startswith("-") else [argv[0]]  # ci.notify's
    return " ".join([module, *subcommand, argv[-2]])


@pytest.mark.parametrize("module, name, argv", OUTPUTS, ids=[_output_id(m, a) for m, _, a in OUTPUTS])
def test_an_output_into_a_missing_folder_is_refused_not_created(tmp_path, monkeypatch, module, name, argv):
    """Found in issue 49: as root, --json /nonexistent/dir/v.json created /nonexistent/dir."""
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    missing = tmp_path / "missing" / "deeper"
    out = missing / "out.json"
    command = getattr(importlib.import_module(module), name)
    with pytest.raises(HarnessError) as refused:
        command.checked([a.format(out=out, tmp=tmp_path) for a in argv])
    assert f"{argv[-2]} {out}: cannot write there (the folder {missing} does not exist; create it first)" in str(
        refused.value
    )
    assert not (tmp_path / "missing").exists()


OTHER_TOOLS_FILE = [  # each option given a file another tool wrote (or reads): named, with what it is not
    ("ci.speed.gate", "GATE", ["--replay", "ci/speed_noise_h200.json"], "not a mxfp4-speed-gate/1 record"),
    ("ci.speed.gate", "GATE", ["--changes", "ci/speed_noise_h200.json"], "not a mxfp4-changes/1 file"),
    ("ci.speed.gate", "GATE", ["--thresholds", "ci/speed_noise_h200.json"], "must be 'mxfp4-speed-thresholds/1'"),
    ("ci.speed.gate", "GATE", ["--noise", "ci/speed_thresholds_h200.json"], "must be 'mxfp4-speed-noise/1'"),
    ("ci.speed.gate", "GATE", ["--calibration", "ci/speed_noise_h200.json"], "not a mxfp4-speed-gate/1 record"),
    ("ci.bisect.options", "COMMAND", ["--from-change-point", "ci/speed_noise_h200.json"], "no 'history' section"),
]


@pytest.mark.parametrize("module, name, argv, said", OTHER_TOOLS_FILE, ids=[a[0] for *_, a, _ in OTHER_TOOLS_FILE])
def test_another_tools_file_is_one_line_naming_the_option(monkeypatch, capsys, module, name, argv, said):
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    command = getattr(importlib.import_module(module), name)
    assert command.main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"{command.prog}: error: {argv[0]} {argv[1]}: ") and said in line, line
    assert "internal error" not in line
