"""The base's verdict of a PR's speed-gate rounds (``python -m ci.notify judge``): the newest speed record, read as JSON
only, replayed by THIS checkout's ``python -m ci.speed --replay RECORD --judge`` (docs/SPEED_GATE.md, "A judge the PR
cannot edit"). ``--out``: its record without the raw rounds, or an error record; no speed record: no ``--out``. Exit 0
in each case; 2 a bad option or an unwritable ``--out``."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ci.common.errors import WriteError
from ci.common.files import write_json_atomic
from ci.notify import bundle

CHECKOUT = Path(__file__).resolve().parents[2]  # the checkout whose gate judges (the default branch's, in the workflow)
GATE_SCHEMA = "mxfp4-speed-gate/1"
MAX_RECORD_BYTES = 64_000_000  # a 30-benchmark, 40-round record is ~2 MB; a bigger one is refused unread
JUDGE_TIMEOUT_S = 600


def error_record(message: str) -> dict[str, Any]:
    return {"schema": GATE_SCHEMA, "mode": "error", "verdict": "error", "exit_code": 2, "error": message}


def without_rounds(record: dict[str, Any]) -> dict[str, Any]:
    """The record the comment reads: every field but the raw rounds (the top level's and each benchmark's)."""
    slim = {k: v for k, v in record.items() if k != "rounds"}
    if isinstance(slim.get("benchmarks"), list):
        slim["benchmarks"] = [
            {k: v for k, v in b.items() if k != "rounds"} if isinstance(b, dict) else b for b in slim["benchmarks"]
        ]
    return slim


def judge_record(record: Path, log: Callable[[str], None]) -> dict[str, Any]:
    """The base's verdict of ``record`` (its JSON without rounds), or an error record saying why there is none."""
    size = record.stat().st_size
    if size > MAX_RECORD_BYTES:
        return error_record(f"the speed gate's record is {size} bytes, over {MAX_RECORD_BYTES}: not judged")
    with tempfile.TemporaryDirectory(prefix="ci-notify-judge-") as tmp:
        out = Path(tmp) / "judged.json"
        cmd = [sys.executable, "-m", "ci.speed", "--replay", str(record.resolve()), "--judge", "--json", str(out)]
        log(f"ci.notify: judging {record.name} with {CHECKOUT}'s gate: python -m ci.speed --replay ... --judge")
        try:
            done = subprocess.run(cmd, cwd=CHECKOUT, capture_output=True, text=True, timeout=JUDGE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return error_record(f"the base's gate did not judge the record in {JUDGE_TIMEOUT_S} s")
        # Its Markdown (also in the step summary) and its progress, for the log.
        sys.stderr.write(done.stdout + done.stderr)
        try:
            judged = json.loads(out.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            said = done.stderr.strip().splitlines()[-1:] or ["(nothing on stderr)"]
            return error_record(f"the base's gate exited {done.returncode} without a record: {said[0][-400:]}")
    if not isinstance(judged, dict):
        return error_record("the base's gate wrote a record that is not a JSON object")
    return without_rounds(judged)


def judge(options, log: Callable[[str], None]) -> int:
    record = bundle.record_path(options.artifacts, bundle.SPEED_ARTIFACT, options.attempt)
    if record is None:
        log(
            "ci.notify: no speed-gate record in the artifacts (the GPU job did not run, or stopped before one): "
            "nothing to judge"
        )
        return 0
    judged = judge_record(record, log)
    try:
        write_json_atomic(options.out, judged)
    except OSError as exc:
        raise WriteError(f"--out {options.out}: {exc}") from None
    log(
        f"ci.notify: the base's verdict ({judged.get('verdict')}, exit {judged.get('exit_code')}) "
        f"written to {options.out}"
    )
    return 0
