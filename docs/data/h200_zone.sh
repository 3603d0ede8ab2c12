#!/usr/bin/env bash
# Issue 37 on the lent H200: version 6's zone rule (docs/SPEED_GATE.md, "Version 6: the zone"). Run from the
# repository root with .dev/ carried (.dev/whl: the wheels of docs/data/h200_noise_model.sh; .dev/repo.bundle:
# `git bundle create .dev/repo.bundle main`), two calls:
#   bash docs/data/h200_zone.sh tuning   # the tuning PR (exp/tuning: GROUP_M retuned for three configs) gated three times
#   bash docs/data/h200_zone.sh kept     # the one-pass PR, three speed-neutral A/A PRs, then the tuning PR's true
#                                        # effects: every benchmark for as many fixed rounds as the call has left
#   bash docs/data/h200_zone.sh final    # after the first two (the noisy n256 configs at 1%, a restart every 2 rounds):
#                                        # three A/A PRs as the workflow runs them (no time cap but the step's), then the
#                                        # tuning PR's true effects in fixed rounds, stopping itself before the call's end
#   bash docs/data/h200_zone.sh layout   # after a change that moves the gate's code but not its method (issue 40):
#                                        # the tuning PR (--all-verdicts), the one-pass PR and one A/A PR, once each
#   bash docs/data/h200_zone.sh cuts     # the same three, after the line cuts of issue 40's second stop
# Each gate run is preceded by its CPU step (python -m ci.speed.changes), as in pr-checks.yml; the gate's wall is the
# GPU job's. The runner's committed model and thresholds decide (ci/speed_noise_h200.json, ci/speed_thresholds_h200.json).
# Everything comes back as $OUT/h200_zone_<part>.tar.gz (each step's JSON record, Markdown, log).
set -u -o pipefail
export PYTHONUNBUFFERED=1
PART=${1:?a part: tuning or kept}
case $PART in tuning|kept|final|layout|cuts) ;; *) echo "unknown part: $PART (tuning, kept, final, layout or cuts)" >&2; exit 2 ;; esac
BUDGET_S=${BUDGET_S:-580}
ROOT=$(pwd)
SITE=/tmp/site WORK=/tmp/r37 LOGS=/tmp/h200_zone OUT=${OUT:-/tmp/out}
WHL=$ROOT/.dev/whl BUNDLE=$ROOT/.dev/repo.bundle
rm -rf "$LOGS" && mkdir -p "$LOGS" "$OUT"
# shellcheck source=docs/data/h200_lib.sh
source docs/data/h200_lib.sh

trap 'h200_pack "h200_zone_$PART"' EXIT
h200_setup

GATE_ARGS=(--noise ci/speed_noise_h200.json --thresholds ci/speed_thresholds_h200.json)

if [ "$PART" = tuning ]; then
  for i in 1 2 3; do gate "tuning_$i" 175 main exp/tuning --max-minutes 2.4 --all-verdicts; done
elif [ "$PART" = layout ] || [ "$PART" = cuts ]; then
  gate tuning 175 main exp/tuning --all-verdicts
  gate one_pass 90 main exp/slow
  gate aa 140 main exp/neutral-1
elif [ "$PART" = final ]; then
  for i in 1 2 3; do gate "final_aa_$i" 140 main "exp/neutral-$i"; done
  room=$(( $(left) - 30 ))
  minutes=$(python3 -c "print(max(0.2, round(($room - 75) / 60, 2)))")
  gate truth "$room" main exp/tuning --plan rounds=40 --all-verdicts --max-minutes "$minutes"
else
  gate one_pass 90 main exp/slow --max-minutes 1.2
  for i in 1 2 3; do gate "aa_$i" 120 main "exp/neutral-$i" --max-minutes 1.3; done
  # The true effects: every benchmark, fixed rounds (no early stop), as many as the call has left.
  room=$(( $(left) - 45 ))
  minutes=$(python3 -c "print(max(0.2, round(($room - 40) / 60, 2)))")
  gate truth "$room" main exp/tuning --plan rounds=40 --all-verdicts --max-minutes "$minutes"
fi
