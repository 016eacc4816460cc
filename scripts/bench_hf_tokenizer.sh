#!/usr/bin/env bash
# `roformer prepare` with a byte-level BPE tokenizer.json beside Hugging Face `tokenizers` encoding
# the same text on the same cores (encode_batch, RAYON_NUM_THREADS), in one run: prints a Markdown
# table of tokens per second, MB of text per second and peak RSS (/usr/bin/time -v) of each, and of
# prepare on the text repeated REPEAT times (memory flat in the file size). docs/benchmarks.md,
# "Prepare with a tokenizer.json".
#
# usage: scripts/bench_hf_tokenizer.sh [THREADS] [REPEAT]   (default: all cores; 4)
#   The tokenizer: RoBERTa's layout (ByteLevel with GPT-2's pattern, BPE, <mask> lstrip), 32000
#   tokens trained by the venv's `tokenizers` on Brown's train.txt, into a temporary folder; the
#   text: Brown's train.txt (ROFORMER_SHARED_DIR/data/brown). BUILD_DIR the roformer build (build).
#   Both sides read the file and encode each line (a paragraph) without special tokens; tokenizers'
#   time excludes reading the file and includes nothing but encode_batch.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
THREADS="${1:-$(nproc)}"
REPEAT="${2:-4}"
BIN="${BUILD_DIR:-$ROOT/build}/roformer"
BROWN="${ROFORMER_SHARED_DIR:-$ROOT/../shared}/data/brown"
PY="$(bash "$ROOT/scripts/setup.sh" venv)/bin/python"
[ -x "$BIN" ] || { echo "no roformer at $BIN: run make build" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "/usr/bin/time is missing: apt-get install time" >&2; exit 1; }
[ -f "$BROWN/train.txt" ] || { echo "no Brown corpus at $BROWN (set ROFORMER_SHARED_DIR)" >&2; exit 1; }

OUT="$(mktemp -d "${TMPDIR:-/tmp}/roformer-bench-hf-tokenizer.XXXXXX")"
trap 'rm -rf "$OUT"' EXIT
TEXT="$BROWN/train.txt"
for _ in $(seq "$REPEAT"); do cat "$TEXT"; done >"$OUT/repeated.txt"

"$PY" - "$TEXT" "$OUT/tok" "$THREADS" >"$OUT/hf.txt" <<'EOF'
import os, sys, time
os.environ["RAYON_NUM_THREADS"] = sys.argv[3]
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
text_path, out_dir = sys.argv[1], sys.argv[2]
with open(text_path, encoding="utf-8") as f:
    lines = [line.rstrip("\n") for line in f if line.strip()]
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
specials = ["<s>", "<pad>", "</s>", "<unk>", AddedToken("<mask>", lstrip=True, special=True, normalized=False)]
tok.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=32000, special_tokens=specials, show_progress=False,
                                                   initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
os.makedirs(out_dir, exist_ok=True)
tok.save(os.path.join(out_dir, "tokenizer.json"))
tok = Tokenizer.from_file(os.path.join(out_dir, "tokenizer.json"))  # as read from the file, no cache
start = time.perf_counter()
encodings = tok.encode_batch_fast(lines, add_special_tokens=False)
seconds = time.perf_counter() - start
tokens = sum(len(e.ids) for e in encodings)
text_mb = sum(len(line.encode("utf-8")) + 1 for line in lines) / 1e6
print(f"{tokens} {seconds} {text_mb}")
EOF
read -r hf_tokens hf_seconds hf_mb <"$OUT/hf.txt"

# prepare on the text, then on it repeated: "prepare: D documents, T tokens ... (R MB/s of text, K M tokens/s, ..."
measure() {
  rm -rf "$OUT/prepared"
  /usr/bin/time -v "$BIN" prepare --tokenizer "$OUT/tok" --input "$1" --out "$OUT/prepared" --threads "$THREADS" \
    --no-progress >"$OUT/log" 2>&1 || { cat "$OUT/log" >&2; exit 1; }
  local line rss_kb
  line=$(grep "prepare: .* documents" "$OUT/log")
  rss_kb=$(sed -nE 's/.*Maximum resident set size \(kbytes\): ([0-9]+)/\1/p' "$OUT/log")
  sed -E "s/.* ([0-9]+) tokens from .*\(([0-9.]+) MB of text\) in ([0-9.]+)s \(([0-9.]+) MB\/s of text, ([0-9.]+)M tokens\/s.*/\1 \2 \3 \4 \5 $((rss_kb / 1024))/" <<<"$line"
}
read -r tokens text_mb seconds mbs mtoks rss <<<"$(measure "$TEXT")"
read -r tokens4 text_mb4 seconds4 mbs4 mtoks4 rss4 <<<"$(measure "$OUT/repeated.txt")"
[ "$tokens" = "$hf_tokens" ] || echo "warning: prepare wrote $tokens tokens, tokenizers encoded $hf_tokens" >&2

awk -v t="$hf_tokens" -v s="$hf_seconds" -v mb="$hf_mb" -v th="$THREADS" 'BEGIN {
  printf "| encoder | threads | text | tokens | seconds | MB/s of text | tokens/s | peak RSS |\n|---|---|---|---|---|---|---|---|\n"
  printf "| tokenizers %s encode_batch_fast | %s | %.1f MB | %d | %.2f | %.1f | %.2fM | (in memory) |\n", "'"$("$PY" -c 'import tokenizers; print(tokenizers.__version__)')"'", th, mb, t, s, mb / s, t / s / 1e6 }'
echo "| roformer prepare | $THREADS | $text_mb MB | $tokens | $seconds | $mbs | ${mtoks}M | $rss MB |"
echo "| roformer prepare, text x$REPEAT | $THREADS | $text_mb4 MB | $tokens4 | $seconds4 | $mbs4 | ${mtoks4}M | $rss4 MB |"
