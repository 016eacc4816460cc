#!/usr/bin/env bash
# Thin wrapper: runs scripts/bench_vs_hf.py with the project's venv Python (ROFORMER_VENV, default
# ~/.cache/roformer/venv-torch-2.11.0). Example (CPU, tiny config, 2 threads each):
#   scripts/bench_vs_hf.sh -c configs/tiny.yaml --set train.device=cpu --set train.precision=fp32 --threads 2
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${ROFORMER_VENV:-$HOME/.cache/roformer/venv-torch-2.11.0}"
exec "$venv/bin/python" "$here/bench_vs_hf.py" "$@"
