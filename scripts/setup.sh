#!/usr/bin/env bash
# One-time (and idempotent) setup for a Debian/Ubuntu machine:
#   1. installs the missing Debian packages (apt-get; needs root or sudo),
#   2. creates or reuses a Python venv OUTSIDE the checkout holding the pinned PyTorch (whose
#      LibTorch we build against) and the test-only Python packages (transformers for golden values, tensorboard to read our event files),
#   3. configures and builds the project into build/.
# A second run takes seconds. Environment knobs:
#   ROFORMER_VENV   venv location (default ~/.cache/roformer/venv-torch-$TORCH_VERSION)
#   BUILD_DIR       build directory (default build)
#   BUILD_TYPE      CMake build type (default Release)
#   SKIP_BUILD=1    stop after installing dependencies
set -euo pipefail

# ---- The pinned versions: the only place they are written. --------------------------------------
TORCH_VERSION=2.11.0          # the GPU machine's version; LibTorch comes from this wheel
TRANSFORMERS_VERSION=5.23.0   # tests only: golden values and the export round trip
PY_TEST_PACKAGES="transformers==${TRANSFORMERS_VERSION} safetensors sentencepiece numpy matplotlib tensorboard"
PYARROW_VERSION=26.0.1        # Parquet input: the build links the Arrow C++ libraries of this wheel

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${ROFORMER_VENV:-$HOME/.cache/roformer/venv-torch-$TORCH_VERSION}"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
BUILD_TYPE="${BUILD_TYPE:-Release}"

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

# ---- 1. Debian packages ------------------------------------------------------------------------
APT_PACKAGES="build-essential cmake ninja-build ccache pkg-config python3 python3-venv
  libsentencepiece-dev libyaml-cpp-dev libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev"
APT_PACKAGES="$APT_PACKAGES zlib1g-dev libzstd-dev"  # gzip and zstd input (src/data/byte_stream.cpp)
missing=()
for p in $APT_PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing Debian packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# ---- 2. Python venv with the pinned PyTorch ----------------------------------------------------
PY="$VENV/bin/python"
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.__version__.split('+')[0] == '$TORCH_VERSION' else 1)" 2>/dev/null; then
  say "creating $VENV with torch==$TORCH_VERSION (a large download, once per machine)"
  python3 -m venv "$VENV"
  "$PY" -m pip install -q --upgrade pip
  "$PY" -m pip install -q "torch==$TORCH_VERSION"
fi
if ! "$PY" -c "import transformers, matplotlib, tensorboard, sys; sys.exit(0 if transformers.__version__ == '$TRANSFORMERS_VERSION' else 1)" 2>/dev/null; then
  say "installing test packages into the venv: $PY_TEST_PACKAGES"
  "$PY" -m pip install -q $PY_TEST_PACKAGES
fi
# Parquet input: pyarrow's wheel ships libarrow/libparquet and their headers (CMakeLists.txt, "Input
# formats"); zstandard writes the tests' .zst fixtures (pyarrow writes their Parquet ones).
if ! "$PY" -c "import pyarrow, zstandard, sys; sys.exit(0 if pyarrow.__version__ == '$PYARROW_VERSION' else 1)" 2>/dev/null; then
  say "installing pyarrow==$PYARROW_VERSION and zstandard into the venv"
  "$PY" -m pip install -q "pyarrow==$PYARROW_VERSION" zstandard
fi
TORCH_PREFIX="$("$PY" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')"

[ "${SKIP_BUILD:-0}" = "1" ] && { say "dependencies ready (build skipped)"; exit 0; }

# ---- 3. Configure (once) and build -------------------------------------------------------------
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  say "configuring $BUILD_DIR"
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" \
    -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" -DROFORMER_PYTHON="$PY" >"$BUILD_DIR.configure.log" 2>&1 \
    || { cat "$BUILD_DIR.configure.log"; exit 1; }
fi
say "building ($(nproc) jobs)"
cmake --build "$BUILD_DIR" -j "$(nproc)"
say "ready: $BUILD_DIR/roformer"
