"""Issue 19, items 4 and 5: re-runs add samples and never replace them; the main job's output fits one screen.

Fast: the step counter, asv's output turned into progress lines, the publish that keeps the html folder,
per-point sample counts, the summary's short form. Slow: the main job twice on one commit (CPU, a
temporary repository): the second run's samples are added to the first's, and each run's screen
output is at most 60 lines with no pip warnings, the log file holding the full table.
"""

from __future__ import annotations

import io
import re

import history_job
import pytest

from ci.history import messages
from ci.history.asv_results import result_points
from ci.history.measure import asv_driver, progress, track_steps
from ci.history.measure import summary as history_summary

SCREEN_LINES = 60


def test_the_step_counter_counts_every_step_once_in_order(capsys):
    steps = progress.Steps(4)
    for what in ("a", "b", "c", "d"):
        steps.start(what)
    numbers = re.findall(r"\[(\d+)/4\]", capsys.readouterr().err)
    assert numbers == ["1", "2", "3", "4"]


class _Stream(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def _asv_output(benchmarks: int) -> list[str]:
    lines = ["· Creating environments\n", "WARNING: pip is configured with locations that require TLS\n"]
    for i in range(1, benchmarks + 1):
        lines.append(f"[{100 * i / benchmarks:5.2f}%] ··· bench_gemm.GemmOnCpu.track_time{i}   n/a\n")
    return lines


def test_asv_output_goes_to_the_log_and_ci_sees_a_line_per_quarter(tmp_path, capsys):
    messages.log_to(tmp_path / "job.log")
    try:
        plain = progress.AsvProgress("asv run", stream=_Stream(tty=False))
        for line in _asv_output(244):
            plain.feed(line)
        plain.close()
    finally:
        messages.log_to(None)
    screen = capsys.readouterr().err.splitlines()
    assert 4 <= len(screen) <= 5 and not any("WARNING" in line for line in screen)
    logged = (tmp_path / "job.log").read_text()
    assert "WARNING: pip" in logged and logged.count("n/a") == 244


def test_a_terminal_gets_one_bar_rewritten_in_place():
    stream = _Stream(tty=True)
    bar = progress.AsvProgress("asv run", stream=stream)
    for line in _asv_output(50):
        bar.feed(line)
    bar.close()
    text = stream.getvalue()
    assert text.count("\n") == 1 and text.count("\r") == 50 and "100%" in text


def test_publish_in_place_keeps_the_html_folder_a_preview_serves(tmp_path):
    html, fresh = tmp_path / "html", tmp_path / "fresh"
    (html / "old").mkdir(parents=True)
    (html / "old" / "stale.json").write_text("{}")
    (html / "index.html").write_text("old")
    (fresh / "graphs").mkdir(parents=True)
    (fresh / "index.html").write_text("new")
    (fresh / "graphs" / "a.json").write_text("[1]")
    inode = html.stat().st_ino
    asv_driver.sync_tree(fresh, html)
    assert html.stat().st_ino == inode  # the folder asv preview chdir'ed into is still the one served
    assert sorted(str(p.relative_to(html)) for p in html.rglob("*")) == ["graphs", "graphs/a.json", "index.html"]
    assert (html / "index.html").read_text() == "new"


def test_sample_counts_per_point_and_the_rerun_line():
    document = {
        "result_columns": ["result", "params", "version", "started_at", "duration", "stats_ci_99_a", "samples"],
        "results": {
            "bench_gemm.GemmOnCpu.track_time": [
                [1.0, None],
                [["'k:a'", "'k:b'"], ["'s'"]],
                "v",
                0,
                1.0,
                [0.9, None],
                [[1.0, 1.1, 0.9], None],
            ],
        },
    }
    assert result_points.sample_counts(document) == {"bench_gemm.GemmOnCpu.track_time('k:a', 's')": 3}
    (line,) = track_steps.rerun_lines("0123456789ab", {"p1": (10, 20), "p2": (10, 20), "new": (0, 10)})
    assert "none replaced" in line and "2 points kept 20 samples and now hold 20 samples each" in line
    assert track_steps.rerun_lines("0123456789ab", {"p1": (0, 10)}) == []


def test_the_screen_summary_cuts_long_tables_and_names_the_log():
    rows = [{"benchmark": f"b{i}", "head": "1"} for i in range(40)]
    short = history_summary._table(rows, "", ".asv/main_job.log")
    full = history_summary._table(rows, "", None)

    def body(table: str) -> int:
        return len(re.findall(r"^\| b\d+ ", table, re.M))

    assert (
        body(short) == history_summary.SHORT_TABLE_ROWS
        and f"{40 - history_summary.SHORT_TABLE_ROWS} more rows" in short
    )
    assert ".asv/main_job.log" in short and body(full) == 40


# ---------------------------------------------------------------------------
# end to end on the CPU: the main job twice on one commit
# ---------------------------------------------------------------------------


@pytest.mark.slow
def test_a_rerun_on_one_commit_adds_samples_and_the_output_fits_one_screen(tmp_path, measured_project):
    # The first run is the session's (--tracks gpu: with this --bench the same runs as the default, all); the
    # second, on a copy of its project, runs with the default tracks.
    measured = history_job.copy_project(measured_project, tmp_path)
    repo, home, first, first_run = measured.repo, measured.home, measured.report, measured.run
    (commit,) = first["commits"]
    before = first["samples"]["gpu"][commit]
    assert before and all(was == 0 and now > 0 for was, now in before.values())

    second, second_run = history_job.run_job(repo, home, "--remeasure")
    after = second["samples"]["gpu"][commit]
    assert set(after) == set(before)  # no point lost
    for key, (was, now) in after.items():
        assert was == before[key][1] and now > was  # the first run's samples kept, this run's added
    assert "none replaced" in second_run.stderr and f"{len(after)} points kept" in second_run.stderr
    assert "0 files from" not in second_run.stderr

    log_file = repo / ".asv" / "main_job.log"
    # Each run names its own checkout's log: the first ran in the session's project, not in this copy.
    for done, its_log in ((first_run, measured_project.repo / ".asv" / "main_job.log"), (second_run, log_file)):
        screen = done.stdout.splitlines() + done.stderr.splitlines()
        assert len(screen) <= SCREEN_LINES, "\n".join(screen)
        assert not any(line.startswith("WARNING:") for line in done.stdout.splitlines())
        steps = [int(n) for n in re.findall(r"\[(\d+)/\d+\]", done.stderr)]
        assert steps == list(range(1, len(steps) + 1)) and len(steps) >= 5
        assert str(its_log) in done.stderr
    logged = log_file.read_text()
    assert "### GEMM time per commit" in logged and "asv run" in logged and "track_time" in logged


# ---------------------------------------------------------------------------
# the budget gate's table: base, head and budget side by side, one unit per column
# ---------------------------------------------------------------------------


def test_the_budget_table_has_base_head_and_budget_side_by_side_in_one_unit_each():
    from ci.budget.compare import TargetCheck
    from ci.budget.report import table_rows

    base = {"registers": 120, "shared_bytes": 65536, "occupancy": 2, "occupancy_unit": "waves/SIMD", "agpr": 4}
    head = {**base, "registers": 128, "shared_bytes": 131072, "register_limit": 512, "agpr": 8}
    check = TargetCheck(
        "k/gfx950/default",
        base=base,
        head=head,
        status="fail",
        budget={"max_registers": 124, "max_shared_bytes": 131072, "min_occupancy": 1, "max_agpr": 8},
    )
    (row,) = table_rows([check])
    columns = list(row)
    for label in ("regs", "LDS bytes", "occupancy"):
        at = columns.index(f"{label} base")
        assert columns[at : at + 3] == [f"{label} base", f"{label} head", f"{label} budget"]
    assert (row["regs base"], row["regs head"], row["regs budget"]) == ("120", "128", "<= 124")
    assert (row["LDS bytes base"], row["LDS bytes head"], row["LDS bytes budget"]) == ("65536", "131072", "<= 131072")
    assert row["occupancy budget"] == ">= 1" and row["occupancy unit"] == "waves/SIMD"
    assert row["other regs (base/head/budget)"] == "agpr 4/8/8"
    assert not any("KiB" in cell for cell in row.values())
