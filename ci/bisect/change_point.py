"""Good, bad and the benchmark of a bisection, from a regression change point of the main job's JSON
(``--from-change-point``); several left and no ``--index`` is an error (docs/CHANGE_POINTS.md, "Culprit bisection")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ci.common.json_file import JsonFileError, read_json
from ci.common.options import OptionsError
from ci.history.asv_results.store import GEMM_KEY

REGRESSION = "regression"  # harness.changepoints' direction of a TFLOPS drop


def gate_bench_id(asv_key: str) -> str:
    """``bench_gemm.GemmOnGpu.track_time('kernel:config', 'shape')`` -> ``kernel[config]/shape``."""
    match = GEMM_KEY.match(asv_key)
    kernel, sep, config = match.group(2).partition(":") if match else ("", "", "")
    if not (match and kernel and sep and config):
        raise OptionsError(f"--from-change-point: benchmark {asv_key!r} is not a GEMM timing (kernel:config, shape)")
    return f"{kernel}[{config}]/{match.group(3)}"


def _load_changes(report_path: Path) -> list[dict[str, Any]]:
    try:  # capped, and a file nested thousands deep is one line too, not a RecursionError
        report = read_json(Path(report_path), f"--from-change-point {report_path}")
    except JsonFileError as exc:
        raise OptionsError(str(exc)) from None
    # The site build's (ci.history.publish --json), else the main job's.
    if isinstance(report, dict) and isinstance(report.get("machines"), list):
        checked = [m for m in report["machines"] if isinstance(m, dict) and not m.get("not_checked")]
        changes = [c for m in checked for c in m.get("change_points") or [] if isinstance(c, dict)]
        if not checked:
            raise OptionsError(
                f"--from-change-point {report_path}: no machine of the report was checked for change points"
            )
        return changes
    history = report.get("history") if isinstance(report, dict) else None
    if not isinstance(history, dict):
        raise OptionsError(
            f"--from-change-point {report_path}: no 'history' section (is it python -m ci.history --json's "
            "report of a run that measured GEMM timings?)"
        )
    if history.get("not_checked"):
        raise OptionsError(
            f"--from-change-point {report_path}: machine {history.get('machine')} was not checked for "
            f"change points: {history['not_checked']}"
        )
    points = history.get("change_points")
    if not isinstance(points, list):
        raise OptionsError(f"--from-change-point {report_path}: 'history.change_points' is missing")
    return points


def _describe(changes: list[dict[str, Any]]) -> str:
    return "; ".join(
        f"{i}: {c.get('benchmark')} in {str(c.get('last_before'))[:12]}..{str(c.get('first_after'))[:12]}"
        for i, c in enumerate(changes, 1)
    )


def choose(report_path: Path, bench: str | None = None, index: int | None = None) -> tuple[str, str, str]:
    """(good, bad, the gate's benchmark id) of the one regression change point that ``bench`` and ``index`` select:
    the last commit at the old level, the first at the new; OptionsError says why there is none."""
    changes = _load_changes(report_path)
    if not changes:
        raise OptionsError(f"--from-change-point {report_path}: the report has no change point: nothing to bisect")
    regressions = [c for c in changes if (c.get("change") or {}).get("direction") == REGRESSION]
    if not regressions:
        raise OptionsError(
            f"--from-change-point {report_path}: its {len(changes)} change point(s) are improvements; "
            "only a slowdown is bisected"
        )
    if bench is not None:
        regressions = [c for c in regressions if bench in (c.get("benchmark"), gate_bench_id(str(c.get("benchmark"))))]
        if not regressions:
            raise OptionsError(f"--benchmark {bench}: no regression change point of that benchmark in {report_path}")
    if index is None:
        if len(regressions) > 1:
            raise OptionsError(
                f"--from-change-point {report_path}: {len(regressions)} regression change points, pick "
                f"one with --index N (or narrow with --benchmark): {_describe(regressions)}"
            )
        index = 1
    if not 1 <= index <= len(regressions):
        raise OptionsError(
            f"--index {index}: the report has {len(regressions)} regression change point(s)"
            f"{' of that benchmark' if bench else ''}: {_describe(regressions)}"
        )
    picked = regressions[index - 1]
    good, bad = picked.get("last_before"), picked.get("first_after")
    if not (isinstance(good, str) and isinstance(bad, str) and good and bad):
        raise OptionsError(f"--from-change-point {report_path}: change point {index} names no commit range")
    return good, bad, gate_bench_id(str(picked.get("benchmark")))
