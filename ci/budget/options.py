"""The budget package's options: one frozen object per command, checked whole (OptionsError) before any work.

The fronts (ci.budget.gate, ci.budget.resources) build them with :func:`from_args`; nothing below sees ``argv``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from ci.budget.targets import compile_targets, describe_error
from ci.common.options import OptionsError, arch_value, name_matches, names_value, output_value

Names = str | Sequence[str] | None  # one value or several (a front's repeatable --kernel / --config, --arch a,b)


def _names(value: Names, flag: str) -> tuple[str, ...]:
    return names_value([value] if isinstance(value, str) else value, flag)


def _archs(value: Names) -> tuple[str, ...]:
    return arch_value(value if value is None or isinstance(value, str) else ",".join(value) or None)


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
    def checked(cls, **given: Any) -> GateOptions:
        """The fields as given (``kernel``/``arch``/``config``: one value or several), each checked."""
        raw = cls(**given)
        if raw.working_tree and raw.head != "HEAD":
            raise OptionsError(
                f"--head {raw.head} and --working-tree exclude each other: the working tree is measured on HEAD"
            )
        if not raw.head:
            raise OptionsError("--head must name a commit")
        if raw.base == "":
            raise OptionsError("--base must name a commit (leave it out for origin/main, else main)")
        if not Path(raw.repo).is_dir():
            raise OptionsError(f"--repo {raw.repo}: not a directory")
        budget = None if raw.budget is None or str(raw.budget) == "" else Path(raw.budget)
        if budget is not None and not budget.is_file():
            raise OptionsError(f"budget file {budget} does not exist")
        if budget is not None and raw.update_budget:
            output_value(budget, "--budget (written by --update-budget)")
        return replace(
            raw,
            budget=budget,
            kernel=_names(raw.kernel, "--kernel"),
            arch=_archs(raw.arch),
            config=_names(raw.config, "--config"),
            repo=Path(raw.repo),
            json=output_value(raw.json, "--json"),
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

    targets: tuple[tuple[str, str, str], ...] = ()  # (kernel, arch, config), sorted; resolved by ``checked``
    kernel: tuple[str, ...] = ()
    arch: tuple[str, ...] = ()
    config: tuple[str, ...] = ()
    json: Path | None = None
    isa_dir: Path | None = None
    list_only: bool = False
    allow_empty: bool = False

    @classmethod
    def checked(cls, **given: Any) -> ResourcesOptions:
        """The selectors as given, resolved against the registry; the output paths checked writable."""
        raw = cls(**given)
        kernel, arch, config = _names(raw.kernel, "--kernel"), _archs(raw.arch), _names(raw.config, "--config")
        try:
            every = compile_targets()
        except Exception as exc:  # the registry (the code under test) does not import
            raise OptionsError(describe_error(exc)) from None
        targets = tuple(t for t in every if selected(t, kernel, arch, config))
        if not targets and (kernel or arch or config) and not raw.allow_empty:
            raise OptionsError(f"no compile target matches {selectors_text(kernel, arch, config)}")
        isa_dir = None if raw.isa_dir is None or str(raw.isa_dir) == "" else Path(raw.isa_dir)
        if isa_dir is not None:
            output_value(isa_dir / ".probe", "--isa-dir", create=True)  # the option names a folder: made
        json = output_value(raw.json, "--json")
        return replace(raw, targets=targets, kernel=kernel, arch=arch, config=config, json=json, isa_dir=isa_dir)


def from_args(options: type[GateOptions] | type[ResourcesOptions], args: Any) -> Any:
    """A front's options object from its parsed arguments (named as the fields; None: the field's default), checked."""
    given = {f.name: getattr(args, f.name, None) for f in fields(options)}
    return options.checked(**{name: value for name, value in given.items() if value is not None})
