#!/usr/bin/env bash
# `roformer prepare` on one corpus in several formats and thread counts: prints a Markdown table of
# the stored size, MB of text per second, tokens per second and peak RSS (/usr/bin/time -v), one
# process per measurement (docs/benchmarks.md, "Prepare: input formats at 1 GB").
#
# usage: scripts/bench_prepare_formats.sh CORPUS_DIR [THREADS...]   (default threads: 1 2)
#   CORPUS_DIR as written by scripts/make_brown_corpus.py (brown.txt, brown.jsonl.zst, parquet/);
#   the tokenizer is CORPUS_DIR/tok/tokenizer.model, trained on Brown's train.txt (vocab 8000) when
#   absent. FORMATS="parquet jsonl.zst txt" picks the inputs; BUILD_DIR the roformer build (build).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CORPUS="${1:?usage: scripts/bench_prepare_formats.sh CORPUS_DIR [THREADS...]}"
shift
if [ $# -gt 0 ]; then THREADS=("$@"); else THREADS=(1 2); fi
BIN="${BUILD_DIR:-$ROOT/build}/roformer"
BROWN="${ROFORMER_SHARED_DIR:-$ROOT/../shared}/data/brown"
FORMATS="${FORMATS:-parquet jsonl.zst txt}"
[ -x "$BIN" ] || { echo "no roformer at $BIN: run make build" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "/usr/bin/time is missing: apt-get install time" >&2; exit 1; }

OUT="$(mktemp -d "${TMPDIR:-/tmp}/roformer-bench-prepare.XXXXXX")"
trap 'rm -rf "$OUT"' EXIT
TOK="$CORPUS/tok/tokenizer.model"
if [ ! -f "$TOK" ]; then
  "$BIN" tokenizer train --input "$BROWN/train.txt" --vocab-size 8000 --out "$CORPUS/tok" --no-progress \
    >"$OUT/log" 2>&1 || { cat "$OUT/log" >&2; exit 1; }
fi

echo "| input | stored | threads | MB/s of text | tokens/s | peak RSS |"
echo "|---|---|---|---|---|---|"
for format in $FORMATS; do
  case "$format" in
    parquet) input="$CORPUS/parquet"; label="Parquet, $(ls "$CORPUS/parquet" | wc -l) files (snappy)" ;;
    *) input="$CORPUS/brown.$format"; label="brown.$format" ;;
  esac
  stored_mb=$(du -sm --apparent-size "$input" | cut -f1)
  for t in "${THREADS[@]}"; do
    rm -rf "$OUT/prepared"
    /usr/bin/time -v "$BIN" prepare --tokenizer "$TOK" --input "$input" --out "$OUT/prepared" --threads "$t" \
      --no-progress >"$OUT/log" 2>&1 || { cat "$OUT/log" >&2; exit 1; }
    # "prepare: D documents, T tokens from F file(s), A MB (B MB of text) in S s (R MB/s of text, K M tokens/s, ..."
    line=$(grep "prepare: .* documents" "$OUT/log")
    rate=$(sed -E 's/.*\(([0-9.]+) MB\/s of text, ([0-9.]+)M tokens\/s.*/\1 \2/' <<<"$line")
    rss_kb=$(sed -nE 's/.*Maximum resident set size \(kbytes\): ([0-9]+)/\1/p' "$OUT/log")
    read -r mbs mtoks <<<"$rate"
    echo "| $label | ${stored_mb} MB | $t | $mbs | ${mtoks}M | $((rss_kb / 1024)) MB |"
  done
done
