#!/usr/bin/env bash
# TensorBoard from the project's venv (scripts/setup.sh installs it with `make demo`), so it needs
# nothing on PATH: scripts/tensorboard.sh --logdir runs/   (any tensorboard arguments)
set -euo pipefail
venv="$(bash "$(dirname "${BASH_SOURCE[0]}")/setup.sh" venv)"
if [ ! -x "$venv/bin/tensorboard" ]; then
  echo "error: $venv/bin/tensorboard not found: run \`make demo\` (or scripts/setup.sh demo) first, which installs it" >&2
  exit 1
fi
exec "$venv/bin/tensorboard" "$@"
