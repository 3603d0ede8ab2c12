"""Issue 46, deliver 3: each runner's noise model and policy thresholds found from its GPU name, in one place
(ci/speed_runners.json, ci/speed/profiles.py); an unknown runner says so first and gates on its own rounds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci.speed.decide.noise_file import load_noise_model
from ci.speed.decide.thresholds import Thresholds, load_thresholds
from ci.speed.profiles import RunnersFileError, parse_runners, runner_profile, unknown_noise_path

PROJECT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("gpu", "name", "noise", "thresholds"),
    [
        ("NVIDIA H200", "h200", "ci/speed_noise_h200.json", "ci/speed_thresholds_h200.json"),
        ("NVIDIA H200 NVL", "h200", "ci/speed_noise_h200.json", "ci/speed_thresholds_h200.json"),
        ("AMD Instinct MI355X", "mi355x", "ci/speed_noise.json", "ci/speed_thresholds.json"),
        (None, "cpu", "ci/speed_noise.json", "ci/speed_thresholds.json"),
        (
            "NVIDIA H100 80GB HBM3",
            "unknown",
            "ci/speed_noise_nvidia_h100_80gb_hbm3.json",
            "ci/speed_thresholds.json",
        ),
    ],
)
def test_a_runner_is_found_by_the_gpu_name_torch_reports(gpu, name, noise, thresholds):
    profile = runner_profile(gpu)
    assert (profile.name, profile.gpu, profile.noise, profile.thresholds) == (name, gpu, noise, thresholds)
    assert profile.known == (name != "unknown")
    assert (PROJECT / profile.thresholds).is_file()  # every profile's policy loads
    load_thresholds(PROJECT / profile.thresholds)


def test_the_committed_h200_model_is_its_profiles_and_still_loads():
    model = load_noise_model(PROJECT / runner_profile("NVIDIA H200").noise)
    assert model.runner["gpu"] == "NVIDIA H200" and model.benchmarks
    assert all(not e.weak and e.generations == 0 for e in model.benchmarks.values())  # a file before issue 46


def test_the_mi355x_policy_is_the_zone_rule_and_its_file_says_the_same():
    profile = runner_profile("AMD Instinct MI355X")
    assert "t/2" in profile.policy and "0.7-1.5% steps" in profile.policy and "0.5%" in profile.policy
    thresholds = load_thresholds(PROJECT / profile.thresholds)
    assert "band" not in thresholds.about and "--calibrate" not in thresholds.about and "t/2" in thresholds.about
    assert thresholds.lookup("flydsl_gfx950_4wave[default]/square_m08192_n08192_k08192")[0] == 0.005
    assert thresholds.lookup("flydsl_gfx950_4wave[intrinsic_acc]/square_m08192_n08192_k08192")[0] == 0.007
    assert thresholds.lookup("triton_dot_scaled[m128_n128_k128_w8_s3]/square_m08192_n08192_k08192")[0] == 0.007
    assert thresholds.lookup("torch_dequant[bf16]/square_m08192_n08192_k08192")[0] == 0.01


def test_an_unknown_runners_model_has_its_own_name():
    assert unknown_noise_path("AMD Instinct MI300X") == "ci/speed_noise_amd_instinct_mi300x.json"
    assert unknown_noise_path("???") == "ci/speed_noise_gpu.json"


def test_a_malformed_runners_file_names_the_key():
    good = json.loads((PROJECT / "ci/speed_runners.json").read_text())
    runners, defaults = parse_runners(good, "r.json")
    assert [p.name for _, p in runners] == ["mi355x", "h200"] and set(defaults) == {"cpu", "unknown"}
    bad = json.loads(json.dumps(good))
    bad["runners"][0]["gpu"] = "AMD Instinct MI355X"
    with pytest.raises(RunnersFileError, match=r"r.json: runners\[0\].gpu: a list"):
        parse_runners(bad, "r.json")
    bad = {**good, "runner": []}
    with pytest.raises(RunnersFileError, match="unknown key"):
        parse_runners(bad, "r.json")


def test_the_gate_reads_the_runners_files_and_explicit_ones_win(tmp_path):
    from ci.speed.modes.measure import noise_model_for
    from ci.speed.modes.shared import thresholds_for

    h200 = {"gpu": "NVIDIA H200", "driver": "580.159.04", "torch": "2.11.0+cu130"}
    choice = noise_model_for(True, None, tmp_path, h200)  # the head has no model: this checkout's
    assert (
        choice.model is not None
        and choice.model.source == "ci/speed_noise_h200.json of this checkout (the head has none)"
    )
    given = tmp_path / "mine.json"
    given.write_text((PROJECT / "ci/speed_noise_h200.json").read_text())
    assert noise_model_for(True, given, tmp_path, h200).model.source == str(given)  # --noise wins
    unknown = noise_model_for(True, None, tmp_path, {"gpu": "NVIDIA H100 80GB HBM3"})
    assert unknown.model is None and unknown.notes[0].startswith("unknown runner NVIDIA H100 80GB HBM3: no noise model")
    h200_policy = runner_profile("NVIDIA H200").thresholds
    assert thresholds_for(None, tmp_path, h200_policy).source == f"{h200_policy} of this checkout (the head has none)"
    mine = Thresholds(0.02, (), "--thresholds")
    assert thresholds_for(mine, tmp_path, h200_policy) is mine  # --thresholds wins


def test_the_judge_takes_the_records_runners_files():
    from ci.speed.modes.replay import judge_files

    root = PROJECT / "ci"
    assert judge_files({"gpu": "NVIDIA H200"}) == (root / "speed_thresholds_h200.json", root / "speed_noise_h200.json")
    assert judge_files({"gpu": "NVIDIA H100 80GB HBM3"}) == (root / "speed_thresholds.json", None)


def _context(gpu: str, extra: dict):
    """A gate's report context with nothing measured, for a runner named ``gpu``."""
    from ci.speed.decide.exclusion import ExclusionRule
    from ci.speed.report.write import Context
    from harness.paired.plan import ZONE_WARM_PLAN

    return Context(
        mode="gate",
        plan=ZONE_WARM_PLAN,
        rule=ExclusionRule(),
        thresholds=Thresholds(0.01, (), "ci/speed_thresholds.json"),
        base={"ref": "main", "sha": "a" * 40},
        head={"ref": "HEAD", "sha": "b" * 40},
        environment={"gpu": gpu},
        device="cuda",
        extra=extra,
    )


def _gate_record(path: Path, gpu: str, extra: dict) -> dict:
    """A gate's record with nothing measured, written as the gate writes it, for a runner named ``gpu``."""
    from ci.speed.report.write import finish

    context = _context(gpu, extra)
    finish(context, [], [], [], fail_on_inconclusive=False, json_path=path, plot_path=None, command=())
    return json.loads(path.read_text())


def test_an_unknown_runner_says_so_on_the_summarys_first_line_and_in_the_record(tmp_path, capsys):
    from ci.speed.decide.noise_file import ModelChoice
    from ci.speed.modes.measure import runner_record

    unknown = runner_profile("NVIDIA H100 80GB HBM3")
    record = _gate_record(tmp_path / "r.json", unknown.gpu, runner_record(unknown, ModelChoice(None)))
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(
        "**Unknown runner NVIDIA H100 80GB HBM3**: no noise model; the gate decides on this run's own rounds"
    )
    assert record["runner_profile"]["known"] is False and record["runner_profile"]["first_line"] == first
    # A known runner adds no line.
    assert runner_record(runner_profile("NVIDIA H200"), ModelChoice(None))["runner_profile"]["first_line"] is None


@pytest.mark.parametrize("has_model", [False, True])
def test_the_pr_comment_names_an_unknown_runner_on_its_first_line(tmp_path, capsys, has_model):
    """Issue 46, deliver 3: the comment (ci.notify), not only the step summary, says so first -- read from the gate's
    own record as the comment job reads it."""
    from ci.notify.comment import Inputs, Links, render
    from ci.notify.records import speed_record
    from ci.speed.decide.noise_file import ModelChoice
    from ci.speed.modes.measure import runner_record

    unknown = runner_profile("NVIDIA H100 80GB HBM3`](x)")  # a hostile name stays text
    model = load_noise_model(PROJECT / runner_profile("NVIDIA H200").noise) if has_model else None
    record = speed_record(_gate_record(tmp_path / "r.json", unknown.gpu, runner_record(unknown, ModelChoice(model))))
    capsys.readouterr()
    first = render(Inputs(record, None, None, None), Links("https://example.invalid/run")).splitlines()[0]
    assert first.startswith("**Unknown runner** ``NVIDIA H100 80GB HBM3`](x)``: no profile in")
    assert ("with its calibrated noise model" in first) is has_model
    assert ("on this run's own rounds" in first) is not has_model
    # A known runner's comment starts with its verdict.
    known = runner_record(runner_profile("NVIDIA H200"), ModelChoice(None))
    record = speed_record(_gate_record(tmp_path / "k.json", "NVIDIA H200", known))
    assert render(Inputs(record, None, None, None), Links("https://example.invalid/run")).startswith("### ")


def test_an_unknown_runners_first_line_names_the_model_and_thresholds_that_decided():
    """An H100 lease, 2026-12-07: with --noise /tmp/day_one/model.json the first line named the profile's path
    (ci/speed_noise_nvidia_h100_80gb_hbm3.json), a file that run never read; --thresholds was named "the default"."""
    from dataclasses import replace

    from ci.speed.decide.noise_file import ModelChoice
    from ci.speed.modes.measure import runner_record

    unknown = runner_profile("NVIDIA H100 80GB HBM3")
    model = replace(load_noise_model(PROJECT / runner_profile("NVIDIA H200").noise), source="/tmp/day_one/model.json")
    line = runner_record(unknown, ModelChoice(model), "ci/speed_thresholds_h200.json")["runner_profile"]["first_line"]
    assert "`/tmp/day_one/model.json`" in line and "`ci/speed_thresholds_h200.json`" in line
    assert unknown.noise not in line and "default" not in line
    # Neither given: the profile's default thresholds, said to be the default; no model, said so.
    for source in (None, f"{unknown.thresholds} of the head"):
        line = runner_record(unknown, ModelChoice(None), source)["runner_profile"]["first_line"]
        assert "no noise model" in line and f"the default thresholds `{unknown.thresholds}`" in line


def test_the_summary_bolds_the_gpus_wall_not_a_sum_over_processes():
    """An H100 A/A: 62.6 s measuring and 37.3 s of start-up summed over 4 processes, 82 s of wall. The bold figure
    read "100 s" (the sum), over a wall of 82 s; it is the wall the GPU was held, the slowest GPU's."""
    from ci.speed.report.write import header_lines

    cost = {"measure_s": 62.6, "startup_s": 37.3, "overlapped_startup_s": 8.3, "processes_started": 4}
    context = _context("NVIDIA H200", {"cost": {**cost, "device_wall_s": {"0": 82.4, "1": 79.0}}})
    (line,) = [x for x in header_lines(context, [{"processes": []}]) if x.startswith("GPU runner:")]
    assert line.startswith("GPU runner: **82 s** of wall (per GPU: 0: 82 s, 1: 79 s)"), line
    assert "62.6 s measuring, 37.3 s starting 4 process(es)" in line and "**100 s**" not in line
