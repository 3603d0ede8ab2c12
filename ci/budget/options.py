"""The budget package's options: one frozen object per command, checked whole before any work.

ci.budget.gate and ci.budget.resources (the fronts) parse the command line and build these with their ``checked``
constructors; the code below the fronts takes the object and never sees ``argv``. A bad value is an
:class:`~ci.common.options.OptionsError` (exit 2), raised before minutes of compiling.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ci.budget.targets import compile_targets, describe_error
from ci.common.options import OptionsError, arch_value, name_matches, names_value, output_value

Names = str | Sequence[str] | None  # one value or several (a front's repeatable --kernel / --config, --arch a,b)


def _names(value: Names, flag: str) -> tuple[str, ...]:
    return names_value([value] if isinstance(value, str) else value, flag)


def _archs(value: Names) -> tuple[str, ...]:
    return arch_value(value if value is None or isinstance(value, str) else ",".join(value))


def selected(target: tuple[str, str, str], kernel: Sequence[str], arch: Sequence[str], config: Sequence[str]) -> bool:
    """Whether a compile target (kernel, arch, config) matches the --kernel/--arch/--config selectors (none: all)."""
    return name_matches(target[0], kernel) and (not arch or target[1] in arch) and name_matches(target[2], config)


def selectors_text(kernel: Sequence[str], arch: Sequence[str], config: Sequence[str]) -> str:
    """The selectors as given on the command line, e.g. ``--kernel k --arch gfx950``."""
    given = {"kernel": kernel, "arch": [",".join(arch)] if arch else [], "config": config}
    return " ".join(f"--{name} {value}" for name, values in given.items() for value in values)


@dataclass(frozen=True)
class GateOptions:
    """What ``python -m ci.budget`` compares, and where it writes."""

    head: str = "HEAD"
    base: str | None = None  # None: origin/main, else main (ci.common.gitutil.resolve_base)
    working_tree: bool = False
    budget: Path | None = None  # None: the head's ci/register_budget.json
    update_budget: bool = False
    kernel: tuple[str, ...] = ()  # name patterns (ci.common.options.name_matches); empty: every one
    arch: tuple[str, ...] = ()
    config: tuple[str, ...] = ()
    repo: Path = Path(".")
    json: Path | None = None

    @classmethod
    def checked(
        cls,
        *,
        head: str = "HEAD",
        base: str | None = None,
        working_tree: bool = False,
        budget: str | Path | None = None,
        update_budget: bool = False,
        kernel: Names = None,
        arch: Names = None,
        config: Names = None,
        repo: str | Path = ".",
        json: str | Path | None = None,
    ) -> GateOptions:
        if working_tree and head != "HEAD":
            raise OptionsError(
                f"--head {head} and --working-tree exclude each other: the working tree is measured on HEAD"
            )
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
        return cls(
            head=head,
            base=base,
            working_tree=working_tree,
            budget=budget_path,
            update_budget=update_budget,
            kernel=_names(kernel, "--kernel"),
            arch=_archs(arch),
            config=_names(config, "--config"),
            repo=Path(repo),
            json=output_value(json, "--json"),
        )

    @property
    def selectors(self) -> dict[str, tuple[str, ...]]:
        """``{"kernel": ..., "arch": ..., "config": ...}``, empty where not given."""
        return {"kernel": self.kernel, "arch": self.arch, "config": self.config}

    def selects(self, target: str) -> bool:
        """Whether the target ``kernel/arch/config`` matches every selector given."""
        kernel, arch, config = target.split("/")
        return selected((kernel, arch, config), self.kernel, self.arch, self.config)


@dataclass(frozen=True)
class ResourcesOptions:
    """What ``python -m ci.budget.resources`` compiles (resolved against the registry), and where it writes."""

    targets: tuple[tuple[str, str, str], ...]  # (kernel, arch, config), sorted
    kernel: tuple[str, ...] = ()
    arch: tuple[str, ...] = ()
    config: tuple[str, ...] = ()
    json: Path | None = None
    isa_dir: Path | None = None
    list_only: bool = False
    allow_empty: bool = False

    @classmethod
    def checked(
        cls,
        *,
        kernel: Names = None,
        arch: Names = None,
        config: Names = None,
        json: str | Path | None = None,
        isa_dir: str | Path | None = None,
        list_only: bool = False,
        allow_empty: bool = False,
    ) -> ResourcesOptions:
        kernel, arch, config = _names(kernel, "--kernel"), _archs(arch), _names(config, "--config")
        try:
            every = compile_targets()
        except Exception as exc:  # the registry (the code under test) does not import
            raise OptionsError(describe_error(exc)) from None
        targets = tuple(t for t in every if selected(t, kernel, arch, config))
        if not targets and (kernel or arch or config) and not allow_empty:
            raise OptionsError(f"no compile target matches {selectors_text(kernel, arch, config)}")
        isa_path = None if isa_dir is None or str(isa_dir) == "" else Path(isa_dir)
        if isa_path is not None:
            output_value(isa_path / ".probe", "--isa-dir")
        return cls(targets, kernel, arch, config, output_value(json, "--json"), isa_path, list_only, allow_empty)
