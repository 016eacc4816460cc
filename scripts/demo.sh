#!/usr/bin/env bash
# `make demo`: the main job on the built-in defaults. Trains the tiny RoFormer of configs/tiny.yaml
# on the Brown corpus (tokenizer, prepared shards, training with periodic evaluation and
# checkpoints), then evaluates the final checkpoint and prints its validation MLM accuracy.
# Env: RUN_DIR (default runs/demo), BROWN_DIR (default ../shared/data/brown), EXTRA (more --set ...).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BUILD_DIR:-$ROOT/build}/roformer"
RUN_DIR="${RUN_DIR:-$ROOT/runs/demo}"
BROWN_DIR="${BROWN_DIR:-$ROOT/../shared/data/brown}"
cd "$ROOT"

if [ ! -f "$BROWN_DIR/train.txt" ]; then
  echo "demo: the Brown corpus is not at $BROWN_DIR (train.txt, valid.txt)." >&2
  echo "      Set BROWN_DIR to the folder holding it, or train on your own text:" >&2
  echo "      $BIN train -c configs/tiny.yaml --set data.train_files=[my.txt] --set data.valid_files=[my-valid.txt]" >&2
  exit 1
fi

# --resume auto: a first demo starts the run; a second one (after Ctrl-C, or when done) continues it
# instead of training a new run into the same directory (which `roformer train` refuses).
echo "== training configs/tiny.yaml into $RUN_DIR (Ctrl-C saves a checkpoint; make demo again continues) =="
"$BIN" train -c configs/tiny.yaml --run-dir "$RUN_DIR" --resume auto \
  --set "data.train_files=[$BROWN_DIR/train.txt]" --set "data.valid_files=[$BROWN_DIR/valid.txt]" ${EXTRA:-}

echo
echo "== evaluating the final checkpoint on the validation set =="
"$BIN" eval --checkpoint "$RUN_DIR/checkpoints/$(cat "$RUN_DIR/checkpoints/latest")" --data "$BROWN_DIR/valid.txt"
