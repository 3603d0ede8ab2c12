"""The H200's recorded gate runs (docs/data) replay to their verdicts, through the gate's own replay.

Every record of the warm plan -- the gate's version 2 (t looks at 5/10/20, alpha two-sided), version 3
(alpha per tail, the futility stop) and version 4 (the miss alpha, five looks) -- is decided again
under its own recorded plan, thresholds and exclusion rule, and must give the verdict it gave on the
H200, with the same interval and rounds. A record of the retired signed-rank plan (the fresh-process
engine's) cannot be replayed under its plan and is never re-judged under another: it is refused, exit 2,
with the reason.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from ci.speed import gate

DATA = Path(__file__).resolve().parents[1] / "docs" / "data"
RECORDS = sorted(
    p
    for p in [
        *DATA.glob("h200_gpu_cost*/*.json"),
        *DATA.glob("h200_history_cost/*.json"),
        DATA / "h200_speed_gate_rounds.json",
    ]
    if (data := json.loads(p.read_text()))
    and isinstance(data, dict)
    and data.get("schema") == "mxfp4-speed-gate/1"
    and data.get("mode") != "error"
)
RETIRED = {"h200_gpu_cost/slow_one_fresh.json", "h200_speed_gate_rounds.json"}  # the signed-rank plan's


def replay(record: Path, out: Path) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = gate.main(["--replay", str(record), "--json", str(out)])
    return code, err.getvalue()


def test_the_records_are_all_here():
    names = {p.relative_to(DATA).as_posix() for p in RECORDS}
    assert RETIRED <= names and len(names - RETIRED) == 21, sorted(names)  # the count docs/SPEED_GATE.md states


@pytest.mark.parametrize(
    "record",
    [p for p in RECORDS if p.relative_to(DATA).as_posix() not in RETIRED],
    ids=lambda p: p.relative_to(DATA).as_posix(),
)
def test_a_warm_plan_record_replays_to_its_verdicts(record, tmp_path):
    recorded = json.loads(record.read_text())
    code, err = replay(record, tmp_path / "replay.json")
    again = json.loads((tmp_path / "replay.json").read_text())
    assert code == recorded["exit_code"] and again["verdict"] == recorded["verdict"], err[-2000:]
    # Decided under its own plan: the recorded keys as they were (a record before a rule lacks its key).
    assert {k: again["plan"][k] for k in recorded["plan"]} == recorded["plan"] | {"method": "t"}
    assert again["summary"] == recorded["summary"]
    for was, now in zip(recorded["benchmarks"], again["benchmarks"], strict=True):
        assert (now["id"], now["status"], now["verdict"]) == (was["id"], was["status"], was["verdict"])
        if was["decision"] is None:
            assert now["decision"] is None
            continue
        for key in ("rounds_used", "rounds_excluded", "complete", "stopped_early"):
            assert now["decision"][key] == was["decision"][key], (was["id"], key)
        if was.get("stopped_by") not in (None, "decision"):  # the result keeps the code; the record gets the words
            assert now["decision"]["reason"] == was["decision"]["reason"], was["id"]
        for key in ("point", "low", "high"):  # float rounding of another numpy may differ in the last bit
            assert now["decision"]["estimate"][key] == pytest.approx(was["decision"]["estimate"][key], rel=1e-12), (
                was["id"],
                key,
            )


@pytest.mark.parametrize("name", sorted(RETIRED))
def test_a_record_of_the_retired_signed_rank_plan_is_refused_with_the_reason(name, tmp_path):
    code, err = replay(DATA / name, tmp_path / "replay.json")
    assert code == 2
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"python -m ci.speed: error: {DATA / name} was decided with the signed-rank plan"), line
    assert "retired in issue 28" in line and "not re-decided under the warm plan" in line
    assert json.loads((tmp_path / "replay.json").read_text())["verdict"] == "error"
