#!/usr/bin/env bash
# Sets up, builds (release) and runs the main job: the posenc tour, then the
# HTML report (report/index.html, self-contained; data in report/data/).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target posenc_cli
./build/release/cli/posenc tour "$@"
./build/release/cli/posenc report -o report --config examples/configs/*.json
echo "report: open $(pwd)/report/index.html in a browser"
