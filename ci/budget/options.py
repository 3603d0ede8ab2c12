"""The budget package's options: one frozen object per command, checked whole before any work.

ci.budget.gate and ci.budget.resources (the fronts) parse the command line and
build these with their ``checked`` constructors; the code below the fronts takes
the object and never sees ``argv``. A bad value is an
:class:`~ci.common.options.OptionsError` (exit 2), raised before minutes of compiling.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ci.common.options import OptionsError, output_value

SELECTORS = ("kernel", "arch", "config")


def _selector(value: str | None, flag: str) -> str | None:
    if value is not None and (not value or "/" in value):
        raise OptionsError(f"{flag} {value!r}: expected one name (no '/', not empty)")
    return value


@dataclass(frozen=True)
class GateOptions:
    """What ``python -m ci.budget`` compares, and where it writes."""

    head: str = "HEAD"
    base: str | None = None  # None: origin/main, else main (ci.common.gitutil.resolve_base)
    working_tree: bool = False
    budget: Path | None = None  # None: the head's ci/register_budget.json
    update_budget: bool = False
    kernel: str | None = None
    arch: str | None = None
    config: str | None = None
    repo: Path = Path(".")
    json: Path | None = None
    traceback: bool = False

    @classmethod
    def checked(cls, *, head: str = "HEAD", base: str | None = None, working_tree: bool = False,
                budget: str | Path | None = None, update_budget: bool = False, kernel: str | None = None,
                arch: str | None = None, config: str | None = None, repo: str | Path = ".",
                json: str | Path | None = None, traceback: bool = False) -> GateOptions:
        if working_tree and head != "HEAD":
            raise OptionsError(f"--head {head} and --working-tree exclude each other: the working tree is measured on HEAD")
        if not head:
            raise OptionsError("--head must name a commit")
        if base == "":
            raise OptionsError("--base must name a commit (leave it out for origin/main, else main)")
        if not Path(repo).is_dir():
            raise OptionsError(f"--repo {repo}: not a directory")
        budget_path = None if budget is None or str(budget) == "" else Path(budget)
        if budget_path is not None and not budget_path.is_file():
            raise OptionsError(f"budget file {budget_path} does not exist")
        if budget_path is not None and update_budget:
            output_value(budget_path, "--budget (written by --update-budget)")
        return cls(head=head, base=base, working_tree=working_tree, budget=budget_path, update_budget=update_budget,
                   kernel=_selector(kernel, "--kernel"), arch=_selector(arch, "--arch"),
                   config=_selector(config, "--config"), repo=Path(repo), json=output_value(json, "--json"),
                   traceback=traceback)

    @property
    def selectors(self) -> dict[str, str | None]:
        """``{"kernel": ..., "arch": ..., "config": ...}``, None where not given."""
        return {"kernel": self.kernel, "arch": self.arch, "config": self.config}

    def selects(self, target: str) -> bool:
        """Whether the target ``kernel/arch/config`` matches every selector given."""
        return all(value in (None, part) for value, part in zip(self.selectors.values(), target.split("/")))


@dataclass(frozen=True)
class ResourcesOptions:
    """What ``python -m ci.budget.resources`` compiles (resolved against the registry), and where it writes."""

    targets: tuple[tuple[str, str, str], ...]  # (kernel, arch, config), sorted
    kernel: str | None = None
    arch: str | None = None
    config: str | None = None
    json: Path | None = None
    isa_dir: Path | None = None
    list_only: bool = False
    allow_empty: bool = False

    @classmethod
    def checked(cls, *, kernel: str | None = None, arch: str | None = None, config: str | None = None,
                json: str | Path | None = None, isa_dir: str | Path | None = None, list_only: bool = False,
                allow_empty: bool = False) -> ResourcesOptions:
        from ci.budget.compiling import compile_targets, describe_error

        kernel, arch, config = _selector(kernel, "--kernel"), _selector(arch, "--arch"), _selector(config, "--config")
        try:
            every = compile_targets(arch=arch)
        except Exception as exc:  # the registry (the code under test) does not import
            raise OptionsError(describe_error(exc)) from None
        targets = tuple(t for t in every if kernel in (None, t[0]) and config in (None, t[2]))
        if not targets and (kernel or arch or config) and not allow_empty:
            raise OptionsError(f"no compile target matches --kernel {kernel} --arch {arch} --config {config}")
        isa_path = None if isa_dir is None or str(isa_dir) == "" else Path(isa_dir)
        if isa_path is not None:
            output_value(isa_path / ".probe", "--isa-dir")
        return cls(targets, kernel, arch, config, output_value(json, "--json"), isa_path, list_only, allow_empty)
