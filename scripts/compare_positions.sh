#!/usr/bin/env bash
# Position schemes compared on one corpus (issue: RoPE's claims measured). From one config, trains
# the variants of configs/compare-positions.variants
#   rotary         model.position=rotary   (RoPE, the default)
#   absolute       model.position=absolute (BERT's learned position embeddings)
#   none           model.position=none     (no position information: the control)
#   rotary-linear  model.position=rotary, model.attention=linear (the paper's elu+1 linear attention)
#   disentangled   model.position=disentangled (DeBERTa's relative attention, 64 log buckets)
#   disentangled-emd  the same with DeBERTa's enhanced mask decoder (absolute positions for the head)
# at an equal budget (the config's steps x batch x sequence length, the same tokenizer, prepared
# data and seed for each), with validation during training, then evaluates every final checkpoint
# on the validation split at the training length and at 2x and 4x (`roformer eval --seq-len`; the
# learned absolute tables refuse lengths beyond their rows, which the table reports), and writes
#   OUT/results.md    the markdown table (and whether rotary's validation loss fell faster)
#   OUT/results.json  every figure
#   OUT/curves.png    validation loss and MLM accuracy against the step, one line per run
#
# usage: scripts/compare_positions.sh [-c CONFIG] [-o OUT] [--seeds "1234 1235"]
#                                     [--variants "rotary absolute none rotary-linear disentangled
#                                     disentangled-emd"] [--set KEY=VALUE ...]
# Defaults: configs/compare-positions.yaml, runs/compare-positions, seed 1234, all six variants.
# The corpus: BROWN_DIR/train.txt and BROWN_DIR/valid.txt when BROWN_DIR is set or no -c is given
# (default ../shared/data/brown beside the repository); otherwise the config's data.train_files and
# data.valid_files (one file each; relative paths from the current directory, as `roformer train`
# reads them). Env: BUILD_DIR (default build), ROFORMER_PYTHON (the venv's python, for the report:
# matplotlib). The machinery (resumable runs, refusals, the report) is scripts/compare_runs.sh's.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
case " $* " in
  *" -h "*|*" --help "*) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "${BASH_SOURCE[0]}"; exit 0 ;;
  *" -c "*|*" --config "*) ;;
  *) export BROWN_DIR="${BROWN_DIR:-$ROOT/../shared/data/brown}" ;;
esac
COMPARE_NAME=compare_positions exec bash "$ROOT/scripts/compare_runs.sh" \
  --variants-file "$ROOT/configs/compare-positions.variants" -c "$ROOT/configs/compare-positions.yaml" \
  -o "$ROOT/runs/compare-positions" --lengths "1 2 4" --claim positions "$@"
