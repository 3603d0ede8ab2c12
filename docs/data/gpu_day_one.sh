#!/usr/bin/env bash
# Issue 46 on the lent NVIDIA GPU (an H100 most often: a card no committed noise model knows): a runner's first day.
# Run from the repository root with .dev/ carried (.dev/whl: the wheels of shared/H200.md's H100 list; .dev/repo.bundle:
# a bundle of main), three calls on one warm machine, in this order:
#   bash docs/data/gpu_day_one.sh calibrate  # from no model: python -m ci.speed.calibrate --write over the default
#                                            # selection into a new file (--max-minutes $CAL_MINUTES, default 8)
#   bash docs/data/gpu_day_one.sh model      # with that model: three A/A PRs
#   bash docs/data/gpu_day_one.sh rest       # with it: the one-pass PR and the mixed tuning PR (--all-verdicts)
#   bash docs/data/gpu_day_one.sh none       # with no model (--plan noise=off): an A/A PR and the one-pass PR
#   bash docs/data/gpu_day_one.sh each       # when the lease has one call left: one A/A and the one-pass PR with the
#                                            # model, then both with none
# or, when the lease has two calls left after the calibration (each under ~480 s):
#   bash docs/data/gpu_day_one.sh model_pass # with the model: three A/A PRs and the one-pass PR
#   bash docs/data/gpu_day_one.sh mixed_none # with it: the mixed tuning PR; with none: an A/A PR and the one-pass PR
# Every gate runs under its own --max-minutes (no round starts after it; undecided benchmarks are then inconclusive),
# with an outer timeout only as a safety net, a round (~40-60 s) past it: the fourth H100 lease's one-pass PR with no
# model met its 120 s cap in a round begun before its 102 s budget ended (the gate keeps its complete rounds on SIGTERM,
# to it or its whole process group, since then).
# The model written by the first call is kept at /tmp/day_one/model.json on the machine and comes back in the
# tarball; a later call on a fresh machine reads .dev/day_one_model.json instead (copy it there first).
# Thresholds: by default what the runner profile gives this card (an unknown runner: ci/speed_thresholds.json, the
# Triton GEMMs at 0.7%), as a new runner's first day meets them; THRESHOLDS=FILE gives a file explicitly (the first
# H100 leases gave ci/speed_thresholds_h200.json: the tracked config 0.5%, the n256 configs 1%).
# Each gate run is preceded by its CPU step (python -m ci.speed.changes), as in pr-checks.yml; the gate's wall is the
# GPU job's. Everything comes back as $OUT/day_one_<part>.tar.gz (each step's JSON record, Markdown, log).
set -u -o pipefail
export PYTHONUNBUFFERED=1
PART=${1:?a part: calibrate, model, rest, none or each}
case $PART in calibrate|model|rest|none|each|model_pass|mixed_none) ;; *) echo "unknown part: $PART (calibrate, model, rest, none, each, model_pass or mixed_none)" >&2; exit 2 ;; esac
BUDGET_S=${BUDGET_S:-585}
ROOT=$(pwd)
SITE=/tmp/site WORK=/tmp/r46 LOGS=/tmp/day_one_$PART OUT=${OUT:-/tmp/out} KEEP=/tmp/day_one
WHL=$ROOT/.dev/whl BUNDLE=$ROOT/.dev/repo.bundle
rm -rf "$LOGS" && mkdir -p "$LOGS" "$OUT" "$KEEP"
# shellcheck source=docs/data/h200_lib.sh
source docs/data/h200_lib.sh

trap 'h200_pack "day_one_$PART"' EXIT
if [ -d "$WORK/.git" ] && [ -d "$SITE/git" ]; then  # the same warm machine: the clone and the wheels are there
  cd "$WORK" && git checkout -q main && export PYTHONPATH=$WORK:$SITE
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu \
    --format=csv | tee "$LOGS/gpu_before.csv"
else
  h200_setup
fi
python3 -c "import torch; print(torch.__version__, torch.cuda.get_device_name())" | tee "$LOGS/device.txt"

GATE_ARGS=()
[ -n "${THRESHOLDS:-}" ] && GATE_ARGS=(--thresholds "$THRESHOLDS")

if [ "$PART" = calibrate ]; then
  # From no model: a new file (on an H200 its profile's committed model would otherwise be refit with its runs).
  rm -f "$KEEP/model.json"
  step calibrate 560 python3 -m ci.speed.calibrate --write --max-minutes "${CAL_MINUTES:-8}" --noise "$KEEP/model.json" \
    "${GATE_ARGS[@]}" --json "$LOGS/calibration.json" > "$LOGS/calibration.md" 2> "$LOGS/calibration.log"
  if [ -f "$KEEP/model.json" ]; then cp "$KEEP/model.json" "$LOGS/model.json"; fi
  echo "model written: $([ -f "$KEEP/model.json" ] && echo yes || echo no)" | tee -a "$LOGS/runs.txt"
  exit 0
fi

if [ "$PART" != none ]; then  # the no-model part reads none
  MODEL_FILE=$KEEP/model.json
  [ -f "$MODEL_FILE" ] || MODEL_FILE=$ROOT/.dev/day_one_model.json
  [ -f "$MODEL_FILE" ] || { echo "no model from the calibrate part" | tee -a "$LOGS/runs.txt"; exit 2; }
  cp "$MODEL_FILE" "$LOGS/model_used.json"
  WITH=(--noise "$MODEL_FILE")
fi

if [ "$PART" = model ]; then
  for i in 1 2 3; do gate "aa_model_$i" 180 main "exp/neutral-$i" "${WITH[@]}" --max-minutes 1.6; done
elif [ "$PART" = rest ]; then
  gate one_pass_model 130 main exp/slow "${WITH[@]}" --max-minutes 1.2
  gate mixed_model 230 main exp/mixed "${WITH[@]}" --all-verdicts --max-minutes 2.9
elif [ "$PART" = model_pass ]; then
  for i in 1 2 3; do gate "aa_model_$i" 165 main "exp/neutral-$i" "${WITH[@]}" --max-minutes 1.7; done
  gate one_pass_model 140 main exp/slow "${WITH[@]}" --max-minutes 1.3
elif [ "$PART" = mixed_none ]; then
  gate mixed_model 240 main exp/mixed "${WITH[@]}" --all-verdicts --max-minutes 3.0
  gate aa_none 215 main exp/neutral-1 --plan noise=off --max-minutes 2.6
  gate one_pass_none 165 main exp/slow --plan noise=off --max-minutes 1.7
elif [ "$PART" = each ]; then  # each under its bar's time and a little more, to see where it ends
  gate aa_model_1 130 main exp/neutral-1 "${WITH[@]}" --max-minutes 1.8
  gate one_pass_model 110 main exp/slow "${WITH[@]}" --max-minutes 1.4
  gate aa_none 190 main exp/neutral-2 --plan noise=off --max-minutes 2.7
  gate one_pass_none 130 main exp/slow --plan noise=off --max-minutes 1.8
else  # each under its bar's time (A/A 150 s, one-pass 100 s) and a little more, to see where it ends
  gate aa_none 230 main exp/neutral-1 --plan noise=off --max-minutes "${AA_MINUTES:-3.0}"
  gate one_pass_none 150 main exp/slow --plan noise=off --max-minutes "${ONE_PASS_MINUTES:-2.0}"
fi
