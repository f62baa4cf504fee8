#!/usr/bin/env bash
# Sets up, builds (release) and runs the main job: the posenc tour.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target posenc_cli
./build/release/posenc tour "$@"
