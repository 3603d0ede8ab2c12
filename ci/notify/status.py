"""The commit status of the comment's speed verdict (pure), so the two cannot disagree: success only for PASS; failure
for FAIL and INCONCLUSIVE ("inconclusive: re-run"); error otherwise. The description is this module's words and counts
(GitHub keeps 140 characters), never text from an artifact."""

from __future__ import annotations

from typing import Any

from ci.notify.comment import ERROR, FAIL, INCONCLUSIVE, NOT_RUN, PASS, Inputs, judged_speed, speed_area
from ci.notify.records import PrFiles, SpeedRecord
from ci.notify.speed_table import undecided_benchmarks

CONTEXT = "speed gate (judged by base)"
DESCRIPTION_LIMIT = 140  # GitHub's limit on a status description
STATES = {PASS: "success", FAIL: "failure", INCONCLUSIVE: "failure", ERROR: "error", NOT_RUN: "error"}
SCHEMA = "mxfp4-commit-status/1"


def status_of(inputs: Inputs, target_url: str | None = None) -> dict[str, Any]:
    area = speed_area(inputs)
    speed = judged_speed(inputs)
    judged = inputs.judge_expected and isinstance(speed, SpeedRecord) and speed is inputs.judged
    by = "judged by the base's gate" if judged else "the PR's own job (not judged)"
    if area.state == PASS:
        description = f"PASS, {by}" if isinstance(speed, SpeedRecord) else "PASS: identical code, nothing measured"
    elif area.state == FAIL:
        benchmarks = speed.benchmarks if isinstance(speed, SpeedRecord) else ()
        counts = {
            "regression(s)": sum(b.status == "gated" and b.verdict == "regression" for b in benchmarks),
            "wrong result(s)": sum(b.status == "wrong result" for b in benchmarks),
        }
        what = ", ".join(f"{n} {word}" for word, n in counts.items() if n) or "failed"
        description = f"FAIL: {what}, {by}"
    elif area.state == INCONCLUSIVE:
        n = len(undecided_benchmarks(speed)) if isinstance(speed, SpeedRecord) else 0
        description = f"inconclusive: re-run{f' ({n} benchmark(s) not decided)' if n else ''}, {by}"
    elif area.state == NOT_RUN:
        description = "not run: the speed gate left no verdict (see the PR comment)"
    else:
        description = "error: no verdict (see the PR comment)"
    if isinstance(inputs.pr_files, PrFiles) and inputs.pr_files.gate_files:
        description += "; the PR changes the gate"
    if len(description) > DESCRIPTION_LIMIT:
        description = description[: DESCRIPTION_LIMIT - 1] + "…"
    status = {"schema": SCHEMA, "state": STATES[area.state], "context": CONTEXT, "description": description}
    if target_url:
        status["target_url"] = target_url
    return status
