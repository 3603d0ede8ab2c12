"""The layout's promises, enforced: the measuring package imports nothing it measures,
no module shadows the standard library, every command runs from any directory of the checkout,
and the harness writes the MXFP4 layout exactly as the format module does."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness import operands
from kernels import mxfp4

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("kernels", "harness", "ci", "asv_bench")


def _imported_top_level_names(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module":
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                names.add(node.args[0].value.split(".")[0])
    return names


def test_the_harness_imports_nothing_from_kernels_or_ci():
    offenders = {
        str(path.relative_to(ROOT)): sorted(_imported_top_level_names(path) & {"kernels", "ci", "asv_bench", "tests"})
        for path in sorted((ROOT / "harness").rglob("*.py"))
    }
    offenders = {path: names for path, names in offenders.items() if names}
    assert not offenders, f"harness/ must import nothing it measures or gates: {offenders}"


def test_the_import_scan_sees_every_import_form(tmp_path):
    """The scan above must be able to fail: each import form it claims to catch is caught."""
    for source in (
        "import kernels.registry",
        "from kernels import mxfp4",
        "from ci.report import x",
        "import importlib\nimportlib.import_module('kernels.reference')",
    ):
        module = tmp_path / "m.py"
        module.write_text(source + "\n")
        assert _imported_top_level_names(module) & {"kernels", "ci"}, source
    (tmp_path / "m.py").write_text("from . import timing\nimport torch\n")
    assert not _imported_top_level_names(tmp_path / "m.py") & {"kernels", "ci"}


def test_importing_every_harness_module_loads_no_kernels_module():
    modules = [
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for p in sorted((ROOT / "harness").rglob("*.py"))
        if p.stem != "__main__"  # running a command is not importing it
    ]
    script = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('kernels', 'ci', 'asv_bench')))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]", f"importing the harness pulled in: {done.stdout}"


def test_the_clean_child_helper_imports_no_registry():
    """kernels.registry uses kernels.compile_child, never the other way round: no import circle."""
    script = "import sys, kernels.compile_child; print(sorted(m for m in sys.modules if m.startswith('kernels')))"
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "['kernels', 'kernels.artifact', 'kernels.compile_child']", done.stdout


def test_no_module_is_named_after_a_standard_library_module():
    shadowing = [
        str(path.relative_to(ROOT))
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if path.stem in sys.stdlib_module_names
    ]
    assert not shadowing, f"these shadow the standard library for commands run from their folder: {shadowing}"


def test_ci_bisect_stands_in_for_the_standard_library_bisect_when_run_from_ci():
    """ci/bisect is named after a standard library module (issue 20's command name): from ci/, where it shadows
    the standard library's, ``import bisect`` must still give the standard library's functions."""
    probe = "import bisect, random; print(bisect.__file__); print(callable(bisect.insort) and random.random() < 1)"
    found = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT / "ci",
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert found.returncode == 0, found.stderr[-2000:]
    where, works = found.stdout.split()
    assert not Path(where).resolve().is_relative_to(ROOT) and works == "True", found.stdout


@pytest.mark.parametrize("command", ["ci.budget", "ci.speed", "ci.budget.resources", "ci.history", "ci.bisect"])
@pytest.mark.parametrize("where", ["kernels", "harness", "ci", "tests"])
def test_every_command_answers_help_from_any_directory_of_the_checkout(command, where):
    """ci/setup.sh puts the checkout on the venv's path; a command must not depend on the current directory."""
    done = subprocess.run(
        [sys.executable, "-m", command, "--help"], cwd=ROOT / where, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, (
        f"python -m {command} --help from {where}/: exit {done.returncode}\n{done.stderr[-2000:]}"
    )
    assert "usage:" in done.stdout and "Traceback" not in done.stderr
    probe = f"import {command.split('.')[0]} as p; print(p.__file__)"
    found = subprocess.run([sys.executable, "-c", probe], cwd=ROOT / where, capture_output=True, text=True, timeout=60)
    assert Path(found.stdout.strip()).resolve().is_relative_to(ROOT), f"{command} came from {found.stdout} not {ROOT}"


def test_the_harness_packs_nibbles_as_the_format_does():
    g = torch.Generator().manual_seed(3)
    codes = torch.randint(0, 16, (5, 64), dtype=torch.uint8, generator=g)
    assert torch.equal(operands.pack_codes(codes), mxfp4.pack_nibbles(codes))
    a = operands.random_operand(5, 64, generator=torch.Generator().manual_seed(3))
    # The same draws in the same order: codes, then scales.
    g = torch.Generator().manual_seed(3)
    expected_codes = torch.randint(0, 16, (5, 64), dtype=torch.uint8, generator=g)
    expected_scales = torch.randint(120, 134, (5, 2), dtype=torch.uint8, generator=g)
    assert torch.equal(a.data, mxfp4.pack_nibbles(expected_codes)) and torch.equal(a.scales, expected_scales)
    assert torch.equal(mxfp4.unpack_nibbles(a.data), expected_codes)
