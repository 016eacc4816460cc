#!/usr/bin/env bash
# Variants of one config trained at an equal budget and compared: the engine behind
# scripts/compare_positions.sh (position schemes) and scripts/compare_recipe.sh (pretraining recipe).
#
# A variants file names the variants, one a line:  NAME | LABEL | KEY=VALUE KEY*=FACTOR ...
# (the config overrides that make the variant, KEY*=FACTOR scaling the config's value; '#' starts a
# comment). From the config, every chosen
# variant is trained for every seed and every budget (train.steps) with one tokenizer and one
# prepared copy of the data for all, validated during training, and its final checkpoint evaluated on
# the validation split at the given multiples of the training length (`roformer eval --seq-len`; a
# refusal, e.g. a learned position table beyond its rows, is recorded with roformer's message). Then
# scripts/compare_report.py writes
#   OUT/results.md    the markdown tables (and the verdict of --claim, if given)
#   OUT/results.json  every figure
#   OUT/curves.png    validation loss and MLM accuracy against the step, one line per run
#
# usage: scripts/compare_runs.sh --variants-file FILE -c CONFIG -o OUT [--seeds "1234 1235"]
#          [--variants "a b"] [--steps "600 2400"] [--lengths "1 2 4"] [--claim NAME] [--set KEY=VALUE ...]
# --variants: a subset, in the file's order by default all of them. --steps: budgets (train.steps);
# default the config's. --lengths: evaluation lengths as multiples of data.max_seq_len (default 1).
# --claim: a named verdict of compare_report.py (positions: rotary against absolute; recipe: each
# variant against the first). The corpus: BROWN_DIR/train.txt and BROWN_DIR/valid.txt when BROWN_DIR
# is set, else the config's data.train_files and data.valid_files (one file each; relative paths from
# the current directory, as `roformer train` reads them). Env: BUILD_DIR (default build),
# ROFORMER_PYTHON (the venv's python, for the report: matplotlib).
#
# Before each run it prints "run k of n" and, from the second on, the time so far and an estimate of
# the time left (the mean of the runs so far). Runs go to OUT/runs/VARIANT-sSEED
# (VARIANT-nSTEPS-sSEED with --steps) and resume (`--resume
# auto`): run the script again after an interruption and finished runs are only evaluated (a run
# that ended before its steps, e.g. stopped by a signal, which saves and exits 0, stops the script
# with the command to continue it: it is never evaluated as a result). OUT keeps
# its config (OUT/config.yaml); the script refuses an OUT prepared from another config instead of
# mixing results. Each run writes TensorBoard event files: `tensorboard --logdir OUT/runs` shows the
# curves side by side, and its HParams tab the variants' settings against their last eval/accuracy
# and eval/loss.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BUILD_DIR:-$ROOT/build}/roformer"
PY="${ROFORMER_PYTHON:-$HOME/.cache/roformer/venv-torch-2.11.0/bin/python}"
ME="${COMPARE_NAME:-compare_runs}"  # the wrapper's name in messages
CONFIG="" OUT="" VFILE="" SEEDS="1234" VARIANTS="" BUDGETS="" LENGTHS="1" CLAIM=""
SETS=()

die() { echo "$ME: $*" >&2; exit 1; }
trim() { local s="$1"; s="${s#"${s%%[![:space:]]*}"}"; printf '%s' "${s%"${s##*[![:space:]]}"}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    -c|--config) CONFIG="${2:?-c needs a file}"; shift 2 ;;
    -o|--out) OUT="${2:?-o needs a directory}"; shift 2 ;;
    --variants-file) VFILE="${2:?--variants-file needs a file}"; shift 2 ;;
    --seeds) SEEDS="${2:?--seeds needs a list}"; shift 2 ;;
    --variants) VARIANTS="${2:?--variants needs a list}"; shift 2 ;;
    --steps) BUDGETS="${2:?--steps needs a list}"; shift 2 ;;
    --lengths) LENGTHS="${2:?--lengths needs a list}"; shift 2 ;;
    --claim) CLAIM="${2:?--claim needs a name}"; shift 2 ;;
    --set) SETS+=(--set "${2:?--set needs KEY=VALUE}"); shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[ -n "$VFILE" ] || die "--variants-file is required"
[ -f "$VFILE" ] || die "variants file $VFILE does not exist"
[ -n "$CONFIG" ] || die "-c CONFIG is required"
[ -f "$CONFIG" ] || die "config $CONFIG does not exist"
[ -n "$OUT" ] || die "-o OUT is required"
[ -x "$BIN" ] || die "$BIN is not built; run make build (or set BUILD_DIR)"
"$PY" -c "import matplotlib" 2>/dev/null || die "$PY has no matplotlib (ROFORMER_PYTHON; scripts/setup.sh installs the venv)"

# The variants file: NAMES in file order, LABEL[name], OVERRIDES[name] (as --set arguments).
declare -A LABEL OVERRIDES
NAMES=()
while IFS= read -r line || [ -n "$line" ]; do
  line="${line%%#*}"
  [[ "$line" =~ [^[:space:]] ]] || continue
  IFS='|' read -r name label sets <<<"$line"
  name="$(trim "$name")" label="$(trim "$label")"
  [[ "$name" =~ ^[A-Za-z0-9._-]+$ ]] || die "$VFILE: variant name '$name' may hold letters, digits, '.', '_' and '-' only"
  [ -z "${LABEL[$name]+x}" ] || die "$VFILE: variant '$name' is defined twice"
  NAMES+=("$name")
  LABEL[$name]="${label:-$name}"
  read -ra items <<<"$sets"
  for kv in "${items[@]}"; do
    [[ "$kv" =~ ^[a-z_]+\.[a-z_0-9]+\*?=.+$ ]] || die "$VFILE: variant '$name': '$kv' is not KEY=VALUE or KEY*=FACTOR"
  done
  OVERRIDES[$name]="$sets"
done <"$VFILE"
[ ${#NAMES[@]} -gt 0 ] || die "$VFILE defines no variant"
[ -n "$VARIANTS" ] || VARIANTS="${NAMES[*]}"
for v in $VARIANTS; do
  [ -n "${LABEL[$v]+x}" ] || die "unknown variant '$v' ($(tr ' ' ',' <<<"${NAMES[*]}" | sed 's/,/, /g'))"
done
for s in $SEEDS; do [[ "$s" =~ ^[0-9]+$ ]] || die "seed '$s' is not a whole number"; done
for b in $BUDGETS; do [[ "$b" =~ ^[1-9][0-9]*$ ]] || die "budget '$b' (--steps) is not a positive whole number"; done
for m in $LENGTHS; do [[ "$m" =~ ^[1-9][0-9]*$ ]] || die "length multiple '$m' is not a positive whole number"; done

# The resolved config (file + --set), validated by roformer itself; a bad key stops here.
RESOLVED="$("$BIN" config print -c "$CONFIG" "${SETS[@]}")" || die "the config does not resolve (see above)"
key_of() {  # key_of TEXT SECTION NAME: a scalar of a resolved config (`roformer config print`)
  awk -v s="$2:" -v k="  $3:" '$0 == s {in_s = 1; next} /^[^ ]/ {in_s = 0} in_s && index($0, k) == 1 {
    sub(/^[^:]*: */, ""); gsub(/"/, ""); print; exit }' <<<"$1"
}
key() { key_of "$RESOLVED" "$@"; }  # key SECTION NAME: a scalar of the resolved config
files() {  # files NAME: the one file of data.NAME ([a] -> a)
  local v; v="$(key data "$1")"; v="${v#[}"; v="${v%]}"
  [[ "$v" != *,* && -n "$v" ]] || die "data.$1 must list one file for this script, got [$v]"
  echo "$v"
}
if [ -n "${BROWN_DIR:-}" ]; then
  TRAIN="$(realpath -m "$BROWN_DIR/train.txt")" VALID="$(realpath -m "$BROWN_DIR/valid.txt")"
else
  TRAIN="$(realpath -m "$(files train_files)")" VALID="$(realpath -m "$(files valid_files)")"
fi
[ -f "$TRAIN" ] || die "training text $TRAIN does not exist (set BROWN_DIR to the Brown corpus folder, or data.train_files)"
[ -f "$VALID" ] || die "validation text $VALID does not exist (set BROWN_DIR, or data.valid_files)"
SEQ="$(key data max_seq_len)"
# A variant's overrides as --set arguments; KEY*=FACTOR scales the resolved config's value (a learning
# rate sweep that holds for any config). An integer key stays an integer, exactly; a float keeps 15
# significant digits.
NUMBER='^[+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?$'
set_args() {
  local kv out="" k f base items
  read -ra items <<<"${OVERRIDES[$1]}"
  for kv in "${items[@]}"; do
    if [[ "$kv" == *"*="* ]]; then
      k="${kv%%\*=*}" f="${kv#*\*=}" base="$(key "${k%%.*}" "${k#*.}")"
      [ -n "$base" ] || die "variant '$1': $k is not a numeric key of the config (\`roformer config defaults\` lists the keys)"
      [[ "$base" =~ $NUMBER ]] || die "variant '$1': $k is '$base', not a number to scale"
      [[ "$f" =~ $NUMBER ]] || die "variant '$1': the factor of $k, '$f', is not a number (write 0.5, 2 or 1e-1)"
      if [[ "$base" =~ ^[+-]?[0-9]+$ ]]; then  # an integer key: the product must be whole, and exact
        kv="$(awk -v b="$base" -v f="$f" -v k="$k" 'BEGIN { p = b * f; if (p != int(p) || p > 2^53 || -p > 2^53) exit 1;
          printf "%s=%.0f", k, p }')" || die "variant '$1': $k = $base times $f is not a whole number, and $k takes one"
      else
        kv="$k=$(awk -v b="$base" -v f="$f" 'BEGIN { printf "%.15g", b * f }')"
      fi
    fi
    out+=" --set $kv"
  done
  echo "$out"
}
# Every variant's config, resolved and validated by roformer before the first run trains: a bad factor,
# key or value stops here, not after the variants before it have trained. STEPS_OF[variant]: its
# train.steps (a --steps budget overrides it), which each run must reach before it is evaluated.
declare -A STEPS_OF
for v in $VARIANTS; do
  args="$(set_args "$v")" || exit 1
  echo "== variant $v:${args:- (the config as it is)}"
  # shellcheck disable=SC2086
  resolved="$("$BIN" config print -c "$CONFIG" "${SETS[@]}" $args)" || die "variant '$v' (${args# }) does not resolve (see above)"
  STEPS_OF[$v]="$(key_of "$resolved" train steps)"
done

mkdir -p "$OUT"
if [ -f "$OUT/config.yaml" ]; then
  cmp -s "$OUT/config.yaml" <(echo "$RESOLVED") ||
    die "$OUT holds a comparison with another config ($OUT/config.yaml); pass a new -o, or remove $OUT to start over"
else
  [ -z "$(ls -A "$OUT")" ] || die "$OUT is not empty and holds no comparison; pass a new -o"
  echo "$RESOLVED" >"$OUT/config.yaml"
fi

# One tokenizer and one prepared copy of each split for every run: the variants differ only in
# their overrides.
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

# What the report needs to know of the variants: their order, labels and overrides, and the claim.
{
  printf '{"claim": "%s", "config": "%s", "sets": "%s", "variants": [' "$CLAIM" \
    "$(sed 's/\\/\\\\/g; s/"/\\"/g' <<<"$CONFIG")" "$(sed 's/\\/\\\\/g; s/"/\\"/g' <<<"${SETS[*]:-}")"
  sep=""
  for v in $VARIANTS; do
    printf '%s{"name": "%s", "label": "%s", "overrides": "%s"}' "$sep" "$v" \
      "$(sed 's/\\/\\\\/g; s/"/\\"/g' <<<"${LABEL[$v]}")" "$(set_args "$v" | sed 's/^ //; s/"/\\"/g')"
    sep=", "
  done
  printf ']}\n'
} >"$OUT/variants.json"

RESULTS="$OUT/evals.jsonl"
: >"$RESULTS"
# "run k of n" before each run and, after the first, the time left at the mean pace of the runs so far
# (runs finished earlier are only evaluated, so after an interruption the estimate starts low).
n_budgets=$(wc -w <<<"${BUDGETS:-config}") n_seeds=$(wc -w <<<"$SEEDS") n_variants=$(wc -w <<<"$VARIANTS")
RUNS=$((n_budgets * n_seeds * n_variants)) RUN_NO=0 START=$SECONDS
hms() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
for budget in ${BUDGETS:-config}; do
  budget_set=() tag="" steps_field=""
  if [ "$budget" != config ]; then
    budget_set=(--set "train.steps=$budget") tag="-n$budget" steps_field="\"steps\": $budget, "
  fi
  for seed in $SEEDS; do
    for v in $VARIANTS; do
      run="$OUT/runs/$v$tag-s$seed"
      RUN_NO=$((RUN_NO + 1)) took=$((SECONDS - START)) left=""
      [ "$RUN_NO" -gt 1 ] && left=", $(hms "$took") so far, about $(hms $((took * (RUNS - RUN_NO + 1) / (RUN_NO - 1)))) left"
      echo "== run $RUN_NO of $RUNS$left =="
      echo "== $v${tag:+, $budget steps}, seed $seed: training into $run =="
      # shellcheck disable=SC2046
      "$BIN" train -c "$CONFIG" "${SETS[@]}" $(set_args "$v") "${budget_set[@]}" --set "train.seed=$seed" \
        --set "tokenizer.model=$OUT/tokenizer/tokenizer.model" \
        --set "data.train_files=[$OUT/data/train]" --set "data.valid_files=[$OUT/data/valid]" \
        --set logging.progress=plain --run-dir "$run" --resume auto
      # A run stopped by a signal saves a checkpoint and exits 0 (docs/training.md): evaluate only a
      # run that reached the steps it was asked for, never a stopped one as if it were the result.
      want="${STEPS_OF[$v]}"; [ "$budget" = config ] || want="$budget"
      latest="$(cat "$run/checkpoints/latest" 2>/dev/null || true)"
      if [ "$latest" != "$(printf 'step_%08d' "$want")" ]; then
        at="no checkpoint"; [[ "$latest" =~ ^step_[0-9]+$ ]] && at="step $((10#${latest#step_}))"
        die "$run ended at $at of the $want steps asked (stopped by a signal?); run the same command again to continue it (--resume auto), or remove $run to train it anew"
      fi
      for mult in $LENGTHS; do
        len=$((SEQ * mult))
        echo "== $v${tag:+, $budget steps}, seed $seed: evaluating at $len tokens =="
        head="{\"variant\": \"$v\", \"seed\": $seed, ${steps_field}\"mult\": $mult, \"run\": \"$run\""
        if out="$("$BIN" eval --checkpoint "$run" --data "$OUT/data/valid" --seq-len "$len" --json 2>"$OUT/eval.err")"; then
          echo "$head, \"eval\": $(grep '^{' <<<"$out" | tail -n 1)}" >>"$RESULTS"
          cat "$OUT/eval.err" >&2
        else
          rc=$?
          [ "$rc" = 1 ] || { cat "$OUT/eval.err" >&2; die "roformer eval failed with exit $rc (not a refusal)"; }
          reason="$(grep -v '^\s*$' "$OUT/eval.err" | tail -n 1 | sed 's/^\[[^]]*\] \[error\] //; s/\\/\\\\/g; s/"/\\"/g')"
          echo "   refused: $reason"
          echo "$head, \"seq_len\": $len, \"refused\": \"$reason\"}" >>"$RESULTS"
        fi
      done
    done
  done
done
rm -f "$OUT/eval.err"

"$PY" "$ROOT/scripts/compare_report.py" "$OUT"
