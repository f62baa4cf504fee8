#!/usr/bin/env bash
# Sets up, builds (release) and runs the main job: the train-short-test-long
# experiment in its QUICK smoke version (~2 minutes), the posenc tour, then
# the HTML report (report/index.html, self-contained; data in report/data/).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target posenc_cli _posenc
echo "run: posenc experiment extrapolation --quick: the QUICK smoke run of the train-short-test-"
echo "     long experiment (~2 minutes; its numbers check the pipeline, not the measurement)."
echo "     The full run (~12-20 min on 2 cores): build/release/cli/posenc experiment extrapolation"
echo "     -o DIR; the repository's last full run is in docs/experiments/extrapolation."
./build/release/cli/posenc experiment extrapolation --quick -o report/experiment
./build/release/cli/posenc tour --experiment report/experiment "$@"
./build/release/cli/posenc report -o report --experiment report/experiment \
  --config examples/configs/*.json
echo "report: open $(pwd)/report/index.html in a browser"
