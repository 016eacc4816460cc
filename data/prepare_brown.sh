#!/usr/bin/env bash
# Trains a tokenizer on the Brown corpus and prepares its splits for training.
#
#   data/prepare_brown.sh OUT_DIR [VOCAB_SIZE]
#
# Reads ../shared/data/brown/{train,valid,test}.txt next to the checkout (override the folder
# holding data/brown with ROFORMER_SHARED_DIR) and writes
#   OUT_DIR/tokenizer/tokenizer.model   (trained on train.txt; vocabulary 8000 by default)
#   OUT_DIR/{train,valid,test}/         (prepared shards, see docs/data.md)
# The roformer binary is build/roformer unless ROFORMER_BIN says otherwise.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
shared="${ROFORMER_SHARED_DIR:-$root/../shared}"
brown="$shared/data/brown"
bin="${ROFORMER_BIN:-$root/build/roformer}"
out="${1:?usage: data/prepare_brown.sh OUT_DIR [VOCAB_SIZE]}"
vocab="${2:-8000}"

if [[ ! -f "$brown/train.txt" ]]; then
  echo "error: Brown corpus not found at $brown (set ROFORMER_SHARED_DIR to the folder holding data/brown)" >&2
  exit 1
fi
if [[ ! -x "$bin" ]]; then
  echo "error: $bin not found; build first (make, or cmake --build build) or set ROFORMER_BIN" >&2
  exit 1
fi

mkdir -p "$out"
"$bin" tokenizer train --input "$brown/train.txt" --vocab-size "$vocab" --out "$out/tokenizer"
for split in train valid test; do
  "$bin" prepare --tokenizer "$out/tokenizer/tokenizer.model" --input "$brown/$split.txt" --out "$out/$split"
done
echo "Brown prepared in $out (tokenizer: $out/tokenizer/tokenizer.model)"
