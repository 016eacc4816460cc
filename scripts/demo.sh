#!/usr/bin/env bash
# `make demo`: the main job on the built-in defaults, as far as the features that exist go.
# Uses configs/tiny.yaml and the Brown corpus from ../shared/data/brown (or ROFORMER_BROWN_DIR).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BUILD_DIR:-$ROOT/build}/roformer"
RUN_DIR="${RUN_DIR:-$ROOT/runs/demo}"
cd "$ROOT"

echo "== resolved config (configs/tiny.yaml) =="
"$BIN" config print -c configs/tiny.yaml --set train.run_dir="$RUN_DIR"
