#!/usr/bin/env bash
# One command for a GPU machine: build, run the GPU tests, run the benchmark matrix against Hugging
# Face, print one table. Taken over from the GPU starting kit (../shared/gpu) and extended.
#
# The GPU machine this is written for (one H100/H200, PyTorch 2.11 on CUDA 13, transformers, CMake,
# ninja, nvcc; no package registry; each command limited to 10 minutes) lacks our Debian C++
# dependencies, so they travel as .deb files. Three steps, each well inside 10 minutes:
#
#   here (any machine with apt-get):   scripts/gpu_check.sh pack [--brown]
#        downloads the Debian packages into .gpu-kit/debs (git-ignored, ~15 MB); --brown also
#        prepares the Brown corpus (../shared/data/brown) as shards with a 32000-piece tokenizer into
#        .gpu-kit/brown, for the real-data rows (needs build/roformer here).
#   GPU machine, call 1 (~4-6 min on 16 cores):  scripts/gpu_check.sh build
#        unpacks the packages into /opt/deps, configures build-gpu/ against the machine's LibTorch
#        (python3 -c 'import torch'), builds everything.
#   GPU machine, call 2 (~6-8 min):               scripts/gpu_check.sh check LOGDIR
#        ctest -L gpu (every GPU test; logs in LOGDIR/ctest.log), then the benchmark matrix
#        (LOGDIR/bench_*.json, *.log) and, last, the table (also LOGDIR/table.md).
#   `scripts/gpu_check.sh all LOGDIR` does build + check in one call where time allows.
#
# Env: BUILD_DIR (default build-gpu), STEPS (20), WARMUP (5), ROUNDS (2), MATRIX ("tiny:128 tiny:512
# base:128 base:512"), SKIP_TESTS=1 (matrix only), SKIP_BENCH=1 (tests only).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KIT="$ROOT/.gpu-kit"
DEPS=/opt/deps
BUILD="${BUILD_DIR:-$ROOT/build-gpu}"
PKGS="libsentencepiece0 libsentencepiece-dev libyaml-cpp0.7 libyaml-cpp-dev libspdlog1.10 libspdlog-dev
      libfmt9 libfmt-dev libcli11-dev libgtest-dev libgmock-dev googletest nlohmann-json3-dev"

say() { printf '[gpu_check] %s\n' "$*"; }
usage() { sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }

pack() {
  mkdir -p "$KIT/debs"  # .gpu-kit/ is in .gitignore: device calls name it in `carry`
  (cd "$KIT/debs" && { apt-get download $PKGS >/dev/null 2>&1 || { apt-get update -qq && apt-get download $PKGS; }; })
  if [ "${1:-}" = "--brown" ]; then
    local brown="${BROWN_DIR:-$ROOT/../shared/data/brown}" bin="$ROOT/build/roformer"
    [ -x "$bin" ] || { echo "--brown needs build/roformer here (make build)"; exit 1; }
    [ -f "$brown/train.txt" ] || { echo "--brown: no corpus at $brown (set BROWN_DIR)"; exit 1; }
    rm -rf "$KIT/brown"
    "$bin" tokenizer train --input "$brown/train.txt" --vocab-size 32000 --out "$KIT/brown/tokenizer"
    "$bin" prepare --tokenizer "$KIT/brown/tokenizer/tokenizer.model" --input "$brown/train.txt" --out "$KIT/brown/train"
  fi
  say "kit ready: $(ls "$KIT/debs" | wc -l) packages, $(du -sh "$KIT" | cut -f1). Device calls carry [\".gpu-kit\"]"
}

env_setup() {
  [ -d "$KIT/debs" ] || { echo "no $KIT/debs: run 'scripts/gpu_check.sh pack' on a machine with apt-get and carry .gpu-kit"; exit 1; }
  if [ ! -f "$DEPS/.unpacked" ]; then
    mkdir -p "$DEPS"
    for f in "$KIT"/debs/*.deb; do dpkg -x "$f" "$DEPS"; done
    touch "$DEPS/.unpacked"
  fi
  TORCH_PREFIX="$(python3 -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')"
  TORCH_LIB="$(python3 -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')"
  export PKG_CONFIG_SYSROOT_DIR=$DEPS
  export PKG_CONFIG_PATH=$DEPS/usr/lib/x86_64-linux-gnu/pkgconfig:$DEPS/usr/share/pkgconfig
  export LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu:$TORCH_LIB:${LD_LIBRARY_PATH:-}
}

build() {
  env_setup
  say "torch $(python3 -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)'); $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
  if [ ! -f "$BUILD/build.ninja" ]; then
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DROFORMER_PYTHON="$(command -v python3)" \
      -DCMAKE_PREFIX_PATH="$TORCH_PREFIX;$DEPS/usr" ${CMAKE_ARGS:-} >"$BUILD.configure.log" 2>&1 \
      || { tail -40 "$BUILD.configure.log"; exit 1; }
  fi
  grep -E "CUDA LibTorch|NCCL backend" "$BUILD.configure.log" || true
  cmake --build "$BUILD" -j "$(nproc)"
  say "built $BUILD/roformer"
}

bench_row() {  # config seq logdir
  local cfg="$1" seq="$2" log="$3" batch
  batch=$((seq == 128 ? 128 : 32))  # the same 16384 tokens per step at both lengths
  local sets=(--set train.device=cuda --set train.precision=bf16 --set train.grad_accum=1
              --set "train.batch_size=$batch" --set "data.max_seq_len=$seq" --set model.max_position_embeddings=512)
  [ "$cfg" = base ] && sets+=(--set model.vocab_size=32000)
  say "bench $cfg seq $seq (batch $batch): roformer vs HF, ${ROUNDS:-2} alternating rounds"
  python3 "$ROOT/scripts/bench_vs_hf.py" -c "$ROOT/configs/$cfg.yaml" "${sets[@]}" --roformer "$BUILD/roformer" \
    --steps "${STEPS:-20}" --warmup "${WARMUP:-5}" --rounds "${ROUNDS:-2}" --json "$log/bench_${cfg}_${seq}.json" \
    >"$log/bench_${cfg}_${seq}.log" 2>&1 || { say "bench $cfg $seq failed: see $log/bench_${cfg}_${seq}.log"; tail -5 "$log/bench_${cfg}_${seq}.log"; }
  if [ -d "$KIT/brown/train" ] && [ "$cfg" = base ]; then  # real data: prepared Brown shards (ours only)
    "$BUILD/roformer" bench -c "$ROOT/configs/base.yaml" "${sets[@]}" --set "data.train_files=[$KIT/brown/train]" \
      --set "tokenizer.model=$KIT/brown/tokenizer/tokenizer.model" --set data.valid_files=[] \
      --run-dir "$log/brown-bench" --steps "${STEPS:-20}" --warmup "${WARMUP:-5}" --json \
      >"$log/bench_brown_${seq}.log" 2>&1 || say "bench brown $seq failed: see $log/bench_brown_${seq}.log"
  fi
}

table() {  # logdir
  python3 - "$1" <<'PY'
import glob, json, os, sys
log = sys.argv[1]
rows = ["| data | config | seq | device | roformer tokens/s | HF tokens/s | ratio | MFU | peak memory (GiB) | attention |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---|"]
def last_json(path):
    lines = [l for l in open(path) if l.startswith("{")]
    return json.loads(lines[-1]) if lines else None
for path in sorted(glob.glob(os.path.join(log, "bench_*.json"))):
    d = json.load(open(path))
    ours = sorted(d["roformer"], key=lambda r: r["tokens_per_s"])[len(d["roformer"]) // 2]
    hf = sorted(x["tokens_per_s"] for x in d["hf"])[len(d["hf"]) // 2]
    cfg = os.path.basename(path)[len("bench_"):-len(".json")].rsplit("_", 1)[0]
    mfu = f"{100 * ours['mfu']:.1f}%" if ours.get("mfu") is not None else "-"
    rows.append(f"| synthetic | {cfg} | {ours['seq_len']} | {ours['device_name']} | {ours['tokens_per_s']:.0f} | {hf:.0f} | "
                f"{d['ratio']:.2f}x | {mfu} | {ours['peak_memory_bytes'] / 2**30:.2f} | {ours['attention_backend']} |")
for path in sorted(glob.glob(os.path.join(log, "bench_brown_*.log"))):
    r = last_json(path)
    if r:
        mfu = f"{100 * r['mfu']:.1f}%" if r.get("mfu") is not None else "-"
        rows.append(f"| Brown | base | {r['seq_len']} | {r['device_name']} | {r['tokens_per_s']:.0f} | - | - | {mfu} | "
                    f"{r['peak_memory_bytes'] / 2**30:.2f} | {r['attention_backend']} |")
text = "\n".join(rows)
open(os.path.join(log, "table.md"), "w").write(text + "\n")
print(text)
PY
}

check() {
  local log="${1:-}"
  [ -n "$log" ] || { echo "check needs LOGDIR (where the logs go)"; usage 1; }
  mkdir -p "$log"
  log="$(cd "$log" && pwd)"
  env_setup
  [ -x "$BUILD/roformer" ] || { echo "no $BUILD/roformer: run 'scripts/gpu_check.sh build' first (same machine)"; exit 1; }
  nvidia-smi >"$log/nvidia-smi.txt" 2>&1 || true
  local tests_status=0
  if [ "${SKIP_TESTS:-0}" != 1 ]; then
    say "ctest -L gpu (log: $log/ctest.log)"
    (cd "$BUILD" && ctest -L gpu --output-on-failure --timeout 600) >"$log/ctest.log" 2>&1 || tests_status=$?
    grep -E "tests passed|Passed|Failed|Skipped|\*\*\*" "$log/ctest.log" | tail -12 || true
  fi
  if [ "${SKIP_BENCH:-0}" != 1 ]; then
    for row in ${MATRIX:-tiny:128 tiny:512 base:128 base:512}; do bench_row "${row%%:*}" "${row##*:}" "$log"; done
    table "$log"
  fi
  [ "$tests_status" = 0 ] || { say "GPU tests FAILED (exit $tests_status): $log/ctest.log"; exit "$tests_status"; }
}

case "${1:-}" in
  pack) shift; pack "$@" ;;
  build) build ;;
  check) shift; check "$@" ;;
  all) shift; build && check "$@" ;;
  -h|--help|help) usage 0 ;;
  *) usage 1 ;;
esac
