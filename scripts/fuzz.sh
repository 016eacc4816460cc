#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/) with clang into a separate build directory and runs
# each for a given time, one after the other, then prints executions, corpus size and crashes per
# target. Not part of `make test`: fuzzing needs clang and its libFuzzer runtime, which the default
# build does not, so this script installs them (Debian: clang, libclang-rt-14-dev) when missing.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]      (default: 60 s, every target)
#
# Targets: fuzz_safetensors fuzz_config fuzz_text_reader fuzz_prepared_corpus fuzz_manifest
# fuzz_trainer_state. Environment: FUZZ_BUILD_DIR (default build-fuzz), ROFORMER_VENV (the venv of
# scripts/setup.sh, for LibTorch). A crash stops that target; its input is kept under
# $FUZZ_BUILD_DIR/artifacts/TARGET/ and replays with `$FUZZ_BUILD_DIR/tests/fuzz/TARGET FILE`.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECONDS_PER_TARGET="${1:-60}"
shift || true
ALL_TARGETS="fuzz_safetensors fuzz_config fuzz_text_reader fuzz_prepared_corpus fuzz_manifest fuzz_trainer_state"
TARGETS="${*:-$ALL_TARGETS}"
BUILD="${FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
VENV="${ROFORMER_VENV:-$HOME/.cache/roformer/venv-torch-2.11.0}"
say() { printf '\033[1m[fuzz]\033[0m %s\n' "$*"; }

# ---- clang and libFuzzer ------------------------------------------------------------------------
libfuzzer_works() {
  local t
  t="$(mktemp -d)"
  echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' > "$t/f.cpp"
  clang++ -fsanitize=fuzzer "$t/f.cpp" -o "$t/f" >/dev/null 2>&1
  local ok=$?
  rm -rf "$t"
  return $ok
}
if ! command -v clang++ >/dev/null || ! libfuzzer_works; then
  say "installing clang and the libFuzzer runtime (Debian packages clang, libclang-rt-14-dev): fuzzing needs them, the default build does not"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends clang libclang-rt-14-dev >/dev/null
  libfuzzer_works || { echo "clang++ -fsanitize=fuzzer still fails; install libFuzzer for your clang" >&2; exit 1; }
fi

# ---- Build ----------------------------------------------------------------------------------------
TORCH_PREFIX="$("$VENV/bin/python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')" || {
  echo "no LibTorch: run scripts/setup.sh (make setup) first" >&2; exit 1; }
if [ ! -f "$BUILD/build.ninja" ]; then
  say "configuring $BUILD with clang"
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" -DROFORMER_BUILD_FUZZERS=ON -DROFORMER_BUILD_TESTS=OFF \
    -DROFORMER_USE_PCH=OFF >"$BUILD.configure.log" 2>&1 || { cat "$BUILD.configure.log"; exit 1; }
fi
say "building $TARGETS"
# shellcheck disable=SC2086
cmake --build "$BUILD" -j 2 --target $TARGETS

# ---- Seeds: one small valid input per target, so the fuzzers start from real formats -------------
SEEDS="$BUILD/seeds"
python3 - "$SEEDS" "$ROOT" <<'PY'
import json, os, struct, sys, glob
seeds, root = sys.argv[1], sys.argv[2]
def put(target, name, data):
    d = os.path.join(seeds, target); os.makedirs(d, exist_ok=True)
    open(os.path.join(d, name), "wb").write(data if isinstance(data, bytes) else data.encode())

# safetensors: two small tensors and metadata, header padded to 8 bytes as the writer does
def safetensors(tensors, meta):
    header, blobs, off = {"__metadata__": meta}, b"", 0
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        blobs += raw; off += len(raw)
    h = json.dumps(header).encode(); h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + blobs
put("fuzz_safetensors", "two", safetensors({"a.weight": ("F32", [2, 3], struct.pack("<6f", *range(6))),
                                            "b": ("I64", [2], struct.pack("<2q", 7, -1))}, {"format": "pt"}))
put("fuzz_safetensors", "bf16", safetensors({"w": ("BF16", [4], b"\x80\x3f" * 4), "e": ("BOOL", [0], b"")}, {}))

for f in glob.glob(os.path.join(root, "configs", "*.yaml")):
    put("fuzz_config", os.path.basename(f), open(f, "rb").read())
put("fuzz_config", "override", "train.steps=100\nmodel:\n  hidden_size: 64\n  num_heads: 2\n")

put("fuzz_text_reader", "plain", b"\x00The jury said.\nIt was over.\n\nA second document \xc3\xa9t\xc3\xa9.\n")
put("fuzz_text_reader", "jsonl", b'\x01{"text": "one\\ntwo"}\n\n{"text": "caf\\u00e9", "id": 3}\n')

# A prepared directory (docs/data.md): 64-byte headers, uint16 tokens, two shards' worth in one.
fp = b"0123456789abcdef"
def header(magic, dtype, count, docs, vocab):
    return struct.pack("<8sIIQQQ16sII", magic, 1, dtype, count, docs, vocab, fp, 0, 0)
vocab, docs = 12, [[5, 6, 7], [8, 9], [10, 11, 5, 6]]
tokens = [t for d in docs for t in d]
offsets = [0]
for d in docs: offsets.append(offsets[-1] + len(d))
meta = {"format": "roformer-prepared", "version": 1, "tokenizer_fingerprint": fp.decode(), "vocab_size": vocab,
        "token_bytes": 2, "num_documents": len(docs), "num_tokens": len(tokens),
        "shards": [{"file": "shard_00000.tok", "tokens": len(tokens), "documents": len(docs)}]}
files = [json.dumps(meta).encode(),
         header(b"RFDOCIDX", 8, len(offsets), len(docs), vocab) + struct.pack(f"<{len(offsets)}Q", *offsets),
         header(b"RFWORDST", 1, vocab, 0, vocab) + bytes([0] * 5 + [1, 0] * 3 + [1]),
         header(b"RFTOKENS", 2, len(tokens), len(docs), vocab) + struct.pack(f"<{len(tokens)}H", *tokens)]
put("fuzz_prepared_corpus", "three_docs", b"".join(struct.pack("<I", len(f)) + f for f in files))

put("fuzz_manifest", "manifest", json.dumps({"format": "roformer-checkpoint", "version": 1, "files": {
    "config.yaml": {"size": 1234, "checksum": "0123456789abcdef"},
    "model.safetensors": {"size": 99, "checksum": "fedcba9876543210"}}}, indent=2))
put("fuzz_trainer_state", "state", json.dumps({"step": 12, "tokens_seen": 4096, "loader": {"epoch": 0, "position": 48},
    "world_size": 1, "global_batch_size": 4, "loss_scale": 65536.0, "good_steps": 0,
    "tokenizer_fingerprint": "0123456789abcdef", "num_parameters": 1000, "reason": "periodic",
    "roformer_version": "0.1.0"}, indent=2))
PY

# ---- Run, one target at a time ------------------------------------------------------------------
SCRATCH=/tmp
[ -d /dev/shm ] && SCRATCH=/dev/shm
REPORT="$BUILD/report.txt"
printf '%-22s %8s %12s %10s %8s %8s\n' target seconds executions exec/s corpus crashes | tee "$REPORT"
for t in $TARGETS; do
  corpus="$BUILD/corpus/$t"
  artifacts="$BUILD/artifacts/$t/"
  mkdir -p "$corpus" "$artifacts"
  log="$BUILD/$t.log"
  start=$(date +%s)
  # A crash makes libFuzzer exit non-zero; the report below says so, and the next target runs.
  TMPDIR="$SCRATCH" ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1" UBSAN_OPTIONS="print_stacktrace=1" \
    "$BUILD/tests/fuzz/$t" "$corpus" "$SEEDS/$t" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=4096 \
    -max_len=16384 -print_final_stats=1 -artifact_prefix="$artifacts" >"$log" 2>&1 &
  pid=$!
  wait "$pid" || true
  rm -rf "$SCRATCH/roformer-fuzz-$pid"
  secs=$(( $(date +%s) - start ))
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)
  execs=${execs:-0}
  crashes=$(find "$artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  printf '%-22s %8s %12s %10s %8s %8s\n' "$t" "$secs" "$execs" "$(( execs / (secs > 0 ? secs : 1) ))" \
    "$(find "$corpus" -type f | wc -l)" "$crashes" | tee -a "$REPORT"
done
say "report: $REPORT (logs: $BUILD/TARGET.log; crash inputs: $BUILD/artifacts/TARGET/)"
