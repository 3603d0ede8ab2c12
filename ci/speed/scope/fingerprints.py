"""Both sides' speed fingerprints (:func:`fingerprint_sides`) and the decision data they give (:func:`decide`, schema
``mxfp4-changes/1``): what the CPU job writes as ``changes.json`` and the gate computes itself or reads (``--changes``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ci.common.code_fingerprint import TreeFingerprints, compare, fingerprint_tree
from ci.speed.scope import summary


def fingerprint_sides(
    base_tree: Path | None,
    head_tree: Path,
    archs: Sequence[str],
    *,
    kernels: Sequence[str] = (),
    log: Callable[[str], None] = lambda line: None,
) -> tuple[TreeFingerprints, TreeFingerprints]:
    """(base, head) fingerprints; a missing base tree (no merge-base) lists nothing, so everything is "measure"."""

    def one(name: str, tree: Path | None) -> TreeFingerprints:
        if tree is None:
            return TreeFingerprints({}, {a: [] for a in archs}, {})
        log(f"fingerprinting {name} ({', '.join(archs)}) ...")
        return fingerprint_tree(tree, archs, kernels=kernels or None, log=log)

    with ThreadPoolExecutor(max_workers=2) as pool:
        base, head = pool.submit(one, "base", base_tree), pool.submit(one, "head", head_tree)
        return base.result(), head.result()


def decide(
    base_sha: str | None,
    head_sha: str,
    base: TreeFingerprints,
    head: TreeFingerprints,
    costs: Mapping[str, float] | None = None,
    started: float | None = None,
) -> dict[str, Any]:
    """The decision data of ci.speed.scope.summary (what the CPU job writes as changes.json)."""
    data = summary.report_data(base_sha, head_sha, base, head, compare(base, head), costs)
    if started is not None:
        data["fingerprint_seconds"] = round(time.perf_counter() - started, 1)
    return data
