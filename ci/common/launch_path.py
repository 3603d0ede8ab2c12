"""The host-side launch path of a kernel: its module and every project module it imports (statically, ``ast``), each
normalized (comments, docstrings and formatting do not count); what is followed: docs/SPEED_GATE.md, "The speed
fingerprint"."""

from __future__ import annotations

import ast
import hashlib
import threading
from pathlib import Path

from ci.common.errors import InputError

PACKAGE = "kernels"
# CPython 3.11 keeps the AST constructor's recursion depth per interpreter, not per thread: two threads
# parsing at once (the speed gate fingerprints base and head side by side) can fail with "SystemError:
# AST constructor recursion depth mismatch" -- seen under a CPU hog. Parsing is milliseconds: one at a time.
_PARSE_LOCK = threading.Lock()
_DOCSTRING_OWNERS = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def parse(text: str, where: str = "<source>") -> ast.Module:
    """``ast.parse``, one thread at a time."""
    with _PARSE_LOCK:
        return ast.parse(text, filename=where)


class ModuleNotInTree(InputError, LookupError):
    """A project module on the launch path has no file in the tree; the message names it."""


class SourceUnparsable(InputError, SyntaxError):
    """A module on the launch path is not valid Python; the message names the file."""


def normalized_source(text: str, where: str = "<source>") -> str:
    """The module's syntax tree without docstrings, as text: equal for comment/docstring/format-only edits."""
    try:
        tree = parse(text, where)
    except SyntaxError as exc:
        raise SourceUnparsable(f"{where}: line {exc.lineno}: {exc.msg}") from None
    for node in ast.walk(tree):
        if isinstance(node, _DOCSTRING_OWNERS) and ast.get_docstring(node, clean=False) is not None:
            node.body = node.body[1:] or [ast.Pass()]
    return ast.dump(tree, include_attributes=False)


def source_digest(text: str, where: str = "<source>") -> str:
    return hashlib.sha256(normalized_source(text, where).encode()).hexdigest()


def module_file(tree: Path, module: str) -> Path:
    """The file of project module ``module`` (``kernels.x.y``) in ``tree``; ModuleNotInTree if none."""
    parts = module.split(".")
    base = Path(tree).joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    raise ModuleNotInTree(f"module {module} has no {'/'.join(parts)}.py or {'/'.join(parts)}/__init__.py in the tree")


def _is_package(tree: Path, module: str) -> bool:
    return Path(tree).joinpath(*module.split("."), "__init__.py").is_file()


def _is_module(tree: Path, module: str) -> bool:
    return _is_package(tree, module) or Path(tree).joinpath(*module.split(".")).with_suffix(".py").is_file()


def _imported_modules(tree: Path, module: str, syntax: ast.AST) -> set[str]:
    """Project modules the statements of ``module`` import (with their parent packages)."""
    package = module if _is_package(tree, module) else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(syntax):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found.add(base)
            # ``from kernels import preshuffle`` imports a submodule, not a name.
            found.update(
                f"{base}.{alias.name}"
                for alias in node.names
                if _is_package(tree, base) and _is_module(tree, f"{base}.{alias.name}")
            )
    project = {m for m in found if m == PACKAGE or m.startswith(PACKAGE + ".")}
    with_parents = set(project)
    for m in project:
        parts = m.split(".")
        with_parents.update(".".join(parts[:i]) for i in range(1, len(parts)))
    return with_parents


def launch_path_files(tree: Path, module: str) -> dict[str, str]:
    """``{path relative to tree: normalized-source digest}`` for ``module`` and every project module it imports."""
    tree = Path(tree)
    parts = module.split(".")
    pending = {module} | {".".join(parts[:i]) for i in range(1, len(parts))}
    seen: set[str] = set()
    digests: dict[str, str] = {}
    while pending:
        name = pending.pop()
        seen.add(name)
        path = module_file(tree, name)
        relative = path.relative_to(tree).as_posix()
        text = path.read_text()
        digests[relative] = source_digest(text, relative)
        pending |= _imported_modules(tree, name, parse(text, relative)) - seen
    return dict(sorted(digests.items()))


def combined_digest(files: dict[str, str]) -> str:
    """One digest over a ``{path: digest}`` map (the path counts: a moved module is a change)."""
    h = hashlib.sha256()
    for path, digest in sorted(files.items()):
        h.update(f"{path}\0{digest}\n".encode())
    return h.hexdigest()
