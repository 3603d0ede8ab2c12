"""The layout shows the architecture (issue 16): ci/ holds one package per tool, no module grows past ~400 lines."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# "About 400": a module a little over it is fine; one that doubles it holds two jobs.
MAX_LINES = 430
TOOL_PACKAGES = {"common", "speed", "budget", "history", "bisect", "notify"}


@pytest.mark.parametrize("package", ["ci", "harness"])
def test_no_module_is_over_about_400_lines(package):
    long = {str(p.relative_to(REPO)): n for p in sorted((REPO / package).rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"split these by concept: {long}"


def test_ci_is_packages_by_tool_not_file_name_prefixes():
    top_modules = sorted(p.name for p in (REPO / "ci").glob("*.py") if p.name != "__init__.py")
    assert top_modules == [], f"a module at ci/'s top level stands in for a package: {top_modules}"
    packages = {p.name for p in (REPO / "ci").iterdir() if (p / "__init__.py").is_file()}
    assert packages == TOOL_PACKAGES, packages
    for name in packages:
        doc = (REPO / "ci" / name / "__init__.py").read_text()
        assert doc.lstrip().startswith('"""') and len(doc.strip()) > 80, f"ci/{name}/__init__.py: say what it decides, reads, writes"
