"""Measure one checkout: a child ``python -m ci.budget.resources --json`` whose only code from the commit is its
``kernels`` (ci.common.commit_tree), so one parser reads base and head; its result validated."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ci.budget.compiling import SCHEMA as RESULTS_SCHEMA
from ci.budget.metrics import METRIC_BY_FIELD
from ci.common.errors import HarnessError

CHILD_TIMEOUT_S = 1800


@dataclass
class Measurement:
    results: dict[str, dict[str, Any]] | None  # None: this checkout has no kernels package
    note: str = ""


def measure_tree(tree: Path, label: str, only: Mapping[str, Sequence[str]]) -> Measurement:
    """Compile ``tree``'s kernels (those matching ``only``: kernel/arch/config -> the selectors given) and read them."""
    from ci.common.commit_tree import has_kernels, kernels_of, run_forwarding_stderr

    if not has_kernels(tree):
        return Measurement(None, f"{label} has no kernels package")
    with kernels_of(tree) as (folder, env):
        out = folder / "resources.json"
        cmd = [sys.executable, "-m", "ci.budget.resources", "--json", str(out), "--allow-empty"]
        cmd += [
            f"--{name}={value}"
            for name, values in only.items()
            for value in ([",".join(values)] if name == "arch" and values else values)
        ]
        print(f"budget_gate: measuring {label} in {tree}", file=sys.stderr, flush=True)
        run = run_forwarding_stderr(
            cmd,
            cwd=folder,
            env=env,
            timeout_s=CHILD_TIMEOUT_S,
            log=lambda line: print(f"  [{label}] {line}", file=sys.stderr, flush=True),
        )
        if run.timed_out:
            raise HarnessError(f"{' '.join(cmd)} took over {CHILD_TIMEOUT_S} s in {tree}")
        returncode, stderr_tail = run.returncode, run.tail()
        # Exit 2 with a report: a target whose compiler output cannot be parsed (load_results names it).
        if returncode not in (0, 1, 2) or not out.exists() or _error_record(out.read_text()):
            raise HarnessError(f"ci.budget.resources failed in the {label} checkout (exit {returncode}): {stderr_tail}")
        text = out.read_text()
    return Measurement(load_results(text, f"{label} ci.budget.resources JSON", tree))


def _error_record(text: str) -> bool:
    """What a failed run leaves at --json (ci.common.command): the error is on its stderr, not a report."""
    try:
        return json.loads(text).get("verdict") == "error"
    except (ValueError, AttributeError):
        return False


def load_results(text: str, where: str, tree: Path | None = None) -> dict[str, dict[str, Any]]:
    """Validate ci.budget.resources JSON: ``{target: {"ok": bool, "usage"|"error": ...}}``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HarnessError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != RESULTS_SCHEMA or not isinstance(data.get("targets"), dict):
        raise HarnessError(f"{where}: not a {RESULTS_SCHEMA} report")
    if tree is not None and data.get("source_root") and Path(data["source_root"]).resolve() != tree.resolve():
        raise HarnessError(f"{where}: measured the kernels in {data['source_root']}, not the checkout {tree}")
    results = data["targets"]
    for target, result in results.items():
        if not isinstance(result, dict) or not isinstance(result.get("ok"), bool):
            raise HarnessError(f'{where}: targets[{target!r}] has no boolean "ok"')
        if result.get("kind") == "parse":
            raise HarnessError(f"{where}: cannot parse the compiler output of {target}: {result.get('error')}")
        if result["ok"]:
            usage = result.get("usage")
            needed = {"arch", "threads_per_group", "shared_limit", "occupancy_unit", *METRIC_BY_FIELD}
            if not isinstance(usage, dict) or not needed <= set(usage):
                raise HarnessError(f"{where}: targets[{target!r}].usage lacks {sorted(needed - set(usage or {}))}")
    return results
