#!/usr/bin/env bash
# Issue 29 on the lent H200: the runner's noise model (docs/SPEED_GATE.md, "The noise model"; docs/PERF_NOTES.md,
# version 5). Run from the repository root with .dev/ carried: the wheels (.dev/whl, as for h200_gpu_cost_v4.sh) and
# `git bundle create .dev/repo.bundle main` (BRANCH=... for another branch, cloned as main), four calls:
#   bash docs/data/h200_noise_model.sh calibrate  # python -m ci.speed.calibrate --write on the default selection (<= 8.5 min of rounds)
#   bash docs/data/h200_noise_model.sh before     # the plan before issue 29 (--plan noise=off, the hand-set thresholds):
#                                                 # the one-pass PR and one A/A PR, 20 Triton benchmarks each
#   bash docs/data/h200_noise_model.sh after      # the model calibrate wrote: the one-pass PR, the 0.25% slowdown of the
#                                                 # tracked config, the first A/A PR (a speed-neutral launch-path edit)
#   bash docs/data/h200_noise_model.sh after_aa   # the second and third A/A PRs (two more such edits)
#   bash docs/data/h200_noise_model.sh repeat     # the 0.25% slowdown four more times, and the tracked config alone A/A twice
#   bash docs/data/h200_noise_model.sh warm       # the same with a 2 s first warm-up (--timing warmup_ms=2000), twice and once
#   bash docs/data/h200_noise_model.sh verify     # the worker's own 2 s first warm-up (no --timing): the injection, then its A/A
#                                                 # (REPEATS=N: N such pairs, default 1)
#   bash docs/data/h200_noise_model.sh committed  # the code as committed (the worker's first warm-up included): the one-pass PR
#                                                 # and the three A/A PRs, 20 Triton benchmarks each (AA_CAP: each A/A
#                                                 # step's cap in seconds, default 130; the workflow has no such cap)
#   bash docs/data/h200_noise_model.sh committed_aa # the three A/A PRs again (AA_CAP default 200), then one verify pair
# Every gate run is preceded by its CPU step (python -m ci.speed.changes, as in pr-checks.yml): the gate's wall is the
# GPU job's. `calibrate` keeps the files it wrote in .dev/noise_state/ (ignored; kept on the device while it stays warm)
# for `after`; if the machine was given back between the calls, copy speed_noise_h200.json and speed_thresholds_h200.json
# from the calibrate tarball into .dev/noise_state/ and carry .dev again, or `after` uses the committed model (and says so).
# Everything comes back as one file, $OUT/h200_noise_model_<part>.tar.gz (each step's JSON record, Markdown, log).
set -u -o pipefail
export PYTHONUNBUFFERED=1
PART=${1:?a part: calibrate, before, after, after_aa, repeat, warm, verify, committed or committed_aa}
case $PART in calibrate|before|after|after_aa|repeat|warm|verify|committed|committed_aa) ;; *) echo "unknown part: $PART (calibrate, before, after, after_aa, repeat, warm, verify, committed or committed_aa)" >&2; exit 2 ;; esac
BUDGET_S=${BUDGET_S:-570}
ROOT=$(pwd)
SITE=/tmp/site WORK=/tmp/r29 LOGS=/tmp/h200_noise_model OUT=${OUT:-/tmp/out}
WHL=$ROOT/.dev/whl BUNDLE=$ROOT/.dev/repo.bundle STATE=$ROOT/.dev/noise_state
export BRANCH=${BRANCH:-main}
rm -rf "$LOGS" && mkdir -p "$LOGS" "$OUT"
# shellcheck source=docs/data/h200_lib.sh
source docs/data/h200_lib.sh

trap 'h200_pack "h200_noise_model_$PART"' EXIT
h200_setup

TRIPLE=(--kernel triton_dot_scaled --config m128_n128_k128_w8_s3 --shape square_m08192_n08192_k08192)
gate() {  # gate NAME CAP BASE HEAD ARGS...: the CPU step (changes.json), then the gate, its --max-minutes from what is left
  local name=$1 cap=$2 base=$3 head=$4; shift 4
  step "$name.changes" 60 python3 -m ci.speed.changes --base "$base" --head "$head" --arch sm_90 \
    --json "$LOGS/$name.changes.json" > /dev/null 2> "$LOGS/$name.changes.log"
  # No round starts after this many minutes: a round started just before it still ends inside the step's cap.
  local room; room=$(( $(left) - 30 )); [ "$room" -gt "$cap" ] && room=$cap
  local minutes; minutes=$(python3 -c "print(max(0.2, round(($room - 35) / 60, 2)))")
  step "$name" "$cap" python3 -m ci.speed --base "$base" --head "$head" --changes "$LOGS/$name.changes.json" \
    --json "$LOGS/$name.json" --max-minutes "$minutes" "$@" > "$LOGS/$name.md" 2> "$LOGS/$name.log"
  grep -E "^### Speed gate|GPU runner|the run's guard|noisier than the noise model" "$LOGS/$name.md" | cut -c1-240 | head -4
}

if [ "$PART" = calibrate ]; then
  # The default selection (every benchmark that runs here: 30 on an H200), a restart every 2 rounds, at most 16 rounds,
  # none that would end after 8.5 minutes. The model file gains this run (the five recorded runs are in it already).
  step calibrate 545 python3 -m ci.speed.calibrate --noise ci/speed_noise_h200.json \
    --thresholds ci/speed_thresholds_h200.json --write --max-minutes 8.5 --json "$LOGS/calibrate.json" \
    > "$LOGS/calibrate.md" 2> "$LOGS/calibrate.log"
  cp ci/speed_noise_h200.json ci/speed_thresholds_h200.json "$LOGS/"
  mkdir -p "$STATE" && cp ci/speed_noise_h200.json ci/speed_thresholds_h200.json "$STATE/"
  grep -E "wrote|runner:|rounds, a restart" "$LOGS/calibrate.md" "$LOGS/calibrate.log" | cut -c1-240 | head -5
elif [ "$PART" = before ]; then  # the plan before issue 29: each benchmark's own rounds, the hand-set thresholds
  OLD=(--plan noise=off --thresholds docs/data/h200_noise_model/thresholds_before.json)
  gate before_one_pass 240 main exp/slow "${OLD[@]}"
  gate before_aa 260 main exp/neutral-1 "${OLD[@]}"
else
  MODEL=ci/speed_noise_h200.json THRESHOLDS=ci/speed_thresholds_h200.json
  if [ -f "$STATE/speed_noise_h200.json" ] && [ -f "$STATE/speed_thresholds_h200.json" ]; then
    MODEL=$STATE/speed_noise_h200.json THRESHOLDS=$STATE/speed_thresholds_h200.json
    echo "after: the model and thresholds the calibrate part wrote ($STATE)" | tee -a "$LOGS/runs.txt"
  else
    echo "after: NO calibrate output in $STATE: the committed model (fitted from docs/data) is used" | tee -a "$LOGS/runs.txt"
  fi
  cp "$MODEL" "$THRESHOLDS" "$LOGS/"
  NEW=(--noise "$MODEL" --thresholds "$THRESHOLDS")
  if [ "$PART" = verify ]; then  # ci.speed.engine.worker.FIRST_GPU_WARMUP_MS, as committed
    for i in $(seq 1 "${REPEATS:-1}"); do
      suffix=$([ "${REPEATS:-1}" = 1 ] || echo "_$i")
      gate "verify_slow_0p25$suffix" 75 main exp/slow-0p25 "${NEW[@]}" "${TRIPLE[@]}"
      gate "verify_aa_tracked$suffix" 60 main exp/neutral-1 "${NEW[@]}" "${TRIPLE[@]}"
    done
  elif [ "$PART" = committed ]; then  # the whole-PR bars again, with every change since the 'after' runs in
    gate committed_one_pass 120 main exp/slow "${NEW[@]}"
    for i in 1 2 3; do gate "committed_aa_$i" "${AA_CAP:-130}" main "exp/neutral-$i" "${NEW[@]}"; done
  elif [ "$PART" = committed_aa ]; then  # more A/A PRs as committed, under a cap nearer the workflow's (none)
    for i in 1 2 3; do gate "committed_aa_${i}b" "${AA_CAP:-200}" main "exp/neutral-$i" "${NEW[@]}"; done
    gate verify_slow_0p25 75 main exp/slow-0p25 "${NEW[@]}" "${TRIPLE[@]}"
    gate verify_aa_tracked 60 main exp/neutral-1 "${NEW[@]}" "${TRIPLE[@]}"
  elif [ "$PART" = warm ]; then  # the first timing of a lone benchmark in fresh workers was off by +-0.5% (repeat)
    for i in 1 2; do gate "warm_slow_0p25_$i" 110 main exp/slow-0p25 "${NEW[@]}" "${TRIPLE[@]}" --timing warmup_ms=2000; done
    gate warm_aa_tracked_1 110 main exp/neutral-1 "${NEW[@]}" "${TRIPLE[@]}" --timing warmup_ms=2000
  elif [ "$PART" = repeat ]; then
    for i in 1 2 3 4; do gate "repeat_slow_0p25_$i" 110 main exp/slow-0p25 "${NEW[@]}" "${TRIPLE[@]}"; done
    for i in 1 2; do gate "repeat_aa_tracked_$i" 110 main exp/neutral-1 "${NEW[@]}" "${TRIPLE[@]}"; done
  elif [ "$PART" = after ]; then
    gate after_one_pass 120 main exp/slow "${NEW[@]}"
    gate after_slow_0p25 150 main exp/slow-0p25 "${NEW[@]}" "${TRIPLE[@]}"
    gate after_aa_1 200 main exp/neutral-1 "${NEW[@]}"
  else
    gate after_aa_2 240 main exp/neutral-2 "${NEW[@]}"
    gate after_aa_3 240 main exp/neutral-3 "${NEW[@]}"
  fi
fi
