"""Which pinned dependencies a PR changes: pyproject.toml's ``dependencies`` and ci/constraints-cpu.txt, base vs head,
read from git (or the working tree). Both sides are timed in the runner's one environment: a changed pin is only said.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ci.common import gitutil

PYPROJECT = "pyproject.toml"
CONSTRAINTS = "ci/constraints-cpu.txt"
WARNING = (
    "this PR changes pinned dependencies ({changes}); the gate measures both sides in the runner's one "
    "environment, so their effect is not measured here"
)

_REQUIREMENT = re.compile(r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?P<extras>\[[^\]]*\])?\s*(?P<spec>.*?)\s*$")
_DEPENDENCIES = re.compile(r"^dependencies\s*=\s*\[(?P<body>.*?)^\]", re.M | re.S)
_QUOTED = re.compile(r"\"([^\"]*)\"|'([^']*)'")


def requirements(text: str | None) -> dict[str, str]:
    """``{normalized name: specifier}`` of requirement lines (``#`` comments and blank lines skipped)."""
    found: dict[str, str] = {}
    for line in (text or "").splitlines():
        line = line.split("#", 1)[0].strip()
        match = _REQUIREMENT.match(line) if line and not line.startswith("-") else None
        if match:
            found[re.sub(r"[-_.]+", "-", match["name"].lower())] = (match["extras"] or "") + match["spec"]
    return found


def pyproject_dependencies(text: str | None) -> dict[str, str]:
    """``[project] dependencies`` of a pyproject.toml, without a TOML library (Python 3.10 has none)."""
    project = re.search(r"^\[project\]\s*$(?P<body>.*?)(?=^\[|\Z)", text or "", re.M | re.S)
    block = _DEPENDENCIES.search(project["body"]) if project else None
    if block is None:
        return {}
    lines = [
        m.group(1) if m.group(1) is not None else m.group(2)
        for line in block["body"].splitlines()
        for m in [_QUOTED.search(line.split("#", 1)[0])]
        if m
    ]
    return requirements("\n".join(lines))


def changed(base: dict[str, str], head: dict[str, str], where: str = "") -> list[str]:
    """One text per differing requirement: ``torch 2.13.0 -> 2.14.0``, ``scipy ==1.17.1 (new)``, ``x >=1 removed``."""
    out = []
    for name in sorted(set(base) | set(head)):
        old, new = base.get(name), head.get(name)
        if old == new:
            continue
        old_text, new_text = (_pin(v) if v is not None else None for v in (old, new))
        text = (
            f"{name} {new_text} (new)"
            if old is None
            else f"{name} {old_text} removed"
            if new is None
            else f"{name} {old_text} -> {new_text}"
        )
        out.append(text + (f" in {where}" if where else ""))
    return out


def _pin(spec: str) -> str:
    """``==2.13.0`` reads as ``2.13.0``; any other specifier keeps its operator."""
    return spec[2:] if spec.startswith("==") and not spec.startswith("===") else spec or "(any version)"


def _read(repo: Any, sha: str | None, path: str) -> str | None:
    if sha is None:  # the working tree (--working-tree)
        file = Path(repo.working_tree_dir) / path
        return file.read_text() if file.is_file() else None
    return gitutil.read_file(repo, sha, path)


def dependency_changes(repo: Any, base_sha: str | None, head_sha: str | None) -> list[str]:
    """The changed requirements between two commits (``head_sha`` None: the working tree); [] without a base."""
    if base_sha is None:
        return []
    out = changed(
        pyproject_dependencies(_read(repo, base_sha, PYPROJECT)),
        pyproject_dependencies(_read(repo, head_sha, PYPROJECT)),
        PYPROJECT,
    )
    out += changed(requirements(_read(repo, base_sha, CONSTRAINTS)), requirements(_read(repo, head_sha, CONSTRAINTS)))
    return out


def warning_lines(changes: list[str]) -> list[str]:
    """The Markdown warning (and a blank line) when ``changes`` is not empty."""
    return [f"> ⚠ {WARNING.format(changes='; '.join(changes))}", ""] if changes else []
