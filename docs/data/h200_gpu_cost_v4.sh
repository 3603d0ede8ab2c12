#!/usr/bin/env bash
# The speed gate's GPU cost, version 4 (docs/SPEED_GATE.md, "third lease"; docs/PERF_NOTES.md, version 4), on the
# lent H200, run from the repository root with .dev/ carried (the wheels and .dev/repo.bundle of main):
#   bash docs/data/h200_gpu_cost_v4.sh verdicts   # one benchmark slowed / faster / wrong; the 10-benchmark PR slowed
#                                                 # and A/A; the main job over a kernel wrong at 8192^3
#   bash docs/data/h200_gpu_cost_v4.sh rerun      # slow_one, slow_ten and the main job again, after the PR-level stop
#   bash docs/data/h200_gpu_cost_v4.sh all        # the full default selection, every launch path changed
#   bash docs/data/h200_gpu_cost_v4.sh steady     # torch_dequant[bf16] A/A at its two unsteady shapes, after the fallback
# Each gate run is preceded by its CPU step, as in .github/workflows/pr-checks.yml: python -m ci.speed.changes
# (the fingerprints) writes changes.json and the gate reads it with --changes, so the gate's wall is the GPU job's.
# Everything comes back as one file, $OUT/h200_gpu_cost_v4_<part>.tar.gz.
set -u -o pipefail
export PYTHONUNBUFFERED=1
PART=${1:?verdicts, rerun, all or steady}
BUDGET_S=${BUDGET_S:-585}
SITE=/tmp/site WORK=/tmp/r4 LOGS=/tmp/h200_gpu_cost_v4 OUT=${OUT:-/tmp/out}
WHL=$(pwd)/.dev/whl BUNDLE=$(pwd)/.dev/repo.bundle
rm -rf "$LOGS" && mkdir -p "$LOGS" "$OUT"
# shellcheck source=docs/data/h200_lib.sh
source docs/data/h200_lib.sh

finish() {
  nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv > "$LOGS/gpu_after.csv" 2>/dev/null
  tar -C "$(dirname "$LOGS")" -czf "$OUT/h200_gpu_cost_v4_$PART.tar.gz" "$(basename "$LOGS")"
  echo "total wall $(( $(date +%s) - T0 )) s"
  cat "$LOGS/runs.txt"
}
trap finish EXIT
h200_setup

gate() {  # gate NAME CAP BASE HEAD ARGS...: the CPU step (changes.json), then the gate with it; wall times apart
  local name=$1 cap=$2 base=$3 head=$4; shift 4
  step "$name.changes" 60 python3 -m ci.speed.changes --base "$base" --head "$head" --arch sm_90 \
    --json "$LOGS/$name.changes.json" > /dev/null 2> "$LOGS/$name.changes.log"
  step "$name" "$cap" python3 -m ci.speed --thresholds ci/speed_thresholds_h200.json --base "$base" --head "$head" \
    --changes "$LOGS/$name.changes.json" --json "$LOGS/$name.json" "$@" > "$LOGS/$name.md" 2> "$LOGS/$name.log"
  grep -E "^speed_gate: (PASS|FAIL)|GPU runner" "$LOGS/$name.md" | cut -c1-240 | head -3
}
main_job_wrong_at_8192() {  # the main job over a kernel wrong only at 8192^3: recorded as "failed" with the reason
  export MXFP4_STACK_PYTHON; MXFP4_STACK_PYTHON=$(command -v python3)
  step main_job_wrong_at_8192 120 python3 -m ci.history --tracks gpu --no-publish --wheelhouse "$WHL/env" \
    --json "$LOGS/main_job_wrong_at_8192.json" --branch exp/wrong-at-8192 --commits 1 --launch-method forkserver \
    --bench "GemmOnGpu\\.track_time\\('triton_dot_scaled:m128_n128_k128_w8_s3', 'square_m08192_n08192_k08192'\\)" \
    > "$LOGS/main_job_wrong_at_8192.md" 2> "$LOGS/main_job_wrong_at_8192.stderr"
  cp .asv/main_job.log "$LOGS/main_job_wrong_at_8192.main_job.log" 2>/dev/null
  grep -iE "failed|wrong result" "$LOGS/main_job_wrong_at_8192.md" | cut -c1-240 | head -4
}
TRACKED=(--kernel triton_dot_scaled --config m128_n128_k128_w8_s3 --shape square_m08192_n08192_k08192)

if [ "$PART" = verdicts ]; then
  gate slow_one 90 main exp/slow "${TRACKED[@]}" --max-minutes 1
  gate faster_one 90 exp/slow exp/faster "${TRACKED[@]}" --max-minutes 1
  gate wrong_at_8192 60 main exp/wrong-at-8192 "${TRACKED[@]}" --max-minutes 1
  gate slow_ten 200 main exp/slow --kernel triton_dot_scaled --max-minutes 3
  gate aa_ten 200 main exp/docs-only --kernel triton_dot_scaled --measure-identical --max-minutes 3
  main_job_wrong_at_8192
elif [ "$PART" = steady ]; then  # after the fallback: unsteady settled samples -> the full warm-up, timed again
  gate aa_torch_bf16 200 main exp/docs-only --kernel torch_dequant --config bf16 --measure-identical --max-minutes 2.5 \
    --shape square_m08192_n08192_k08192 --shape square_m16384_n16384_k16384
elif [ "$PART" = rerun ]; then  # after the PR-level stop (no round once the PR has failed) and the wheel fix
  gate slow_one 90 main exp/slow "${TRACKED[@]}" --max-minutes 1
  gate slow_ten 200 main exp/slow --kernel triton_dot_scaled --max-minutes 3
  main_job_wrong_at_8192
else
  main_job_wrong_at_8192  # again: the first two tries had an incomplete wheelhouse for asv's environment
  # --max-minutes 7, not 8: the call has 600 s, and a round that starts just before the limit still runs
  gate all_launch_paths 545 main exp/all-launch-paths --max-minutes 7
fi
