#!/usr/bin/env bash
# Set-up for a Debian/Ubuntu machine, run by `make demo`, `make test` and `make build`; idempotent,
# and a second run takes about a second before the (no-op) build:
#   1. installs the missing Debian packages (apt-get; needs root or sudo),
#   2. creates or reuses a Python venv OUTSIDE the checkout holding the pinned PyTorch (whose
#      LibTorch we build against) and, for the tests, the reference packages (transformers for
#      golden values, tensorboard to read our event files, pyarrow and zstandard to write inputs),
#   3. configures build/ once and builds what was asked.
# Usage: scripts/setup.sh [demo|all|venv]
#   demo  what `make demo` needs: the roformer program; nothing that only the tests need
#   all   (default) everything: tests, benchmarks, the test-only Debian and Python packages
#   venv  prints the venv's path and does nothing else (for the scripts that run its programs)
# Environment knobs:
#   ROFORMER_VENV   venv location (default ~/.cache/roformer/venv-torch-$TORCH_VERSION)
#   BUILD_DIR       build directory (default build)
#   BUILD_TYPE      CMake build type (default Release)
#   SKIP_BUILD=1    stop after installing dependencies
set -euo pipefail

# ---- The pinned versions: the only place they are written. --------------------------------------
TORCH_VERSION=2.11.0          # the GPU machine's version; LibTorch comes from this wheel
TORCH_CUDA=13.0               # the CUDA version of that wheel (PyPI's torch 2.11.0 is cu130)
TRANSFORMERS_VERSION=5.23.0   # loading exports (README), and the tests' golden values and round trips
PYARROW_VERSION=26.0.1        # Parquet input

# ---- What each scope installs --------------------------------------------------------------------
# Debian packages to build the roformer program (libprotobuf-dev: Debian 13's sentencepiece.pc
# requires protobuf-lite, which libsentencepiece-dev does not pull in).
APT_PACKAGES="build-essential cmake ninja-build ccache pkg-config python3 python3-venv
  libsentencepiece-dev libprotobuf-dev libyaml-cpp-dev libspdlog-dev libfmt-dev libcli11-dev
  nlohmann-json3-dev zlib1g-dev libzstd-dev libpcre2-dev libutf8proc-dev"
# zlib, zstd: gzip and zstd input (src/data/byte_stream.cpp); PCRE2, utf8proc: the tokenizer.json
# reader's regular expressions and Unicode normalization (src/data/hf_tokenizer)
APT_TEST_PACKAGES="libgtest-dev libgmock-dev"
# The CUDA headers the wheel's runtime lacks (crt/, nv/), so no CUDA toolkit is needed to compile
# against it: about 3 MB (cmake/torch_wheel_cuda.cmake).
# pyarrow: Parquet input; the build links the Arrow C++ libraries of this wheel (CMakeLists.txt,
# "Input formats"). matplotlib and tensorboard: looking at a run after `make demo`
# (scripts/plot_metrics.py and scripts/tensorboard.sh run them from this venv). transformers: loading
# an export as README shows (AutoModelForMaskedLM, pipeline("fill-mask")) after `make demo`.
PY_PACKAGES="torch==${TORCH_VERSION} nvidia-cuda-crt==${TORCH_CUDA}.* nvidia-cuda-cccl==${TORCH_CUDA}.*
  pyarrow==${PYARROW_VERSION} matplotlib tensorboard transformers==${TRANSFORMERS_VERSION}"
# zstandard writes the tests' .zst fixtures (pyarrow writes their Parquet ones).
PY_TEST_PACKAGES="safetensors sentencepiece numpy zstandard"

SCOPE="${1:-all}"
case "$SCOPE" in
  demo|all|venv) ;;
  *) echo "usage: scripts/setup.sh [demo|all|venv]" >&2; exit 1 ;;
esac
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${ROFORMER_VENV:-$HOME/.cache/roformer/venv-torch-$TORCH_VERSION}"
if [ "$SCOPE" = venv ]; then echo "$VENV"; exit 0; fi
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
BUILD_TYPE="${BUILD_TYPE:-Release}"
PY="$VENV/bin/python"
if [ "$SCOPE" = all ]; then
  APT_PACKAGES="$APT_PACKAGES $APT_TEST_PACKAGES"
  PY_PACKAGES="$PY_PACKAGES $PY_TEST_PACKAGES"
fi

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
# Runs "$@" as one phase: says what it does first and how long it took after.
phase() {
  local what="$1" start=$SECONDS
  shift
  say "$what"
  "$@"
  local took=$((SECONDS - start))
  say "  done in $((took / 60))m$(printf '%02d' $((took % 60)))s"
}

# ---- 1. Debian packages ------------------------------------------------------------------------
missing_apt_packages() {  # one dpkg-query for all of them
  local installed
  installed="$(dpkg-query -W -f='${Package} ${Status}\n' $APT_PACKAGES 2>/dev/null | awk '/install ok installed$/ {print $1}')"
  for p in $APT_PACKAGES; do
    grep -qx "$p" <<<"$installed" || echo "$p"
  done
}

install_apt_packages() {
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  # apt's summary (download and disk size) and errors; dpkg's lines are in /var/log/apt/term.log.
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "$@" \
    | { grep -E '^(Need to get|After this operation|E:)' || true; }
}

# ---- 2. Python venv with the pinned PyTorch ----------------------------------------------------
# The requirements of $PY_PACKAGES that the venv lacks, one a line, from the packages' metadata
# (importing torch would take seconds on every run).
missing_py_packages() {
  "$PY" - $PY_PACKAGES 2>/dev/null <<'EOF' || tr ' ' '\n' <<<"$PY_PACKAGES"  # no venv (yet): all of them
import fnmatch, sys
from importlib.metadata import PackageNotFoundError, version
for requirement in sys.argv[1:]:
    name, _, wanted = requirement.partition("==")
    try:
        have = version(name).split("+")[0]
    except PackageNotFoundError:
        have = None
    if have is None or not fnmatch.fnmatch(have, wanted or "*"):
        print(requirement)
EOF
}

install_py_packages() {
  [ -x "$PY" ] || { python3 -m venv "$VENV" && "$PY" -m pip install -q --upgrade pip; }
  # pip's own lines (one per package, with its download size), not -q: torch alone takes minutes.
  "$PY" -m pip install "$@"
}

# ---- 3. Configure (once) and build -------------------------------------------------------------
# A configure that fails leaves nothing behind that would break the next one: the CMake state it
# created (CMakeCache.txt, CMakeFiles/) is removed, so fixing the cause and running again suffices.
configure() {
  local fresh=0
  if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
    fresh=1
  elif [ ! -f "$BUILD_DIR/build.ninja" ]; then
    say "$BUILD_DIR holds a configure that did not finish (CMakeCache.txt, no build.ninja)."
    say "Remove it and run again: rm -rf $BUILD_DIR/CMakeCache.txt $BUILD_DIR/CMakeFiles"
    exit 1
  fi
  mkdir -p "$BUILD_DIR"
  if ! cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" \
       -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" -DROFORMER_PYTHON="$PY" >"$BUILD_DIR/configure.log" 2>&1; then
    cat "$BUILD_DIR/configure.log"
    if [ "$fresh" = 1 ]; then
      rm -rf "$BUILD_DIR/CMakeCache.txt" "$BUILD_DIR/CMakeFiles"
      say "configure failed (above; kept in $BUILD_DIR/configure.log); its CMake state was removed, so after"
      say "fixing the cause the next run configures from scratch"
    fi
    exit 1
  fi
  grep -E '^-- (LibTorch|CUDA|Distributed|Parquet|Tests)' "$BUILD_DIR/configure.log" | sed 's/^-- /  /' || true
}

# build.ninja is missing (first run, or after `make clean`), or the tests were asked for and the
# first configure (for the demo, before GoogleTest was installed) left them out.
needs_configure() {
  [ ! -f "$BUILD_DIR/build.ninja" ] && return 0
  [ "$SCOPE" = all ] && [ ! -f "$BUILD_DIR/tests/CTestTestfile.cmake" ] &&
    ! grep -q '^ROFORMER_BUILD_TESTS:BOOL=OFF' "$BUILD_DIR/CMakeCache.txt" && return 0
  return 1
}

missing=$(missing_apt_packages | tr '\n' ' ')
if [ -n "$missing" ]; then
  phase "installing Debian packages: $missing(apt-get)" install_apt_packages $missing
fi

missing=$(missing_py_packages | tr '\n' ' ')
if [ -n "$missing" ]; then
  size=""
  [[ "$missing" == *torch==* ]] && size=" (torch with its CUDA libraries: about 3 GB to download, 5 GB installed)"
  phase "installing into $VENV: $missing$size" install_py_packages $missing
fi
TORCH_PREFIX="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/torch/share/cmake"

[ "${SKIP_BUILD:-0}" = "1" ] && { say "dependencies ready (build skipped)"; exit 0; }

if needs_configure; then
  phase "configuring $BUILD_DIR" configure
fi
if [ "$SCOPE" = demo ]; then
  phase "building the roformer program ($(nproc) jobs)" cmake --build "$BUILD_DIR" -j "$(nproc)" --target roformer
else
  phase "building everything: the program, tests, benchmarks ($(nproc) jobs)" cmake --build "$BUILD_DIR" -j "$(nproc)"
fi
say "ready: $BUILD_DIR/roformer"
