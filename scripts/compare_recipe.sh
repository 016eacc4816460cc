#!/usr/bin/env bash
# Pretraining recipes compared on one corpus (issue: defaults that learn more per token). From one
# config (default configs/tiny.yaml), trains the variants of configs/compare-recipe.variants (masking
# rate, 80/10/10 against mask-only, the schedule, the peak learning rate, pre- against post-LN, and
# the combinations listed there) at equal budgets, every seed and every budget (--steps), all
# evaluated by one protocol (eval.mask_prob 0.15, 80/10/10, seed 0: the accuracies compare), and
# writes OUT/results.md (the table, each variant against the first seed by seed at every budget, and
# a verdict), OUT/results.json and OUT/curves.png.
#
# usage: scripts/compare_recipe.sh [-c CONFIG] [-o OUT] [--seeds "1234 1235"] [--steps "600 2400"]
#                                  [--variants "base mask30 ..."] [--variants-file FILE] [--set KEY=VALUE ...]
# Defaults: configs/tiny.yaml, runs/compare-recipe, seeds 1234 1235, budgets 600 and 2400 steps, all
# variants. The corpus: BROWN_DIR (default ../shared/data/brown beside the repository) unless -c is
# given (then the config's data.train_files / data.valid_files). Runs resume: run it again after an
# interruption. The machinery is scripts/compare_runs.sh's.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
case " $* " in
  *" -h "*|*" --help "*) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "${BASH_SOURCE[0]}"; exit 0 ;;
  *" -c "*|*" --config "*) ;;
  *) export BROWN_DIR="${BROWN_DIR:-$ROOT/../shared/data/brown}" ;;
esac
COMPARE_NAME=compare_recipe exec bash "$ROOT/scripts/compare_runs.sh" \
  --variants-file "$ROOT/configs/compare-recipe.variants" -c "$ROOT/configs/tiny.yaml" \
  -o "$ROOT/runs/compare-recipe" --seeds "1234 1235" --steps "600 2400" --claim recipe "$@"
