"""Issue 46, deliver 2: a calibration a new runner can live with. One benchmark that cannot run (out of memory, a
wrong result, before it starts or mid-run) is skipped with its reason; the others' model is fitted and written.

The warm workers are a fake here (no process, no GPU): what is tested is the calibration's handling, and the memory
estimate's arithmetic (ci/speed/engine/memory.py) against harness.timing's own formulas.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest

from ci.speed.decide.thresholds import Thresholds
from ci.speed.engine import memory
from ci.speed.engine.memory import GIB, DeviceMemory, device_need, footprint, memory_skips
from ci.speed.engine.rounds import Benchmark, ProcessRecord, RoundRecord
from ci.speed.options import Mode, SpeedOptions

H100_FREE = 78 * GIB  # an 80 GB H100 with both workers' contexts up
H100_LLC = 50 << 20
SHAPES = {  # harness/shapes.py BENCHMARK_SHAPES
    "square_m08192_n08192_k08192": (8192, 8192, 8192),
    "square_m16384_n16384_k16384": (16384, 16384, 16384),
    "llama31_70b_mlp_gate_up_m08192_n57344_k08192": (8192, 57344, 8192),
    "llama31_70b_mlp_down_m08192_n08192_k28672": (8192, 8192, 28672),
    "llama31_405b_attn_qkv_m08192_n18432_k16384": (8192, 18432, 16384),
}
PAIRS = [  # the default selection on an NVIDIA GPU
    ("torch_dequant", "bf16"),
    ("torch_dequant", "fp32"),
    ("triton_dot_scaled", "m128_n128_k128_w8_s3"),
    ("triton_dot_scaled", "m128_n256_k64_w8_s3"),
    ("triton_upcast", "m128_n128_k64_w8_s3"),
    ("triton_upcast", "m128_n128_k64_w8_s4"),
]
GATE_UP_FP32 = "torch_dequant[fp32]/llama31_70b_mlp_gate_up_m08192_n57344_k08192"


def _default_selection() -> list[Benchmark]:
    return [Benchmark(k, c, s, *mnk) for k, c in PAIRS for s, mnk in SHAPES.items()]


# ------------------------------------------------------------------ the memory estimate


def test_the_parents_input_set_formula_is_harness_timings():
    from harness.timing import inputs

    for m, n, k in SHAPES.values():
        assert memory.gemm_bytes(m, n, k) == inputs.gemm_bytes(m, n, k)
        set_bytes = inputs.gemm_bytes(m, n, k)
        for llc in (H100_LLC, 256 << 20):
            sets, _ = inputs.input_set_count(set_bytes, llc, 1 << 50)  # free memory no limit: the count it wants
            assert memory.input_sets(set_bytes, llc) == sets
    assert memory.MAX_INPUT_SETS == inputs.MAX_INPUT_SETS


def test_footprint_arithmetic():
    m, n, k = SHAPES["llama31_70b_mlp_gate_up_m08192_n57344_k08192"]
    set_bytes = (m + n) * (k // 2 + k // 32) + m * n * 2
    fp32 = footprint(Benchmark("torch_dequant", "fp32", "x", m, n, k), H100_LLC)
    assert fp32.held == 2 * set_bytes  # two sets: one is 1.2 GB, far above twice the L2
    # B dequantized in fp32 beside A's: (2*4 + 4) bytes an element of B at the peak, 4 of A; the allocator's slack.
    assert fp32.transient == math.ceil((4 * m * k + 12 * n * k) * memory.TEMPORARY_SLACK)
    assert 6.5 * GIB < fp32.transient < 7.5 * GIB
    bf16 = footprint(Benchmark("torch_dequant", "bf16", "x", m, n, k), H100_LLC)
    assert bf16.held == fp32.held and bf16.transient < fp32.transient
    triton = footprint(Benchmark("triton_dot_scaled", "m128_n128_k128_w8_s3", "x", m, n, k), H100_LLC)
    assert triton.held == fp32.held and triton.transient == math.ceil(memory.OUTPUT_CHECK_BYTES * 1.25)
    fly = footprint(Benchmark("flydsl_gfx950_4wave", "default", "x", m, n, k), H100_LLC)
    assert fly.held == 2 * (set_bytes + n * k // 2 + (m + n) * (k // 32))  # a preshuffled B and scales per set
    unknown = footprint(Benchmark("someone_new", "x", "x", m, n, k), H100_LLC)
    assert unknown.transient == fp32.transient  # costed as the most of any known kernel


def test_the_default_selection_is_38_gb_of_inputs_a_side_on_an_h100():
    # Issue 46: two workers of ~39 GB each ran out of memory on the 80 GB card.
    held = sum(footprint(b, H100_LLC).held for b in _default_selection())
    assert 36e9 < held < 40e9  # ~38 GB, as the H100 showed
    need = device_need(_default_selection(), H100_LLC)
    largest = max(footprint(b, H100_LLC).held for b in _default_selection())
    transient = footprint(_default_selection()[7], H100_LLC).transient
    assert need == 2 * (held + transient) + largest + memory.DEVICE_HEADROOM_BYTES  # PREPARE_SHARE 0.5: one more
    assert need > H100_FREE


def test_what_is_kept_can_be_prepared_under_the_harness_own_rule():
    """The H100 lease of 2026-12-07: the estimate kept 28 benchmarks, and the two prepared last failed in round 1 --
    harness.timing.inputs makes input sets only within half the free memory. Both workers prepare the kept ones side
    by side under that rule (harness.timing.inputs.input_set_count itself): none may fail."""
    from harness.timing import inputs

    assert memory.PREPARE_SHARE == inputs._INPUT_MEMORY_SHARE
    free_at_survey = 77.8 * GIB  # what the H100's surveys saw (both workers' contexts up)
    benches = _default_selection()
    skips = memory_skips(benches, DeviceMemory(int(free_at_survey), 80 * GIB, H100_LLC))
    free = free_at_survey
    for b in (b for b in benches if b.id not in skips):
        for _side in ("base", "head"):
            set_bytes = inputs.gemm_bytes(b.m, b.n, b.k)
            sets, _ = inputs.input_set_count(set_bytes, H100_LLC, int(free))  # raises MemoryError as on the H100
            free -= sets * set_bytes
    assert all(b.startswith("torch_dequant[") for b in skips)  # the references go, never a Triton kernel


def test_what_does_not_fit_is_skipped_largest_first_with_bytes_needed_and_free():
    benches = _default_selection()
    skips = memory_skips(benches, DeviceMemory(H100_FREE, 80 * GIB, H100_LLC))
    assert next(iter(skips)) == GATE_UP_FP32  # the largest goes first
    assert all(b.startswith("torch_dequant[") for b in skips) and len(skips) <= 4
    why = skips[GATE_UP_FP32]
    assert "GiB held" in why and "78.0 GiB free of 80.0 GiB" in why and "2 workers" in why
    kept = [b for b in benches if b.id not in skips]
    assert device_need(kept, H100_LLC) <= H100_FREE
    # An H200's 141 GB hold them all; two GPUs halve each one's share.
    assert memory_skips(benches, DeviceMemory(139 * GIB, 141 * GIB, H100_LLC)) == {}
    assert memory_skips(benches, DeviceMemory(H100_FREE, 80 * GIB, H100_LLC), devices=(0, 1)) == {}
    # A card too small for any: every benchmark goes, each with its reason.
    assert len(memory_skips(benches[:3], DeviceMemory(GIB, 2 * GIB, H100_LLC))) == 3


def test_the_device_memory_is_the_least_any_survey_saw():
    surveys = {
        "base": {"memory": {"free_bytes": 70 * GIB, "total_bytes": 80 * GIB, "llc_bytes": H100_LLC}},
        "head": {"memory": {"free_bytes": 69 * GIB, "total_bytes": 80 * GIB, "llc_bytes": H100_LLC}},
    }
    assert DeviceMemory.of_surveys(list(surveys.values())) == DeviceMemory(69 * GIB, 80 * GIB, H100_LLC)
    assert DeviceMemory.of_surveys([{"device": "cpu"}, None]) is None  # a CPU (or an old worker): no check


# ------------------------------------------------------------------ the calibration with a fake engine


class FakeEngine:
    """Warm workers without processes: ``failing`` benchmarks answer an out-of-memory error, ``wrong`` a wrong result;
    the others' rounds are A/A with a between-generation offset. ``measured``: every benchmark a round asked for."""

    restart_every = 2
    device = "cuda"

    def __init__(self, benches, *, failing=(), wrong=(), dies=None, free=139 * GIB, seed=3, failing_from=None):
        self.benches, self.failing, self.wrong, self.free = benches, set(failing), set(wrong), free
        self.failing_from = failing_from  # a round index from which every benchmark runs out of memory
        self.dies, self.revived = dies, 0  # (benchmark id, round index): its worker dies measuring it then
        self.rng = np.random.default_rng(seed)
        self.devices = {0: None}
        self.measured: set[str] = set()
        self.offsets: dict[tuple[str, int], float] = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def survey(self, requests):
        survey = {
            "device": "cuda",
            "environment": {"gpu": "NVIDIA H100 80GB HBM3", "torch": "2.x", "driver": "1", "cuda": "12", "rocm": None},
            "registered": [{"name": k, "backend": "torch", "configs": [c]} for k, c in PAIRS],
            "shapes": [],
            "unknown_shapes": [],
            "benchmarks": [dict(b.to_json(), backend="torch", available=True, reason=None) for b in self.benches],
            "correctness": [],
            "memory": {"free_bytes": self.free, "total_bytes": 80 * GIB, "llc_bytes": H100_LLC},
        }
        return {side: survey for side in requests}

    def measure_round(self, order, benchmarks, *, round_index, after_pair=None):
        generation = round_index // self.restart_every
        records = {side: {} for side in order}
        dead = False
        for bench in benchmarks:
            self.measured.add(bench.id)
            if dead or (bench.id, round_index) == self.dies:  # the device's records after a death (device_state)
                for side in order:
                    records[side][bench.id] = {
                        "error": "WorkerFailed: the head worker exited with -11 (measuring it)",
                        "busy": False,
                        "device_failed": True,
                        **({} if dead else {"died_measuring": True}),
                    }
                dead = True
                continue
            offset = self.offsets.setdefault((bench.id, generation), float(self.rng.normal(0.0, 0.001)))
            for side in order:
                if bench.id in self.failing or (self.failing_from is not None and round_index >= self.failing_from):
                    rec = {"error": "OutOfMemoryError: CUDA out of memory. Tried to allocate 7.00 GiB", "busy": False}
                elif bench.id in self.wrong and side == "head":
                    rec = {"error": "wrong result at 8x8x64", "busy": False, "wrong_result": {"passed": False}}
                else:
                    shift = offset if side == "head" else 0.0
                    rec = {"tflops": 100.0 * math.exp(shift + self.rng.normal(0.0, 0.001)), "steady": True}
                records[side][bench.id] = dict(rec, worker_generation=generation, measure_s=0.5)
        processes = [ProcessRecord(s, 1, 1.0, records[s]) for s in order]
        return RoundRecord(round_index, list(order), processes, sequence=[b.id for b in benchmarks])

    def revive(self):
        self.revived += 1
        return [0]


@pytest.fixture
def one_commit_repo(tmp_path):
    return make_one_commit_repo(tmp_path)


def make_one_commit_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    commit = ["-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "x"]
    for args in (["init", "-q"], commit):
        subprocess.run(["git", *args], cwd=repo, check=True)
    return repo


def _options(tmp_path, repo, **given):
    base = dict(
        mode=Mode.CALIBRATE,
        repo=repo,
        working_tree=True,
        thresholds=Thresholds(0.01, (), "test"),
        noise=tmp_path / "model.json",
        write=True,
        plan_keys=(("rounds", 8), ("restart_every", 2)),
        max_minutes=None,
        json=tmp_path / "cal.json",
    )
    return SpeedOptions(**{**base, **given})


def _calibrate(tmp_path, repo, engine):
    from ci.speed.modes.calibration import run_calibrate

    code = run_calibrate(_options(tmp_path, repo), open_engine=lambda sides, opts, stop_at: engine)
    return code, json.loads((tmp_path / "model.json").read_text()), json.loads((tmp_path / "cal.json").read_text())


def test_an_out_of_memory_benchmark_is_skipped_and_the_others_model_is_written(tmp_path, one_commit_repo, capsys):
    benches = [Benchmark("triton_dot_scaled", "m128_n128_k128_w8_s3", f"s{i}", 256, 256, 256) for i in range(3)]
    oom = benches[1].id
    code, model, record = _calibrate(tmp_path, one_commit_repo, FakeEngine(benches, failing=[oom]))
    assert code == 0
    assert set(model["benchmarks"]) == {benches[0].id, benches[2].id}
    assert "CUDA out of memory" in model["skipped"][oom] and "failed in round 1" in model["skipped"][oom]
    assert record["skipped"] == model["skipped"] and record["files_written"] == [str(tmp_path / "model.json")]
    out = capsys.readouterr().out
    assert "**skipped** (1" in out and f"`{oom}`: base failed in round 1: OutOfMemoryError" in out
    assert "the model was still written" in out


def test_a_benchmark_the_card_cannot_hold_twice_is_skipped_before_it_starts(tmp_path, one_commit_repo):
    benches = [Benchmark("triton_dot_scaled", "m128_n128_k128_w8_s3", f"s{i}", 256, 256, 256) for i in range(2)]
    big = Benchmark("torch_dequant", "fp32", "llama31_70b_mlp_gate_up_m08192_n57344_k08192", 8192, 57344, 8192)
    engine = FakeEngine([*benches, big], free=20 * GIB)
    code, model, _ = _calibrate(tmp_path, one_commit_repo, engine)
    assert code == 0 and big.id not in engine.measured  # never prepared, never timed
    assert set(model["benchmarks"]) == {b.id for b in benches}
    assert model["skipped"][big.id].startswith("not enough GPU memory") and "20.0 GiB free" in model["skipped"][big.id]


def test_a_wrong_result_is_skipped_not_fitted(tmp_path, one_commit_repo):
    benches = [Benchmark("triton_upcast", "m128_n128_k64_w8_s3", f"s{i}", 256, 256, 256) for i in range(3)]
    code, model, _ = _calibrate(tmp_path, one_commit_repo, FakeEngine(benches, wrong=[benches[0].id]))
    assert code == 0 and benches[0].id not in model["benchmarks"]
    assert model["skipped"][benches[0].id].startswith("wrong result")


def test_nothing_left_to_fit_is_an_error_and_nothing_is_written(tmp_path, one_commit_repo):
    from ci.speed.decide.noise_file import NoiseModelError

    benches = [Benchmark("triton_upcast", "m128_n128_k64_w8_s3", "s0", 256, 256, 256)]
    with pytest.raises(NoiseModelError, match="no benchmark could be calibrated"):
        _calibrate(tmp_path, one_commit_repo, FakeEngine(benches, failing=[benches[0].id]))
    assert not Path(tmp_path / "model.json").exists()


def test_a_worker_that_dies_measuring_a_benchmark_costs_that_benchmark_only(tmp_path, one_commit_repo):
    benches = [Benchmark("triton_upcast", "m128_n128_k64_w8_s3", f"s{i}", 256, 256, 256) for i in range(3)]
    engine = FakeEngine(benches, dies=(benches[1].id, 2))
    code, model, record = _calibrate(tmp_path, one_commit_repo, engine)
    assert code == 0 and engine.revived == 1  # the device started a new generation after the death
    # It is measured no more, and its two rounds before the death are kept in the fit (stopped, not skipped).
    assert benches[1].id not in model.get("skipped", {})
    assert "stopped after round 2" in record["stopped"][benches[1].id]
    assert "worker died measuring it in round 3" in record["stopped"][benches[1].id]
    assert model["benchmarks"][benches[1].id]["rounds"] == 2
    # The benchmark measured after it on the dead device lost round 3 only.
    assert model["benchmarks"][benches[2].id]["rounds"] == 7 and model["benchmarks"][benches[0].id]["rounds"] == 8


def test_a_failure_after_measured_rounds_keeps_those_rounds(tmp_path, one_commit_repo, capsys):
    """The H100 lease of 2026-12-07: every benchmark ran out of memory at round 5 (the old worker generation still
    held its operands while the new one prepared); the calibration then wrote nothing from 4 good rounds."""
    benches = [Benchmark("triton_upcast", "m128_n128_k64_w8_s3", f"s{i}", 256, 256, 256) for i in range(3)]
    code, model, record = _calibrate(tmp_path, one_commit_repo, FakeEngine(benches, failing_from=4))
    assert code == 0 and record["files_written"] == [str(tmp_path / "model.json")]
    assert {b: e["rounds"] for b, e in model["benchmarks"].items()} == {b.id: 4 for b in benches}
    assert not model.get("skipped") and set(record["stopped"]) == {b.id for b in benches}
    assert all(w.startswith("stopped after round 4: base failed in round 5") for w in record["stopped"].values())
    assert "**stopped** (3: a failure ended their rounds" in capsys.readouterr().out


def test_the_gate_and_the_calibration_leave_out_what_does_not_fit_as_n_a_with_the_bytes():
    from ci.speed.decide.codes import Status
    from ci.speed.decide.selection import Entry, Selection
    from ci.speed.modes.shared import SKIPPED, memory_check

    benches = _default_selection()
    h100 = {"memory": {"free_bytes": H100_FREE, "total_bytes": 80 * GIB, "llc_bytes": H100_LLC}}
    selection = Selection([Entry(b, Status.GATED) for b in benches], [])
    reasons = memory_check(selection, {"base": h100, "head": h100}, [0])
    assert GATE_UP_FP32 in reasons
    left = {e.benchmark.id: e for e in selection.entries if e.status is Status.NOT_APPLICABLE}
    assert set(left) == set(reasons) and left[GATE_UP_FP32].note.startswith(f"{SKIPPED} not enough GPU memory")
    # A survey without a memory figure (a CPU, an older worker): nothing is left out.
    selection = Selection([Entry(b, Status.GATED) for b in benches], [])
    assert memory_check(selection, {"head": {"device": "cpu"}, "base": None}, [0]) == {}
    assert all(e.status is Status.GATED for e in selection.entries)


def test_another_runners_model_file_is_refused_before_any_round_and_left_untouched(tmp_path, one_commit_repo):
    """Issue 49, item 1: `--noise <the H200's model>` on another machine (here an H100) replaced the H200's model with
    this run's and dropped its six recorded runs. Refused after the survey (which names the GPU), before any round."""
    from ci.speed.decide.noise_file import NoiseModelError

    committed = Path(__file__).resolve().parents[1] / "ci" / "speed_noise_h200.json"
    (tmp_path / "model.json").write_bytes(committed.read_bytes())
    benches = [Benchmark("triton_upcast", "m128_n128_k64_w8_s3", "s0", 256, 256, 256)]
    engine = FakeEngine(benches)
    with pytest.raises(
        NoiseModelError, match=r"is the noise model of 'NVIDIA H200'; this calibration runs on 'NVIDIA H100"
    ):
        _calibrate(tmp_path, one_commit_repo, engine)
    assert (tmp_path / "model.json").read_bytes() == committed.read_bytes() and engine.measured == set()


class InterruptedEngine(FakeEngine):
    """SIGTERM (a cancelled job) arrives while round ``at`` (an index) is measured."""

    def __init__(self, benches, at):
        super().__init__(benches)
        self.at = at

    def measure_round(self, order, benchmarks, *, round_index, after_pair=None):
        if round_index == self.at:
            import signal

            from ci.common.interrupts import Interrupted

            raise Interrupted(signal.SIGTERM)
        return super().measure_round(order, benchmarks, round_index=round_index, after_pair=after_pair)


def test_an_interrupted_calibration_keeps_its_rounds_and_they_refit(tmp_path, one_commit_repo, capsys):
    """Issue 49, item 2: SIGTERM in round 6 of 8: exit 143, no model written, the five complete rounds in --json
    (marked interrupted), and `--refit --aa-records` of that file fits them."""
    from ci.speed.modes.calibration import run_calibrate

    benches = [Benchmark("triton_upcast", "m128_n128_k64_w8_s3", f"s{i}", 256, 256, 256) for i in range(2)]
    engine = InterruptedEngine(benches, at=5)
    try:
        code = run_calibrate(_options(tmp_path, one_commit_repo), open_engine=lambda sides, opts, stop_at: engine)
    except KeyboardInterrupt as escaped:  # before issue 49: the interrupt left the calibration, its rounds unwritten
        pytest.fail(f"the interrupt escaped the calibration, nothing kept: {escaped!r}")
    assert code == 143 and not (tmp_path / "model.json").exists()
    record = json.loads((tmp_path / "cal.json").read_text())
    assert record["interrupted"] == "SIGTERM" and record["exit_code"] == 143 and len(record["rounds"]) == 5
    assert "--refit --aa-records" in capsys.readouterr().err
    refit = _options(tmp_path, one_commit_repo, refit=True, aa_records=(tmp_path / "cal.json",), json=None)
    assert run_calibrate(refit, open_engine=lambda *a: pytest.fail("a refit measures nothing")) == 0
    model = json.loads((tmp_path / "model.json").read_text())
    assert {b: e["rounds"] for b, e in model["benchmarks"].items()} == {b.id: 5 for b in benches}


def test_a_model_that_cannot_be_written_keeps_the_rounds_and_says_how_to_refit(tmp_path, one_commit_repo):
    """Issue 49, item 2: the model's folder refuses the file (a full disk behaves the same: tests/test_full_disk.py):
    exit 2 naming it, and the measured rounds are in --json, with the command that fits them."""
    from ci.common.errors import WriteError
    from ci.speed.modes.calibration import run_calibrate

    (tmp_path / "not-a-folder").write_text("a file where the model's folder should be")
    benches = [Benchmark("triton_upcast", "m128_n128_k64_w8_s3", f"s{i}", 256, 256, 256) for i in range(2)]
    options = _options(tmp_path, one_commit_repo, noise=tmp_path / "not-a-folder" / "model.json")
    with pytest.raises(WriteError, match=r"not-a-folder/model.json.*the rounds are kept in .*cal\.json.*--refit"):
        run_calibrate(options, open_engine=lambda sides, opts, stop_at: FakeEngine(benches))
    assert len(json.loads((tmp_path / "cal.json").read_text())["rounds"]) == 8
