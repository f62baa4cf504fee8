#!/usr/bin/env bash
# Sets up, builds (release) and runs the main job: the train-short-test-long
# experiment in its QUICK smoke version (~2-4 minutes on 2 cores) into experiment-quick/,
# the posenc tour, then the HTML report (report/index.html, self-contained;
# data in report/data/; its last section runs posenc compiled to WebAssembly,
# the wasm preset), which reads the experiment from experiment-quick/.
# The two output folders are apart on purpose: `posenc report -o report`
# replaces the whole report/ folder and refuses one that holds anything it
# did not write, so the experiment must not write inside it. Running this
# script again reuses both folders (the experiment overwrites its own files,
# the report replaces its own folder).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target posenc_cli _posenc
# The report's live playground: posenc compiled to WebAssembly (build/wasm/posenc.{js,wasm}).
cmake --preset wasm >/dev/null
cmake --build --preset wasm -j "$(nproc)"
experiment=experiment-quick
echo "run: posenc experiment extrapolation --quick -o $experiment: the QUICK smoke run of the"
echo "     train-short-test-long experiment (~2-4 minutes; its numbers check the pipeline, not the"
echo "     measurement). The full run (~14-20 min on 2 cores): build/release/cli/posenc"
echo "     experiment extrapolation -o DIR; the repository's last full run is in"
echo "     docs/experiments/extrapolation."
./build/release/cli/posenc experiment extrapolation --quick -o "$experiment"
./build/release/cli/posenc tour --experiment "$experiment" "$@"
./build/release/cli/posenc report -o report --experiment "$experiment" \
  --config examples/configs/*.json
echo "report: open $(pwd)/report/index.html in a browser"
