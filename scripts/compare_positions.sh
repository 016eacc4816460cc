#!/usr/bin/env bash
# Position schemes compared on one corpus (issue: RoPE's claims measured). From one config, trains
# the variants
#   rotary         model.position=rotary   (RoPE, the default)
#   absolute       model.position=absolute (BERT's learned position embeddings)
#   none           model.position=none     (no position information: the control)
#   rotary-linear  model.position=rotary, model.attention=linear (the paper's elu+1 linear attention)
# at an equal budget (the config's steps x batch x sequence length, the same tokenizer, prepared
# data and seed for each), with validation during training, then evaluates every final checkpoint
# on the validation split at the training length and at 2x and 4x (`roformer eval --seq-len`; the
# learned absolute table refuses lengths beyond its rows, which the table reports), and writes
#   OUT/results.md    the markdown table (and whether rotary's validation loss fell faster)
#   OUT/results.json  every figure
#   OUT/curves.png    validation loss and MLM accuracy against the step, one line per run
#
# usage: scripts/compare_positions.sh [-c CONFIG] [-o OUT] [--seeds "1234 1235"]
#                                     [--variants "rotary absolute none rotary-linear"] [--set KEY=VALUE ...]
# Defaults: configs/compare-positions.yaml, runs/compare-positions, seed 1234, all four variants.
# The corpus: BROWN_DIR/train.txt and BROWN_DIR/valid.txt when BROWN_DIR is set or no -c is given
# (default ../shared/data/brown beside the repository); otherwise the config's data.train_files and
# data.valid_files (one file each; relative paths from the current directory, as `roformer train`
# reads them). Env: BUILD_DIR (default build), ROFORMER_PYTHON (the venv's python, for the report:
# matplotlib).
#
# Runs go to OUT/runs/VARIANT-sSEED and resume (`--resume auto`): run the script again after an
# interruption and finished runs are only evaluated. OUT keeps its config (OUT/config.yaml); the
# script refuses an OUT prepared from another config instead of mixing results. Each run writes
# TensorBoard event files: `tensorboard --logdir OUT/runs` shows the curves side by side, and its
# HParams tab the variants' settings against their last eval/accuracy and eval/loss.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BUILD_DIR:-$ROOT/build}/roformer"
PY="${ROFORMER_PYTHON:-$HOME/.cache/roformer/venv-torch-2.11.0/bin/python}"
CONFIG="$ROOT/configs/compare-positions.yaml"
CONFIG_GIVEN=0
OUT="$ROOT/runs/compare-positions"
SEEDS="1234"
VARIANTS="rotary absolute none rotary-linear"
SETS=()

die() { echo "compare_positions: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
  case "$1" in
    -c|--config) CONFIG="${2:?-c needs a file}"; CONFIG_GIVEN=1; shift 2 ;;
    -o|--out) OUT="${2:?-o needs a directory}"; shift 2 ;;
    --seeds) SEEDS="${2:?--seeds needs a list}"; shift 2 ;;
    --variants) VARIANTS="${2:?--variants needs a list}"; shift 2 ;;
    --set) SETS+=(--set "${2:?--set needs KEY=VALUE}"); shift 2 ;;
    -h|--help) sed -n '2,29p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[ -x "$BIN" ] || die "$BIN is not built; run make build (or set BUILD_DIR)"
[ -f "$CONFIG" ] || die "config $CONFIG does not exist"
"$PY" -c "import matplotlib" 2>/dev/null || die "$PY has no matplotlib (ROFORMER_PYTHON; scripts/setup.sh installs the venv)"
# The config overrides of each variant; nothing for an unknown name.
variant_sets() {
  case "$1" in
    rotary) echo "--set model.position=rotary --set model.attention=softmax" ;;
    absolute) echo "--set model.position=absolute --set model.attention=softmax" ;;
    none) echo "--set model.position=none --set model.attention=softmax" ;;
    rotary-linear) echo "--set model.position=rotary --set model.attention=linear" ;;
  esac
}
for v in $VARIANTS; do
  [ -n "$(variant_sets "$v")" ] || die "unknown variant '$v' (rotary, absolute, none, rotary-linear)"
done
for s in $SEEDS; do [[ "$s" =~ ^[0-9]+$ ]] || die "seed '$s' is not a whole number"; done

# The resolved config (file + --set), validated by roformer itself; a bad key stops here.
RESOLVED="$("$BIN" config print -c "$CONFIG" "${SETS[@]}")" || die "the config does not resolve (see above)"
key() {  # key SECTION NAME: a scalar of the resolved config
  awk -v s="$1:" -v k="  $2:" '$0 == s {in_s = 1; next} /^[^ ]/ {in_s = 0} in_s && index($0, k) == 1 {
    sub(/^[^:]*: */, ""); gsub(/"/, ""); print; exit }' <<<"$RESOLVED"
}
files() {  # files NAME: the one file of data.NAME ([a] -> a)
  local v; v="$(key data "$1")"; v="${v#[}"; v="${v%]}"
  [[ "$v" != *,* && -n "$v" ]] || die "data.$1 must list one file for this script, got [$v]"
  echo "$v"
}
[ "$CONFIG_GIVEN" = 1 ] || BROWN_DIR="${BROWN_DIR:-$ROOT/../shared/data/brown}"
if [ -n "${BROWN_DIR:-}" ]; then
  TRAIN="$(realpath -m "$BROWN_DIR/train.txt")" VALID="$(realpath -m "$BROWN_DIR/valid.txt")"
else
  TRAIN="$(realpath -m "$(files train_files)")" VALID="$(realpath -m "$(files valid_files)")"
fi
[ -f "$TRAIN" ] || die "training text $TRAIN does not exist (set BROWN_DIR to the Brown corpus folder, or data.train_files)"
[ -f "$VALID" ] || die "validation text $VALID does not exist (set BROWN_DIR, or data.valid_files)"
SEQ="$(key data max_seq_len)"

mkdir -p "$OUT"
if [ -f "$OUT/config.yaml" ]; then
  cmp -s "$OUT/config.yaml" <(echo "$RESOLVED") ||
    die "$OUT holds a comparison with another config ($OUT/config.yaml); pass a new -o, or remove $OUT to start over"
else
  [ -z "$(ls -A "$OUT")" ] || die "$OUT is not empty and holds no comparison; pass a new -o"
  echo "$RESOLVED" >"$OUT/config.yaml"
fi

# One tokenizer and one prepared copy of each split for every run: the variants differ in the
# position scheme (and attention) only.
if [ ! -f "$OUT/tokenizer/tokenizer.model" ]; then
  echo "== tokenizer ($(key tokenizer vocab_size) pieces) on $TRAIN =="
  "$BIN" tokenizer train --input "$TRAIN" --vocab-size "$(key tokenizer vocab_size)" \
    --model-type "$(key tokenizer model_type)" --seed "$(key tokenizer seed)" --out "$OUT/tokenizer"
fi
for split in train valid; do
  src="$TRAIN"; [ "$split" = valid ] && src="$VALID"
  if [ ! -f "$OUT/data/$split/meta.json" ]; then
    echo "== preparing $split: $src =="
    "$BIN" prepare --tokenizer "$OUT/tokenizer/tokenizer.model" --input "$src" --out "$OUT/data/$split" --no-progress
  fi
done

RESULTS="$OUT/evals.jsonl"
: >"$RESULTS"
for seed in $SEEDS; do
  for v in $VARIANTS; do
    run="$OUT/runs/$v-s$seed"
    echo "== $v, seed $seed: training into $run =="
    # shellcheck disable=SC2046
    "$BIN" train -c "$CONFIG" "${SETS[@]}" $(variant_sets "$v") --set "train.seed=$seed" \
      --set "tokenizer.model=$OUT/tokenizer/tokenizer.model" \
      --set "data.train_files=[$OUT/data/train]" --set "data.valid_files=[$OUT/data/valid]" \
      --set logging.progress=plain --run-dir "$run" --resume auto
    for mult in 1 2 4; do
      len=$((SEQ * mult))
      echo "== $v, seed $seed: evaluating at $len tokens =="
      if out="$("$BIN" eval --checkpoint "$run" --data "$OUT/data/valid" --seq-len "$len" --json 2>"$OUT/eval.err")"; then
        line="$(grep '^{' <<<"$out" | tail -n 1)"
        echo "{\"variant\": \"$v\", \"seed\": $seed, \"mult\": $mult, \"run\": \"$run\", \"eval\": $line}" >>"$RESULTS"
        cat "$OUT/eval.err" >&2
      else
        rc=$?
        [ "$rc" = 1 ] || { cat "$OUT/eval.err" >&2; die "roformer eval failed with exit $rc (not a refusal)"; }
        reason="$(grep -v '^\s*$' "$OUT/eval.err" | tail -n 1 | sed 's/^\[[^]]*\] \[error\] //; s/\\/\\\\/g; s/"/\\"/g')"
        echo "   refused: $reason"
        echo "{\"variant\": \"$v\", \"seed\": $seed, \"mult\": $mult, \"run\": \"$run\", \"seq_len\": $len, \"refused\": \"$reason\"}" >>"$RESULTS"
      fi
    done
  done
done
rm -f "$OUT/eval.err"

"$PY" "$ROOT/scripts/compare_positions_report.py" "$OUT"
