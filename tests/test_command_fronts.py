"""One front per command: only the modules listed here may parse the command line.

A command's front module owns its argparse parser and turns the parsed values
into one checked options object; everything below it takes that object, so no
other module under ci/ imports argparse or reads sys.argv. The lists below are
the whole policy: to move a command's parser, edit them.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Module (path from the repository root) -> why it may read the command line.
FRONTS = {
    "ci/speed/gate.py": "front of python -m ci.speed",
    "ci/budget/gate.py": "front of python -m ci.budget",
    "ci/budget/resources.py": "front of python -m ci.budget.resources",
    "ci/history/main_job.py": "front of python -m ci.history",
    "ci/history/publish.py": "front of python -m ci.history.publish",
    "ci/speed/changes.py": "front of python -m ci.speed.changes",
    "ci/bisect/options.py": "front of python -m ci.bisect",
    "ci/notify/front.py": "front of python -m ci.notify (the PR comment, the regression issues)",
}
# Child entry points: started by a front with a fixed argv (a command and JSON file paths), not options.
CHILD_ENTRY_POINTS = {
    "ci/common/device_code.py": (
        "python -m ci.common.device_code REQUEST.json OUT.json (compile-only, in a commit's tree)"
    ),
    "ci/speed/engine/worker.py": "python -m ci.speed.engine.worker (requests on stdin)",
}
# The one runner of every front (ci.common.command): builds each front's parser, reads sys.argv when given none.
RUNNER = {"ci/common/command.py": "Command.main: the prefix, exit codes, --traceback, signals, the error JSON"}
# Shared option adders (asv's common_args): may import argparse to type the parser they add to; never read sys.argv.
SHARED_ADDERS = {
    "ci/common/options.py": (
        "add_commits, add_repo, add_selection, add_arch, add_timing, add_json, add_machine, add_max_minutes"
    ),
}


def command_line_uses(source: str) -> set[str]:
    """What in ``source`` touches the command line: "argparse" (imported) and/or "sys.argv" (read)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "argparse" for a in node.names):
            found.add("argparse")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "argparse":
            found.add("argparse")
        elif isinstance(node, ast.ImportFrom) and node.module == "sys" and any(a.name == "argv" for a in node.names):
            found.add("sys.argv")
        elif (
            isinstance(node, ast.Attribute)
            and node.attr == "argv"
            and isinstance(node.value, ast.Name)
            and node.value.id == "sys"
        ):
            found.add("sys.argv")
    return found


def off_list(root: Path) -> dict[str, set[str]]:
    """Modules under ``root``/ci that touch the command line without being allowed to."""
    allowed = {
        **{m: {"argparse", "sys.argv"} for m in {**FRONTS, **CHILD_ENTRY_POINTS, **RUNNER}},
        **{m: {"argparse"} for m in SHARED_ADDERS},
    }
    out = {}
    for path in sorted((root / "ci").rglob("*.py")):
        module = path.relative_to(root).as_posix()
        extra = command_line_uses(path.read_text()) - allowed.get(module, set())
        if extra:
            out[module] = extra
    return out


def test_only_the_fronts_read_the_command_line():
    assert off_list(REPO) == {}, "parse argv only in a command's front (tests/test_command_fronts.py FRONTS)"


@pytest.mark.parametrize("module", sorted({**FRONTS, **CHILD_ENTRY_POINTS, **SHARED_ADDERS, **RUNNER}))
def test_every_listed_module_exists(module):
    assert (REPO / module).is_file(), (
        f"{module} is listed as allowed to read the command line but is gone: update the list"
    )


@pytest.mark.parametrize("module", sorted({**FRONTS, **CHILD_ENTRY_POINTS}))
def test_every_front_has_a_main(module):
    tree = ast.parse((REPO / module).read_text())
    assert any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body), f"{module}: a front has main()"


@pytest.mark.parametrize(
    "module, injected, found",
    [
        ("ci/speed/decide/verdict.py", "import argparse\n", "argparse"),
        ("ci/speed/modes/shared.py", "from argparse import Namespace\n", "argparse"),
        ("ci/speed/modes/measure.py", "import sys\nCOMMAND = sys.argv[1:]\n", "sys.argv"),
        ("ci/common/options.py", "import sys\nCOMMAND = sys.argv[1:]\n", "sys.argv"),  # an adder reads no argv
    ],
)
def test_the_check_fails_on_a_command_line_below_a_front(tmp_path, module, injected, found):
    shutil.copytree(REPO / "ci", tmp_path / "ci", ignore=shutil.ignore_patterns("__pycache__"))
    assert off_list(tmp_path) == {}
    with open(tmp_path / module, "a") as f:
        f.write(injected)
    assert off_list(tmp_path) == {module: {found}}


def test_command_line_uses_reads_the_code_not_the_words():
    assert command_line_uses('"""Parsed by argparse in the front; sys.argv is never read here."""\n') == set()
    assert command_line_uses("import argparse as ap\n") == {"argparse"}
    assert command_line_uses("from sys import argv\n") == {"sys.argv"}
    assert command_line_uses("def f():\n    import sys\n    return sys.argv\n") == {"sys.argv"}
