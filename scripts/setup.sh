#!/usr/bin/env bash
# Installs everything the build, the tests and the report need on Debian 12.
# Idempotent: each package is checked first; apt-get runs only if one is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

DEBS=(
  build-essential cmake ninja-build ccache pkg-config
  libhwy-dev libcli11-dev nlohmann-json3-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  pybind11-dev libdlpack-dev python3-dev python3-numpy python3-torch python3-pytest
  python3-matplotlib
  python3-setuptools python3-wheel python3-pip python3-venv python3-build
  libjemalloc2 chromium
  # OpenBLAS for torch's float32 matmuls (Debian's default libblas.so.3 is the
  # reference BLAS, ~5x slower here): `posenc experiment extrapolation --dtype float32`
  # and its float32 speed check.
  libopenblas0-pthread
  clang-16 libfuzzer-16-dev libclang-rt-16-dev python3-hypothesis
  # The format check of scripts/test.sh (scripts/check_format.sh).
  clang-format
  # The report's live playground: posenc compiled to WebAssembly (the wasm
  # preset). Its JS optimiser needs node-acorn (NODE_PATH=/usr/share/nodejs,
  # set by the wasm build preset).
  emscripten node-acorn
)

missing=()
for p in "${DEBS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm (for the report's chart library and the browser test):
# Debian's packages unless a node/npm is already on PATH.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${missing[@]}"
else
  echo "setup: all Debian packages present"
fi

# npm packages pinned in package-lock.json (installed only when missing or stale).
if [ -f package.json ]; then
  if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    echo "setup: npm ci"
    npm ci --no-audit --no-fund --loglevel=error
  fi
fi
