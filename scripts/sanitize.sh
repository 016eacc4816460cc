#!/usr/bin/env bash
# Builds the library, the program and the tests with AddressSanitizer + UndefinedBehaviorSanitizer
# (-DROFORMER_SANITIZE=ON, gcc) into a separate build directory and runs the test suite there. Any
# finding (a read of freed memory, a buffer overflow, undefined behaviour) stops the process that
# made it, so its test fails and the report (with a stack) is in the test's output.
#
#   scripts/sanitize.sh [CTEST_ARGS...]     e.g. scripts/sanitize.sh -R test_corpus
#
# Environment: SANITIZE_BUILD_DIR (default build-sanitize), ROFORMER_VENV (the venv of
# scripts/setup.sh: LibTorch, the Python of the reference tests). Run scripts/setup.sh (make build)
# first.
#
# LibTorch and the other libraries are not instrumented; the runtime options below are what that
# needs: detect_leaks=0 (LibTorch, CUDA and Python keep allocations until exit on purpose),
# protect_shadow_gap=0 (the CUDA driver maps memory where ASan would reserve its shadow gap),
# alloc_dealloc_mismatch=0 (libraries built without ASan free across new/malloc), and
# new_delete_type_mismatch=0 (sized deletes in uninstrumented code).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${SANITIZE_BUILD_DIR:-$ROOT/build-sanitize}"
VENV="${ROFORMER_VENV:-$HOME/.cache/roformer/venv-torch-2.11.0}"
PY="$VENV/bin/python"
say() { printf '\033[1m[sanitize]\033[0m %s\n' "$*"; }

TORCH_PREFIX="$("$PY" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')" || {
  echo "no LibTorch in $VENV: run scripts/setup.sh (make build) first" >&2; exit 1; }
start=$SECONDS
if [ ! -f "$BUILD/build.ninja" ]; then
  say "configuring $BUILD (AddressSanitizer + UndefinedBehaviorSanitizer, -O1)"
  mkdir -p "$BUILD"
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
    -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" -DROFORMER_PYTHON="$PY" -DROFORMER_SANITIZE=ON \
    >"$BUILD/configure.log" 2>&1 || { cat "$BUILD/configure.log"; exit 1; }
fi
say "building ($(nproc) jobs)"
cmake --build "$BUILD" -j "$(nproc)"
built=$SECONDS

export ASAN_OPTIONS="detect_leaks=0:protect_shadow_gap=0:alloc_dealloc_mismatch=0:new_delete_type_mismatch=0:abort_on_error=0:print_summary=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
say "testing (ASAN_OPTIONS=$ASAN_OPTIONS)"
rc=0
(cd "$BUILD" && ctest --output-on-failure --timeout 3000 -j 2 "$@") || rc=$?
say "build $((built - start)) s, tests $((SECONDS - built)) s; ctest exit $rc"
exit "$rc"
