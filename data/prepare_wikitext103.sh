#!/usr/bin/env bash
# Downloads WikiText-103 (raw), converts it to one paragraph a line with a blank line between
# articles, trains a tokenizer on the training split and prepares every split.
#
#   data/prepare_wikitext103.sh OUT_DIR [VOCAB_SIZE]
#
# Needs internet access (about 190 MB zipped, 540 MB unpacked), curl or wget, and unzip. Writes
#   OUT_DIR/raw/wikitext-103-raw/wiki.{train,valid,test}.raw   (the download, unpacked)
#   OUT_DIR/text/{train,valid,test}.txt                        (converted text)
#   OUT_DIR/tokenizer/tokenizer.model                          (vocabulary 32000 by default)
#   OUT_DIR/{train,valid,test}/                                (prepared shards, see docs/data.md)
# Set WIKITEXT103_URL to use a mirror. The roformer binary is build/roformer unless ROFORMER_BIN
# says otherwise. `data/prepare_wikitext103.sh --convert IN OUT` only converts one .raw file.
set -euo pipefail

# WikiText markup: " = Title = " starts an article, " = = Section = = " a section (dropped), and
# numbers/hyphens are split as " @-@ ", " @,@ ", " @.@ ".
convert() {
  awk '
    /^ = [^=].* = $/ { if (started) print ""; started = 1; next }   # article title: new document
    /^ *= = / { next }                                               # section headings
    /^ *$/ { next }                                                  # blank lines inside articles
    {
      line = $0
      gsub(/ @-@ /, "-", line); gsub(/ @,@ /, ",", line); gsub(/ @\.@ /, ".", line)
      sub(/^ +/, "", line); sub(/ +$/, "", line)
      if (line != "") { print line; started = 1 }
    }' "$1" > "$2.tmp"
  mv "$2.tmp" "$2"
}

if [[ "${1:-}" == "--convert" ]]; then
  convert "${2:?usage: --convert IN OUT}" "${3:?usage: --convert IN OUT}"
  exit 0
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${ROFORMER_BIN:-$root/build/roformer}"
out="${1:?usage: data/prepare_wikitext103.sh OUT_DIR [VOCAB_SIZE]}"
vocab="${2:-32000}"
url="${WIKITEXT103_URL:-https://s3.amazonaws.com/research.metamind.io/wikitext/wikitext-103-raw-v1.zip}"

if [[ ! -x "$bin" ]]; then
  echo "error: $bin not found; build first (make, or cmake --build build) or set ROFORMER_BIN" >&2
  exit 1
fi
mkdir -p "$out/raw" "$out/text"
zip="$out/raw/wikitext-103-raw-v1.zip"
if [[ ! -f "$zip" ]]; then
  echo "downloading $url"
  if command -v curl > /dev/null; then
    curl -fL --retry 3 -o "$zip.part" "$url"
  else
    wget -O "$zip.part" "$url"
  fi
  mv "$zip.part" "$zip"
fi
[[ -f "$out/raw/wikitext-103-raw/wiki.train.raw" ]] || unzip -o -q "$zip" -d "$out/raw"

for split in train valid test; do
  convert "$out/raw/wikitext-103-raw/wiki.$split.raw" "$out/text/$split.txt"
done
# WikiText-103's training split is ~540 MB: the tokenizer samples 2M paragraphs of it.
"$bin" tokenizer train --input "$out/text/train.txt" --vocab-size "$vocab" --out "$out/tokenizer"
for split in train valid test; do
  "$bin" prepare --tokenizer "$out/tokenizer/tokenizer.model" --input "$out/text/$split.txt" --out "$out/$split"
done
echo "WikiText-103 prepared in $out (tokenizer: $out/tokenizer/tokenizer.model)"
