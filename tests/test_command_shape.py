"""Every ``python -m ci.X`` front has the one shape of ci.common.command (issue 40).

The fronts are found, not listed: every ``__main__.py`` under ci/ and every module with a ``__main__``
block, but the child entry points the tools start themselves. Each runs in a subprocess: a bad argument,
``--help``, a crash injected where the runner calls the tool (``_work``; with and without ``--traceback``),
and a signal while it runs (SIGINT for each; SIGTERM once). A front that does not go through the runner
fails these checks (:func:`test_the_checks_catch_a_front_that_bypasses_the_runner`).
"""

from __future__ import annotations

import importlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.test_command_fronts import CHILD_ENTRY_POINTS

REPO = Path(__file__).resolve().parents[1]
# Arguments a front needs to parse at all (a subcommand and its required options); none of them is checked here.
PARSES = {
    "ci.notify": [
        "regression-issues",
        "--github-repo",
        "o/n",
        "--changes",
        "c.json",
        "--run-url",
        "https://example.org/r",
    ]
}
# Runs the front as `python -m` would, with the runner's call of the tool replaced: "crash" raises, "wait" waits.
WRAPPER = """
import faulthandler, runpy, sys, time
import ci.common.command as command

def injected(cmd, args):
    if FAULT == "crash":
        raise RuntimeError("injected crash")
    # A run that has not ended 45 s after this line (the test's signal is sent at once) prints where every thread is
    # and exits 1: a hang fails with its traceback, not as a bare timeout.
    faulthandler.dump_traceback_later(45, exit=True)
    print("running", flush=True)
    # Work in short steps, as a front's loops do: a signal that lands after the interpreter's last check and before a
    # single long sleep's system call only runs its handler when that sleep ends (the hang this dump showed, 1 run in
    # 6 of this file: the main thread in time.sleep(120) with SIGINT pending).
    for _ in range(1200):
        time.sleep(0.1)
    return 0

FAULT, module = sys.argv[1], sys.argv[2]
command._work = injected
sys.argv = [module, *sys.argv[3:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def fronts(root: Path = REPO) -> list[str]:
    """The ``python -m`` names of the commands under ``root``/ci."""
    found = set()
    for path in (root / "ci").rglob("*.py"):
        module = path.relative_to(root).as_posix()
        if path.name == "__main__.py":
            found.add(".".join(path.parent.relative_to(root).parts))
        elif module not in CHILD_ENTRY_POINTS and 'if __name__ == "__main__"' in path.read_text():
            found.add(".".join(path.relative_to(root).with_suffix("").parts))
    return sorted(found)


def _env(pythonpath: str | Path = REPO) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(pythonpath), "GITHUB_STEP_SUMMARY": ""}


def _run(args: list[str], cwd: Path, pythonpath: str | Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=_env(pythonpath), capture_output=True, text=True, timeout=120
    )


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""


def check_bad_argument(front: str, cwd: Path, pythonpath: str | Path = REPO) -> None:
    done = _run(["-m", front, *PARSES.get(front, []), "--no-such-option"], cwd, pythonpath)
    assert done.returncode == 2, done.stderr[-2000:]
    assert _last_line(done.stderr).startswith(f"python -m {front}: error: "), done.stderr[-2000:]
    assert "Traceback" not in done.stderr


def check_help(front: str, cwd: Path, pythonpath: str | Path = REPO) -> str:
    done = _run(["-m", front, "--help"], cwd, pythonpath)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"usage: python -m {front} " in done.stdout and "--traceback" in done.stdout
    section = done.stdout.split("\nexit codes:\n", 1)[-1]
    assert "\nexit codes:\n" in done.stdout, done.stdout[-1500:]
    assert all(f"  {code} " in section for code in (0, 2, 130)), section
    return done.stdout


def check_crash(front: str, cwd: Path, pythonpath: str | Path = REPO) -> None:
    done = _run(["-c", WRAPPER, "crash", front, *PARSES.get(front, [])], cwd, pythonpath)
    line = _last_line(done.stderr)
    assert done.returncode == 2, done.stderr[-2000:]
    assert line == (
        f"python -m {front}: error: internal error (RuntimeError: injected crash); "
        "run again with --traceback for the Python traceback"
    ), done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    shown = _run(["-c", WRAPPER, "crash", front, *PARSES.get(front, []), "--traceback"], cwd, pythonpath)
    assert shown.returncode == 2 and "Traceback (most recent call last)" in shown.stderr, shown.stderr[-2000:]
    assert _last_line(shown.stderr).startswith(f"python -m {front}: error: internal error (RuntimeError"), shown.stderr


def signalled(
    front: str,
    cwd: Path,
    signum: int,
    extra: Sequence[str] = (),
    pythonpath: str | Path = REPO,
    preexec_fn: Callable[[], object] | None = None,
) -> tuple[int, str]:
    """``front`` run under WRAPPER until it is working, then sent ``signum``: its exit code and stderr."""
    command = [sys.executable, "-c", WRAPPER, "wait", front, *PARSES.get(front, []), *extra]
    proc = subprocess.Popen(
        command,
        cwd=cwd,
        env=_env(pythonpath),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=preexec_fn,
    )
    try:
        assert proc.stdout.readline() == "running\n", proc.communicate()[1][-2000:]
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    return proc.returncode, stderr


def check_signal(
    front: str, cwd: Path, signum: int = signal.SIGINT, pythonpath: str | Path = REPO, takes_json: bool = True
) -> None:
    """Stopped while it runs: 128 + the signal, one line, and its --json (if it has one) absent or whole."""
    out = cwd / f"{front}.json"
    returncode, stderr = signalled(front, cwd, signum, ["--json", str(out)] if takes_json else [], pythonpath)
    assert returncode == 128 + signum, stderr[-2000:]
    assert _last_line(stderr).startswith(f"python -m {front}: interrupted by {signal.Signals(signum).name}: "), stderr
    assert "Traceback" not in stderr
    if out.exists():  # written whole (atomically) or not at all
        record = json.loads(out.read_text())
        assert record["exit_code"] == 128 + signum and record["verdict"] == "error", record


def test_the_fronts_are_found():
    """The nine commands of issue 40; the discovery sees a new one (and not a child entry point)."""
    assert fronts() == [
        "ci.bisect",
        "ci.budget",
        "ci.budget.resources",
        "ci.history",
        "ci.history.publish",
        "ci.notify",
        "ci.speed",
        "ci.speed.calibrate",
        "ci.speed.changes",
    ]


@pytest.mark.parametrize("front", fronts())
def test_a_front_has_the_one_shape(front, tmp_path):
    check_bad_argument(front, tmp_path)
    takes_json = "--json" in check_help(front, tmp_path)
    check_crash(front, tmp_path)
    check_signal(front, tmp_path, takes_json=takes_json)


def test_sigterm_is_143_and_the_error_json_says_so(tmp_path):
    check_signal("ci.budget", tmp_path, signal.SIGTERM)
    assert json.loads((tmp_path / "ci.budget.json").read_text())["error"].startswith("interrupted by SIGTERM")


def test_a_command_started_with_its_signals_blocked_still_stops_on_them(tmp_path):
    """A blocked signal mask is inherited across exec: started so (by a launcher that blocked SIGTERM in its thread), a
    front would leave a cancel pending for its whole run. It unblocks both signals when it installs its handlers."""
    out = tmp_path / "ci.budget.json"
    returncode, stderr = signalled(
        "ci.budget",
        tmp_path,
        signal.SIGTERM,
        ["--json", str(out)],
        preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT}),
    )
    assert returncode == 143, stderr[-2000:]
    assert _last_line(stderr).startswith("python -m ci.budget: interrupted by SIGTERM: "), stderr


def test_a_harness_error_is_one_line_and_its_json(tmp_path):
    """A HarnessError (here: a --repo that is no directory) is the message alone; the --json says the same."""
    out = tmp_path / "v.json"
    done = _run(["-m", "ci.budget", "--repo", str(tmp_path / "none"), "--json", str(out)], tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert _last_line(done.stderr) == f"python -m ci.budget: error: --repo {tmp_path / 'none'}: not a directory"
    record = json.loads(out.read_text())
    assert record["verdict"] == "error" and record["exit_code"] == 2
    assert record["schema"].startswith("mxfp4-budget-gate/")


def test_the_discovery_sees_a_new_front_and_skips_the_child_entry_points(tmp_path):
    for module in ("ci/new/__main__.py", "ci/new/tool.py", *CHILD_ENTRY_POINTS):
        (tmp_path / module).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / module).write_text('if __name__ == "__main__":\n    pass\n')
    (tmp_path / "ci" / "new" / "helper.py").write_text("X = 1\n")
    assert fronts(tmp_path) == ["ci.new", "ci.new.tool"]


def test_the_checks_catch_a_front_that_bypasses_the_runner(tmp_path):
    """A front in the old shape (its own argparse and catch-all: a crash exits 1) fails every check."""
    (tmp_path / "rogue").mkdir()
    (tmp_path / "rogue" / "__init__.py").write_text("")
    (tmp_path / "rogue" / "__main__.py").write_text(
        "import argparse, sys\n"
        "parser = argparse.ArgumentParser(prog='rogue')\n"
        "parser.add_argument('--json')\n"
        "parser.parse_args()\n"
        "try:\n"
        "    raise RuntimeError('a defect')\n"
        "except Exception as exc:\n"
        "    print(f'rogue: {exc}', file=sys.stderr)\n"
        "    sys.exit(1)\n"
    )
    path = os.pathsep.join([str(tmp_path), str(REPO)])  # rogue from tmp_path, the wrapper's ci.common from the checkout
    for check in (check_bad_argument, check_help, check_crash, check_signal):
        with pytest.raises(AssertionError):
            check("rogue", tmp_path, pythonpath=path)


# Errors of the measuring and the kernels' layers that a user causes (a busy GPU, a shape a kernel refuses, ...).
LAYER_ERRORS = [
    ("harness.gpu_state", "GpuBusyError", RuntimeError, "GPU 0 busy: 3 processes"),
    ("harness.gpu_state", "MonitorUnavailable", RuntimeError, "no NVML: install nvidia-ml-py"),
    ("harness.output_check", "WrongResult", RuntimeError, SimpleNamespace(summary=lambda: "wrong result at 8x8x8")),
    ("harness.resources.usage", "ResourceParseError", ValueError, "no .vgpr_count in the ISA"),
    ("kernels.registry", "UnsupportedShape", ValueError, "K must be a multiple of 256"),
    ("kernels.registry", "UnsupportedDevice", RuntimeError, "needs gfx950"),
    ("kernels.flydsl_gfx950.toolchain", "ToolchainMissing", RuntimeError, "no ld.lld"),
]


@pytest.mark.parametrize(("module", "name", "base", "argument"), LAYER_ERRORS, ids=[e[1] for e in LAYER_ERRORS])
def test_an_error_a_user_causes_below_ci_is_one_line(module, name, base, argument, monkeypatch, capsys):
    """Raised by harness/ or kernels/ inside a front's run: the message alone, exit 2, not an "internal error"."""
    from ci.bisect import options as bisect_front
    from ci.common import command

    error = getattr(importlib.import_module(module), name)(argument)
    assert isinstance(error, base)  # the `except RuntimeError/ValueError` that already catch it still do

    def raising(cmd, args):
        raise error

    monkeypatch.setattr(command, "_work", raising)
    assert bisect_front.COMMAND.main(["--good", "a", "--bad", "b", "--benchmark", "k[c]/s"]) == 2
    assert capsys.readouterr().err == f"python -m ci.bisect: error: {error}\n"


def test_the_runner_loads_no_torch():
    """The fronts' runner imports the two roots below ci/ only, not their heavy modules (a --help stays quick)."""
    code = "import sys, ci.common.command; sys.exit('torch' in sys.modules or 'kernels.registry' in sys.modules)"
    assert _run(["-c", code], REPO).returncode == 0


def declaring_modules(root: Path = REPO) -> list[str]:
    """The ``python -m`` names of the modules under ci/ that declare a front (a ``Command(``) without being it."""
    found = {
        ".".join(path.relative_to(root).with_suffix("").parts)
        for path in (root / "ci").rglob("*.py")
        if " Command(" in path.read_text() and path.name != "command.py"
    }
    return sorted(found - set(fronts(root)))


@pytest.mark.parametrize("module", declaring_modules())
def test_python_m_of_the_module_that_declares_a_front_says_which_is_the_front(module, tmp_path):
    """``python -m ci.budget.gate`` (the front's module, not the front) is exit 2 and one line, not a silent 0."""
    done = _run(["-m", module, "--help"], tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr and not done.stdout, done.stderr[-2000:]
    assert re.fullmatch(rf"python -m {module}: error: not a command; run python -m ci\.[a-z.]+\n", done.stderr)


def test_the_modules_that_declare_a_front_are_found():
    assert declaring_modules() == [
        "ci.bisect.options",
        "ci.budget.gate",
        "ci.history.main_job",
        "ci.notify.front",
        "ci.speed.gate",
    ]


def test_every_python_m_the_docs_spell_is_a_front():
    """README.md, docs/ and .github/ spell only what runs: a front, or a child entry point named as one."""
    runnable = set(fronts()) | {".".join(Path(path).with_suffix("").parts) for path in CHILD_ENTRY_POINTS}
    texts = [REPO / "README.md", *(p for d in ("docs", ".github") for p in (REPO / d).rglob("*"))]
    spelled = {
        (str(path.relative_to(REPO)), module)
        for path in texts
        if path.suffix in (".md", ".sh", ".yml", ".yaml", ".py")
        for module in re.findall(r"-m (ci(?:\.[a-z_]+)+)", path.read_text())
    }
    assert spelled and not {(path, module) for path, module in spelled if module not in runnable}


def test_an_interrupt_keeps_an_earlier_runs_record(tmp_path):
    """Issue 49, item 3: a run stopped before it has anything never replaces an earlier run's record with less; an
    earlier error record is replaced as before (check_signal's own test)."""
    out = tmp_path / "ci.budget.json"
    earlier = {"schema": "mxfp4-budget-gate/1", "verdict": "pass", "exit_code": 0, "targets": ["kept"]}
    out.write_text(json.dumps(earlier))
    returncode, stderr = signalled("ci.budget", tmp_path, signal.SIGTERM, ["--json", str(out)])
    assert returncode == 143, stderr[-2000:]
    assert f"the earlier record at {out} is kept (this run wrote none)" in _last_line(stderr), stderr
    assert json.loads(out.read_text()) == earlier
