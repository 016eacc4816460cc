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
#   `scripts/gpu_check.sh kernels OUTDIR` (one call, prebuilt kit, <= 5 minutes: issues 38 and 51's
#        device check): a preflight first (the device's torch is 2.11.0, where libcudart.so.13 is
#        found, every library of the kit's binaries found; else it stops saying which), every GPU
#        test binary (test_gpu_kernels first; test_gpu_train last, its own budget reserved),
#        compute-sanitizer (memcheck, initcheck) on the fused kernels' tiny shapes, the fused kernels'
#        micro-benchmark against their ATen paths (roformer bench kernels: us per call, GB/s next to
#        the 3 TB/s floor, GPU ops per call) and the training step (base, seq 512 and 128) by default,
#        with all fused entries and with each alone (roformer bench --fused-*), each step under
#        `timeout -k`. OUTDIR receives two files, rewritten after every step: summary.md (the whole
#        call in one page) and logs.tar.gz (every log); exit status 1 when a step failed or was not
#        run. `kernels OUTDIR --dry-run` (any machine) checks the kit, prints the plan with each
#        step's time limit and the bytes/floors table, and runs nothing on a GPU.
#   `scripts/gpu_check.sh variants LOGDIR` (after check, same machine): ours only, each CUDA fast path
#        on its own, each attention kernel, larger batches and the position schemes (issue 25: what
#        absolute and disentangled cost next to rotary) (LOGDIR/variants.{jsonl,md}); VARIANTS_FILE
#        names other rows (name|bench arguments per line).
#
# Prebuilt (saves the device build, ~5 min of the 30-minute budget, on every machine start):
#   here:  make build && scripts/gpu_check.sh pack --bin [--brown]
#        also copies build/roformer and the GPU test binaries (built here
#        against the same torch 2.11.0 CUDA 13 wheel; they need glibc >= 2.34) into .gpu-kit/bin, and
#        downloads compute-sanitizer (PyPI's nvidia-cuda-sanitizer-api, 14 MB) into .gpu-kit/wheels.
#   GPU machine, one call:  scripts/gpu_check.sh check LOGDIR
#        with no build-gpu/ there, check runs the kit's binaries: it links this checkout to the
#        source path the tests were built with (when that path is free) and runs each GPU test
#        binary directly (exit 77 = skipped) instead of ctest.
#
# Env: BUILD_DIR (default build-gpu), GPU_KIT (default .gpu-kit), PACK_BUILD (pack --bin's build, default build),
# STEPS (20), WARMUP (5), ROUNDS (2), TOKENS (16384 per step), MATRIX ("tiny:128 tiny:512
# base:128 base:512"), SKIP_TESTS=1 (matrix only), SKIP_BENCH=1 (tests only), BROWN=0 (no real-data rows), PROFILE=0 (no
# profile of the base rows; by default LOGDIR/profile_base_SEQ.{md,json.gz}, see profile_summary.py; PROFILE_SETS="a=b ..."
# adds a second profile per base row with those overrides, LOGDIR/profile_base_SEQ_alt.*), COMPILE=1 (HF also under
# torch.compile: a second baseline and ratio), TEST_LIMIT (check: seconds per GPU test binary, 600). kernels:
# ONESHOT_BUDGET, KILL_GRACE, the *_LIMIT of each step, SANITIZER (a path, or none), KERNELS_WORK (its log folder).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KIT="${GPU_KIT:-$ROOT/.gpu-kit}"  # GPU_KIT: another kit (tests/integration/test_scripts)
DEPS="${GPU_DEPS:-/opt/deps}"  # GPU_DEPS: elsewhere (tests/integration/test_scripts)
BUILD="${BUILD_DIR:-$ROOT/build-gpu}"
PKGS="libsentencepiece0 libsentencepiece-dev libyaml-cpp0.7 libyaml-cpp-dev libspdlog1.10 libspdlog-dev
      libfmt9 libfmt-dev libcli11-dev libgtest-dev libgmock-dev googletest nlohmann-json3-dev
      libpcre2-8-0 libpcre2-dev libutf8proc2 libutf8proc-dev"

say() { printf '[gpu_check] %s\n' "$*"; }
usage() { awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "${BASH_SOURCE[0]}"; exit "${1:-0}"; }

# Why build/ (PACK_BUILD) cannot make a kit, empty when it can: its binaries must be built against
# the CUDA LibTorch (CMake's cache names libc10_cuda.so: C10_CUDA_LIBRARY, which a CPU-only LibTorch
# leaves unset) and hold the fused kernels (configure.log: "Fused kernels: yes").
kit_build_unfit() {  # build dir
  local b="$1" cuda
  [ -x "$b/roformer" ] || { echo "--bin needs $b/roformer (make build)"; return; }
  cuda="$(sed -n 's/^C10_CUDA_LIBRARY:FILEPATH=//p' "$b/CMakeCache.txt" 2>/dev/null)"
  case "$cuda" in "" | *NOTFOUND*)
    echo "$b is configured against a CPU-only LibTorch (no C10_CUDA_LIBRARY in $b/CMakeCache.txt): its binaries skip every GPU test; configure it with the CUDA wheel (scripts/setup.sh does)"; return ;;
  esac
  grep -q "Fused kernels: yes" "$b/configure.log" 2>/dev/null \
    || echo "$b has no fused kernels ($(grep -o 'Fused kernels: no.*' "$b/configure.log" 2>/dev/null || echo "no configure.log says so")): the kit would test their ATen fallbacks only"
}

pack_bin() {
  local b="${PACK_BUILD:-$ROOT/build}"
  rm -rf "$KIT/bin" && mkdir -p "$KIT/bin"
  cp "$b/roformer" "$b"/tests/test_gpu_* "$KIT/bin/"
  # compute-sanitizer for `kernels` (the device has no registry): the wheel of the torch's CUDA major
  local venv; venv="$(bash "$ROOT/scripts/setup.sh" venv)"
  mkdir -p "$KIT/wheels"
  ls "$KIT"/wheels/nvidia_cuda_sanitizer_api-13.* >/dev/null 2>&1 \
    || "$venv/bin/pip" download --no-deps -q "nvidia-cuda-sanitizer-api==13.0.*" -d "$KIT/wheels" \
    || say "warning: no compute-sanitizer wheel downloaded; kernels will use the device's own, if any"
  echo "$ROOT" >"$KIT/bin/source_dir"  # ROFORMER_TEST_SOURCE_DIR baked into the tests
  echo "$(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD || echo +uncommitted)" >"$KIT/bin/commit"
}

pack() {
  if [ "${1:-}" = "--bin" ]; then  # checked before anything is downloaded
    local unfit; unfit="$(kit_build_unfit "${PACK_BUILD:-$ROOT/build}")"
    [ -z "$unfit" ] || { echo "pack --bin: $unfit"; exit 1; }
  fi
  mkdir -p "$KIT/debs"  # .gpu-kit/ is in .gitignore: device calls name it in `carry`
  (cd "$KIT/debs" && { apt-get download $PKGS >/dev/null 2>&1 || { apt-get update -qq && apt-get download $PKGS; }; })
  if [ "${1:-}" = "--bin" ]; then pack_bin; shift; fi
  if [ "${1:-}" = "--brown" ]; then
    local brown="${BROWN_DIR:-$ROOT/../shared/data/brown}" bin="$ROOT/build/roformer"
    [ -x "$bin" ] || { echo "--brown needs build/roformer here (make build)"; exit 1; }
    [ -f "$brown/train.txt" ] || { echo "--brown: no corpus at $brown (set BROWN_DIR)"; exit 1; }
    rm -rf "$KIT/brown"
    "$bin" tokenizer train --input "$brown/train.txt" --vocab-size 32000 --out "$KIT/brown/tokenizer"
    "$bin" prepare --tokenizer "$KIT/brown/tokenizer/tokenizer.model" --input "$brown/train.txt" --out "$KIT/brown/train"
  fi
  say "kit ready: $(ls "$KIT/debs" | wc -l) packages. Device calls carry [\".gpu-kit\"]"
  carried_size
}

# What a device call carries, which may not pass 64 MiB: the kit and the working tree (tracked and
# untracked files that git does not ignore). Warns above 56 MiB.
carried_size() {
  local kit tree
  kit=$(du -sk "$KIT" | cut -f1)
  tree=$( (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard | xargs -0 du -ck 2>/dev/null | tail -1 | cut -f1) || echo 0)
  say "carried: kit $((kit / 1024)) MiB + working tree $((tree / 1024)) MiB = $(((kit + tree) / 1024)) MiB of the 64 MiB a device call takes"
  [ $((kit + tree)) -lt $((56 * 1024)) ] || say "warning: within 8 MiB of the 64 MiB limit: the device call may be refused"
}

env_setup() {
  [ -d "$KIT/debs" ] || { echo "no $KIT/debs: run 'scripts/gpu_check.sh pack' on a machine with apt-get and carry .gpu-kit"; exit 1; }
  if [ ! -f "$DEPS/.unpacked" ]; then
    mkdir -p "$DEPS"
    for f in "$KIT"/debs/*.deb; do [ -e "$f" ] && dpkg -x "$f" "$DEPS"; done
    touch "$DEPS/.unpacked"
  fi
  # Empty without a python3 that imports torch: `kernels` says so in its preflight, `build` at configure.
  local torch_paths
  torch_paths="$(python3 -c 'import os, torch, torch.utils
print(torch.utils.cmake_prefix_path); print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null)" || true
  TORCH_PREFIX="$(sed -n 1p <<<"$torch_paths")"
  TORCH_LIB="$(sed -n 2p <<<"$torch_paths")"
  export PKG_CONFIG_SYSROOT_DIR=$DEPS
  export PKG_CONFIG_PATH=$DEPS/usr/lib/x86_64-linux-gnu/pkgconfig:$DEPS/usr/share/pkgconfig
  export LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu:$TORCH_LIB:${LD_LIBRARY_PATH:-}
}

build() {
  env_setup
  say "torch $(python3 -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)'); $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
  # -isystem $DEPS/usr/include first in every compile: a machine with its own (other) versions of
  # these packages in /usr/include (Ubuntu 24.04's spdlog 1.12, yaml-cpp 0.8, gtest 1.14) must not
  # compile against those headers and link the kit's libraries.
  if [ ! -f "$BUILD/build.ninja" ]; then
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DROFORMER_PYTHON="$(command -v python3)" \
      -DCMAKE_PREFIX_PATH="$TORCH_PREFIX;$DEPS/usr" -DCMAKE_CXX_FLAGS="-isystem $DEPS/usr/include" ${CMAKE_ARGS:-} >"$BUILD.configure.log" 2>&1 \
      || { tail -40 "$BUILD.configure.log"; exit 1; }
  fi
  grep -E "CUDA LibTorch|NCCL backend" "$BUILD.configure.log" || true
  cmake --build "$BUILD" -j "$(nproc)"
  say "built $BUILD/roformer"
}

# The overrides every GPU row uses, into the array `sets`: CUDA, bf16, one micro-batch of
# TOKENS (default 16384) tokens per step at length $1, whatever the length, and for the base config
# ($2) the 32000-piece vocabulary.
cuda_sets() {  # seq cfg
  local seq="$1" cfg="$2"
  batch=$(( ${TOKENS:-16384} / seq ))
  sets=(--set train.device=cuda --set train.precision=bf16 --set train.grad_accum=1
        --set "train.batch_size=$batch" --set "data.max_seq_len=$seq" --set model.max_position_embeddings=512)
  [ "$cfg" = base ] && sets+=(--set model.vocab_size=32000)
  return 0
}

profile_row() {  # config seq logdir name (uses the caller's `sets`)
  local cfg="$1" seq="$2" log="$3" name="$4"
  "$BUILD/roformer" bench -c "$ROOT/configs/$cfg.yaml" "${sets[@]}" --synthetic --steps 5 --warmup 3 \
    --run-dir "$log/profile-bench" --profile "$log/$name.json" >"$log/$name.log" 2>&1 \
    && python3 "$ROOT/scripts/profile_summary.py" "$log/$name.json" >"$log/$name.md" \
    && gzip -f "$log/$name.json" || say "profile $name failed: see $log/$name.log"
}

bench_row() {  # config seq logdir
  local cfg="$1" seq="$2" log="$3" batch sets
  cuda_sets "$seq" "$cfg"
  say "bench $cfg seq $seq (batch $batch): roformer vs HF, ${ROUNDS:-2} alternating rounds"
  local tag="${cfg}_${seq}${TOKENS:+_t$TOKENS}"
  python3 "$ROOT/scripts/bench_vs_hf.py" -c "$ROOT/configs/$cfg.yaml" "${sets[@]}" --roformer "$BUILD/roformer" \
    --steps "${STEPS:-20}" --warmup "${WARMUP:-5}" --rounds "${ROUNDS:-2}" --json "$log/bench_${tag}.json" \
    $([ "${COMPILE:-0}" = 1 ] && echo --compile) \
    >"$log/bench_${tag}.log" 2>&1 || { say "bench $tag failed: see $log/bench_${tag}.log"; tail -5 "$log/bench_${tag}.log"; }
  if [ "${PROFILE:-1}" = 1 ] && [ "$cfg" = base ]; then  # where the time goes (outside the timed steps)
    profile_row "$cfg" "$seq" "$log" "profile_${cfg}_${seq}"
    if [ -n "${PROFILE_SETS:-}" ]; then
      local s; for s in $PROFILE_SETS; do sets+=(--set "$s"); done
      profile_row "$cfg" "$seq" "$log" "profile_${cfg}_${seq}_alt"
    fi
    cuda_sets "$seq" "$cfg"
  fi
  if [ -d "$KIT/brown/train" ] && [ "$cfg" = base ] && [ "${BROWN:-1}" = 1 ]; then  # real data: prepared Brown shards (ours only)
    "$BUILD/roformer" bench -c "$ROOT/configs/base.yaml" "${sets[@]}" --set "data.train_files=[$KIT/brown/train]" \
      --set "tokenizer.model=$KIT/brown/tokenizer/tokenizer.model" --set data.valid_files=[] \
      --run-dir "$log/brown-bench" --steps "${STEPS:-20}" --warmup "${WARMUP:-5}" --json \
      >"$log/bench_brown_${seq}${TOKENS:+_t$TOKENS}.log" 2>&1 || say "bench brown $seq failed: see $log/bench_brown_${seq}.log"
  fi
}

table() {  # logdir
  python3 - "$1" <<'PY'
import glob, json, os, sys
log = sys.argv[1]
rows = ["| data | config | seq | device | roformer tokens/s | HF tokens/s | ratio | HF compiled tokens/s | ratio | MFU | peak memory (GiB) | attention |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
def last_json(path):
    lines = [l for l in open(path) if l.startswith("{")]
    return json.loads(lines[-1]) if lines else None
for path in sorted(glob.glob(os.path.join(log, "bench_*.json"))):
    d = json.load(open(path))
    ours = sorted(d["roformer"], key=lambda r: r["tokens_per_s"])[len(d["roformer"]) // 2]
    hf = sorted(x["tokens_per_s"] for x in d["hf"])[len(d["hf"]) // 2]
    cfg = os.path.basename(path)[len("bench_"):-len(".json")].split("_")[0] + f" (batch {ours['batch_size']})"
    mfu = f"{100 * ours['mfu']:.1f}%" if ours.get("mfu") is not None else "-"
    compiled = sorted(x["tokens_per_s"] for x in d.get("hf_compiled") or [])
    hc, rc = (f"{compiled[len(compiled) // 2]:.0f}", f"{d['ratio_compiled']:.2f}x") if compiled else ("-", "-")
    rows.append(f"| synthetic | {cfg} | {ours['seq_len']} | {ours['device_name']} | {ours['tokens_per_s']:.0f} | {hf:.0f} | "
                f"{d['ratio']:.2f}x | {hc} | {rc} | {mfu} | {ours['peak_memory_bytes'] / 2**30:.2f} | {ours['attention_backend']} |")
for path in sorted(glob.glob(os.path.join(log, "bench_brown_*.log"))):
    r = last_json(path)
    if r:
        mfu = f"{100 * r['mfu']:.1f}%" if r.get("mfu") is not None else "-"
        rows.append(f"| Brown | base (batch {r['batch_size']}) | {r['seq_len']} | {r['device_name']} | {r['tokens_per_s']:.0f} | - | - | - | - | {mfu} | "
                    f"{r['peak_memory_bytes'] / 2**30:.2f} | {r['attention_backend']} |")
text = "\n".join(rows)
open(os.path.join(log, "table.md"), "w").write(text + "\n")
print(text)
PY
}

variants() {  # logdir: each CUDA fast path on its own, attention kernels, batch sizes (ours only)
  local log="$1" b="$BUILD/roformer" out="$1/variants.jsonl"
  : >"$out"
  for seq in ${SEQS:-512 128}; do
    local batch sets
    cuda_sets "$seq" base
    sets+=(-c "$ROOT/configs/base.yaml" --synthetic --steps "${STEPS:-20}" --warmup "${WARMUP:-5}" --json
           --run-dir "$log/variants-bench")
    while IFS='|' read -r name args; do
      [ -n "$name" ] || continue
      args="${args//\{batch2\}/$((batch * 2))}"; args="${args//\{batch4\}/$((batch * 4))}"
      say "variant seq $seq: $name"
      # shellcheck disable=SC2086
      "$b" bench "${sets[@]}" $args 2>"$log/variant.err" | tail -1 \
        | python3 -c "import json,sys; r=json.load(sys.stdin); r['variant']='$name'; print(json.dumps(r))" >>"$out" \
        || { say "variant $name failed:"; tail -3 "$log/variant.err"; }
    done < <(if [ -n "${VARIANTS_FILE:-}" ]; then cat "$VARIANTS_FILE"; else default_variants; fi)
  done
  variants_table "$out" "$log"
}

# The roformer binary that lists the rows: ROFORMER_BIN, else this machine's build, else the kit's.
lister() {
  local b
  for b in "${ROFORMER_BIN:-}" "$BUILD/roformer" "$KIT/bin/roformer"; do
    [ -n "$b" ] && [ -x "$b" ] && { echo "$b"; return 0; }
  done
  echo "no roformer binary to list the variants: build one, or carry a kit packed with --bin" >&2
  return 1
}

# The rows of `variants`: name|roformer bench arguments ({batch2}, {batch4}: 2x and 4x the batch),
# generated by the bench from the kernel policy's table (src/model/kernel_policy.cpp) and its levers.
default_variants() { "$(lister)" bench --list-variants all; }

variants_table() {  # jsonl logdir
  python3 - "$1" <<'PY' | tee "$2/variants.md"
import json, sys
print("| seq | batch | variant | tokens/s | ms/step | MFU | peak GiB | attention | fused ops' paths |\n"
      "|---:|---:|---|---:|---:|---:|---:|---|---|")
for line in open(sys.argv[1]):
    r = json.loads(line)
    mfu = f"{100 * r['mfu']:.1f}%" if r.get("mfu") is not None else "-"
    # kernel_paths (roformer bench's record): op -> the path it ran ("triton", or "aten (why)")
    paths = "; ".join(f"{op}: {path}" for op, path in sorted((r.get("kernel_paths") or {}).items())) or "-"
    print(f"| {r['seq_len']} | {r['batch_size']} | {r['variant']} | {r['tokens_per_s']:.0f} | {r['ms_per_step_mean']:.1f} | "
          f"{mfu} | {r['peak_memory_bytes'] / 2**30:.1f} | {r['attention_backend']} | {paths} |")
PY
}

# With no build of this machine (BUILD) and a kit with binaries: use those (returns 0), linking this
# checkout to the source path the tests were built with (when that path is free); BUILD becomes
# build/, where the tests' baked ROFORMER_TEST_BIN points.
use_kit_binaries() {
  [ ! -x "$BUILD/roformer" ] && [ -x "$KIT/bin/roformer" ] || return 1
  local src; src="$(cat "$KIT/bin/source_dir")"
  say "no $BUILD: using the kit's prebuilt binaries (commit $(cat "$KIT/bin/commit"), built with source dir $src)"
  if [ "$src" != "$ROOT" ]; then
    [ -e "$src" ] || { mkdir -p "$(dirname "$src")" && ln -s "$ROOT" "$src"; }
    [ "$(cd "$src" && pwd -P)" = "$(cd "$ROOT" && pwd -P)" ] || { echo "$src exists and is not this checkout: the prebuilt tests cannot find their files"; exit 1; }
  fi
  mkdir -p "$ROOT/build" && cp "$KIT/bin/roformer" "$ROOT/build/roformer"
  BUILD="$ROOT/build"
}

check() {
  local log="${1:-}"
  [ -n "$log" ] || { echo "check needs LOGDIR (where the logs go)"; usage 1; }
  mkdir -p "$log"
  log="$(cd "$log" && pwd)"
  env_setup
  local prebuilt=0
  use_kit_binaries && prebuilt=1
  [ -x "$BUILD/roformer" ] || { echo "no $BUILD/roformer: run 'scripts/gpu_check.sh build' first (same machine)"; exit 1; }
  nvidia-smi >"$log/nvidia-smi.txt" 2>&1 || true
  local tests_status=0
  if [ "${SKIP_TESTS:-0}" != 1 ] && [ "$prebuilt" = 1 ]; then
    say "GPU test binaries (log: $log/ctest.log)"
    : >"$log/ctest.log"
    for t in "$KIT"/bin/test_gpu_*; do
      local rc=0
      timeout -k 10 "${TEST_LIMIT:-600}" "$t" >>"$log/ctest.log" 2>&1 || rc=$?
      case $rc in 0) say "$(basename "$t"): passed" ;; 77) say "$(basename "$t"): skipped (no GPU visible)" ;;
        124 | 137) say "$(basename "$t"): TIMED OUT after ${TEST_LIMIT:-600} s"; tests_status=$rc ;;
        *) say "$(basename "$t"): FAILED (exit $rc)"; tests_status=$rc ;; esac
    done
    grep -E "^\[  (FAILED|PASSED|SKIPPED)" "$log/ctest.log" | tail -12 || true
  elif [ "${SKIP_TESTS:-0}" != 1 ]; then
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

# ---- kernels: the one device call (prebuilt kit; <= 5 minutes; OUTDIR gets summary.md, logs.tar.gz) --
# The device gives back at most 8 files of $OUT: the logs are written into a work folder
# (KERNELS_WORK, default a new folder under ${TMPDIR:-/tmp}) and OUTDIR receives summary.md and
# logs.tar.gz alone, both rewritten after every step (the summary first), so a call cut short still
# returns what it did. Each step runs under `timeout -k KILL_GRACE LIMIT` (a process that ignores
# SIGTERM is killed KILL_GRACE seconds later), its limit cut to what is left of ONESHOT_BUDGET; a
# step with under 5 s left is not run (summary.md says so). Order: the preflight (the device's torch
# is 2.11.0, where libcudart.so.13 is found, no library of the kit's binaries missing: the call stops
# there when not), the GPU test binaries but test_gpu_train, compute-sanitizer, the kernels'
# micro-benchmark, the training step's rows (kernel_variants), and last test_gpu_train (24 roformer
# processes, no fused kernel), whose TRAIN_TEST_LIMIT is reserved from the budget. Exit status: 0
# when every step passed, 1 when one failed or was not run.
ONESHOT_BUDGET="${ONESHOT_BUDGET:-270}"          # seconds for the steps (the device call's timeout_s: 300)
KILL_GRACE="${KILL_GRACE:-5}"                    # timeout -k: SIGKILL this long after SIGTERM
KERNEL_TEST_LIMIT="${KERNEL_TEST_LIMIT:-45}"      # test_gpu_kernels
OTHER_TEST_LIMIT="${OTHER_TEST_LIMIT:-45}"        # each other GPU test binary (test_gpu_step, test_gpu_dist)
TRAIN_TEST_LIMIT="${TRAIN_TEST_LIMIT:-60}"        # test_gpu_train, last: reserved from the budget
SANITIZER_LIMIT="${SANITIZER_LIMIT:-60}"          # per compute-sanitizer tool (tiny shapes, allocator caching off)
BENCH_LIMIT="${BENCH_LIMIT:-25}"                  # the kernels' micro-benchmark
VARIANT_LIMIT="${VARIANT_LIMIT:-20}"              # each `roformer bench` row (base, 16384 tokens, 10 steps)
SANITIZER_TOOLS="${SANITIZER_TOOLS:-memcheck initcheck}"
SANITIZER_FILTER="KernelsOnCuda.TinyShapesForTheSanitizer"
KERNELS_LAST_TEST=test_gpu_train

# A compute-sanitizer: SANITIZER when set ("none": no sanitizer step), else the machine's, else the
# kit's wheel unpacked into $DEPS/sanitizer.
find_sanitizer() {
  if [ -n "${SANITIZER:-}" ]; then [ "$SANITIZER" != none ] && echo "$SANITIZER"; return; fi
  local s
  for s in "$(command -v compute-sanitizer 2>/dev/null)" /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
    [ -n "$s" ] && [ -x "$s" ] && { echo "$s"; return 0; }
  done
  local wheel; wheel="$(ls "$KIT"/wheels/nvidia_cuda_sanitizer_api-*.whl 2>/dev/null | head -1)"
  [ -n "$wheel" ] || return 1
  [ -x "$DEPS/sanitizer/nvidia/cu13/bin/compute-sanitizer" ] || [ "${DRY_RUN:-0}" = 1 ] \
    || python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$wheel" "$DEPS/sanitizer"
  chmod +x "$DEPS/sanitizer/nvidia/cu13/bin/compute-sanitizer" 2>/dev/null || true
  echo "$DEPS/sanitizer/nvidia/cu13/bin/compute-sanitizer"
}

# The GPU test binaries in the order they run, test_gpu_kernels first (the newest code), then the
# others as the kit has them; test_gpu_train is not among them (it runs last, kernels_run).
kernel_test_binaries() {
  local dir="$1"
  [ -x "$dir/test_gpu_kernels" ] && echo "$dir/test_gpu_kernels"
  local t; for t in "$dir"/test_gpu_*; do
    case "$(basename "$t")" in test_gpu_kernels|"$KERNELS_LAST_TEST") ;; *) [ -x "$t" ] && echo "$t" ;; esac
  done
  return 0
}

test_limit() { [ "$(basename "$1")" = test_gpu_kernels ] && echo "$KERNEL_TEST_LIMIT" || echo "$OTHER_TEST_LIMIT"; }

# The training step's rows of `kernels`, in the order they run (the first matter most when time is
# short): seq|name|roformer bench arguments, generated as default_variants' rows are.
kernel_variants() { "$(lister)" bench --list-variants kernels; }

# One row's bench command (configs/base.yaml, synthetic, as `variants` runs them).
variant_command() {  # seq args logdir
  local batch sets
  cuda_sets "$1" base
  echo "$BUILD/roformer bench -c $ROOT/configs/base.yaml ${sets[*]} --synthetic --steps 10 --warmup 3 --json" \
       "--run-dir $3/variants-bench $2"
}

# libcudart.so.13: on LD_LIBRARY_PATH, else the first of the candidates given (next to the device's
# torch), else in ld.so's cache. Prints its path; returns 1 when there is none.
find_cudart() {  # candidates...
  local d
  for d in ${LD_LIBRARY_PATH//:/ }; do [ -e "$d/libcudart.so.13" ] && { echo "$d/libcudart.so.13"; return 0; }; done
  for d in "$@" "$(ldconfig -p 2>/dev/null | awk '/libcudart\.so\.13 / {print $NF; exit}')"; do
    [ -n "$d" ] && [ -e "$d" ] && { echo "$d"; return 0; }
  done
  return 1
}

is_elf() { [ "$(head -c 4 "$1" 2>/dev/null | tail -c 3)" = ELF ]; }

# What the kit's binaries need of this machine, printed before anything runs: the device's torch is
# 2.11.0 (LibTorch's C++ ABI binds the binaries to the version they were built against), where
# libcudart.so.13 is found (added to LD_LIBRARY_PATH when it is next to torch only), and ldd finds
# every library of the kit's binaries. Prints one line starting "STOP:" and returns 1 when not.
preflight() {  # bindir
  local info v cudart t missing=""
  # One Python start: torch's version, its CUDA, then the libcudart.so.13 files beside it (site-packages/nvidia/*/lib).
  info="$(python3 -c 'import glob, os, torch
print(torch.__version__, torch.version.cuda)
print("\n".join(sorted(glob.glob(os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), "nvidia", "*", "lib", "libcudart.so.13")))))' 2>/dev/null)" \
    || { echo "STOP: $(command -v python3 || echo python3) cannot import torch; the kit's binaries need the device's LibTorch 2.11.0"; return 1; }
  v="$(head -1 <<<"$info")"
  echo "torch: ${v%% *} (CUDA ${v##* }), python3 at $(command -v python3)"
  case "${v%% *}" in
    2.11.0 | 2.11.0+*) ;;
    *) echo "STOP: the device's torch is ${v%% *}, the kit was built against 2.11.0 and its C++ ABI is bound to it:" \
            "build on the device instead (scripts/gpu_check.sh build, then check)"; return 1 ;;
  esac
  # shellcheck disable=SC2046
  cudart="$(find_cudart $(tail -n +2 <<<"$info"))" || { echo "STOP: no libcudart.so.13 on LD_LIBRARY_PATH, next to torch (site-packages/nvidia/*/lib) or in ld.so's cache: the kit's binaries cannot start"; return 1; }
  case ":${LD_LIBRARY_PATH:-}:" in *":$(dirname "$cudart"):"*) ;; *) export LD_LIBRARY_PATH="$(dirname "$cudart"):${LD_LIBRARY_PATH:-}" ;; esac
  echo "libcudart.so.13: $cudart"
  for t in "$1"/*; do
    [ -f "$t" ] && is_elf "$t" || continue
    missing+="$(ldd "$t" 2>&1 | awk -v b="$(basename "$t")" '/not found/ {printf " %s needs %s;", b, $1}')"
    [ "$(basename "$t")" = roformer ] && echo "roformer links $(ldd "$t" 2>/dev/null | awk '/libcudart/ {print $1, $2, $3; exit}')"
  done
  [ -z "$missing" ] || { echo "STOP: libraries not found:$missing carry them in the kit (scripts/gpu_check.sh pack --bin)"; return 1; }
  t="$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)" || true
  echo "GPU: ${t:-none that nvidia-smi shows}"
}

kernels_plan() {  # logdir bindir sanitizer
  local t seq name args
  echo "plan (limits in seconds, each cut to what is left of the call's ${ONESHOT_BUDGET} s; timeout -k ${KILL_GRACE}):"
  echo "  preflight: the device's torch is 2.11.0, libcudart.so.13 found, ldd finds every library of $2/*; else STOP"
  for t in $(kernel_test_binaries "$2"); do echo "  timeout -k $KILL_GRACE $(test_limit "$t") $t  > $(basename "$t").log"; done
  for t in $SANITIZER_TOOLS; do
    echo "  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout -k $KILL_GRACE $SANITIZER_LIMIT ${3:-compute-sanitizer} --tool $t --error-exitcode 9 \\"
    echo "      $2/test_gpu_kernels --gtest_filter=$SANITIZER_FILTER  > sanitizer_$t.log"
  done
  echo "  timeout -k $KILL_GRACE $BENCH_LIMIT $2/roformer bench kernels --json kernels_bench.json  > kernels_bench.md"
  while IFS='|' read -r seq name args; do
    echo "  timeout -k $KILL_GRACE $VARIANT_LIMIT $(variant_command "$seq" "$args" "${KERNELS_WORK:-WORK}")  >> variants.jsonl  # $name, seq $seq"
  done < <(kernel_variants)
  if [ -x "$2/$KERNELS_LAST_TEST" ]; then
    echo "  last, its own ${TRAIN_TEST_LIMIT} s reserved from the budget: timeout -k $KILL_GRACE $TRAIN_TEST_LIMIT $2/$KERNELS_LAST_TEST  > $KERNELS_LAST_TEST.log"
  fi
  echo "  $1 receives summary.md and logs.tar.gz (every log above), rewritten after each step: 2 files of the 8 a device call returns"
}

# The seconds a step may take: its limit, cut to what is left of the call less `reserve` and the
# kill grace (0: under 5 s left).
step_limit() {  # limit [reserve]
  local left=$(( KERNELS_DEADLINE - ${2:-0} - KILL_GRACE - SECONDS ))
  [ "$left" -ge 5 ] || { echo 0; return; }
  [ "$1" -lt "$left" ] && echo "$1" || echo "$left"
}

# Runs a step under its limit (timeout -k), records "name rc seconds" in results.txt (rc 200: not
# run, out of time), then rewrites OUTDIR's summary and archive.
timed_step() {  # logfile name limit reserve command...
  local out="$1" name="$2" limit rc=0 t0=$SECONDS
  limit="$(step_limit "$3" "$4")"; shift 4
  if [ "$limit" = 0 ]; then
    echo "$name 200 0" >>"$WORK/results.txt"; say "$name: not run (out of time)"
  else
    say "$name (limit ${limit}s)"
    timeout -k "$KILL_GRACE" "$limit" "$@" >>"$out" 2>&1 || rc=$?
    echo "$name $rc $((SECONDS - t0))" >>"$WORK/results.txt"
  fi
  publish
}

# OUTDIR's two files from the work folder: summary.md first, then logs.tar.gz (every log).
publish() {
  kernels_summary >"$OUTDIR/summary.md.part" && mv -f "$OUTDIR/summary.md.part" "$OUTDIR/summary.md"
  tar -czf "$OUTDIR/logs.tar.gz.part" -C "$WORK" . 2>/dev/null && mv -f "$OUTDIR/logs.tar.gz.part" "$OUTDIR/logs.tar.gz"
  return 0
}

kernels() {
  local log="${1:-}"
  [ -n "$log" ] || { echo "kernels needs OUTDIR (where summary.md and logs.tar.gz go)"; usage 1; }
  [ "${2:-}" = "--dry-run" ] && DRY_RUN=1
  mkdir -p "$log" && log="$(cd "$log" && pwd)"
  local bin="$KIT/bin" san
  [ -x "$bin/test_gpu_kernels" ] || { echo "no $bin/test_gpu_kernels: here, run 'make build && scripts/gpu_check.sh pack --bin' and carry .gpu-kit"; exit 1; }
  [ -x "$bin/roformer" ] || say "warning: no $bin/roformer in the kit: no micro-benchmark"
  san="$(find_sanitizer)" || say "warning: no compute-sanitizer on this machine or in the kit: the sanitizer step is skipped"
  if [ "${DRY_RUN:-0}" = 1 ]; then
    [ -x "$BUILD/roformer" ] || BUILD="$ROOT/build"  # where use_kit_binaries puts the kit's roformer
    say "dry run: kit commit $(cat "$bin/commit" 2>/dev/null), $(kernel_test_binaries "$bin" | wc -l) GPU test binaries before the rows, sanitizer ${san:-none}"
    kernels_plan "$log" "$bin" "$san"
    [ -x "$bin/roformer" ] && "$bin/roformer" bench kernels --dry-run
    return 0
  fi
  KERNELS_DEADLINE=$(( SECONDS + ONESHOT_BUDGET ))
  OUTDIR="$log"
  WORK="${KERNELS_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/gpu_check_kernels.XXXXXX")}"
  mkdir -p "$WORK"
  : >"$WORK/results.txt"
  say "logs in $WORK; $OUTDIR receives summary.md and logs.tar.gz"
  env_setup
  if ! preflight "$bin" >"$WORK/preflight.txt" 2>&1; then
    cat "$WORK/preflight.txt"; publish; exit 1
  fi
  cat "$WORK/preflight.txt"
  use_kit_binaries || true
  nvidia-smi >"$WORK/nvidia-smi.txt" 2>&1 || true
  kernels_run "$bin" "$san"
  publish
  cat "$OUTDIR/summary.md"
  ! grep -qvE '^[^ ]+ 0 ' "$WORK/results.txt"  # every step passed (a step not run counts against)
}

kernels_run() {  # bindir sanitizer: every log into $WORK
  local bin="$1" san="$2" t seq name args reserve=0
  [ -x "$bin/$KERNELS_LAST_TEST" ] && reserve=$(( TRAIN_TEST_LIMIT + KILL_GRACE ))
  : >"$WORK/variants.jsonl"
  for t in $(kernel_test_binaries "$bin"); do
    timed_step "$WORK/$(basename "$t").log" "$(basename "$t")" "$(test_limit "$t")" "$reserve" "$t" --gtest_color=no
  done
  if [ -n "$san" ]; then
    for t in $SANITIZER_TOOLS; do  # PyTorch's caching allocator off: each tensor its own allocation, so memcheck sees any overrun
      PYTORCH_NO_CUDA_MEMORY_CACHING=1 timed_step "$WORK/sanitizer_$t.log" "sanitizer_$t" "$SANITIZER_LIMIT" "$reserve" \
        "$san" --tool "$t" --error-exitcode 9 --print-limit 20 \
        "$bin/test_gpu_kernels" --gtest_filter="$SANITIZER_FILTER" --gtest_color=no
    done
  fi
  if [ -x "$bin/roformer" ]; then
    timed_step "$WORK/kernels_bench.md" kernels_bench "$BENCH_LIMIT" "$reserve" "$bin/roformer" bench kernels --json "$WORK/kernels_bench.json"
  fi
  if [ -x "$BUILD/roformer" ]; then
    while IFS='|' read -r seq name args; do
      : >"$WORK/variant.out"
      # shellcheck disable=SC2046
      timed_step "$WORK/variant.out" "bench_${seq}_${name// /_}" "$VARIANT_LIMIT" "$reserve" $(variant_command "$seq" "$args" "$WORK")
      tail -1 "$WORK/variant.out" 2>/dev/null \
        | python3 -c "import json,sys; r=json.load(sys.stdin); r['variant']='$name'; print(json.dumps(r))" >>"$WORK/variants.jsonl" 2>/dev/null \
        || cp "$WORK/variant.out" "$WORK/bench_${seq}_${name//[^A-Za-z0-9]/_}.log"  # the failed row's output
    done < <(kernel_variants)
    rm -f "$WORK/variant.out"
    [ -s "$WORK/variants.jsonl" ] && variants_table "$WORK/variants.jsonl" "$WORK" >/dev/null
  else
    say "no roformer binary: no training-step rows"
  fi
  if [ -x "$bin/$KERNELS_LAST_TEST" ]; then
    timed_step "$WORK/$KERNELS_LAST_TEST.log" "$KERNELS_LAST_TEST" "$TRAIN_TEST_LIMIT" 0 "$bin/$KERNELS_LAST_TEST" --gtest_color=no
  fi
  return 0
}

kernels_summary() {  # from $WORK
  local name rc secs r passed=0 failed=0 skipped=0
  echo "# scripts/gpu_check.sh kernels: $(sed -n 's/^GPU: //p' "$WORK/preflight.txt" 2>/dev/null)"
  echo "kit commit $(cat "$KIT/bin/commit" 2>/dev/null); $SECONDS s so far; every log in logs.tar.gz"
  echo; sed 's/^/    /' "$WORK/preflight.txt" 2>/dev/null
  echo; echo "| step | result | seconds |"; echo "|---|---|---:|"
  while read -r name rc secs; do
    case $rc in 0) r=passed ;; 77) r="FAILED: skipped (no GPU visible)" ;; 124 | 137) r="FAILED: TIMED OUT" ;;
      9) r="FAILED: errors found" ;; 200) r="not run (out of time)" ;; *) r="FAILED (exit $rc)" ;; esac
    case $rc in 0) passed=$((passed + 1)) ;; 200) skipped=$((skipped + 1)) ;; *) failed=$((failed + 1)) ;; esac
    echo "| $name | $r | $secs |"
  done <"$WORK/results.txt"
  echo; echo "Failed cases:"
  cat "$WORK"/test_gpu_*.log 2>/dev/null | grep -E "^\[  FAILED  \] [A-Za-z]" | sort -u || echo "none"
  for f in "$WORK"/sanitizer_*.log; do [ -f "$f" ] && echo "$(basename "$f" .log): $(grep -E "ERROR SUMMARY" "$f" | tail -1)"; done
  echo; cat "$WORK/kernels_bench.md" 2>/dev/null || true
  echo; echo "Training step (configs/base.yaml, synthetic, 16384 tokens per step; tokens/s, ms/step, MFU, the fused ops' paths):"
  cat "$WORK/variants.md" 2>/dev/null || echo "none"
  echo; echo "result: $passed passed, $failed failed, $skipped not run"
}

case "${1:-}" in
  pack) shift; pack "$@" ;;
  build) build ;;
  check) shift; check "$@" ;;
  kernels) shift; kernels "$@" ;;
  variants) shift; [ -n "${1:-}" ] || usage 1; mkdir -p "$1"; env_setup; [ -x "$BUILD/roformer" ] || BUILD="$ROOT/build"; variants "$1" ;;
  all) shift; build && check "$@" ;;
  -h|--help|help) usage 0 ;;
  *) usage 1 ;;
esac
